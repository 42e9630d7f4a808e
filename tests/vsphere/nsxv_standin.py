"""A stand-in for the part of NSX-V's REST API the vsphere cloud uses, on 127.0.0.1 over
HTTPS. It is not NSX-V: no NSX-V manager or simulator can be had here (NSX-V is past its end
of support), so this serves what the official CPI's NSX client (bosh-vsphere-cpi-release's
nsx.rb) sends and reads, with the XML documents of NSX-V's API guide:

- GET  /api/2.0/services/securitygroup/scope/globalroot-0: `<list><securitygroup>...`
- POST /api/2.0/services/securitygroup/bulk/globalroot-0 (a `<securitygroup>`): 201 with
  the new group's object id as the body; a name that is taken: error 210
- PUT  /api/2.0/services/securitygroup/<id>/members/<vm moref>: the VM must be in the
  vCenter (the simulator, asked through pyVmomi), else error 300, as NSX-V answers for a VM
  its inventory does not have; a member already: error 311 (NSX-V 6.4)
- GET  /api/4.0/edges?startIndex=&pageSize=: `<pagedEdgeList><edgePage>` with its
  `<pagingInfo>`; at most `page_size` edges a page, whatever is asked, so paging is used
- GET  /api/4.0/edges/<id>/loadbalancer/config/pools: `<loadBalancer><pool>...`
- PUT  /api/4.0/edges/<id>/loadbalancer/config/pools/<poolId> (a `<pool>`): it replaces the pool

Errors are NSX-V's `<error><details/><errorCode/><moduleName/></error>`. Basic
authentication with the user and password it is made with; anything else is 403, as NSX-V
answers. `busy` makes that many membership changes meet "Concurrent object access error",
`unseen` that many meet error 300 first, `stale` that many pool writes meet a
StaleObjectStateException (other writers); a new group named in `refused_names` is refused;
`seen` lists the requests.
"""

from __future__ import annotations

import base64
import copy
import threading
import urllib.parse
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.vsphere.https_standin import Server, vms

GROUPS = "/api/2.0/services/securitygroup"
EDGES = "/api/4.0/edges"


class NsxvStandin:
    def __init__(self, si: Any = None, *, user: str = "admin", password: str = "nsx-V-secret", page_size: int = 2):
        self.si = si
        self.user, self.password, self.page_size = user, password, page_size
        self.groups: dict[str, dict[str, Any]] = {}  # object id -> {"name", "members"}
        self.edges: dict[str, str] = {}  # object id -> name
        self.pools: dict[str, dict[str, ET.Element]] = {}  # edge id -> pool id -> <pool>
        self.seen: list[tuple[str, str]] = []
        self.busy = self.unseen = self.stale = 0
        #: names a new security group may not have (NSX-V refuses them, error 1)
        self.refused_names: set[str] = set()
        self.lock = threading.Lock()
        self.server = Server(self._serve)
        self.address = self.server.address

    def close(self) -> None:
        self.server.close()

    # ------------------------------------------------------------ objects

    def add_group(self, name: str, members: list[str] | None = None) -> str:
        object_id = f"securitygroup-{len(self.groups) + 10}"
        self.groups[object_id] = {"name": name, "members": list(members or [])}
        return object_id

    def add_edge(self, name: str) -> str:
        edge_id = f"edge-{len(self.edges) + 1}"
        self.edges[edge_id] = name
        self.pools[edge_id] = {}
        return edge_id

    def add_pool(self, edge_id: str, name: str, members: list[dict[str, str]] | None = None) -> str:
        pool_id = f"pool-{sum(len(p) for p in self.pools.values()) + 1}"
        pool = _element("pool", [("poolId", pool_id), ("name", name), ("algorithm", "round-robin"),
                                 ("transparent", "false")])
        for member in members or []:
            pool.append(_element("member", list(member.items())))
        self.pools[edge_id][pool_id] = pool
        return pool_id

    def edge_id(self, name: str) -> str:
        return next(edge_id for edge_id, edge in self.edges.items() if edge == name)

    def group_id(self, name: str) -> str | None:
        return next((object_id for object_id, g in self.groups.items() if g["name"] == name), None)

    def members(self, name: str) -> list[str]:
        object_id = self.group_id(name)
        return list(self.groups[object_id]["members"]) if object_id else []

    def pool_members(self, edge_id: str, name: str) -> list[dict[str, str]]:
        pool = next(p for p in self.pools[edge_id].values() if p.findtext("name") == name)
        return [{child.tag: child.text or "" for child in member} for member in pool.findall("member")]

    def writes(self) -> list[tuple[str, str]]:
        return [seen for seen in self.seen if seen[0] != "GET"]

    # ------------------------------------------------------------ the API

    def _serve(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urllib.parse.urlsplit(handler.path)
        self.seen.append((method, parts.path))
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        expected = "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        if handler.headers.get("Authorization") != expected:
            self._answer(handler, 403, _error("The user is not authorized", "403"))
            return
        if body and handler.headers.get("Content-Type") != "application/xml":
            self._answer(handler, 415, _error("Unsupported media type: application/xml expected", "415"))
            return
        query = dict(urllib.parse.parse_qsl(parts.query))
        with self.lock:
            status, document = self._route(method, parts.path, query, body)
        self._answer(handler, status, document)

    def _route(self, method: str, path: str, query: dict[str, str], body: bytes) -> tuple[int, bytes]:
        if method == "GET" and path == f"{GROUPS}/scope/globalroot-0":
            listed = ET.Element("list")
            for object_id, group in self.groups.items():
                item = _element("securitygroup", [("objectId", object_id), ("objectTypeName", "SecurityGroup"),
                                                  ("name", group["name"])])
                for member in group["members"]:
                    item.append(_element("member", [("objectId", member), ("objectTypeName", "VirtualMachine")]))
                listed.append(item)
            return 200, ET.tostring(listed)
        if method == "POST" and path == f"{GROUPS}/bulk/globalroot-0":
            name = ET.fromstring(body).findtext("name") or ""
            if name in self.refused_names:
                return 400, _error(f"The name {name} is not valid for a security group.", "1")
            if self.group_id(name) is not None:
                return 400, _error(f"Another object with same name : {name} already exists in the current scope : "
                                   "globalroot-0.", "210")
            return 201, self.add_group(name).encode()
        if method == "PUT" and path.startswith(f"{GROUPS}/") and "/members/" in path:
            object_id, _, vm = path.removeprefix(f"{GROUPS}/").partition("/members/")
            group = self.groups.get(object_id)
            if group is None:
                return 404, _error(f"The requested object : {object_id} could not be found.", "202")
            if self.unseen > 0 or not self._vm_exists(vm):
                self.unseen = max(self.unseen - 1, 0)
                return 400, _error(f"Requested member {vm} could not be found for addition to Security Group "
                                   f"{object_id}.", "300")
            if self.busy > 0:
                self.busy -= 1
                return 400, _error("Concurrent object access error. Please try again.", "100")
            if vm in group["members"]:
                return 400, _error(f"The object {vm} is already present in the system.", "311")
            group["members"].append(vm)
            return 200, b""
        if method == "GET" and path == EDGES:
            start = int(query.get("startIndex", "0"))
            size = min(int(query.get("pageSize", "256")), self.page_size)
            listed = ET.Element("pagedEdgeList")
            page = ET.SubElement(listed, "edgePage")
            page.append(_element("pagingInfo", [("pageSize", str(size)), ("startIndex", str(start)),
                                                ("totalCount", str(len(self.edges)))]))
            for edge_id, name in list(self.edges.items())[start:start + size]:
                page.append(_element("edgeSummary", [("objectId", edge_id), ("id", edge_id), ("name", name),
                                                     ("edgeType", "gatewayServices")]))
            return 200, ET.tostring(listed)
        if path.startswith(f"{EDGES}/") and "/loadbalancer/config/pools" in path:
            edge_id, _, pool_id = path.removeprefix(f"{EDGES}/").partition("/loadbalancer/config/pools")
            pools = self.pools.get(edge_id)
            if pools is None:
                return 404, _error(f"Edge {edge_id} not found", "10013")
            if method == "GET" and not pool_id:
                balancer = ET.Element("loadBalancer")
                balancer.extend(copy.deepcopy(p) for p in pools.values())
                return 200, ET.tostring(balancer)
            pool_id = pool_id.removeprefix("/")
            if method == "PUT" and pool_id in pools:
                if self.stale > 0:
                    self.stale -= 1
                    return 500, _error("org.hibernate.StaleObjectStateException: Row was updated or deleted by "
                                       "another transaction", "100")
                written = ET.fromstring(body)
                if written.tag != "pool" or written.findtext("poolId") != pool_id:
                    return 400, _error("The pool written is not the pool of the path", "14000")
                pools[pool_id] = written
                return 204, b""
        return 404, _error(f"{method} {path}: not served by the stand-in", "404")

    def _vm_exists(self, moref: str) -> bool:
        return self.si is None or any(vm._moId == moref for vm in vms(self.si))

    @staticmethod
    def _answer(handler: BaseHTTPRequestHandler, status: int, data: bytes) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/xml" if data.startswith(b"<") else "text/plain")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)


def _element(tag: str, children: list[tuple[str, str]]) -> ET.Element:
    element = ET.Element(tag)
    for child, text in children:
        ET.SubElement(element, child).text = text
    return element


def _error(details: str, code: str) -> bytes:
    return ET.tostring(_element("error", [("details", details), ("errorCode", code),
                                          ("moduleName", "core-services")]))
