"""Finding the vSphere objects cpi.json and cloud_properties name: a datacenter, a cluster,
a resource pool, a datastore, a VM folder and a network, each by its name (or path).

Why by inventory path: the official CPI finds a network by listing every network of the
datacenter and reading their names, so a lookup costs requests and bytes in proportion to
the port groups (thousands, on an NSX-backed vCenter) and create_vm slows down as the
vCenter grows. vSphere's SearchIndex resolves `<datacenter>/network/<name>` on the server
side: one request, one managed object reference back, whatever the inventory's size. The
same holds for the other kinds, under their datacenter's `host`, `datastore` and `vm`
folders. What the request returns is checked for its kind (a folder named like the network
is not the network) without a further request: the reference carries its type.

A name that is not there is an error naming it, the datacenter and the path looked up:
NetworkNotFound for a network (the type the director knows), CloudError for the rest, which
are cpi.json's and so the operator's to fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from cpi.errors import CloudError, NetworkNotFound

from . import collector

if TYPE_CHECKING:
    from pyVmomi import vim

    from .vcenter.session import Session

#: the kind of managed object a lookup expects (pyVmomi's own stubs type them)
Found = TypeVar("Found")


def _find(session: Session, path: str) -> Any:
    """The managed object at inventory path `path`, or None: one request."""
    return session.content.searchIndex.FindByInventoryPath(inventoryPath=path)


def _kind(obj: Any) -> str:
    return type(obj).__name__.rsplit(".", 1)[-1]


def _check(found: Any, expected: type[Found], what: str, path: str,
           missing: type[CloudError] = CloudError) -> Found:
    if found is None:
        raise missing(f"{what} not found (looked up at inventory path '{path}')")
    if not isinstance(found, expected):
        raise missing(f"{what} not found: '{path}' is a {_kind(found)}, not a {expected.__name__.rsplit('.', 1)[-1]}")
    return found


def _join(*parts: str) -> str:
    return "/".join(part.strip("/") for part in parts if part and part.strip("/"))


def datacenter(session: Session, name: str) -> vim.Datacenter:
    """The datacenter `name` (at the root of the inventory, or a path through folders)."""
    from pyVmomi import vim

    return _check(_find(session, name), vim.Datacenter, f"datacenter '{name}'", name)


def cluster(session: Session, datacenter_name: str, name: str) -> vim.ClusterComputeResource:
    """The cluster `name` of the datacenter (a path if it is in a host folder)."""
    from pyVmomi import vim

    path = _join(datacenter_name, "host", name)
    return _check(_find(session, path), vim.ClusterComputeResource,
                  f"cluster '{name}' in datacenter '{datacenter_name}'", path)


def resource_pool(session: Session, datacenter_name: str, cluster_name: str,
                  pool: str | None = None) -> vim.ResourcePool:
    """The resource pool `pool` of a cluster, as props.py defines it: a path below its root
    pool (`parent/child`: one request), else a pool of that name anywhere below it (one more
    request, reading the names of the cluster's pools only); None or empty: the root pool."""
    from pyVmomi import vim

    path = _join(datacenter_name, "host", cluster_name, "Resources", pool or "")
    what = (f"resource pool '{pool}' of cluster '{cluster_name}'" if pool else f"root resource pool of cluster "
            f"'{cluster_name}'") + f" in datacenter '{datacenter_name}'"
    found = _find(session, path)
    if found is None and pool and "/" not in pool.strip("/"):
        root = _check(_find(session, _join(datacenter_name, "host", cluster_name, "Resources")), vim.ResourcePool,
                      f"cluster '{cluster_name}' in datacenter '{datacenter_name}'",
                      _join(datacenter_name, "host", cluster_name))
        named = [obj for obj, name in _pools_below(session, root) if name == pool.strip("/")]
        if len(named) > 1:
            raise CloudError(f"{what}: {len(named)} pools below the cluster's root pool have that name; give its path "
                             "(`parent/child`)")
        found = named[0] if named else None
    return _check(found, vim.ResourcePool, what, path)


def _pools_below(session: Session, root: vim.ResourcePool) -> list[tuple[Any, str]]:
    """Every resource pool (and vApp) below `root`, with its name: one PropertyCollector
    request walking `resourcePool` down from the root (pages followed, should there be many)."""
    from pyVmomi import vim, vmodl

    spec = vmodl.query.PropertyCollector
    walk = spec.TraversalSpec(name="pools", type=vim.ResourcePool, path="resourcePool", skip=False,
                              selectSet=[spec.SelectionSpec(name="pools")])
    return [(obj, values["name"]) for obj, values in collector.retrieve(
        session, [spec.ObjectSpec(obj=root, skip=True, selectSet=[walk])], vim.ResourcePool, ["name"])]


def datastore(session: Session, datacenter_name: str, name: str) -> vim.Datastore:
    """The datastore `name` of the datacenter."""
    from pyVmomi import vim

    path = _join(datacenter_name, "datastore", name)
    return _check(_find(session, path), vim.Datastore, f"datastore '{name}' in datacenter '{datacenter_name}'", path)


def folder(session: Session, datacenter_name: str, path_below: str) -> vim.Folder:
    """The VM folder at `path_below` the datacenter's VM folder (`BOSH_VMs`, `a/b`)."""
    from pyVmomi import vim

    path = _join(datacenter_name, "vm", path_below)
    return _check(_find(session, path), vim.Folder, f"VM folder '{path_below}' in datacenter '{datacenter_name}'",
                  path)


def network(session: Session, datacenter_name: str, name: str) -> vim.Network:
    """The network `name` of the datacenter: a standard port group, a distributed port
    group or an opaque (NSX) network, or a path (`folder/name`) where names repeat. One
    request however many networks the datacenter has."""
    from pyVmomi import vim

    path = _join(datacenter_name, "network", name)
    return _check(_find(session, path), vim.Network, f"network '{name}' in datacenter '{datacenter_name}'", path,
                  NetworkNotFound)
