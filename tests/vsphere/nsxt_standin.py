"""A stand-in for the part of NSX-T's Policy API the vsphere cloud uses, on 127.0.0.1 over
HTTPS. It is not NSX: no NSX manager or simulator can be had here, so this serves what the
official CPI's generated Policy client (bosh-vsphere-cpi-release's nsxt_policy_client) sends
and reads, as NSX documents it:

- GET  /policy/api/v1/search/query?query=resource_type:Group AND display_name:("a" OR "b")
- GET, PUT /policy/api/v1/infra/domains/default/groups/<id>: a PUT must carry the
  `_revision` of the object as it is (else 412), which it then increments
- GET /policy/api/v1/infra/lb-pools, and GET, PUT /policy/api/v1/infra/lb-pools/<id> (the same)
- GET /policy/api/v1/infra/realized-state/enforcement-points/default/virtual-machines
  ?query=display_name:<name>: NSX's inventory, which NSX fills from the vCenter; here the
  vCenter (the simulator) is asked through pyVmomi, and a VM's external id is its
  instanceUuid, as NSX gives it
- GET /policy/api/v1/infra/virtual-machine-group-associations?vm_external_id=<id>

Basic authentication with the user and password it is made with; anything else is 403.
`conflicts` makes that many PUTs meet a newer revision first (another writer), and `seen`
lists the requests.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.faults.proxy import _tls_context

API = "/policy/api/v1"


class NsxtStandin:
    def __init__(self, si: Any, *, username: str = "admin", password: str = "nsxt-pw"):
        self.si = si
        self.username, self.password = username, password
        self.groups: dict[str, dict[str, Any]] = {}
        self.pools: dict[str, dict[str, Any]] = {}
        self.seen: list[tuple[str, str]] = []
        self.conflicts = 0
        self.lock = threading.Lock()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet: the test reads `seen`
                return

            def do_GET(self) -> None:
                standin._serve(self, "GET")

            def do_PUT(self) -> None:
                standin._serve(self, "PUT")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = _tls_context().wrap_socket(self.server.socket, server_side=True)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

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

    def members(self, group_id: str) -> list[str]:
        return [i for e in self.groups[group_id]["expression"] if e.get("resource_type") == "ExternalIDExpression"
                for i in e.get("external_ids") or []]

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
        path = parts.path.removeprefix(API)
        with self.lock:
            status, document = self._route(method, path, query, body)
        self._answer(handler, status, document)

    def _route(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        if method == "GET" and path == "/search/query":
            names = re.findall(r'"((?:[^"\\]|\\.)*)"', query.get("query", ""))
            names = [json.loads(f'"{name}"') for name in names]
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
        for prefix, objects in (("/infra/domains/default/groups/", self.groups), ("/infra/lb-pools/", self.pools)):
            if path.startswith(prefix):
                found = objects.get(path.removeprefix(prefix))
                if found is None:
                    return 404, {"error_message": f"{path} not found"}
                if method == "GET":
                    return 200, copy.deepcopy(found)
                if self.conflicts > 0:  # another writer came first
                    self.conflicts -= 1
                    found["_revision"] += 1
                if (body or {}).get("_revision") != found["_revision"]:
                    return 412, {"error_message": "The object was modified by somebody else"}
                objects[found["id"]] = {**body, "_revision": found["_revision"] + 1}
                return 200, copy.deepcopy(objects[found["id"]])
        return 404, {"error_message": f"{method} {path}: not served by the stand-in"}

    def _vms(self) -> list[Any]:
        from pyVmomi import vim

        view = self.si.content.viewManager.CreateContainerView(self.si.content.rootFolder, [vim.VirtualMachine], True)
        try:
            return list(view.view)
        finally:
            view.DestroyView()

    @staticmethod
    def _answer(handler: BaseHTTPRequestHandler, status: int, document: Any) -> None:
        data = json.dumps(document).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
