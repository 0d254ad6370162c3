"""--history's URL forms, parsed once."""

from __future__ import annotations

import pytest

from nccl_bench.history.address import POSTGRESQL, SQLITE, AddressError, StoreAddress, default_address, parse_address


@pytest.mark.parametrize("url,expected", [
    ("store.sqlite", StoreAddress(SQLITE, "store.sqlite")),
    ("/abs/h.sqlite", StoreAddress(SQLITE, "/abs/h.sqlite")),
    ("sqlite:///rel/h.sqlite", StoreAddress(SQLITE, "rel/h.sqlite")),
    ("sqlite:////abs/h.sqlite", StoreAddress(SQLITE, "/abs/h.sqlite")),
    ("postgresql://ci@db:5432/bench", StoreAddress(POSTGRESQL, "postgresql://ci@db:5432/bench")),
    ("postgresql://ci@/bench?host=/run/pg&port=5433", StoreAddress(POSTGRESQL, "postgresql://ci@/bench?host=/run/pg&port=5433")),
    ("postgres://ci@db/bench", StoreAddress(POSTGRESQL, "postgres://ci@db/bench")),
])
def test_url_forms(url, expected):
    assert parse_address(url) == expected


@pytest.mark.parametrize("url", ["", "  ", "mysql://db/x", "sqlite://", "sqlite:/x"])
def test_urls_that_name_no_store(url):
    with pytest.raises(AddressError):
        parse_address(url)


def test_the_password_never_shows():
    assert parse_address("postgresql://ci:secret@db/bench").shown == "postgresql://ci:***@db/bench"


def test_the_default_store_is_in_the_results_root(tmp_path):
    assert default_address(tmp_path) == StoreAddress(SQLITE, str(tmp_path / "history.sqlite"))


def test_the_history_option_names_the_variable_this_module_reads():
    from nccl_bench.history.address import ENV_VAR
    from nccl_bench.options import HISTORY

    assert f"${ENV_VAR}" in HISTORY.help
