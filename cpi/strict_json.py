"""JSON as the director's parser accepts it, both ways, at a cost linear in its size.

Python's json module is lenient where Ruby's and Go's are not: it reads `NaN`, `Infinity`
and `1e400` (as inf) and writes them back, which the director then fails to parse. Here
they are refused on the way in (a CpiError naming what was wrong) and can never be
written. Nesting is bounded too: a value 500 levels deep parses, but would overflow the
recursion of whatever walks it later, after the cloud may already have acted; refusing it
up front keeps every later step safe.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from typing import Any

from cpi.errors import CpiError

#: Deeper than any BOSH manifest nests (env, networks and cloud_properties stay under ~10).
MAX_DEPTH = 64
#: A JSON escape of a UTF-16 surrogate: the only way a string can carry one in UTF-8 input.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


class InvalidJSON(CpiError):
    """"<what> is not valid JSON: <reason>"; `reason` alone for callers that say the rest."""

    def __init__(self, what: str, reason: str):
        super().__init__(f"{what} is not valid JSON: {reason}")
        self.reason = reason


class _Refused(Exception):
    """Raised from inside the decoder's hooks; turned into a CpiError by `loads`."""


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {text[:40]} is too large for a 64-bit float")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # more digits than Python converts (4300 by default)
        raise _Refused(f"an integer of {len(text)} digits is too large") from None


def loads(data: bytes | str, what: str) -> Any:
    """Parse `data` (UTF-8) strictly; CpiError "<what> is not valid JSON: ..." otherwise."""
    if isinstance(data, bytes):
        has_surrogates = _SURROGATE_ESCAPE.search(data) is not None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidJSON(what, f"not UTF-8 at byte {exc.start}") from None
    else:
        text = data
        has_surrogates = _SURROGATE_ESCAPE.search(data.encode("utf-8", "surrogatepass")) is not None
    if text_depth(text) > MAX_DEPTH:
        raise InvalidJSON(what, f"nested deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except _Refused as exc:
        raise InvalidJSON(what, str(exc)) from None
    except json.JSONDecodeError as exc:
        raise InvalidJSON(what, f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise InvalidJSON(what, f"nested deeper than {MAX_DEPTH} levels") from None
    if has_surrogates:
        _check_unicode(value, what)
    return value


#: A JSON string (the unrolled form: each run of plain characters is one fast step) and the
#: brackets outside strings, to measure nesting before the decoder recurses into it.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKETS = re.compile(r"[\[\]{}]")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def text_depth(text: str) -> int:
    """How deep the brackets of a JSON text nest, strings aside (in C-speed passes)."""
    brackets = _BRACKETS.findall(_STRING.sub("", text)) if "[" in text or "{" in text else []
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _check_unicode(value: Any, what: str) -> None:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidJSON(what, "a string holds a lone UTF-16 surrogate (\\ud800-\\udfff)") from None


def dumps(value: Any) -> str:
    """Serialise for the wire: NaN and infinities raise ValueError instead of being written."""
    return json.dumps(value, allow_nan=False)
