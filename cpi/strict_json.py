"""JSON as the director's parser accepts it, both ways, at a cost linear in its size.

Python's json module is lenient where Ruby's and Go's are not: it reads `NaN`, `Infinity`
and `1e400` (as inf) and writes them back, which the director then fails to parse. Here
they are refused on the way in (a CpiError naming what was wrong) and can never be
written. Nesting is bounded too: a value 500 levels deep parses, but would overflow the
recursion of whatever walks it later, after the cloud may already have acted; refusing it
up front keeps every later step safe.
"""

from __future__ import annotations

import sys

from cpi.errors import CpiError

#: Deeper than any BOSH manifest nests (env, networks and cloud_properties stay under ~10).
MAX_DEPTH = 64
#: The strings (bytes) a JSON escape of a UTF-16 surrogate starts with, once "\u" is found:
#: the only way a string can carry one in UTF-8 input.
_SURROGATE_HEADS = tuple(f"\\u{d}{x}".encode() for d in "dD" for x in "89abcdefABCDEF")
_INFINITY = float("inf")

# Start-up is on every call's path, and `info` must cost little more than the interpreter
# (issue #12), so this module imports neither `json` nor `re` (~8 ms together on a cold
# interpreter): it drives the C scanner and encoder of the `json` package (`_json`) directly,
# exactly as json.loads/json.dumps do, and imports `json` or `re` only on the rare paths
# (an error to describe, a request deep enough or with surrogates to check).
TYPE_CHECKING = False  # not `typing` (~ms): for mypy only
if TYPE_CHECKING:
    from typing import Any, NoReturn

    # typeshed types these as the C classes; here they may be None (no accelerator)
    _make_scanner: Any
    _make_encoder: Any
try:
    from _json import encode_basestring as _encode_basestring
    from _json import encode_basestring_ascii as _encode_basestring_ascii
    from _json import make_encoder as _make_encoder
    from _json import make_scanner as _make_scanner
except ImportError:  # an interpreter without the C accelerator: the json package's Python code
    _make_scanner = _make_encoder = None


class InvalidJSON(CpiError):
    """"<what> is not valid JSON: <reason>"; `reason` alone for callers that say the rest."""

    def __init__(self, what: str, reason: str):
        super().__init__(f"{what} is not valid JSON: {reason}")
        self.reason = reason


class _Refused(Exception):
    """Raised from inside the decoder's hooks; turned into a CpiError by `loads`."""


def _constant(name: str) -> NoReturn:
    raise _Refused(f"{name} is not a JSON number")


def _float(text: str) -> float:
    value = float(text)
    if value in (_INFINITY, -_INFINITY):  # JSON has no NaN literal: only an overflow gets here
        raise _Refused(f"the number {text[:40]} is too large for a 64-bit float")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # more digits than Python converts (4300 by default)
        raise _Refused(f"an integer of {len(text)} digits is too large") from None


class _Context:
    """What the scanner reads off a json.JSONDecoder: these hooks, nothing else."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = staticmethod(_float)
    parse_int = staticmethod(_int)
    parse_constant = staticmethod(_constant)


_scan_once = None
_JSON_WHITESPACE = " \t\n\r"


def _scanner() -> Any:
    global _scan_once
    if _scan_once is None:
        if _make_scanner is not None:
            _scan_once = _make_scanner(_Context())
        else:
            import json

            decoder = json.JSONDecoder(parse_constant=_constant, parse_float=_float, parse_int=_int)
            _scan_once = decoder.scan_once  # type: ignore[attr-defined]  # set by its __init__, not in typeshed
    return _scan_once


def _scan(text: str, start: int) -> tuple[Any, int]:
    try:
        return _scanner()(text, start)
    except SystemError:
        # The C scanner raises json.decoder.JSONDecodeError for a syntax error, and (3.11)
        # finds that class only among the modules already imported, else this SystemError.
        # The error path may pay for importing json: import it and scan again.
        if "json.decoder" in sys.modules:
            raise
        import json.decoder  # noqa: F401 - imported for the C scanner to find (above)

        return _scanner()(text, start)


def _decode(text: str) -> Any:
    """json.loads(text) with this module's hooks: what json.loads and JSONDecoder.decode do,
    step by step."""
    if text.startswith("\ufeff"):
        from json import JSONDecodeError

        raise JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    start = len(text) - len(text.lstrip(_JSON_WHITESPACE))
    try:
        value, end = _scan(text, start)
    except StopIteration as stop:
        from json import JSONDecodeError

        raise JSONDecodeError("Expecting value", text, stop.value) from None
    rest = text[end:].lstrip(_JSON_WHITESPACE)
    if rest:
        from json import JSONDecodeError

        raise JSONDecodeError("Extra data", text, len(text) - len(rest))
    return value


def loads(data: bytes | str, what: str) -> Any:
    """Parse `data` (UTF-8) strictly; CpiError "<what> is not valid JSON: ..." otherwise."""
    if isinstance(data, bytes):
        has_surrogates = b"\\u" in data and any(head in data for head in _SURROGATE_HEADS)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidJSON(what, f"not UTF-8 at byte {exc.start}") from None
    else:
        text = data
        encoded = data.encode("utf-8", "surrogatepass")
        has_surrogates = b"\\u" in encoded and any(head in encoded for head in _SURROGATE_HEADS)
    if too_deep(text):
        raise InvalidJSON(what, f"nested deeper than {MAX_DEPTH} levels")
    try:
        value = _decode(text)
    except _Refused as exc:
        raise InvalidJSON(what, str(exc)) from None
    except ValueError as exc:  # json.JSONDecodeError (not named here: that would import json)
        if not (hasattr(exc, "msg") and hasattr(exc, "lineno") and hasattr(exc, "colno")):
            raise
        raise InvalidJSON(what, f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise InvalidJSON(what, f"nested deeper than {MAX_DEPTH} levels") from None
    if has_surrogates:
        _check_unicode(value, what)
    return value


def too_deep(text: str) -> bool:
    """Whether the brackets of a JSON text (or of several, one after another) nest deeper
    than MAX_DEPTH: a check cheap enough to make before any decoder recurses."""
    # a text with fewer brackets than the limit cannot nest deeper (the common case: no regex)
    return text.count("[") + text.count("{") > MAX_DEPTH and text_depth(text) > MAX_DEPTH


def text_depth(text: str) -> int:
    """How deep the brackets of a JSON text nest, strings aside (in C-speed passes)."""
    import itertools
    import re

    if "[" not in text and "{" not in text:
        return 0
    # A JSON string (the unrolled form: each run of plain characters is one fast step), then
    # the brackets outside strings.
    brackets = re.findall(r"[\[\]{}]", re.sub(r'"[^"\\]*(?:\\.[^"\\]*)*"', "", text))
    return max(itertools.accumulate(map({"[": 1, "{": 1, "]": -1, "}": -1}.__getitem__, brackets)), default=0)


def _check_unicode(value: Any, what: str) -> None:
    try:
        dumps_text(value).encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidJSON(what, "a string holds a lone UTF-16 surrogate (\\ud800-\\udfff)") from None


def _not_serializable(value: object) -> NoReturn:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def _encode(value: Any, ensure_ascii: bool) -> str:
    """json.dumps(value, allow_nan=False, ensure_ascii=ensure_ascii): the one-shot C path
    json.JSONEncoder.encode takes."""
    if _make_encoder is None:
        import json

        return json.dumps(value, allow_nan=False, ensure_ascii=ensure_ascii)
    quote = _encode_basestring_ascii if ensure_ascii else _encode_basestring
    if isinstance(value, str):
        return quote(value)
    encoder = _make_encoder({}, _not_serializable, quote, None, ": ", ", ", False, False, False)
    return "".join(encoder(value, 0))


def dumps(value: Any) -> str:
    """Serialise for the wire: NaN and infinities raise ValueError instead of being written."""
    return _encode(value, ensure_ascii=True)


def dumps_text(value: Any) -> str:
    """As `dumps`, but non-ASCII characters written as they are (json.dumps(ensure_ascii=False))."""
    return _encode(value, ensure_ascii=False)


def quoted(text: str) -> str:
    """A string as JSON writes it (json.dumps(text)), without importing json."""
    return _encode(text, ensure_ascii=True)
