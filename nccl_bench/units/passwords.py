"""Passwords hidden in text before it is shown or written: a URL's user-info (`user:PASSWORD@`), a
query's `password=` and a libpq keyword string's `password=` (quoted or not). Pure text in, text out:
what meta.json's command line, the history's copy of it and every message about a store go through.

A driver quotes what it could not parse (`invalid percent-encoded token: "Tops3cret%Pw"`) or what it
took for a host (`Pw@db` from `ci:Tops3cret@Pw@db`), so a message about a store is also masked by the
password as the user wrote it: raw, percent-decoded, and each piece of it between the characters a
URL or keyword string splits on (`secrets_of`, `mask`).
"""

from __future__ import annotations

import re
from typing import Any

HIDDEN = "***"
# scheme://user:PASSWORD@, up to the last '@' before the query: a password may hold an unencoded '@'
# or '/' (libpq refuses it, and its message must not show it)
_USER_INFO = re.compile(r"(://[^/@\s:]*):([^\s?#]*)@")
# password=VALUE in a query (ends at '&') or a keyword string (ends at a space, or a quoted value);
# sslpassword= too
_KEYWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&']*)", re.IGNORECASE)


# What splits a password written unencoded into the pieces a driver may quote apart from each other
_SPLITS = re.compile(r"[@:/%?#&=\s'\"\\]+")
_QUOTED_ESCAPE = re.compile(r"\\(.)")
# A piece this short says nothing of the password (one character); every longer one is masked
SHORTEST_PIECE = 2
PASSWORD_ENV = ("PGPASSWORD",)  # libpq's environment variables that hold a password


def hide_passwords(text: str, secrets: tuple[str, ...] = ()) -> str:
    """`text` with every password it holds replaced by ***, and every one of `secrets` (secrets_of) too."""
    hidden = _KEYWORD.sub(lambda m: m.group(1) + HIDDEN, _USER_INFO.sub(lambda m: f"{m.group(1)}:{HIDDEN}@", text))
    return mask(hidden, secrets)


def mask(text: str, secrets: tuple[str, ...]) -> str:
    """`text` with each of `secrets` replaced by ***, the longest first (a piece inside a longer one)."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(secret, HIDDEN)
    return text


def secrets_of(value: str) -> tuple[str, ...]:
    """Every text that would show a password `value` (one URL, keyword string or argument) holds: the
    password as written, percent-decoded, and each piece of both between URL and keyword delimiters."""
    return _forms(_written_passwords(value))


def environment_secrets(environ) -> tuple[str, ...]:
    """The passwords libpq reads from the environment (PGPASSWORD), in every form secrets_of gives."""
    return _forms([environ[name] for name in PASSWORD_ENV if environ.get(name)])


def _written_passwords(value: str) -> list[str]:
    found = []
    for start in [m.end() for m in re.finditer("://", value)]:
        authority = re.split(r"[?#]", value[start:], maxsplit=1)[0]
        user_info, at, _ = authority.rpartition("@")
        if at and ":" in user_info:
            found.append(user_info.partition(":")[2])
    for match in _KEYWORD.finditer(value):
        written = match.group(2)
        if written.startswith("'"):
            found.append(_QUOTED_ESCAPE.sub(r"\1", written[1:-1] if written.endswith("'") and len(written) > 1
                                            else written[1:]))
        found.append(written)
    return [password for password in found if password]


def _forms(passwords: list[str]) -> tuple[str, ...]:
    from urllib.parse import unquote

    forms = set()
    for password in passwords:
        for whole in (password, unquote(password, errors="replace")):
            forms.add(whole)
            forms.update(_SPLITS.split(whole))
    return tuple(sorted(form for form in forms if len(form) >= SHORTEST_PIECE))


def holds_password(text: str) -> bool:
    return hide_passwords(text) != text


def hide_written(value: str) -> str:
    """One value (an argument, a URL) without its password in any form it holds (secrets_of)."""
    return hide_passwords(value, secrets_of(value))


def hide_passwords_in(value: Any) -> Any:
    """Every string in a JSON-like value (dicts, lists) with its passwords hidden; the rest as it is."""
    if isinstance(value, str):
        return hide_written(value)
    if isinstance(value, dict):
        return {key: hide_passwords_in(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [hide_passwords_in(item) for item in value]
    return value
