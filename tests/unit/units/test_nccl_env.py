"""--nccl-env's grammar: names and values checked, the product of the lists, labels and the shell loop."""

from __future__ import annotations

import pytest

from nccl_bench.units.nccl_env import label, parse_assignment, parse_assignments, shell_loop, variants


def test_an_assignment_is_a_name_and_its_values_in_order():
    assert parse_assignment("NCCL_ALGO=Ring,Tree") == ("NCCL_ALGO", ("Ring", "Tree"))
    assert parse_assignment("NCCL_ALGO=^NVLS") == ("NCCL_ALGO", ("^NVLS",))
    assert parse_assignment("NCCL_MIN_NCHANNELS=4") == ("NCCL_MIN_NCHANNELS", ("4",))


@pytest.mark.parametrize("text, problem", [
    ("NCCL_ALGO", "is not NAME=VALUE"),
    ("LD_PRELOAD=x.so", "'LD_PRELOAD' is not an NCCL variable"),
    ("nccl_algo=Ring", "is not an NCCL variable"),
    ("NCCL_ALGO=Ring;rm", "'Ring;rm' is not a value"),
    ("NCCL_ALGO=", "'' is not a value"),
    ("NCCL_ALGO=Ring,,Tree", "'' is not a value"),
    ("NCCL_ALGO=$(id)", "is not a value"),
    ("NCCL_ALGO=Ring,Ring", "a value is given twice"),
])
def test_what_is_not_a_name_or_a_value_is_refused(text, problem):
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace("$", r"\$")):
        parse_assignment(text)


def test_a_name_given_twice_and_too_many_variants_are_refused():
    with pytest.raises(ValueError, match="NCCL_ALGO given twice"):
        parse_assignments(["NCCL_ALGO=Ring", "NCCL_ALGO=Tree"])
    many = [f"NCCL_X{i}=a,b" for i in range(7)]  # 2**7 = 128 variants
    with pytest.raises(ValueError, match="128 variants; a run takes at most 64"):
        parse_assignments(many)


def test_variants_are_the_product_the_first_name_slowest():
    found = variants(parse_assignments(["NCCL_ALGO=Ring,Tree", "NCCL_PROTO=LL,Simple"]))
    assert [label(v) for v in found] == [
        "NCCL_ALGO=Ring NCCL_PROTO=LL", "NCCL_ALGO=Ring NCCL_PROTO=Simple",
        "NCCL_ALGO=Tree NCCL_PROTO=LL", "NCCL_ALGO=Tree NCCL_PROTO=Simple"]
    assert variants(()) == [()] and label(()) == ""


def test_the_shell_loop_nests_one_loop_per_name():
    loop = shell_loop(parse_assignments(["NCCL_ALGO=Ring,Tree", "NCCL_PROTO=LL"]), "torchrun ... nccl-bench sweep")
    assert loop == ("for v0 in Ring Tree; do for v1 in LL; do NCCL_ALGO=$v0 NCCL_PROTO=$v1 torchrun ... "
                    "nccl-bench sweep; done; done;")
