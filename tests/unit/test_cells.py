"""cpi.cli.output.escaped, which every table cell and error line of `cpi` passes through
(#33, point 3): over arbitrary text, what it makes holds no control, bidi or other
invisible character, and reads back as exactly the text it was made from."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from cpi.cli.output import escaped

HIDDEN = {"Cc", "Cf", "Cs", "Zl", "Zp"}
SHORT = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}
ESCAPE = re.compile(r"\\(?:([\\nrt])|x([0-9a-f]{2})|u([0-9a-f]{4})|U([0-9a-f]{8}))")


def unescaped(text: str) -> str:
    """The reader's side: each escape back to its character; a backslash that starts no
    escape is a failure (the escaping could then be forged)."""
    out, index = [], 0
    while index < len(text):
        if text[index] != "\\":
            out.append(text[index])
            index += 1
            continue
        match = ESCAPE.match(text, index)
        assert match, f"a lone backslash at {index} of {text!r}"
        short, *hexes = match.groups()
        out.append(SHORT[short] if short else chr(int(next(h for h in hexes if h), 16)))
        index = match.end()
    return "".join(out)


@settings(max_examples=1500, derandomize=True, database=None, deadline=None)
@given(st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
       | st.lists(st.sampled_from(["\\", "\\x1b", "\x1b", "\n", "\t", "\u202e", "\u2066", "\x85", "\ufeff",
                                   "\U000e0001", "\ud800", "x", "é", "[bold]"]), max_size=12).map("".join))
def test_an_escaped_cell_shows_no_hidden_character_and_reads_back_uniquely(text):
    shown = escaped(text)
    assert not [c for c in shown if unicodedata.category(c) in HIDDEN], repr(shown)
    assert unescaped(shown) == text


def test_the_escapes_are_the_ones_a_reader_knows():
    assert escaped("plain café, [bold]x[/]") == "plain café, [bold]x[/]"
    assert escaped("a\x1b[31m\x07\x00\x7f\x9b") == "a\\x1b[31m\\x07\\x00\\x7f\\x9b"
    assert escaped("row\nvm-forged\tstopped\r") == "row\\nvm-forged\\tstopped\\r"
    assert escaped("\u202eevil\u2066\u200f\u061c\u2028") == "\\u202eevil\\u2066\\u200f\\u061c\\u2028"
    assert escaped("\\x1b") == "\\\\x1b"  # a typed escape is not taken for an ESC
