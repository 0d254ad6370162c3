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
    from nccl_bench.cli.option_sets import HISTORY
    from nccl_bench.history.address import ENV_VAR

    assert f"${ENV_VAR}" in HISTORY.help


@pytest.mark.parametrize("text,shown", [
    ("postgresql://ci:s3cr@t@db/bench", "postgresql://ci:***@db/bench"),  # an unencoded '@' in the password
    ("postgresql://ci@/bench?host=/run/pg&password=s3cret&port=5433", "postgresql://ci@/bench?host=/run/pg&password=***&port=5433"),
    ("host=db dbname=bench user=ci password=s3cret", "host=db dbname=bench user=ci password=***"),
    ("host=db password = 's3 \\' cret' dbname=bench", "host=db password = *** dbname=bench"),
    ("host=db sslpassword=s3cret", "host=db sslpassword=***"),
])
def test_passwords_never_show_whatever_their_form(text, shown):
    from nccl_bench.units.passwords import hide_passwords

    address = parse_address(text)
    assert address.kind == POSTGRESQL and address.target == text.strip()
    assert address.shown == shown == hide_passwords(text)


def test_a_url_without_a_password_is_shown_as_it_is():
    from nccl_bench.units.passwords import hide_passwords

    url = "postgresql://db:5432/bench?application_name=a@b"
    assert hide_passwords(url) == url


@pytest.mark.parametrize("text,said", [
    ("host=db pass word", "'host=db pass word' is not a libpq keyword string"),
    ("host=db password='unterminated", "'host=db password=***' is not a libpq keyword string"),
    ("ci:s3cret@db:5432/bench", "'ci:***@db:5432/bench' looks like a server without a scheme; write "
                                "postgresql://ci:***@db:5432/bench"),
    ("store\n.sqlite", "holds a control character"),
])
def test_values_that_are_neither_a_url_nor_a_path_are_refused_without_their_password(text, said):
    with pytest.raises(AddressError) as refused:
        parse_address(text)
    assert said in str(refused.value) and "s3cret" not in str(refused.value)
