"""Reading properties of many vSphere objects in one request (the PropertyCollector), pages
followed: what every listing of this cloud goes through, so none costs a request per object.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pyVmomi import vim, vmodl

    from .vcenter.session import Session

#: the kind of managed object asked about (pyVmomi's stubs type each)
Kind = TypeVar("Kind")


def retrieve(session: Session, object_specs: list[vmodl.query.PropertyCollector.ObjectSpec], kind: type[Kind],
             paths: list[str]) -> Iterator[tuple[Kind, dict[str, Any]]]:
    """(object, {property path: value}) of each object of `kind` the object specs reach."""
    from pyVmomi import vmodl

    collector = vmodl.query.PropertyCollector
    spec = collector.FilterSpec(objectSet=object_specs, propSet=[collector.PropertySpec(type=kind, pathSet=paths)])
    yield from retrieve_specs(session, [spec])


def retrieve_specs(session: Session, filter_specs: list[vmodl.query.PropertyCollector.FilterSpec]
                   ) -> Iterator[tuple[Any, dict[str, Any]]]:
    """(object, {property path: value}) of each object the filter specs select: several
    kinds, each with its properties, in one request."""
    from pyVmomi import vmodl

    pc = session.content.propertyCollector
    result = pc.RetrievePropertiesEx(specSet=filter_specs, options=vmodl.query.PropertyCollector.RetrieveOptions())
    while result is not None:
        for item in result.objects:
            yield item.obj, {p.name: p.val for p in item.propSet}
        result = pc.ContinueRetrievePropertiesEx(token=result.token) if result.token else None


def of(session: Session, objects: list[Kind], kind: type[Kind], paths: list[str]) -> list[tuple[Kind, dict[str, Any]]]:
    """The properties `paths` of each of `objects` (all of `kind`)."""
    from pyVmomi import vmodl

    if not objects:
        return []
    return list(retrieve(session, [vmodl.query.PropertyCollector.ObjectSpec(obj=o) for o in objects], kind, paths))


def children(session: Session, folder: vim.Folder, kind: type[Kind], paths: list[str]
             ) -> list[tuple[Kind, dict[str, Any]]]:
    """The properties of each direct child of `folder` that is a `kind`."""
    from pyVmomi import vim, vmodl

    collector = vmodl.query.PropertyCollector
    walk = collector.TraversalSpec(name="children", type=vim.Folder, path="childEntity", skip=False)
    return list(retrieve(session, [collector.ObjectSpec(obj=folder, skip=True, selectSet=[walk])], kind, paths))


def below(session: Session, root: vim.ManagedEntity, kind: type[Kind], paths: list[str]
          ) -> Iterator[tuple[Kind, dict[str, Any]]]:
    """The properties of each `kind` anywhere below `root` (a container view, destroyed after)."""
    from pyVmomi import vmodl

    view = session.content.viewManager.CreateContainerView(container=root, type=[kind], recursive=True)
    try:
        collector = vmodl.query.PropertyCollector
        traverse = collector.TraversalSpec(name="view", type=type(view), path="view", skip=False)
        yield from retrieve(session, [collector.ObjectSpec(obj=view, skip=True, selectSet=[traverse])], kind, paths)
    finally:
        view.DestroyView()
