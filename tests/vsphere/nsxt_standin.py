"""A stand-in for the parts of NSX-T's Manager API and Policy API the vsphere cloud uses, on
127.0.0.1 over HTTPS. It is not NSX: no NSX manager or simulator can be had here, so this
serves what the official CPI's generated clients (bosh-vsphere-cpi-release's
nsxt_manager_client and nsxt_policy_client) send and read, as NSX documents it.

NSX's inventory comes from the vCenter (the simulator, asked through pyVmomi): a VM's
external id is its instanceUuid, and each NIC on a port group NSX backs (backingType `nsx`)
is realized as NSX does it: a VIF whose attachment id the vCenter shows as the NIC's
externalId (set here through ReconfigVM when NSX first sees it), a Manager API logical port
and a Policy API segment port attached to it.

Policy API (/policy/api/v1):
- GET  /search/query?query=resource_type:Group AND display_name:("a" OR "b"), and
  resource_type:SegmentPort AND attachment.id:<id>
- GET, PUT /infra/domains/default/groups/<id>; GET /infra/lb-pools, GET, PUT
  /infra/lb-pools/<id>: a PUT must carry the `_revision` of the object as it is (else 412)
- GET, PATCH /infra/segments/<segment>/ports/<id>
- GET /infra/realized-state/enforcement-points/default/virtual-machines?query=display_name:<n>
- GET /infra/virtual-machine-group-associations?vm_external_id=<id>

Manager API (/api/v1):
- GET /fabric/virtual-machines?display_name=<n>; POST /fabric/virtual-machines?action=update_tags
- GET /fabric/vifs?owner_vm_id=<external id>
- GET /logical-ports?attachment_id=<id>; GET, PUT /logical-ports/<id> (with `_revision`)
- GET /ns-groups (two per page, with a cursor); POST /ns-groups/<id>?action=ADD_MEMBERS|REMOVE_MEMBERS
- GET /loadbalancer/pools; POST /loadbalancer/pools/<id>?action=ADD_MEMBERS|REMOVE_MEMBERS

Basic authentication with the user and password it is made with; anything else is 403.
`conflicts` makes that many writes meet a newer revision first (another writer), `throttled`
that many writes refused with 429 first; `seen` lists the requests and `overwrites` those
sent with X-Allow-Overwrite.
"""

from __future__ import annotations

import base64
import copy
import ipaddress
import json
import re
import threading
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.vsphere.https_standin import Server, vms

POLICY = "/policy/api/v1"
MANAGER = "/api/v1"


class NsxtStandin:
    def __init__(self, si: Any = None, *, username: str = "admin", password: str = "nsxt-pw"):
        self.si = si
        self.username, self.password = username, password
        self.groups: dict[str, dict[str, Any]] = {}  # Policy API
        self.pools: dict[str, dict[str, Any]] = {}
        self.ns_groups: dict[str, dict[str, Any]] = {}  # Manager API
        self.lb_pools: dict[str, dict[str, Any]] = {}
        self.logical_ports: dict[str, dict[str, Any]] = {}  # by attachment id
        self.segment_ports: dict[str, dict[str, Any]] = {}  # by attachment id
        self.vm_tags: dict[str, list[dict[str, str]]] = {}  # by external id
        self.routers: dict[str, dict[str, Any]] = {}  # managed networks (Manager API)
        self.router_ports: dict[str, dict[str, Any]] = {}
        self.switches: dict[str, dict[str, Any]] = {}
        self.switch_ports: dict[str, dict[str, Any]] = {}
        self.ip_blocks: dict[str, ipaddress.IPv4Network] = {}
        self.subnets: dict[str, dict[str, Any]] = {}
        self.made = 0
        self.zones = {"tz-overlay", "tz-full"}
        self.seen: list[tuple[str, str]] = []
        self.conflicts = 0
        self.throttled = 0  # that many writes are refused first with 429 (NSX's API rate limit)
        self.overwrites: list[str] = []  # the paths of the requests sent with X-Allow-Overwrite
        self.lock = threading.Lock()
        self.server = Server(self._serve)
        self.host = self.server.address

    def close(self) -> None:
        self.server.close()

    @property
    def writes(self) -> list[tuple[str, str]]:
        return [seen for seen in self.seen if seen[0] != "GET"]

    # ------------------------------------------------------------ objects

    def add_group(self, group_id: str, name: str, expression: list[dict[str, Any]] | None = None) -> None:
        self.groups[group_id] = {"id": group_id, "display_name": name, "resource_type": "Group",
                                 "path": f"/infra/domains/default/groups/{group_id}", "_revision": 0,
                                 "expression": expression or []}

    def add_pool(self, pool_id: str, name: str, member_group: str | None = None) -> None:
        """A static pool, or with `member_group` (a group's path) a dynamic one."""
        self.pools[pool_id] = {"id": pool_id, "display_name": name, "resource_type": "LBPool",
                               "path": f"/infra/lb-pools/{pool_id}", "_revision": 0, "members": [],
                               **({"member_group": {"group_path": member_group}} if member_group else {})}

    def add_ns_group(self, group_id: str, name: str) -> None:
        self.ns_groups[group_id] = {"id": group_id, "display_name": name, "resource_type": "NSGroup",
                                    "members": [], "_revision": 0}

    def add_lb_pool(self, pool_id: str, name: str, ns_group: str | None = None) -> None:
        """A Manager API pool: static, or with `ns_group` (its id) one whose members are that NSGroup's."""
        grouping = {"grouping_object": {"target_type": "NSGroup", "target_id": ns_group,
                                        "target_display_name": self.ns_groups[ns_group]["display_name"]}
                    } if ns_group else {}
        self.lb_pools[pool_id] = {"id": pool_id, "display_name": name, "resource_type": "LbPool", "members": [],
                                  "_revision": 0, **({"member_group": grouping} if ns_group else {})}

    def add_t0(self, router_id: str, edge_cluster_id: str | None = "edge-cluster-1") -> None:
        self.routers[router_id] = {"id": router_id, "router_type": "TIER0", "resource_type": "LogicalRouter",
                                   **({"edge_cluster_id": edge_cluster_id} if edge_cluster_id else {})}

    def add_ip_block(self, block_id: str, cidr: str) -> None:
        self.ip_blocks[block_id] = ipaddress.ip_network(cidr)

    def networking(self) -> dict[str, int]:
        """How many of each networking object there are (for nothing-left checks)."""
        return {"routers": len(self.routers), "router_ports": len(self.router_ports),
                "switches": len(self.switches), "switch_ports": len(self.switch_ports), "subnets": len(self.subnets)}

    def members(self, group_id: str) -> list[str]:
        return [i for e in self.groups[group_id]["expression"] if e.get("resource_type") == "ExternalIDExpression"
                for i in e.get("external_ids") or []]

    def ns_members(self, group_id: str) -> list[str]:
        return [m["value"] for m in self.ns_groups[group_id]["members"]]

    def ports_of(self, vm: Any) -> list[dict[str, Any]]:
        """The Manager API logical ports of the VM's NSX NICs."""
        with self.lock:
            return [self.logical_ports[attachment] for attachment, _ in self._realize(vm)]

    def segment_ports_of(self, vm: Any) -> list[dict[str, Any]]:
        with self.lock:
            return [self.segment_ports[attachment] for attachment, _ in self._realize(vm)]

    # ------------------------------------------------------------ the API

    def _serve(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urllib.parse.urlsplit(handler.path)
        self.seen.append((method, parts.path))
        expected = "Basic " + base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        if handler.headers.get("Authorization") != expected:
            self._answer(handler, 403, {"error_message": "The credentials were incorrect"})
            return
        body = json.loads(handler.rfile.read(int(handler.headers.get("Content-Length") or 0)) or b"null")
        query = dict(urllib.parse.parse_qsl(parts.query))
        if handler.headers.get("X-Allow-Overwrite"):
            self.overwrites.append(parts.path)
        if method != "GET" and self.throttled > 0:
            self.throttled -= 1
            self._answer(handler, 429, {"error_message": "Client has exceeded the API rate limit", "error_code": 102})
            return
        with self.lock:
            self._realize_all()  # NSX keeps its inventory in step with the vCenter
            if parts.path.startswith(POLICY):
                status, document = self._policy(method, parts.path.removeprefix(POLICY), query, body)
            else:
                status, document = self._manager(method, parts.path.removeprefix(MANAGER), query, body)
        self._answer(handler, status, document)

    def _written(self, found: dict[str, Any], body: Any, store: dict[str, dict[str, Any]], key: str) -> tuple[int, Any]:
        """A PUT of `found` (kept in `store` under `key`): refused unless it carries the revision it is at."""
        if self.conflicts > 0:  # another writer came first
            self.conflicts -= 1
            found["_revision"] += 1
        if (body or {}).get("_revision") != found["_revision"]:
            return 412, {"error_message": "The object was modified by somebody else"}
        store[key] = {**body, "_revision": found["_revision"] + 1}
        return 200, copy.deepcopy(store[key])

    def _policy(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        if method == "GET" and path == "/search/query":
            wanted = query.get("query", "")
            if wanted.startswith("resource_type:SegmentPort AND attachment.id:"):
                port = self.segment_ports.get(wanted.rsplit(":", 1)[-1])
                return 200, {"results": [copy.deepcopy(port)] if port else [], "result_count": int(bool(port))}
            names = [json.loads(f'"{name}"') for name in re.findall(r'"((?:[^"\\]|\\.)*)"', wanted)]
            found = [copy.deepcopy(g) for g in self.groups.values() if g["display_name"] in names]
            return 200, {"results": found, "result_count": len(found)}
        if method == "GET" and path == "/infra/lb-pools":
            return 200, {"results": [copy.deepcopy(p) for p in self.pools.values()]}
        if method == "GET" and path == "/infra/realized-state/enforcement-points/default/virtual-machines":
            name = query.get("query", "").removeprefix("display_name:")
            return 200, {"results": [{"display_name": name, "external_id": vm.config.instanceUuid}
                                     for vm in self._vms() if vm.name == name]}
        if method == "GET" and path == "/infra/virtual-machine-group-associations":
            wanted = query.get("vm_external_id")
            return 200, {"results": [{"path": g["path"], "target_id": g["id"]} for g in self.groups.values()
                                     if wanted in self.members(g["id"])]}
        if path.startswith("/infra/segments/"):
            port = next((p for p in self.segment_ports.values() if p["path"] == path), None)
            if port is None:
                return 404, {"error_message": f"{path} not found"}
            if method == "PATCH":
                port.update({k: v for k, v in (body or {}).items() if k in ("tags", "display_name")})
                port["_revision"] += 1
                return 200, None
            return 200, copy.deepcopy(port)
        for prefix, objects in (("/infra/domains/default/groups/", self.groups), ("/infra/lb-pools/", self.pools)):
            if path.startswith(prefix):
                found = objects.get(path.removeprefix(prefix))
                if found is None:
                    return 404, {"error_message": f"{path} not found"}
                if method == "GET":
                    return 200, copy.deepcopy(found)
                return self._written(found, body, objects, found["id"])
        return 404, {"error_message": f"{method} {path}: not served by the stand-in"}

    def _manager(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        if path.startswith(("/logical-routers", "/logical-router-ports", "/logical-switches", "/pools/ip-subnets")) \
                or (path == "/logical-ports" and method == "POST") or query.get("logical_switch_id") \
                or path.endswith("/status"):
            return self._networks(method, path, query, body)
        if path == "/fabric/virtual-machines":
            if method == "POST" and query.get("action") == "update_tags":
                self.vm_tags[body["external_id"]] = body["tags"]
                return 204, None
            return 200, {"results": [{"display_name": vm.name, "external_id": vm.config.instanceUuid,
                                      "resource_type": "VirtualMachine",
                                      "tags": copy.deepcopy(self.vm_tags.get(vm.config.instanceUuid, []))}
                                     for vm in self._vms() if vm.name == query.get("display_name")]}
        if method == "GET" and path == "/fabric/vifs":
            vms = [vm for vm in self._vms() if vm.config.instanceUuid == query.get("owner_vm_id")]
            return 200, {"results": [{"lport_attachment_id": attachment, "owner_vm_id": vm.config.instanceUuid,
                                      "device_key": str(key), "resource_type": "VirtualNetworkInterface"}
                                     for vm in vms for attachment, key in self._realize(vm)]}
        if method == "GET" and path == "/logical-ports":
            port = self.logical_ports.get(query.get("attachment_id", ""))
            return 200, {"results": [copy.deepcopy(port)] if port else []}
        if path.startswith("/logical-ports/"):
            attachment = next((a for a, p in self.logical_ports.items() if p["id"] == path.rsplit("/", 1)[-1]), None)
            if attachment is None:
                return 404, {"error_message": f"{path} not found"}
            if method == "GET":
                return 200, copy.deepcopy(self.logical_ports[attachment])
            return self._written(self.logical_ports[attachment], body, self.logical_ports, attachment)
        if method == "GET" and path in ("/ns-groups", "/loadbalancer/pools"):
            listed = list((self.ns_groups if path == "/ns-groups" else self.lb_pools).values())
            start = int(query.get("cursor", 0))
            page = listed[start:start + 2]  # small pages, so that the CPI must follow the cursor
            more = {"cursor": str(start + 2)} if start + 2 < len(listed) else {}
            return 200, {"results": copy.deepcopy(page), "result_count": len(listed), **more}
        for prefix, objects, key in (("/ns-groups/", self.ns_groups, "value"),
                                     ("/loadbalancer/pools/", self.lb_pools, "ip_address")):
            if method == "POST" and path.startswith(prefix):
                found = objects.get(path.removeprefix(prefix))
                if found is None:
                    return 404, {"error_message": f"{path} not found"}
                if self.conflicts > 0:
                    self.conflicts -= 1
                    return 409, {"error_message": "The object was modified by somebody else"}
                given = (body or {}).get("members") or []
                if query.get("action") == "ADD_MEMBERS":
                    found["members"] += [m for m in given if m not in found["members"]]
                elif query.get("action") == "REMOVE_MEMBERS":
                    gone = {(m.get(key), m.get("port")) for m in given}
                    found["members"] = [m for m in found["members"] if (m.get(key), m.get("port")) not in gone]
                else:
                    return 400, {"error_message": f"action {query.get('action')!r}"}
                found["_revision"] += 1
                return 200, {"members": copy.deepcopy(found["members"])}
        return 404, {"error_message": f"{method} {path}: not served by the stand-in"}

    def _new(self, kind: str, store: dict[str, dict[str, Any]], body: dict[str, Any]) -> tuple[int, Any]:
        self.made += 1
        made = {**body, "id": f"{kind}-{self.made}", "_revision": 0}
        made.setdefault("display_name", made["id"])
        store[made["id"]] = made
        return 201, copy.deepcopy(made)

    def _networks(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        """Managed networks: routers and their ports, switches and their ports, IP block subnets."""
        parts = path.strip("/").split("/")
        stores = {"logical-routers": ("lr", self.routers), "logical-router-ports": ("lrp", self.router_ports),
                  "logical-switches": ("ls", self.switches), "logical-ports": ("lp", self.switch_ports)}
        if parts[0] == "pools":
            if method == "POST":
                if body.get("block_id") not in self.ip_blocks:
                    return 404, {"error_message": f"IpBlock/{body.get('block_id')} not found", "error_code": 600}
                block = self.ip_blocks[body["block_id"]]
                size = int(body["size"])
                taken = {ipaddress.ip_network(sub["cidr"]) for sub in self.subnets.values()}
                free = next(net for net in block.subnets(new_prefix=32 - size.bit_length() + 1)
                            if not any(net.overlaps(other) for other in taken))
                return self._new("subnet", self.subnets, {"block_id": body["block_id"], "cidr": str(free),
                                                          "size": size})
            return (200, None) if self.subnets.pop(parts[-1], None) else (404, {"error_message": "no subnet"})
        kind, store = stores[parts[0]]
        if method == "POST" and parts[0] == "logical-switches" and body.get("transport_zone_id") not in self.zones:
            return 400, {"error_message": f"transport zone {body.get('transport_zone_id')} not found"}
        if method == "POST" and parts[0] == "logical-ports" and \
                self.switches.get(body.get("logical_switch_id"), {}).get("transport_zone_id") == "tz-full":
            return 400, {"error_message": "the transport zone has no port left"}  # a failure after the switch
        if method == "POST":
            status, made = self._new(kind, store, body)
            for key in ("linked_logical_router_port_id", "linked_logical_switch_port_id"):
                if key in made:
                    store[made["id"]][key]["is_valid"] = True
                    made[key]["is_valid"] = True
            return status, made
        if len(parts) == 1:  # a listing
            found = [copy.deepcopy(o) for o in store.values() if all(
                o.get(k) == v for k, v in query.items() if k in ("logical_router_id", "resource_type"))]
            if "logical_switch_id" in query and parts[0] == "logical-ports":
                found = [o for o in found if o.get("logical_switch_id") == query["logical_switch_id"]]
            elif "logical_switch_id" in query:  # router ports linked to one of the switch's ports
                wanted = query["logical_switch_id"]
                ports = {i for i, o in self.switch_ports.items() if o["logical_switch_id"] == wanted}
                found = [o for o in found if (o.get("linked_logical_switch_port_id") or {}).get("target_id") in ports]
            return 200, {"results": found, "result_count": len(found)}
        found = store.get(parts[1])
        if found is None:
            return 404, {"error_message": f"{path} not found"}
        if parts[-1] == "status":
            linked = any((o.get("linked_logical_switch_port_id") or {}).get("target_id") == parts[1]
                         for o in self.router_ports.values())
            return 200, {"status": "UP" if linked or found.get("vm") else "DOWN"}
        if parts[-1] == "advertisement":
            advertisement = found.setdefault("advertisement", {"enabled": False, "_revision": 0})
            if method == "GET":
                return 200, copy.deepcopy(advertisement)
            return self._written(advertisement, body, found, "advertisement")
        if method == "GET":
            return 200, copy.deepcopy(found)
        if method == "DELETE":
            del store[parts[1]]
            if parts[0] == "logical-routers":  # force: its ports go with it
                for port_id in [i for i, o in self.router_ports.items() if o["logical_router_id"] == parts[1]]:
                    del self.router_ports[port_id]
            if parts[0] == "logical-switches":  # cascade: its ports go, and the router ports' links break
                for port_id in [i for i, o in self.switch_ports.items() if o["logical_switch_id"] == parts[1]]:
                    del self.switch_ports[port_id]
                    for router_port in self.router_ports.values():
                        linked = router_port.get("linked_logical_switch_port_id") or {}
                        if linked.get("target_id") == port_id:
                            linked["is_valid"] = False
            return 200, None
        return 405, {"error_message": f"{method} {path}"}

    # ------------------------------------------------------------ NSX's inventory, from the vCenter

    def _vms(self) -> list[Any]:
        return vms(self.si) if self.si is not None else []  # a stand-in for networks alone needs no vCenter

    def _realize_all(self) -> None:
        for vm in self._vms():
            self._realize(vm)

    def _realize(self, vm: Any) -> list[tuple[str, int]]:
        """(attachment id, device key) of each of the VM's NICs on an NSX port group, with a
        logical port and a segment port for each; a NIC's externalId is set on first sight."""
        from pyVim.task import WaitForTask
        from pyVmomi import vim

        nsx = {group.key: group.name for group in vm.network or []
               if isinstance(group, vim.dvs.DistributedVirtualPortgroup) and group.config.backingType == "nsx"}
        found = []
        for nic in vm.config.hardware.device if vm.config else []:
            backing = getattr(nic, "backing", None)
            if not isinstance(backing, vim.vm.device.VirtualEthernetCard.DistributedVirtualPortBackingInfo) \
                    or backing.port.portgroupKey not in nsx:
                continue
            attachment = nic.externalId
            if not attachment:
                attachment = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{vm.config.instanceUuid}/{nic.key}"))
                nic.externalId = attachment
                spec = vim.vm.ConfigSpec(deviceChange=[vim.vm.device.VirtualDeviceSpec(operation="edit", device=nic)])
                WaitForTask(vm.ReconfigVM_Task(spec=spec))
            segment = nsx[backing.port.portgroupKey]
            self.logical_ports.setdefault(attachment, {
                "id": f"lp-{attachment}", "display_name": f"{vm.name}@{nic.key}", "resource_type": "LogicalPort",
                "attachment": {"attachment_type": "VIF", "id": attachment}, "tags": [], "_revision": 0})
            self.segment_ports.setdefault(attachment, {
                "id": f"sp-{attachment}", "resource_type": "SegmentPort", "attachment": {"id": attachment},
                "path": f"/infra/segments/{segment}/ports/sp-{attachment}", "parent_path": f"/infra/segments/{segment}",
                "tags": [], "_revision": 0})
            found.append((attachment, nic.key))
        return found

    @staticmethod
    def _answer(handler: BaseHTTPRequestHandler, status: int, document: Any) -> None:
        data = json.dumps(document).encode() if document is not None else b""
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
