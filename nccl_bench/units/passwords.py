"""Passwords hidden in text before it is shown or written: a URL's user-info (`user:PASSWORD@`), a
query's `password=` and a libpq keyword string's `password=` (quoted or not). Pure text in, text out:
what meta.json's command line, the history's copy of it and every message about a store go through.
"""

from __future__ import annotations

import re
from typing import Any

HIDDEN = "***"
# scheme://user:PASSWORD@ (the password holds no '/', '@' or space: libpq wants those percent-encoded)
_USER_INFO = re.compile(r"(://[^/@\s:]*):([^\s/]*)@")
# password=VALUE in a query (ends at '&') or a keyword string (ends at a space, or a quoted value);
# sslpassword= too
_KEYWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&']*)", re.IGNORECASE)


def hide_passwords(text: str) -> str:
    """`text` with every password it holds replaced by ***."""
    return _KEYWORD.sub(lambda m: m.group(1) + HIDDEN, _USER_INFO.sub(lambda m: f"{m.group(1)}:{HIDDEN}@", text))


def holds_password(text: str) -> bool:
    return hide_passwords(text) != text


def hide_passwords_in(value: Any) -> Any:
    """Every string in a JSON-like value (dicts, lists) with its passwords hidden; the rest as it is."""
    if isinstance(value, str):
        return hide_passwords(value)
    if isinstance(value, dict):
        return {key: hide_passwords_in(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [hide_passwords_in(item) for item in value]
    return value
