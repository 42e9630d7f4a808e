"""NSX-T through its Policy API (cpi.json's `nsxt` with `use_policy_api: true`), for a
vm_type's `nsxt`: the VM joins the groups (`ns_groups`) and load balancer server pools
(`lb.server_pools`) it names, and leaves them when it is deleted, as the official CPI does.

- Groups are found by display name through the search API before anything is made, so a
  group that is not there refuses create_vm with nothing to clean up.
- A group's members are its ExternalIDExpressions of member type VirtualMachine: the VM's
  NSX external id (the one NSX's inventory gives it once it has seen the VM in the vCenter)
  is added to one with room (at most MAX_IDS ids each), or to a new one after an OR
  conjunction named `conjunction-<vm_cid>-<n>`, as the official CPI names it, so that a
  switch between the two CPIs keeps each other's memberships.
- Each change is a PUT of the group or pool read just before, carrying its `_revision`: NSX
  refuses it with 412 when another writer came first, and the change is read and made again.
- A pool member is named after the vm_cid, so delete_vm removes exactly this VM's members.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import os
import random
import ssl
import tempfile
import time
import urllib.parse
from typing import TYPE_CHECKING, Any

from cpi import plan, retry, waits
from cpi.errors import CloudError, VMCreationFailed

from . import audited, errors
from .session import _Connection, split_address, tls_context

if TYPE_CHECKING:
    from .props import Nsxt as NsxtConfig

log = logging.getLogger("cpi.clouds.vsphere")

API = "/policy/api/v1"
DOMAIN = "default"
#: how many external ids the official CPI puts in one expression before it starts another
MAX_IDS = 500
#: writes refused for a newer revision are read and made again at most this often
CONFLICTS = 20
#: how long NSX may take to see a new VM in the vCenter (its inventory is eventually
#: consistent), and how often it is asked meanwhile
DISCOVERY_SECONDS = 60
DISCOVERY_SCHEDULE = waits.Schedule(first=0.5, factor=1.5, cap=5.0)


class Conflict(Exception):
    """NSX refused a write: the object changed since it was read (409 or 412)."""


class Manager:
    """One NSX-T manager, as the Policy API's client."""

    def __init__(self, config: NsxtConfig, *, budget: float, connect_timeout: float, read_timeout: float):
        self.config = config
        self.budget = budget
        self.host, self.port = split_address(config.host)
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        self._context = self._tls()
        self._connection = lambda: _Connection(self.host, self.port, context=self._context,
                                               connect_timeout=connect_timeout, read_timeout=read_timeout)

    def _tls(self) -> ssl.SSLContext:
        """Verified against `ca_cert` when one is given, not at all otherwise (the official
        CPI's rule); a client certificate, when given, authenticates."""
        config = self.config
        context = tls_context(config.ca_cert, config.ca_cert_file, bool(config.ca_cert or config.ca_cert_file), "nsxt")
        if config.auth_certificate and config.auth_private_key:
            # ssl loads a key pair from files only: a private directory, gone once they are read
            with tempfile.TemporaryDirectory(prefix="cpi-nsxt-") as directory:
                cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
                for path, text in ((cert, config.auth_certificate), (key, config.auth_private_key.get_secret_value())):
                    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
                        out.write(text)
                context.load_cert_chain(cert, key)
        return context

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        if self.config.allow_overwrite:
            headers["X-Allow-Overwrite"] = "true"
        if not (self.config.auth_certificate and self.config.auth_private_key) and self.config.username:
            secret = self.config.password.get_secret_value() if self.config.password else ""
            token = base64.b64encode(f"{self.config.username}:{secret}".encode()).decode()
            headers["Authorization"] = ("Remote " if self.config.remote_auth else "Basic ") + token
        return headers

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """The JSON answer of one request (None for 404); Conflict for 409/412; CloudError
        naming the request for any other refusal. GETs and PUTs (a PUT carries the revision
        it read) are retried within the budget."""
        what = f"NSX-T {method} {path.split('?', 1)[0]}"
        payload = json.dumps(body).encode() if body is not None else None
        if plan.active is not None:  # `cpi plan`: reads go out, changes are listed, not sent
            if method != "GET":
                from . import planned

                planned.http(method, API + path, payload)
                return None
            plan.active.read(what, path)

        def send() -> tuple[int, bytes]:
            connection = self._connection()
            try:
                connection.request(method, API + path, body=payload, headers=self._headers())
                response = connection.getresponse()
                data = response.read()
            finally:
                connection.close()
            if response.status in (429, 503) or (response.status >= 500 and method in ("GET", "PUT")):
                raise http.client.HTTPException(f"{response.status} {response.reason}")
            return response.status, data

        try:
            status, data = retry.call(send, classify=errors.classifier(idempotent=method in ("GET", "PUT")),
                                      what=what, budget=self.budget)
        except Exception as exc:  # noqa: BLE001 - the wire's failures leave as a CloudError, scrubbed
            secrets = [s for s in (self.config.password and self.config.password.get_secret_value(),) if s]
            raise errors.to_cloud_error(exc, what=what, endpoint=self.config.host, user=self.config.username or "",
                                        secrets=secrets, connect_timeout=self.connect_timeout,
                                        read_timeout=self.read_timeout) from None
        if status == 404:
            return None
        if status in (409, 412):
            raise Conflict(what)
        document = json.loads(data) if data else None
        if status >= 400:
            message = (document or {}).get("error_message") if isinstance(document, dict) else None
            raise CloudError(f"{what}: {status} {message or data[:200]!r}")
        if method != "GET":
            audited.http_after(method, API + path, None)
        return document

    # ------------------------------------------------------------ lookups

    def groups(self, names: list[str]) -> dict[str, str]:
        """Display name → id of the groups `names`; VMCreationFailed naming those not there."""
        quoted = " OR ".join(json.dumps(name) for name in names)
        query = urllib.parse.urlencode({"query": f"resource_type:Group AND display_name:({quoted})"})
        found: dict[str, str] = {}
        cursor = None
        while True:
            page = self.call("GET", f"/search/query?{query}" + (f"&cursor={cursor}" if cursor else "")) or {}
            for group in page.get("results") or []:
                if group.get("display_name") in names and "/domains/default/" in (group.get("path") or ""):
                    found[group["display_name"]] = group["id"]
            cursor = page.get("cursor")
            if not cursor or not page.get("results"):
                break
        missing = [name for name in names if name not in found]
        if missing:
            raise VMCreationFailed(f"vm_type nsxt.ns_groups: NSX-T at {self.config.host} has no group "
                                   f"{', '.join(repr(m) for m in missing)} in domain '{DOMAIN}'", ok_to_retry=False)
        return found

    def pools(self) -> list[dict[str, Any]]:
        return (self.call("GET", "/infra/lb-pools") or {}).get("results") or []

    def external_id(self, vm_cid: str, wait: float = DISCOVERY_SECONDS) -> str | None:
        """NSX's id of the VM `vm_cid`: with `wait`, once its inventory has it (a WaitTimeout
        after `wait` seconds); without, None when NSX does not see it (a VM on no NSX segment)."""
        query = urllib.parse.urlencode({"query": f"display_name:{vm_cid}"})

        def look() -> waits.Check[str]:
            found = (self.call("GET", f"/infra/realized-state/enforcement-points/default/virtual-machines?{query}")
                     or {}).get("results") or []
            return waits.Check(bool(found), "seen" if found else "not in NSX's inventory yet",
                               found[0].get("external_id") if found else None)

        if not wait:
            return look().value
        return waits.until(look, what=f"NSX-T at {self.config.host} to see VM {vm_cid}", timeout=wait,
                           schedule=DISCOVERY_SCHEDULE, check_first=True, log=log)

    # ------------------------------------------------------------ changes

    def _changed(self, path: str, change) -> None:
        """Read `path`, let `change` edit it (False: nothing to write), PUT it with the
        revision read; again when another writer came first."""
        for attempt in range(CONFLICTS):
            current = self.call("GET", path)
            if current is None:
                raise CloudError(f"NSX-T {path}: not there")
            if not change(current):
                return
            try:
                self.call("PUT", path, current)
                return
            except Conflict:
                log.info("NSX-T %s changed meanwhile: read and written again (attempt %d)", path, attempt + 1)
                time.sleep(random.uniform(0.1, 1.0))
        raise CloudError(f"NSX-T {path}: still changed by others after {CONFLICTS} attempts")

    def join_groups(self, vm_cid: str, group_ids: list[str]) -> None:
        external_id = self.external_id(vm_cid)
        if external_id is None:  # a plan, which waits for nothing
            return
        for group_id in group_ids:
            self._changed(f"/infra/domains/{DOMAIN}/groups/{group_id}",
                          lambda group: add_member(group, vm_cid, external_id))
            log.info("create_vm: %s joined NSX-T group %s", vm_cid, group_id)

    def leave_groups(self, vm_cid: str) -> None:
        external_id = self.external_id(vm_cid, wait=0)
        if external_id is None:
            return  # NSX does not see it: no group can hold it
        query = urllib.parse.urlencode({"vm_external_id": external_id})
        listed = (self.call("GET", f"/infra/virtual-machine-group-associations?{query}") or {}).get("results") or []
        for association in listed:
            group_id = (association.get("path") or "").rsplit("/", 1)[-1]
            if group_id:
                self._changed(f"/infra/domains/{DOMAIN}/groups/{group_id}",
                              lambda group: remove_member(group, external_id))

    def join_pools(self, vm_cid: str, ip: str, server_pools: list[tuple[str, int | None]]) -> None:
        """Add the VM to each named pool: a static pool gets a member named `vm_cid` (its `ip`,
        on the port); a dynamic one (whose members are a group's) gets the VM in that group."""
        by_name: dict[str, list[dict[str, Any]]] = {}
        for pool in self.pools():
            by_name.setdefault(pool.get("display_name") or "", []).append(pool)
        dynamic = [pool["member_group"]["group_path"].rsplit("/", 1)[-1] for name, _ in server_pools
                   for pool in by_name.get(name, []) if (pool.get("member_group") or {}).get("group_path")]
        if dynamic:
            self.join_groups(vm_cid, sorted(set(dynamic)))
        for name, port in server_pools:
            for pool_id in [pool["id"] for pool in by_name.get(name, []) if not pool.get("member_group")]:
                member = {"display_name": vm_cid, "ip_address": ip, **({"port": str(port)} if port else {})}

                def add(pool: dict[str, Any], member: dict[str, Any] = member) -> bool:
                    members = pool.setdefault("members", [])
                    if any(m.get("display_name") == vm_cid and m.get("ip_address") == ip for m in members):
                        return False
                    members.append(member)
                    return True

                self._changed(f"/infra/lb-pools/{pool_id}", add)

    def leave_pools(self, vm_cid: str) -> None:
        for pool in self.pools():
            if any(m.get("display_name") == vm_cid for m in pool.get("members") or []):
                def drop(current: dict[str, Any]) -> bool:
                    kept = [m for m in current.get("members") or [] if m.get("display_name") != vm_cid]
                    changed = len(kept) != len(current.get("members") or [])
                    current["members"] = kept
                    return changed

                self._changed(f"/infra/lb-pools/{pool['id']}", drop)


def add_member(group: dict[str, Any], vm_cid: str, external_id: str) -> bool:
    """Put `external_id` in the group's VirtualMachine ExternalIDExpressions, as the official
    CPI does; False when it is there already."""
    expressions = group.setdefault("expression", [])
    holders = [e for e in expressions if e.get("resource_type") == "ExternalIDExpression"
               and e.get("member_type") == "VirtualMachine"]
    if any(external_id in (e.get("external_ids") or []) for e in holders):
        return False
    room = next((e for e in holders if len(e.get("external_ids") or []) < MAX_IDS), None)
    if room is not None:
        room.setdefault("external_ids", []).append(external_id)
        return True
    if expressions:
        named = sum(1 for e in expressions if e.get("resource_type") == "ConjunctionOperator"
                    and str(e.get("id", "")).startswith(f"conjunction-{vm_cid}"))
        expressions.append({"resource_type": "ConjunctionOperator", "conjunction_operator": "OR",
                            "id": f"conjunction-{vm_cid}-{named}"})
    expressions.append({"resource_type": "ExternalIDExpression", "member_type": "VirtualMachine",
                        "external_ids": [external_id]})
    return True


def remove_member(group: dict[str, Any], external_id: str) -> bool:
    """Take `external_id` out of the group's expressions (an expression left empty goes,
    with the OR beside it); False when it was not there."""
    expressions = group.get("expression") or []
    for index, expression in enumerate(expressions):
        ids = expression.get("external_ids") or []
        if expression.get("resource_type") != "ExternalIDExpression" or external_id not in ids:
            continue
        ids.remove(external_id)
        if not ids:
            del expressions[index]
            beside = index - 1 if index > 0 else 0
            if beside < len(expressions) and expressions[beside].get("resource_type") == "ConjunctionOperator":
                del expressions[beside]
        return True
    return False


def manager(properties: Any) -> Manager | None:
    """The NSX-T manager cpi.json names for the Policy API; None without one."""
    config = properties.nsxt
    if config is None or not config.use_policy_api:
        return None
    return Manager(config, budget=properties.retry_budget_seconds, connect_timeout=properties.connect_timeout,
                   read_timeout=properties.read_timeout)


def refusal(properties: Any, asked: Any, nets: dict[str, Any]) -> str | None:
    """Why a vm_type's `nsxt` cannot be carried out here (None: it can), before anything is
    made: no manager in cpi.json, the Manager API (not driven yet), VIF types (the Manager
    API's), or server pools without a manual network's address to add."""
    config = properties.nsxt
    if config is None:
        return ("vm_type cloud_properties 'nsxt' needs the NSX-T manager, which cpi.json does not name (`nsxt`, the "
                "job's vcenter.nsxt.*)")
    if not config.use_policy_api:
        return ("vm_type cloud_properties 'nsxt': this CPI drives NSX-T through its Policy API only "
                "(vcenter.nsxt.use_policy_api: true), not yet through the Manager API; keep the official CPI for "
                "these VMs (docs/vsphere.md)")
    if config.policy_api_migration_mode:
        return ("vcenter.nsxt.policy_api_migration_mode adds VMs through the Manager API too, which this CPI does not "
                "drive yet; keep the official CPI while migrating (docs/vsphere.md)")
    if asked.vif_type or config.default_vif_type:
        return ("vm_type nsxt.vif_type / nsxt.default_vif_type: VIF types are set through NSX-T's Manager API, which "
                "this CPI does not drive yet (docs/vsphere.md)")
    if asked.lb and asked.lb.server_pools and not any(net.type == "manual" for net in nets.values()):
        return ("vm_type nsxt.lb.server_pools: the VM joins a pool by its address, and only a manual network gives "
                "one before the VM boots (dynamic networks are not supported for pools yet)")
    return None
