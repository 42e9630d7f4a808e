"""The cids a director knows, read from what bosh-cli prints, so `cpi orphans` can tell
what the CPI made that no director remembers.

Accepted: `bosh vms --json`, `bosh instances --details --json`, `bosh disks [--orphaned]
--json` (bosh-cli's {"Tables": [{"Rows": [...]}]} shape, any number of them, one after
another), a JSON list of cids, or plain text with one cid per line.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: Row columns that hold cids (bosh-cli's names; `disk_cids` may hold several).
CID_COLUMNS = ("vm_cid", "disk_cid", "disk_cids", "snapshot_cid", "stemcell_cid", "cid")
_SPLIT = re.compile(r"[\s,]+")


def parse(text: str) -> set[str]:
    """Every cid in `text`, whichever of the accepted shapes it is in."""
    stripped = text.strip()
    if not stripped:
        return set()
    documents = _json_documents(stripped)
    if documents is None:
        return {line.strip() for line in stripped.splitlines() if line.strip() and not line.startswith("#")}
    found: set[str] = set()
    for document in documents:
        _collect(document, found)
    return found


def _json_documents(text: str) -> list[Any] | None:
    """bosh-cli prints one JSON document per command; several may be concatenated."""
    decoder, documents, index = json.JSONDecoder(), [], 0
    while index < len(text):
        try:
            document, end = decoder.raw_decode(text, index)
        except json.JSONDecodeError:
            return None if not documents else documents
        documents.append(document)
        index = end
        while index < len(text) and text[index].isspace():
            index += 1
    return documents


def _collect(value: Any, found: set[str]) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.add(item)  # a plain list of cids
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            for key, cell in item.items():
                if key in CID_COLUMNS and isinstance(cell, str):
                    found.update(part for part in _SPLIT.split(cell) if part and part != "-")
                elif isinstance(cell, (dict, list)) and key in ("Tables", "Rows", "tables", "rows"):
                    stack.append(cell)
