"""Tables as bosh prints them: every cell whole, columns padded to their widest cell, never
wrapped or cut to fit the terminal (a narrow terminal folds the long line as a whole, and
a pipe gets what `cut`, `awk` and `grep` expect).

- On a terminal (or with `--tty`): the title, the column headers, the rows separated by two
  spaces, then the count ("3 vms").
- Otherwise, as `bosh vms | cat`: the rows only, each cell padded and followed by a tab
  (cut's default delimiter), the first column filled on every row.
- `--column NAME` (repeatable) keeps those columns, in that order; an unknown name is an
  error naming the columns there are.
- Every cell is `escaped` (cpi.cli.output): a tag's newline, ESC or U+202E is shown as its
  escape, never sent raw, so one resource stays one row.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from cpi.logs import plural

from .output import CliError, escaped


class UnknownColumn(CliError):
    def __init__(self, message: str):
        super().__init__(message, 2)


def cell(value: Any) -> str:
    """A value as a person reads it in a cell (`text`), a string `escaped`: the cloud's and
    the director's text never reaches the terminal or the pipe raw, and one row stays one
    line. Every other value is JSON, which is printable ASCII already (json.dumps escapes)."""
    return escaped(value) if isinstance(value, str) else text(value)


def text(value: Any) -> str:
    """A value as text: strings as they are, None as nothing, every other value as JSON
    (never a Python repr)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


@dataclass
class Table:
    title: str
    headers: Sequence[str]
    rows: list[Sequence[Any]] = field(default_factory=list)
    #: What the count at the bottom counts ("vm" -> "3 vms"); None: no count line.
    noun: str | None = None
    nouns: str | None = None
    #: Instead of `rows`: called once to measure the columns and count, once to print, so
    #: that a table of a million rows holds one at a time (`cpi audit`).
    source: Callable[[], Iterable[Sequence[Any]]] | None = None

    def pick(self, columns: Sequence[str] | None) -> Table:
        """Only `columns`, in that order (all when None or empty)."""
        if not columns:
            return self
        index = {h.lower(): i for i, h in enumerate(self.headers)}
        unknown = [c for c in columns if c.lower() not in index]
        if unknown:
            raise UnknownColumn(f"no column {', '.join(repr(c) for c in unknown)}; "
                                f"the columns are: {', '.join(self.headers)}")
        chosen = [index[c.lower()] for c in columns]
        source = self.source
        return Table(self.title, [self.headers[i] for i in chosen], [[row[i] for i in chosen] for row in self.rows],
                     self.noun, self.nouns,
                     None if source is None else lambda: ([row[i] for i in chosen] for row in source()))

    def lines(self, decorated: bool) -> Iterator[str]:
        rows = self.source or (lambda: self.rows)
        widths = [len(h) if decorated else 0 for h in self.headers]
        count = 0
        for row in _cells(rows(), decorated):
            count += 1
            widths = [max(width, len(row[i])) for i, width in enumerate(widths)]
        gap = "  " if decorated else "\t"
        if decorated and self.title:
            yield from (escaped(self.title), "")  # it may name a cid or a path
        shown = _cells(rows(), decorated)
        for row in itertools.chain([list(self.headers)], shown) if decorated else shown:
            line = "".join(c.ljust(widths[i]) + gap for i, c in enumerate(row))
            yield line.rstrip() if decorated else line
        if decorated and self.noun:
            yield from ("", plural(count, self.noun, self.nouns))


def _cells(rows: Iterable[Sequence[Any]], decorated: bool) -> Iterator[list[str]]:
    """Each row's cells as text; piped, an empty first cell repeats the one above it (so
    that `grep` finds every row)."""
    last = ""
    for row in rows:
        cells = [cell(v) for v in row]
        if not decorated and cells:
            if cells[0]:
                last = cells[0]
            else:
                cells[0] = last
        yield cells


def decorated(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "tty", False)) or sys.stdout.isatty()


def print_table(table: Table, args: argparse.Namespace) -> None:
    """`table` on stdout, bosh-style, with the command's `--column`s and `--tty`."""
    picked = table.pick(getattr(args, "columns", None))
    sys.stdout.writelines(line + "\n" for line in picked.lines(decorated(args)))
