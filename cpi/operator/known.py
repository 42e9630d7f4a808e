"""The cids a director knows, read from what bosh-cli prints, so `cpi orphans` can tell
what the CPI made that no director remembers.

What `cpi orphans` deletes is everything tagged with the director's UUID that this set
does not name (and that the cloud shows nothing alive holding: cpi/operator/orphans.py),
so the set must be complete and must really be what bosh printed. The commands that give
the complete set, concatenated into one file (RECIPE):

    bosh instances --details --json   every instance's vm_cid and disk_cids, stopped
                                      instances (whose persistent disks are detached) too
    bosh disks --orphaned --json      the disks the director keeps orphaned for a while
    bosh orphaned-vms --json          the VMs it keeps orphaned until it deletes them
    bosh stemcells --json             the stemcells it uploaded (their cid column)

bosh-cli names each table's content ("instances", "disks", ...), so the reader can tell
which of these the input holds and `missing` says what a short one would cost. (`bosh vms
--json` is accepted too, but names no disk.) Accepted shapes: bosh-cli's {"Tables":
[{"Rows": [...]}], ...} documents, one after another; a JSON list of cid strings; plain text
with one cid per line. Anything else is refused with one line saying what it is — an empty
file, `[]`, bosh's own error document (`"Tables": null` with its `Lines`), truncated JSON, a
shape of another kind, or a file that names no cid at all — because reading any of them as
"the director knows nothing" would offer everything it made for deletion.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from cpi import strict_json

#: Row columns that hold cids (bosh-cli's names; `disk_cids` may hold several).
CID_COLUMNS = ("vm_cid", "disk_cid", "disk_cids", "snapshot_cid", "stemcell_cid", "cid")
_SPLIT = re.compile(r"[\s,]+")
#: what a cid on a line of its own may look like (every cloud's, light stemcells' included)
_PLAIN_CID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]*(?: light)?$")


#: The director's lists that make the known set complete: the table bosh-cli's --json names
#: ("Content"), the command that prints it, and what an input without it lets through.
RECIPE = (
    ("instances", "bosh instances --details --json",
     "the persistent disks of stopped instances (detached) would be offered"),
    ("disks", "bosh disks --orphaned --json", "the orphaned disks the director still keeps would be offered"),
    ("orphaned_vms", "bosh orphaned-vms --json", "the orphaned VMs the director still keeps would be offered"),
    ("stemcells", "bosh stemcells --json", "the stemcells no VM runs would be offered"),
)


class KnownError(ValueError):
    """The known-cids input is not a complete list this reader can trust."""


@dataclass
class Known:
    """The cids of the input, and which of bosh-cli's tables it held (None: plain cids,
    whose source cannot be told)."""

    cids: set[str] = field(default_factory=set)
    tables: set[str] | None = field(default_factory=set)

    def missing(self) -> list[str]:
        """One line per list of RECIPE the input lacks, saying what that lets through."""
        if self.tables is None:
            return ["the input is plain cids: which of the director's lists it holds cannot be told (the complete "
                    "set: " + "; ".join(command for _, command, _ in RECIPE) + ")"]
        found = [f"no `{command}` in the input: {cost}" for content, command, cost in RECIPE
                 if content not in self.tables]
        if "instances" not in self.tables and "vms" in self.tables:
            found[0] = ("`bosh vms --json` names no disk and `bosh instances --details --json` is not in the input: "
                        + RECIPE[0][2])
        elif "instances" not in self.tables and "instances-without-details" in self.tables:
            found[0] = ("`bosh instances --json` without --details names no disk: " + RECIPE[0][2])
        return found


def read(text: str) -> Known:
    """The cids of `text` and the tables they came from; KnownError when it is not one of
    the accepted shapes or names no cid."""
    stripped = text.strip()
    if not stripped:
        raise KnownError("the known-cids input is empty")
    known = _from_json(stripped) if stripped[0] in "[{" else Known(_from_lines(stripped), None)
    if not known.cids:
        raise KnownError("the known-cids input names no cid (a director that knows nothing is not something "
                         "to delete by: check the bosh commands that wrote it)")
    return known


def _from_lines(text: str) -> set[str]:
    found = set()
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if not _PLAIN_CID.match(line):
            raise KnownError(f"line {number} of the known-cids input is not a cid: {line[:80]!r}")
        found.add(line)
    return found


def _from_json(text: str) -> Known:
    # bosh-cli's tables nest 4 deep; a deeper text would overflow the decoder's recursion
    if strict_json.too_deep(text):
        raise KnownError(f"the known-cids input nests deeper than {strict_json.MAX_DEPTH} levels: "
                         "not bosh-cli's output")
    decoder, index = json.JSONDecoder(), 0
    found = Known()
    count = 0
    while index < len(text):
        try:
            document, end = decoder.raw_decode(text, index)
        except json.JSONDecodeError as exc:
            raise KnownError(f"the known-cids input is not complete JSON (document {count + 1}: {exc.msg} at "
                             f"character {exc.pos})") from None
        count += 1
        _collect(document, count, found)
        index = end
        while index < len(text) and text[index].isspace():
            index += 1
    return found


def _collect(document: Any, number: int, found: Known) -> None:
    if isinstance(document, list):
        if not document or not all(isinstance(item, str) and item.strip() for item in document):
            raise KnownError(f"document {number} of the known-cids input is a list, but not a non-empty list of cids")
        found.cids.update(item.strip() for item in document)
        found.tables = None
        return
    if not isinstance(document, dict) or "Tables" not in document:
        raise KnownError(f"document {number} of the known-cids input is not bosh-cli's --json output "
                         f"(no \"Tables\"): {_shape(document)}")
    tables = document["Tables"]
    if not isinstance(tables, list) or not tables:
        lines = document.get("Lines")
        said = "; ".join(str(line) for line in lines) if isinstance(lines, list) and lines else "no tables"
        raise KnownError(f"document {number} of the known-cids input is bosh-cli's answer without tables: {said}")
    for table in tables:
        rows = table.get("Rows") if isinstance(table, dict) else None
        if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
            raise KnownError(f"document {number} of the known-cids input has a table without rows of cells")
        if found.tables is not None:
            found.tables.add(_content(table, rows))
        for row in rows:
            for key, cell in row.items():
                if key in CID_COLUMNS and isinstance(cell, str):
                    found.cids.update(part for part in _SPLIT.split(cell) if part and part != "-")


def _content(table: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """Which bosh-cli list a table is: its "Content", and for instances whether --details
    gave it the disk_cids column (its "Header" names the columns, empty or not)."""
    content = str(table.get("Content") or "")
    if content == "instances":
        header = table.get("Header")
        columns = set(header) if isinstance(header, dict) else {key for row in rows for key in row}
        if "disk_cids" not in columns:
            return "instances-without-details"
    return content


def _shape(value: Any) -> str:
    if isinstance(value, dict):
        return "an object with " + (", ".join(sorted(map(str, value))[:5]) or "no keys")
    return f"a JSON {type(value).__name__}"
