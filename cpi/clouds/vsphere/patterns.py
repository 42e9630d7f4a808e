"""The official vSphere CPI's datastore patterns, read by Python's `re`.

`datastore_pattern` and its kin are regular expressions the official CPI hands to Ruby, and
its documentation writes them in Ruby's dialect (`'\\Aprod-ds\\z'`). Python spells a few of
Ruby's pieces differently or not at all, so a pattern copied from a director manifest is
turned into Python's spelling before it is compiled: the same names must select the same
datastores here as there. What has no counterpart (nested and POSIX bracket classes,
intersections, `\\H` inside a class) is refused, and so is the config, naming the key.
"""

from __future__ import annotations

import re

#: Ruby's escapes outside a character class, as Python writes them.
_OUTSIDE = {
    "z": r"\Z",  # Ruby's end of string is Python's \Z
    "Z": r"(?=\n?\Z)",  # Ruby's \Z: end of string, or before a newline that ends it
    "h": "[0-9a-fA-F]",
    "H": "[^0-9a-fA-F]",
}


def to_python(pattern: str) -> str:
    """`pattern` as Ruby reads it, written for Python's `re` (compile it with re.MULTILINE:
    Ruby's `^` and `$` always match at line boundaries)."""
    out: list[str] = []
    in_class = False
    i, size = 0, len(pattern)
    while i < size:
        char = pattern[i]
        if char == "\\" and i + 1 < size:
            escaped = pattern[i + 1]
            if in_class and escaped == "h":
                out.append("0-9a-fA-F")
            elif not in_class and escaped in _OUTSIDE:
                out.append(_OUTSIDE[escaped])
            elif not in_class and escaped == "k" and pattern.startswith("<", i + 2):
                end = pattern.find(">", i + 3)
                if end == -1:
                    out.append(pattern[i:i + 2])
                else:
                    out.append(f"(?P={pattern[i + 3:end]})")
                    i = end + 1
                    continue
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            if char == "]":
                in_class = False
            elif char == "[" or pattern.startswith("&&", i):
                # Ruby's nested classes, POSIX classes ([:alpha:]) and intersections: Python
                # would read them as plain members, quietly selecting other datastores
                raise ValueError(f"'{pattern}' is not a regular expression this CPI can read (Ruby's nested, "
                                 "POSIX or intersected character classes have no Python spelling: list the "
                                 "characters or ranges instead)")
        elif char == "[":
            in_class = True
            out.append(char)
            if pattern.startswith("^", i + 1):  # `[^]...]` and `[]...]`: a leading ] is a member
                out.append("^")
                i += 1
            if pattern.startswith("]", i + 1):
                out.append("]")
                i += 1
            i += 1
            continue
        elif pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
            out.append("(?P<")  # a named group
            i += 3
            continue
        out.append(char)
        i += 1
    return "".join(out)


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The compiled pattern, or ValueError saying why it is not one."""
    try:
        return re.compile(to_python(pattern), re.MULTILINE)
    except re.error as exc:
        raise ValueError(f"'{pattern}' is not a regular expression this CPI can read ({exc})") from None


def matches(pattern: str, name: str) -> bool:
    """Whether datastore (or datastore cluster) `name` is selected by `pattern`, as Ruby's
    `name =~ pattern` answers: the pattern may match anywhere in the name."""
    return compile_pattern(pattern).search(name) is not None
