"""Text made safe for the output it reaches: a Markdown table cell (GitHub renders some HTML and
links in it, and a '|' or newline splits the row) and a terminal (escape sequences move the cursor,
clear the screen or hide text). Rows read from files are validated (results/schema.check_row); these
cover the free text that remains: flags, titles, what a meta.json recorded."""

from __future__ import annotations

import re

_MARKDOWN = str.maketrans({
    "\\": "\\\\", "|": "\\|", "<": "&lt;", ">": "&gt;", "&": "&amp;", "[": "\\[", "]": "\\]", "`": "\\`",
    "\n": " ", "\r": " ",
})
# C0 and C1 control characters but newline and tab: what a terminal reads as a command, not text.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Every C0 and C1 control character, newline and tab included: within one line, each would end it or move it.
_ANY_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def markdown_text(text: object) -> str:
    """Plain text inside a Markdown table cell or paragraph: no markup, links, HTML or row breaks."""
    return str(text).translate(_MARKDOWN)


def terminal_text(text: str) -> str:
    """Text with every control character but newline and tab shown as an escape (\\x1b), never sent raw."""
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def one_line(text: str) -> str:
    """Text that must stay the one line it was built as (a `#` header line naming a file, a host or what a
    trace recorded): every control character, newline, tab and Unicode's line and paragraph separators
    included, shown as an escape (\\x0a), so text read from a file never starts a line of its own in a
    table that readers parse line by line."""
    return _ANY_CONTROL.sub(lambda match: _escaped(ord(match.group())), text)


def _escaped(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
