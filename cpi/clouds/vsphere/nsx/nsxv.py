"""NSX-V (cpi.json's `nsx`: NSX for vSphere) for create_vm, through NSX-V's REST API (XML
documents), with the official CPI's meaning:

- Whenever cpi.json names the manager, a new VM joins, by its managed object id (`vm-42`,
  which is how NSX-V knows a vCenter's VMs), the security groups named by its vm_type's
  `nsx.security_groups`, by the director's `env.bosh.groups` (so every VM of a deployment,
  not only those whose vm_type says `nsx`), and by each `nsx.lbs[].security_group`. A group
  that is not there is made, in scope globalroot-0.
- Each `nsx.lbs` entry makes its security group a member of the named edge's named load
  balancer pool, with `port` and `monitor_port`; the member is named `BOSH-<group id>-<port>-
  <monitor port>`, as the official CPI names it, and one already there is not added again,
  so a switch between the two CPIs keeps the pools as they are.
- Edges and pools, and which groups are there, are looked up before anything is made: an
  edge or pool that is not there refuses create_vm with nothing made. What NSX-V refuses
  later fails create_vm, which then deletes the VM (vms/vms.py). Groups made stay, as they do
  with the official CPI: other VMs may be or become their members.
- delete_vm sends nothing to NSX-V: NSX-V drops a deleted VM from its security groups by
  itself (its inventory follows the vCenter's), and pools hold groups, not VMs. The official
  CPI's delete_vm does not call NSX-V either.
- NSX-V answers a change made meanwhile by another writer (OptimisticLockException,
  "Concurrent object access error"), or a VM its inventory has not seen yet (error 300),
  with an error: the change is asked again, a bounded number of times, as the official CPI
  does. A pool changed meanwhile (StaleObjectStateException) is read and written again.

Answers are parsed with the standard library's ElementTree, which expands no external
entity; a document with a DOCTYPE (where entity expansion bombs live) is refused unread.
"""

from __future__ import annotations

import logging
import time
import xml.etree.ElementTree as ET  # nosec B405  # the reason is in vsphere/vcenter/session.py
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cpi.errors import CloudError, VMCreationFailed

from ..vcenter import rest
from ..vcenter.session import tls_context, verified

if TYPE_CHECKING:
    from cpi.channel import Channel

    from ..job_config import Nsx as NsxConfig
    from ..props import NsxVmProperties

log = logging.getLogger("cpi.clouds.vsphere")

SCOPE = "globalroot-0"
GROUPS = "/api/2.0/services/securitygroup"
EDGES = "/api/4.0/edges"
#: edges asked for per page (NSX-V pages its edge list)
EDGE_PAGE = 256
#: how often a change NSX-V refused as busy is asked again, and the pause between two asks
#: (the official CPI's numbers: about 10 s for a membership, 25 s for a pool)
MEMBER_TRIES = 20
POOL_TRIES = 50
PAUSE = 0.5
#: NSX-V's error codes this module acts on
EXISTS = "210"  # a security group of that name is there already
ALREADY_MEMBER = ("203", "311")  # the VM is a member already (NSX-V 6.3, 6.4)
NOT_SEEN = "300"  # the member asked for is not in NSX-V's inventory yet
BUSY = ("OptimisticLockException", "Concurrent object access error")
STALE = "StaleObjectStateException"


class _Declared(Exception):
    """A document declares a DOCTYPE or an entity: refused before anything is expanded."""


def parse(data: bytes, what: str) -> ET.Element:
    """The XML document `data`; CloudError for one with a DOCTYPE or an entity declaration
    (where entity expansion bombs live: seen by expat itself, whatever the document's
    encoding, before any expansion) or that is no XML."""
    import xml.parsers.expat

    def refuse(*_: Any) -> None:
        raise _Declared

    scan = xml.parsers.expat.ParserCreate()
    scan.StartDoctypeDeclHandler = refuse
    scan.EntityDeclHandler = refuse
    try:
        scan.Parse(data, True)
        return ET.fromstring(data)  # nosec B314  # as above
    except _Declared:
        raise CloudError(f"{what}: NSX-V answered a document with a DOCTYPE, which this CPI does not read") from None
    except (ET.ParseError, xml.parsers.expat.ExpatError) as exc:
        raise CloudError(f"{what}: NSX-V answered something that is not XML ({exc})") from None


def error_of(response: rest.Response) -> tuple[str | None, str]:
    """(NSX-V's error code, its words) of a refusal: `<error><details>..</details>
    <errorCode>..</errorCode></error>`, or the start of whatever else it answered."""
    text = response.body.decode("utf-8", "replace")
    try:
        document = parse(response.body, "")
    except CloudError:
        return None, text[:300]
    if document.tag != "error":
        return None, text[:300]
    return document.findtext("errorCode"), (document.findtext("details") or text)[:300]


@dataclass(frozen=True)
class PoolMember:
    """A security group as a load balancer pool's member."""

    group_id: str
    group_name: str
    port: int
    monitor_port: int

    @property
    def name(self) -> str:
        return f"BOSH-{self.group_id}-{self.port}-{self.monitor_port}"

    def within(self, pool: ET.Element) -> bool:
        """Whether `pool` has the group as a member on the same ports (whatever its name)."""
        return any(member.findtext("groupingObjectId") == self.group_id and member.findtext("port") == str(self.port)
                   and member.findtext("monitorPort") == str(self.monitor_port) for member in pool.findall("member"))

    def element(self) -> ET.Element:
        member = ET.Element("member")
        for tag, value in (("name", self.name), ("groupingObjectId", self.group_id),
                           ("groupingObjectName", self.group_name), ("port", str(self.port)),
                           ("monitorPort", str(self.monitor_port))):
            ET.SubElement(member, tag).text = value
        return member


class Manager:
    """One NSX-V manager: Basic authentication with every request; its certificate verified
    as the job's `ssl_verify` says (session.verified: unset, against `ca_cert` when one is
    given and not at all otherwise, the official CPI's rule)."""

    def __init__(self, config: NsxConfig, *, ssl_verify: bool | None, budget: float, connect_timeout: float,
                 read_timeout: float, channel: Channel):
        password = config.password.get_secret_value()
        verify = verified(ssl_verify, config.ca_cert, config.ca_cert_file)
        self.address = config.address
        self.client = rest.Client(
            config.address, peer="the NSX-V manager", ca_key="nsx.ca_cert",
            address_key="nsx.address (the job's vcenter.nsx.address)",
            context=tls_context(config.ca_cert, config.ca_cert_file, verify, "nsx"),
            headers={**rest.basic(config.user, password), "Accept": "application/xml"}, user=config.user,
            secrets=[password], budget=budget, connect_timeout=connect_timeout, read_timeout=read_timeout,
            channel=channel)

    def _ask(self, method: str, path: str, document: ET.Element | None = None, *,
             idempotent: bool | None = None, resend: bool = True) -> rest.Response:
        body = ET.tostring(document, encoding="unicode").encode() if document is not None else None
        return self.client.request(method, path, body, idempotent=idempotent, what=f"NSX-V {method} {path}",
                                   headers={"Content-Type": "application/xml"} if body is not None else None,
                                   resend=resend)

    def _refused(self, what: str, response: rest.Response) -> CloudError:
        code, words = error_of(response)
        return CloudError(f"NSX-V at {self.address}: {what}: {response.status}"
                          f"{f' (error {code})' if code else ''}: {self.client.scrub(words)}")

    def _read(self, path: str) -> ET.Element:
        response = self._ask("GET", path)
        if not response.ok:
            raise self._refused(f"GET {path.split('?', 1)[0]}", response)
        return parse(response.body, f"NSX-V GET {path}")

    def _until(self, attempt: Callable[[], bool], what: str, tries: int) -> None:
        """`attempt()` until it says done (True); False is NSX-V's "busy": asked again
        after a pause, at most `tries` times."""
        for number in range(1, tries + 1):
            if attempt():
                return
            log.info("NSX-V %s: busy or not ready yet (attempt %d of %d): asked again", what, number, tries)
            time.sleep(PAUSE)
        raise CloudError(f"NSX-V at {self.address}: {what}: still busy after {tries} attempts", ok_to_retry=True)

    # ------------------------------------------------------------ lookups

    def security_groups(self) -> dict[str, str]:
        """Name → object id of the security groups of scope globalroot-0."""
        found: dict[str, str] = {}
        for group in self._read(f"{GROUPS}/scope/{SCOPE}").findall("securitygroup"):
            name, object_id = group.findtext("name"), group.findtext("objectId")
            if name and object_id:
                found.setdefault(name, object_id)
        return found

    def edges(self) -> dict[str, str]:
        """Name → object id of every edge, page by page."""
        found: dict[str, str] = {}
        start = 0
        while True:
            page = self._read(f"{EDGES}?startIndex={start}&pageSize={EDGE_PAGE}").find("edgePage")
            summaries = page.findall("edgeSummary") if page is not None else []
            for summary in summaries:
                name, object_id = summary.findtext("name"), summary.findtext("objectId")
                if name and object_id:
                    found.setdefault(name, object_id)
            start += len(summaries)
            total = page.findtext("pagingInfo/totalCount") if page is not None else None
            if not summaries or not (total or "").isdigit() or start >= int(total or 0):
                return found

    def pools(self, edge_id: str) -> dict[str, ET.Element]:
        """Name → document of the load balancer pools of edge `edge_id`."""
        found: dict[str, ET.Element] = {}
        for pool in self._read(f"{EDGES}/{edge_id}/loadbalancer/config/pools").findall("pool"):
            found.setdefault(pool.findtext("name") or "", pool)
        return found

    # ------------------------------------------------------------ changes

    def create_security_group(self, name: str) -> str:
        """The object id of a new security group `name` (of the one made meanwhile by another
        create_vm, when NSX-V answers that the name is taken)."""
        document = ET.Element("securitygroup")
        ET.SubElement(document, "objectTypeName").text = "SecurityGroup"
        ET.SubElement(ET.SubElement(document, "type"), "typeName").text = "SecurityGroup"
        ET.SubElement(document, "name").text = name
        ET.SubElement(document, "description").text = (
            f"Made by the BOSH CPI on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC for the VMs it adds; without static "
            "members it serves none of them and may be deleted.")
        ET.SubElement(document, "extendedAttributes")
        # sent again when its answer was lost: the second is answered "name taken", and found below
        response = self._ask("POST", f"{GROUPS}/bulk/{SCOPE}", document, idempotent=True)
        if response.planned and self.client.channel.plan is not None:
            return self.client.channel.plan.placeholder("securitygroup-")
        made = response.body.decode("utf-8", "replace").strip()
        if response.ok and made and "<" not in made:
            log.info("create_vm: made NSX-V security group %s (%s)", name, made)
            return made
        if not response.ok and error_of(response)[0] != EXISTS:
            raise self._refused(f"making security group {name!r}", response)
        found = self.security_groups().get(name)
        if found is None:
            raise CloudError(f"NSX-V at {self.address}: security group {name!r} was made, but is not listed")
        return found

    def add_to_security_group(self, group_id: str, name: str, vm_moid: str) -> None:
        what = f"adding {vm_moid} to security group {name!r}"

        def attempt() -> bool:
            response = self._ask("PUT", f"{GROUPS}/{group_id}/members/{vm_moid}")
            if response.ok or response.planned:
                return True
            code = error_of(response)[0]
            if code in ALREADY_MEMBER:
                log.info("create_vm: %s is in NSX-V security group %s already", vm_moid, name)
                return True
            if code == NOT_SEEN or any(busy in response.body.decode("utf-8", "replace") for busy in BUSY):
                return False
            raise self._refused(what, response)

        self._until(attempt, what, MEMBER_TRIES)

    def add_to_pool(self, edge_id: str, edge_name: str, pool_name: str, members: list[PoolMember]) -> None:
        """Put in the pool each of `members` it does not have yet (one write, of the pool as
        read just before, with them added)."""
        what = f"adding {', '.join(m.group_name for m in members)} to pool {pool_name!r} of edge {edge_name!r}"

        def attempt() -> bool:
            pool = self.pools(edge_id).get(pool_name)
            if pool is None:
                raise CloudError(f"NSX-V at {self.address}: edge {edge_name!r} has no load balancer pool "
                                 f"{pool_name!r} any more")
            wanted = [member for member in members if not member.within(pool)]
            if not wanted:
                log.info("create_vm: NSX-V pool %s of edge %s has its members already", pool_name, edge_name)
                return True
            pool.extend(member.element() for member in wanted)
            # never sent again as it is (idempotent=False, resend=False): the pool may have
            # changed meanwhile, and this document would drop the other writer's change; a
            # busy or stale answer reads the pool again first
            response = self._ask("PUT", f"{EDGES}/{edge_id}/loadbalancer/config/pools/{pool.findtext('poolId')}",
                                 pool, idempotent=False, resend=False)
            if response.ok or response.planned:
                log.info("create_vm: %s", what)
                return True
            if response.status in (429, 503) or STALE in response.body.decode("utf-8", "replace"):
                return False
            raise self._refused(what, response)

        self._until(attempt, what, POOL_TRIES)


@dataclass
class Joining:
    """What NSX-V does for one new VM, looked up before the VM is made."""

    manager: Manager
    #: security group names, in the order the official CPI gathers them
    groups: list[str]
    #: name → id of those there already
    known: dict[str, str]
    #: (edge name, edge id, pool name, its `nsx.lbs` entries)
    pools: list[tuple[str, str, str, list[Any]]]

    def run(self, vm_moid: str) -> None:
        ids: dict[str, str] = {}
        for name in self.groups:
            ids[name] = self.known.get(name) or self.manager.create_security_group(name)
            self.manager.add_to_security_group(ids[name], name, vm_moid)
            log.info("create_vm: %s joined NSX-V security group %s (%s)", vm_moid, name, ids[name])
        for edge_name, edge_id, pool_name, entries in self.pools:
            members = list(dict.fromkeys(
                PoolMember(ids[lb.security_group], lb.security_group, lb.port, lb.monitor_port or lb.port)
                for lb in entries))
            self.manager.add_to_pool(edge_id, edge_name, pool_name, members)


def prepare(properties: Any, asked: NsxVmProperties | None, env: dict[str, Any] | None,
            channel: Channel) -> Joining | None:
    """What NSX-V is to do for a VM of the vm_type's `nsx` (`asked`) and the director's `env`,
    with its edges and pools found, asked through `channel` (the call's: cpi.channel): None
    when nothing (no manager, or no group to join).
    VMCreationFailed, before anything is made, when the vm_type sets `nsx` and cpi.json
    names no manager, or an edge or pool is not there."""
    config = properties.nsx
    if config is None:
        if asked is not None:
            raise VMCreationFailed("vm_type cloud_properties 'nsx' needs the NSX-V manager, which cpi.json does not "
                                   "name (`nsx`, the job's vcenter.nsx.*)", ok_to_retry=False)
        return None
    lbs = (asked.lbs if asked is not None else None) or []
    bosh_groups = ((env or {}).get("bosh") or {}).get("groups") or []
    names = list(dict.fromkeys([*((asked.security_groups if asked is not None else None) or []),
                                *(str(group) for group in bosh_groups if group not in (None, "")),
                                *(lb.security_group for lb in lbs)]))
    if not names:
        return None
    manager = Manager(config, ssl_verify=properties.ssl_verify, budget=properties.retry_budget_seconds,
                      connect_timeout=properties.connect_timeout,
                      read_timeout=properties.read_timeout, channel=channel)
    known = manager.security_groups()
    pools: list[tuple[str, str, str, list[Any]]] = []
    if lbs:
        edges = manager.edges()
        missing = list(dict.fromkeys(lb.edge_name for lb in lbs if lb.edge_name not in edges))
        if missing:
            raise VMCreationFailed(f"vm_type nsx.lbs: NSX-V at {config.address} has no edge "
                                   f"{', '.join(repr(m) for m in missing)}", ok_to_retry=False)
        absent = []
        for edge_name in dict.fromkeys(lb.edge_name for lb in lbs):
            there = manager.pools(edges[edge_name])
            for pool_name in dict.fromkeys(lb.pool_name for lb in lbs if lb.edge_name == edge_name):
                if pool_name not in there:
                    absent.append(f"{pool_name!r} on edge {edge_name!r}")
                pools.append((edge_name, edges[edge_name], pool_name,
                              [lb for lb in lbs if (lb.edge_name, lb.pool_name) == (edge_name, pool_name)]))
        if absent:
            raise VMCreationFailed(f"vm_type nsx.lbs: NSX-V at {config.address} has no load balancer pool "
                                   f"{', '.join(absent)}", ok_to_retry=False)
    return Joining(manager, names, known, pools)
