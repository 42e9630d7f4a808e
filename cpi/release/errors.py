"""The one error type of the release builder.

Every check raises `ReleaseError` with a message written for the person running the
build: which file, which key, what was found and what to do. The CLI prints the message
and exits non-zero; no traceback is needed to act on it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError


class ReleaseError(Exception):
    """The release cannot be built as it stands; the message says why and what to fix."""


def read_text(path: Path, needed_for: str) -> str:
    """The file's text, or a ReleaseError naming it and what it is needed for (how to
    make it, where that helps)."""
    try:
        return path.read_text()
    except FileNotFoundError:
        raise ReleaseError(f"{path}: not found; {needed_for}") from None


def describe_validation(exc: ValidationError, source: str) -> str:
    """One line per problem, each naming the key path inside `source`, e.g.
    `jobs/cpi/spec: templates: Input should be a valid dictionary (got ['a'])`."""
    lines = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "(top level)"
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown key"
        if error["type"] == "value_error":
            # Our own validators' messages already name the value.
            message = message.removeprefix("Value error, ")
        got = error.get("input")
        quiet = error["type"] in ("missing", "extra_forbidden", "value_error")
        suffix = "" if quiet else f" (got {got!r})"
        lines.append(f"{source}: {where}: {message}{suffix}")
    return "\n".join(lines)
