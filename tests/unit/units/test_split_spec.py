"""The split's grammar (units/split_spec.py): read once into a typed value that keeps its text form."""

from __future__ import annotations

import pytest

from nccl_bench.units.split_spec import Split, parse_split


@pytest.mark.parametrize("text, parsed", [("NODE", "node"), ("rail", "rail"), ("Mod:8", "mod:8"), ("div:2", "div:2")])
def test_the_grammar(text, parsed):
    assert str(parse_split(text)) == parsed


@pytest.mark.parametrize("text, problem", [
    ("host", "'host' is not one of node, rail, mod:N, div:N"), ("mod", "mod needs a whole number, as in mod:8"),
    ("div:0", "N of at least 1, got 0"), ("node:2", "node takes no number"),
])
def test_bad_splits_say_why(text, problem):
    with pytest.raises(ValueError, match=problem.replace("(", r"\(")):
        parse_split(text)


def test_the_value_is_typed_and_keeps_its_text_form():
    assert parse_split("MOD:8") == Split("mod", 8) and parse_split("rail") == Split("rail")
    assert [str(parse_split(text)) for text in ("node", "div:2")] == ["node", "div:2"]
