"""The audit lines of OpenStack requests (cpi.audit): every request goes through
session.OpenStack.request, which hands each successful mutating one here (POST, PUT,
PATCH, DELETE). What a line says is read from the path, the body sent and the answer; a
request not in the table still gets a line (action: the HTTP method)."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from cpi import audit

if TYPE_CHECKING:
    from cpi.plan import Plan

log = logging.getLogger("cpi.clouds.openstack")

#: collection in the path -> resource type in the line
KINDS = {"servers": "vm", "volumes": "disk", "snapshots": "snapshot", "images": "stemcell", "ports": "port",
         "floatingips": "floating_ip", "members": "lb_member", "os-volume_attachments": "disk"}
_VERSION = re.compile(r"v\d+(\.\d+)?")


def segments(path: str) -> list[str]:
    return [s for s in path.split("?", 1)[0].split("/") if s and not _VERSION.fullmatch(s)]


def _body(answer: Any) -> dict[str, Any]:
    if isinstance(answer, dict):
        return answer
    try:
        if getattr(answer, "status_code", 204) == 204 or not answer.content:
            return {}
        found = answer.json()
    except (ValueError, AttributeError):
        return {}
    return found if isinstance(found, dict) else {}


def _inner(document: Any, key: str) -> dict[str, Any]:
    """`document[key]` when the document wraps its resource (`{"server": {...}}`), else the document."""
    if isinstance(document, dict):
        inner = document.get(key)
        return inner if isinstance(inner, dict) else document
    return {}


def lines(method: str, path: str, sent: Any, answer: Any) -> list[tuple[str, str, Any, Any, Any]]:
    parts = segments(path)
    body = sent if isinstance(sent, dict) else {}
    if not parts:
        return [(method.lower(), "resource", None, None, None)]
    collection = parts[0]
    kind = KINDS.get(collection, collection)
    singular = {"servers": "server", "volumes": "volume", "snapshots": "snapshot", "ports": "port",
                "floatingips": "floatingip"}.get(collection, collection)
    if len(parts) == 1 and method == "POST":  # a create
        made = _inner(_body(answer), singular)
        asked = _inner(body, singular)
        if collection == "servers":
            new = {"name": asked.get("name"), "flavor": asked.get("flavorRef"), "image": asked.get("imageRef"),
                   "availability_zone": asked.get("availability_zone"), "key_name": asked.get("key_name"),
                   "networks": asked.get("networks"), "security_groups": asked.get("security_groups"),
                   "metadata": asked.get("metadata")}
        elif collection == "volumes":
            new = {"size_gib": asked.get("size"), "volume_type": asked.get("volume_type"),
                   "availability_zone": asked.get("availability_zone"), "snapshot_id": asked.get("snapshot_id")}
        elif collection == "snapshots":
            new = {"disk_cid": asked.get("volume_id"), "name": asked.get("name")}
        elif collection == "ports":
            new = {"network_id": asked.get("network_id"), "fixed_ips": asked.get("fixed_ips"),
                   "name": asked.get("name")}
        elif collection == "images":
            new = {k: asked.get(k) for k in ("name", "disk_format", "container_format") if k in asked}
        else:
            new = asked
        return [("create", kind, made.get("id"), None, {k: v for k, v in new.items() if v is not None})]
    resource = parts[1] if len(parts) > 1 else None
    if len(parts) == 2:
        if method == "DELETE":
            return [("delete", kind, resource, {"id": resource}, None)]
        if collection == "floatingips":
            port = _inner(body, "floatingip").get("port_id")
            return [("associate" if port else "disassociate", kind, resource, None, {"port_id": port})]
        return [("update", kind, resource, None, _inner(body, singular))]
    sub = parts[2]
    if sub == "action":
        action = next(iter(body), "action")
        if action == "os-extend":
            return [("resize", kind, resource, None, {"size_gib": (body.get(action) or {}).get("new_size")})]
        if action == "reboot":
            return [("reboot", kind, resource, None, body.get(action))]
        return [(action, kind, resource, None, body.get(action))]
    if sub == "metadata":
        return [("tag", kind, resource, None, body.get("metadata"))]
    if sub == "os-volume_attachments":
        if method == "DELETE":
            volume = parts[3] if len(parts) > 3 else None
            return [("detach", "disk", volume, {"vm_cid": resource}, None)]
        attachment = _inner(_body(answer), "volumeAttachment")
        volume = _inner(body, "volumeAttachment").get("volumeId") or attachment.get("volumeId")
        return [("attach", "disk", volume, None, {"vm_cid": resource, "device": attachment.get("device")})]
    if sub == "file" and collection == "images":
        return [("upload", kind, resource, None, None)]
    if sub == "members":
        if method == "DELETE":
            return [("remove", "lb_member", parts[3] if len(parts) > 3 else None, {"pool": resource}, None)]
        member = _inner(_body(answer), "member")
        return [("add", "lb_member", member.get("id"), None, {"pool": resource, **_inner(body, "member")})]
    return [(method.lower(), kind, resource, None, None)]


def read_only(method: str) -> bool:
    return method in ("GET", "HEAD", "OPTIONS")


def after(service: str, method: str, path: str, sent: Any, answer: Any, *, plan: Plan | None = None) -> None:
    """Called with each request that got an answer: a line per mutation it made (a
    DELETE answered 404 made none, unless an earlier attempt whose answer was lost did);
    under `plan` (the call's, cpi.plan) with each it withheld, the line going to the plan."""
    if read_only(method):
        return
    status = getattr(answer, "status_code", 200)
    if status >= 400 and not getattr(answer, "after_unknown_outcome", False):
        return
    try:
        made = lines(method, path, sent, answer)
    except Exception as exc:  # noqa: BLE001 - an audit line must never fail the CPI call
        log.warning("audit: cannot describe %s %s (%s); recording it bare", method, service, type(exc).__name__)
        made = [(method.lower(), "resource", None, None, None)]
    for action, kind, resource, old, new in made:
        audit.record(action, resource, {"old": old, "new": new}, plan=plan, resource_type=kind,
                     request=f"{service} {method} {path.split('?', 1)[0]}")
