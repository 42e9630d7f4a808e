"""Datastore clusters (vSphere StoragePods): which datastores they add to those a disk may
go on, as the official CPI counts them.

The official CPI takes a datastore cluster as the set of its datastores: those of every
cluster whose Storage DRS is on, among the clusters `datastore_cluster_pattern` (or
`persistent_datastore_cluster_pattern`) matches or a `datastores` list names, join the
datastores of the pattern or list; a cluster whose Storage DRS is off is left out, with a
line in the log. Which of those datastores takes a disk is then the CPI's own pick (here
place.pick, weighted by the space left, so disks spread): the official CPI asks Storage DRS
for a recommendation (StorageResourceManager.RecommendDatastores) only on a path its VM
placement no longer takes since 2021, and neither does this one.

A datastore cluster is named by its path below the datacenter's datastore folder (`POD`,
or `folder/POD`), as the official CPI names it; a pattern may match anywhere in that path.
The datacenter's clusters, their Storage DRS switch and their datastores' names come in
one PropertyCollector request, whatever their number.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cpi.errors import CloudError

from .. import collector
from ..patterns import compile_pattern

if TYPE_CHECKING:
    from ..vcenter.session import Session

log = logging.getLogger("cpi.clouds.vsphere")


@dataclass(frozen=True)
class Pod:
    """A datastore cluster: its path below the datastore folder, whether Storage DRS is on,
    and the names of its datastores."""

    path: str
    ref: Any
    sdrs: bool
    datastores: tuple[str, ...]


def read(session: Session, datacenter: Any) -> list[Pod]:
    """Every datastore cluster below the datacenter's datastore folder (subfolders too)."""
    from pyVmomi import vim, vmodl

    spec = vmodl.query.PropertyCollector
    root = datacenter.datastoreFolder
    walk = spec.TraversalSpec(name="folders", type=vim.Folder, path="childEntity", skip=False,
                              selectSet=[spec.SelectionSpec(name="folders")])
    filter_spec = spec.FilterSpec(objectSet=[spec.ObjectSpec(obj=root, skip=True, selectSet=[walk])], propSet=[
        spec.PropertySpec(type=vim.Folder, pathSet=["name", "parent"]),  # a StoragePod is a Folder too
        spec.PropertySpec(type=vim.StoragePod, pathSet=["childEntity",
                                                        "podStorageDrsEntry.storageDrsConfig.podConfig.enabled"]),
        spec.PropertySpec(type=vim.Datastore, pathSet=["name"])])
    folders: dict[str, tuple[str, Any]] = {}  # moId -> (name, parent)
    pods: list[tuple[Any, dict[str, Any]]] = []
    names: dict[str, str] = {}
    for obj, values in collector.retrieve_specs(session, [filter_spec]):
        if isinstance(obj, vim.Datastore):
            names[obj._moId] = values.get("name", obj._moId)
            continue
        folders[obj._moId] = (values.get("name", obj._moId), values.get("parent"))
        if isinstance(obj, vim.StoragePod):
            pods.append((obj, values))

    def path(moid: str) -> str:
        parts = []
        while moid in folders:
            name, parent = folders[moid]
            parts.append(name)
            moid = parent._moId if parent is not None and parent._moId != root._moId else ""
        return "/".join(reversed(parts))

    return sorted((Pod(path=path(obj._moId), ref=obj,
                       sdrs=bool(values.get("podStorageDrsEntry.storageDrsConfig.podConfig.enabled")),
                       datastores=tuple(sorted(names.get(d._moId, d._moId) for d in values.get("childEntity") or [])))
                   for obj, values in pods), key=lambda p: p.path)


def listed(pods: list[Pod]) -> str:
    """The clusters as an error names them."""
    return ", ".join(f"{p.path}{'' if p.sdrs else ' (Storage DRS off)'}" for p in pods) or "none"


def named(pods: list[Pod], names: list[str], datacenter: str) -> list[Pod]:
    """The clusters `names` lists (paths below the datastore folder); one that is not there
    is a CloudError, as in the official CPI."""
    by_path = {p.path: p for p in pods}
    missing = [n for n in names if n.strip("/") not in by_path]
    if missing:
        raise CloudError(f"datastore cluster(s) {', '.join(repr(n) for n in missing)} not found in datacenter "
                         f"'{datacenter}' (its datastore clusters: {listed(pods)})")
    return [by_path[n.strip("/")] for n in names]


def matching(pods: list[Pod], pattern: str) -> list[Pod]:
    """The clusters whose path `pattern` matches (anywhere, as Ruby's `=~`)."""
    regex = compile_pattern(pattern)
    return [p for p in pods if regex.search(p.path)]


def with_sdrs(pods: list[Pod], what: str) -> list[Pod]:
    """Those of `pods` whose Storage DRS is on; the others are left out, and logged."""
    off = [p.path for p in pods if not p.sdrs]
    if off:
        log.info("%s: datastore cluster(s) %s left out: their Storage DRS is off", what, ", ".join(off))
    return [p for p in pods if p.sdrs]


def exactly(names: list[str]) -> str:
    """A pattern matching exactly these datastore names (as the official CPI writes one)."""
    return "^(" + "|".join(re.escape(n) for n in names) + ")$"
