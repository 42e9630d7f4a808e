"""A VM of the template folder as create_vm clones it: a stemcell or one of its copies on a
datastore. stemcells.py finds and makes them; the clone's spec (vms/clone.py) reads one, and
takes it from here so that it needs none of the stemcell calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyVmomi import vim


@dataclass(frozen=True)
class Template:
    """A VM of the template folder: a stemcell or one of its copies."""

    name: str
    ref: Any
    datastores: tuple[str, ...]  # managed object ids of its datastores
    snapshot: vim.vm.Snapshot | None  # its current snapshot
