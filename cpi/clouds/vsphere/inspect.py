"""`cpi validate --online` for the vsphere cloud: read-only lookups that check what a
cloud-config's cloud_properties name exists in the datacenter (networks, datastores,
clusters and their resource pools, datastore clusters, storage policies), and that
cpi.json's clusters and storage policy exist, its datastore patterns match a datastore and
its datastore cluster patterns a datastore cluster with Storage DRS on. A network is one
request whatever the number of port groups; the datastores are one request for them all,
and so are the datastore clusters.

The NSX objects a vm_type, extension or AZ names are looked up as create_vm looks them up
before the clone: `nsxt`'s groups and server pools through the NSX-T manager of cpi.json's
`nsxt` (nsxt.Nsxt.prepare: the API(s) it chooses, migration mode's leniency included), and
`nsx.lbs`' edges and pools through the NSX-V manager of cpi.json's `nsx` (nsxv.prepare;
security groups need none: create_vm makes them). Those lookups run as under `cpi plan`, so
that vcenter/rest.py sends their reads and would withhold any write."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from cpi.channel import Channel
from cpi.clouds.findings import VM_KINDS, Finding, Item, missing, references
from cpi.errors import BoshError, CloudError, CpiError
from cpi.plan import Plan
from cpi.validation import parse

from . import lookups, passthrough
from .job_config import ClusterProperties
from .nsx import nsxt, nsxt_refusal, nsxv
from .placement import pbm, pods
from .props import PASSTHROUGH_KEYS, NsxtLoadBalancer, NsxtVmProperties, VMCloudProperties

if TYPE_CHECKING:
    from typing import Protocol

    from cpi.models import CallContext

    from .job_config import VsphereProperties
    from .placement.place import Place
    from .vcenter.session import Session

    class VsphereCloud(Protocol):
        """What the checks read of the cloud that calls them (cloud.VsphereCloud), named
        here rather than imported: cloud.py imports this module."""

        @property
        def properties(self) -> VsphereProperties: ...

        @property
        def session(self) -> Session: ...

        @property
        def place(self) -> Place: ...

        @property
        def context(self) -> CallContext: ...

SPEC = {"vm": {"datastores": "datastore"}, "network": {"name": "network"}, "disk_type": {"datastores": "datastore"}}
CONFIG = "cpi.json: cloud.properties.vsphere.datacenters[0]"


def check_cloud_config(cloud: VsphereCloud, items: list[Item]) -> list[Finding]:
    place = cloud.place
    dc = place.config.name
    refs = references(items, SPEC)
    findings: list[Finding] = []
    datastores = {d.name for d in place.datacenter_datastores()}
    findings += missing(refs, "datastore", datastores, "datastore")
    for name, paths in refs.get("network", {}).items():
        try:
            lookups.network(cloud.session, dc, name)
        except CloudError:
            findings += [Finding(path, f"network '{name}' does not exist in datacenter '{dc}'") for path in paths]
    # cpi.json's clusters are models; a cloud-config's, the dicts of its YAML
    clusters: list[tuple[str, str, ClusterProperties | dict[str, Any]]] = [
        (f"{CONFIG}.clusters[{i}]", name, settings)
                for i, entry in enumerate(place.config.clusters) for name, settings in entry.items()]
    for item in items:
        if item.kind not in VM_KINDS:
            continue
        for d, datacenter in enumerate(item.properties.get("datacenters") or []):
            for c, entry in enumerate((datacenter or {}).get("clusters") or []):
                named = entry.items() if isinstance(entry, dict) else [(entry, {})]
                for name, settings in named:
                    clusters.append((f"{item.path}.datacenters[{d}].clusters[{c}]", name, settings or {}))
    for path, name, settings in clusters:
        pool = settings.get("resource_pool") if isinstance(settings, dict) else settings.resource_pool
        try:
            lookups.cluster(cloud.session, dc, name)
        except CloudError:
            findings.append(Finding(path, f"cluster '{name}' does not exist in datacenter '{dc}'"))
            continue
        if pool:
            try:
                lookups.resource_pool(cloud.session, dc, name, pool)
            except CloudError as exc:
                findings.append(Finding(path, exc.message))
    findings += _passthrough(cloud, items) + _nsx(cloud, items)
    policies = [(f"{item.path}.storage_policy", (item.properties.get("storage_policy") or {}).get("name"))
                for item in items if item.kind in VM_KINDS and isinstance(item.properties.get("storage_policy"), dict)]
    policies.append(("cpi.json: cloud.properties.vsphere.vm_storage_policy_name",
                     cloud.properties.vm_storage_policy_name))
    for path, policy in policies:
        if policy:
            try:
                pbm.find(cloud.session, policy, "storage policy", list(place.datacenter.datastore))
            except CloudError as exc:
                findings.append(Finding(path, exc.message))
    for key in ("datastore_pattern", "persistent_datastore_pattern"):
        pattern = getattr(place.config, key)
        if pattern and not place.matching(place.datacenter_datastores(), pattern):
            findings.append(Finding(f"{CONFIG}.{key}", f"'{pattern}' matches none of the datastores of '{dc}' "
                                    f"({', '.join(sorted(datastores)) or 'none'})"))
    return findings + _datastore_clusters(place, items)


def _datastore_clusters(place: Place, items: list[Item]) -> list[Finding]:
    """The datastore clusters the cloud-config names, and those cpi.json's cluster patterns
    match with Storage DRS on (what create_vm and create_disk will use); read only when asked."""
    named = [(f"{item.path}.datastores[{i}].clusters[{c}]", name)
             for item in items if item.kind in (*VM_KINDS, "disk_type")
             for i, entry in enumerate(item.properties.get("datastores") or []) if isinstance(entry, dict)
             for c, cluster in enumerate(entry.get("clusters") or []) if isinstance(cluster, dict) for name in cluster]
    keys = [key for key in ("datastore_cluster_pattern", "persistent_datastore_cluster_pattern")
            if getattr(place.config, key)]
    if not named and not keys:
        return []
    found = place.pods()
    paths = {pod.path for pod in found}
    findings = [Finding(path, f"datastore cluster '{name}' does not exist in datacenter '{place.config.name}' "
                        f"({pods.listed(found)})") for path, name in named if name.strip("/") not in paths]
    for key in keys:
        pattern = getattr(place.config, key)
        if not [pod for pod in pods.matching(found, pattern) if pod.sdrs and pod.datastores]:
            findings.append(Finding(f"{CONFIG}.{key}", f"'{pattern}' matches no datastore cluster with Storage DRS on "
                                    f"and a datastore in '{place.config.name}' ({pods.listed(found)})"))
    return findings


def _passthrough(cloud: VsphereCloud, items: list[Item]) -> list[Finding]:
    """The vgpus, pci_passthroughs and device_groups a vm_type, extension or AZ asks, checked
    against the hosts of its clusters as create_vm would (one request per cluster, one for
    their hosts)."""
    findings = []
    for item, props in _asking(items, PASSTHROUGH_KEYS, cloud.context.strict):
        if not props.asks_passthrough:
            continue
        try:
            placements = cloud.place.clusters(props.datacenters[0].clusters if props.datacenters else None)
            passthrough.check(cloud.session, cloud.place.config.name, [name for name, _ in placements], props)
        except BoshError as exc:  # what create_vm would refuse
            findings.append(Finding(item.path, exc.message))
    return findings


def _asking(items: list[Item], keys: tuple[str, ...], strict: bool) -> Iterator[tuple[Item, VMCloudProperties]]:
    """The vm_types, extensions and AZs that set any of `keys`, read as create_vm reads its
    cloud_properties (an extension or an AZ has no sizes of its own: only `keys` matter here);
    those whose cloud_properties are wrong are left to the offline check, which names why."""
    for item in items:
        if item.kind not in VM_KINDS or all(item.properties.get(key) is None for key in keys):
            continue
        try:
            props = parse(VMCloudProperties, {"cpu": 1, "ram": 1, "disk": 1, **item.properties}, item.path,
                          strict=strict)
        except CpiError:
            continue
        yield item, props


def _nsx(cloud: VsphereCloud, items: list[Item]) -> list[Finding]:
    """What create_vm's NSX lookups would refuse of each vm_type, extension or AZ: the NSX-T
    groups and server pools of its `nsxt`, the NSX-V edges and pools of its `nsx.lbs`, or an
    `nsxt`/`nsx` cpi.json names no manager for."""
    asking = list(_asking(items, ("nsxt", "nsx"), cloud.context.strict))
    if not asking:
        return []
    properties, session = cloud.properties, cloud.session  # the vCenter's login, made first
    findings: list[Finding] = []
    with _reads_only(session.channel) as channel:
        manager = nsxt.for_vms(session, properties, channel) if any(props.nsxt for _, props in asking) else None
        for item, props in asking:
            if props.nsxt is not None:
                findings += _nsxt(manager, properties, f"{item.path}.nsxt", props.nsxt)
            if props.nsx is not None:
                where = f"{item.path}.nsx" + (".lbs" if properties.nsx is not None and props.nsx.lbs else "")
                findings += _refused(where, functools.partial(nsxv.prepare, properties, props.nsx, None, channel))
    return findings


def _nsxt(manager: nsxt.Nsxt | None, properties: Any, path: str, asked: NsxtVmProperties) -> list[Finding]:
    """`asked`'s groups and its server pools, each looked up apart (so that both are
    checked, each under its key) as nsxt.Nsxt.prepare looks them up for create_vm."""
    refused = nsxt_refusal(properties)
    if refused:
        return [Finding(path, refused)]
    assert manager is not None  # cpi.json names the manager
    findings: list[Finding] = []
    if asked.ns_groups:
        findings += _refused(f"{path}.ns_groups", lambda: manager.prepare(NsxtVmProperties(ns_groups=asked.ns_groups)))
    if asked.lb and asked.lb.server_pools:
        pools = NsxtVmProperties(lb=NsxtLoadBalancer(server_pools=asked.lb.server_pools))
        findings += _refused(f"{path}.lb.server_pools", lambda: manager.prepare(pools))
    return findings


def _refused(path: str, look: Callable[[], object]) -> list[Finding]:
    """A finding at `path` for what create_vm's lookup `look` refuses; a failure worth asking
    again for (the manager unreachable, busy) ends the check, as the vCenter's do."""
    try:
        look()
    except CloudError as exc:
        if exc.ok_to_retry:
            raise
        return [Finding(path, exc.message)]
    return []


@contextmanager
def _reads_only(channel: Channel) -> Iterator[Channel]:
    """A channel (cpi.channel) for the NSX lookups that runs them as under `cpi plan`
    (cpi.plan): vcenter/rest.py sends their reads and withholds any write, which the plan then lists.
    They ask none; should one ever be asked, it was not sent, and the check fails naming it.
    `channel` is the call's: one already planned withholds the writes itself."""
    if channel.plan is not None:
        yield channel
        return
    watching = Plan()
    yield Channel(watching)
    if watching.mutations:
        asked = ", ".join(str(step.get("request") or step.get("action")) for step in watching.mutations)
        raise CpiError(f"cpi validate --online: the NSX checks asked to write ({asked}); withheld, nothing was sent")
