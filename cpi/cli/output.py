"""What the operator commands print through: JSON for scripts, one-line errors, table cells
(the masking of secrets is cpi.logs.Redactor.masked, which a plan's answer takes too)."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import time
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cpi import errors


class CliError(Exception):
    """One line on stderr ("cpi COMMAND: error: ...") and this exit status, raised from
    anywhere in a command (cpi.cli.commands.run prints it): 1 when the command could not do
    its job, 2 for a usage error."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.message = message
        self.status = status


#: The short escapes a reader knows; every other character `escaped` replaces is \xNN,
#: \uNNNN or \UNNNNNNNN.
_SHORT = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: Unicode's categories of what a terminal would act on or not show: controls (C0, DEL, C1),
#: format characters (the bidi overrides and isolates, U+200E/U+200F, U+061C, zero widths,
#: U+FEFF), lone surrogates, and the line and paragraph separators.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _escape(char: str) -> str:
    if char in _SHORT:
        return _SHORT[char]
    point = ord(char)
    if point < 0x100:
        return f"\\x{point:02x}"
    return f"\\u{point:04x}" if point < 0x10000 else f"\\U{point:08x}"


def escaped(text: str) -> str:
    """`text` safe to print on a terminal or down a pipe: every control, bidi or other
    invisible character written as its escape (ESC as `\\x1b`, a newline as `\\n`, U+202E
    as `\\u202e`), and a backslash as `\\\\`, so that what an escape shows was that
    character and nothing can pass for one. Tag values, names and request_ids come from the
    cloud and the director: raw, ESC drives the terminal, U+202E reorders what is read and
    a newline in a tag forges a whole row of a table a script reads. --json and --yaml
    have escapes of their own and never pass through here."""
    if text.isprintable() and "\\" not in text:  # the common case, no copy
        return text
    return "".join(_escape(c) if c in _SHORT or unicodedata.category(c) in _HIDDEN else c for c in text)


def error_line(command: str, message: str) -> str:
    """The one line an error is on stderr; the message may echo a cloud's text (a cid, a
    tag, a server's answer), so it is `escaped` as a cell is."""
    return f"cpi {command}: error: {escaped(message)}"


def fail(command: str, exc: errors.BoshError) -> int:
    print(error_line(command, exc.message), file=sys.stderr)
    return 1


def print_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


def wants_data(args: argparse.Namespace) -> bool:
    """--json or --yaml: the command prints its data for a script instead of a table."""
    if getattr(args, "json", False) and getattr(args, "yaml", False):
        raise CliError("--json and --yaml: choose one", 2)
    return bool(getattr(args, "json", False) or getattr(args, "yaml", False))


def print_data(value: Any, args: argparse.Namespace, rows: str | None = None) -> None:
    """The command's data as --json or --yaml asked (JSON, keys sorted, when neither), with
    only the keys its `--column`s name (`picked`)."""
    value = picked(value, getattr(args, "columns", None), rows)
    if getattr(args, "yaml", False):
        import yaml

        # Readable non-ASCII text as it is, unless some text holds a character PyYAML counts
        # as printable that a terminal does not show as itself (U+202E, U+2066...): then the
        # whole document escapes all but ASCII, as --json does. The values read back the same.
        plain = not _any_text(value, _hides_beyond_ascii)
        sys.stdout.write(yaml.safe_dump(value, default_flow_style=False, sort_keys=True, allow_unicode=plain))
    else:
        print_json(value)


def _hides_beyond_ascii(text: str) -> bool:
    return not text.isascii() and any(not c.isascii() and unicodedata.category(c) in _HIDDEN for c in text)


def _any_text(value: Any, test: Callable[[str], bool]) -> bool:
    """Whether `test` holds for any string in `value`, keys included."""
    if isinstance(value, str):
        return test(value)
    if isinstance(value, dict):
        return any(_any_text(key, test) or _any_text(item, test) for key, item in value.items())
    if isinstance(value, list | tuple):
        return any(_any_text(item, test) for item in value)
    return False


def picked(value: Any, columns: Any, rows: str | None = None) -> Any:
    """`value` with each row holding only `columns`, in that order, as a table shows only
    those (none: all). The rows are `value` itself when a list, `value[rows]` when `rows`
    names them, else the one mapping `value` (`cpi show`). A column is a row's key, a dotted
    path into it (`tags.deployment`), or a key of one of its mappings (`deployment`, which
    a table shows as a column of its own); a row without it holds null, as a table's cell
    is empty where a VM has no such tag."""
    if not columns:
        return value
    if rows is not None and isinstance(value, dict):
        return {**value, rows: picked(value.get(rows), columns)}
    many = value if isinstance(value, list) else [value]
    if not all(isinstance(row, dict) for row in many):
        return value
    found = [{column: _lookup(row, column) for column in columns} for row in many]
    return found if isinstance(value, list) else found[0]


def _lookup(row: dict, column: str) -> Any:
    if column in row:
        return row[column]
    head, _, rest = column.partition(".")
    if rest and isinstance(row.get(head), dict):
        return _lookup(row[head], rest)
    return next((inner[column] for inner in row.values() if isinstance(inner, dict) and column in inner), None)


def short(value: Any) -> str:
    """A value as one JSON line of at most 120 characters, for a table cell."""
    if value is None:
        return ""
    text = json.dumps(value, separators=(",", ":"))
    return text if len(text) <= 120 else text[:117] + "..."


def confirm(args: argparse.Namespace, what: str, stdin_taken: bool = False) -> None:
    """Ask as bosh asks, "Continue? [yN]:" on the terminal, before `what` is done; -n (or
    $CPI_NON_INTERACTIVE) answers yes. Raises CliError (exit 1) on any answer but y/yes,
    and when there is no terminal to ask on (or stdin is the command's input): a script
    says -n, it is never taken as a yes."""
    if getattr(args, "non_interactive", False):
        return
    if stdin_taken or not sys.stdin.isatty():
        raise CliError(f"refusing to {what} without -n: there is no terminal to ask on")
    sys.stderr.write("Continue? [yN]: ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    if answer.strip().lower() not in ("y", "yes"):
        raise CliError(f"stopped: did not {what}")


class Status:
    """What a spinner says while a command waits on a cloud: what it waits on, how far it is
    (a listing's count), for how long, and the latest retry the cloud logged (cpi.retry:
    "... attempt 2 failed, retrying in 0.4s"), so a slow or unreachable endpoint is seen
    to be one. rich draws it anew on every refresh (`__rich__`), so the seconds move while
    a request blocks."""

    def __init__(self, what: str, clean: Callable[[str], str] | None = None):
        self.what = what
        self.progress = ""  # e.g. "1,500 volumes"
        self.retry = ""
        self.clean = clean or (lambda text: text)
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def line(self) -> str:
        return f"{self.what}: " + (f"{self.progress}, " if self.progress else "") + f"{self.elapsed():.0f} s"

    def __rich__(self) -> Any:
        from rich.console import Group
        from rich.text import Text

        # the first line is cut, never folded (it is what moves); the retry folds, so that
        # "retrying in 1.5s" is still seen on an 80-column terminal
        # both `escaped`: a cid typed, a cloud's retry message
        head = Text(escaped(self.line()), no_wrap=True, overflow="ellipsis")
        if not self.retry:
            return head
        retry = self.retry if len(self.retry) <= 300 else self.retry[:297] + "..."
        return Group(head, Text(escaped(retry), style="dim"))

    def failed(self, message: str, timeout: float | None) -> str:
        """The one error line's text: a failure that took a while says how long it waited
        and on what (the message names the endpoint), and the --timeout that ended it; so
        does one after retries (the budget ran out, whatever the clock says)."""
        line = f"{self.what}: {self.clean(message)}"
        spent = self.elapsed()
        if spent < 1 and not self.retry:  # a quick refusal: the message alone says it
            return line
        limit = f"; --timeout {timeout:g} s" if timeout is not None else ""
        return f"{line} (after {spent:.1f} s{limit})"


@contextlib.contextmanager
def spinner(status: Status) -> Iterator[Status]:
    """`status` drawn on the terminal's stderr until the block ends; nothing at all when
    stderr is not a terminal (a script's log gets the result, or the one error line)."""
    if not sys.stderr.isatty():
        yield status
        return
    from rich.console import Console

    with Console(stderr=True).status(status):
        yield status


class _Retries(logging.Handler):
    """cpi.retry's records, each shown as the spinner's latest retry; none printed (the
    give-up warning's news is the command's one error line)."""

    def __init__(self, status: Status):
        super().__init__(logging.INFO)
        self.status = status

    def emit(self, record: logging.LogRecord) -> None:
        self.status.retry = self.status.clean(record.getMessage())


@contextlib.contextmanager
def watching(status: Status) -> Iterator[Status]:
    """`status` on the terminal (`spinner`), fed with the retries the cloud logs in this
    process (cpi.retry) until the block ends; none of them printed."""
    logger = logging.getLogger("cpi.retry")
    handler, level = _Retries(status), logger.level
    logger.addHandler(handler)
    if not level or level > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        with spinner(status):
            yield status
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@contextlib.contextmanager
def waiting(what: str, timeout: float | None = None,
            clean: Callable[[str], str] | None = None) -> Iterator[Status]:
    """While a command in this process waits on a cloud: the spinner (`watching`); a cloud
    error (cpi.errors) ends the command as one line naming what was waited on and for how
    long (CliError, exit 1). `clean` masks the config's secrets in whatever is shown."""
    from cpi import errors

    status = Status(what, clean)
    try:
        with watching(status):
            yield status
    except errors.BoshError as exc:
        raise CliError(status.failed(exc.message, timeout)) from None


@contextlib.contextmanager
def reading(what: str, timeout: float | None = None, clean: Callable[[str], str] | None = None) -> Iterator[None]:
    """While a cloud's listing is read page after page: "reading vms: 1,500 vms, 12 s" on
    the terminal's stderr, updated per page (cpi.clouds.inventory.progress), so a listing
    of thousands is seen to move, and a cloud that does not answer is seen to be waited
    on; nothing when stderr is not a terminal (a script's log). As `waiting`."""
    from cpi.clouds import inventory

    with waiting(f"reading {what}", timeout, clean) as status:
        def progress(kind: str, count: int) -> None:
            status.progress = f"{count:,} {kind}"

        inventory.progress = progress
        try:
            yield
        finally:
            inventory.progress = None
