"""Plan mode on OpenStack (cpi.plan): a mutating request (POST, PUT, PATCH, DELETE) is
never sent; the CPI answers it itself with what the code reads next, placeholder ids for
what would be made, and the call goes on as it would.

OpenStack has no dry run, so unlike AWS a plan here cannot prove the credentials may make
a change: each mutation says so. (Keystone's token request is not a change: it is sent.)
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from . import audited

if TYPE_CHECKING:
    from cpi.plan import Plan

log = logging.getLogger("cpi.clouds.openstack")

UNCHECKED = "not checked: OpenStack has no dry run"
#: collection -> the status a new resource starts in
FIRST_STATUS = {"servers": "BUILD", "volumes": "creating", "snapshots": "creating", "images": "queued",
                "ports": "DOWN", "floatingips": "DOWN"}
#: collection -> the prefix of its placeholders (what `cpi plan` shows)
PREFIX = {"servers": "vm-", "volumes": "disk-", "snapshots": "snapshot-", "images": "stemcell-"}


class Answer:
    """The part of a requests.Response the code reads."""

    after_unknown_outcome = False

    def __init__(self, status_code: int, document: Any = None):
        self.status_code = status_code
        self._document = document
        self.content = b"" if document is None else json.dumps(document).encode()
        self.headers: dict[str, str] = {}

    def json(self) -> Any:
        if self._document is None:
            raise ValueError("no body")
        return self._document


def send(plan: Plan, service: str, method: str, path: str, body: Any) -> Answer:
    """Answer a mutation of the call's `plan` without sending it, and put it in the plan."""
    answer = _answer(plan, method, path, body)
    log.info("plan: %s %s %s not sent", service, method, path.split("?", 1)[0])
    with plan.permission(UNCHECKED):
        audited.after(service, method, path, body, answer, plan=plan)
    return answer


def _answer(plan: Plan, method: str, path: str, body: Any) -> Answer:
    parts = audited.segments(path)
    sent = body if isinstance(body, dict) else {}
    if method == "DELETE":
        return Answer(204)
    if not parts:
        return Answer(200, sent)
    collection = parts[0]
    if method == "POST" and len(parts) == 1:  # a create: the resource, as sent, with an id
        wrapper = next(iter(sent)) if len(sent) == 1 and isinstance(next(iter(sent.values())), dict) else None
        inner = dict(sent[wrapper]) if wrapper else dict(sent)
        inner["id"] = plan.placeholder(PREFIX.get(collection, f"{collection.rstrip('s')}-"))
        inner.setdefault("status", FIRST_STATUS.get(collection, "creating"))
        if collection == "ports":
            inner.setdefault("fixed_ips", [])
        return Answer(201, {wrapper: inner} if wrapper else inner)
    if len(parts) >= 3 and parts[2] == "os-volume_attachments" and method == "POST":
        attachment = dict(sent.get("volumeAttachment") or {})
        attachment.setdefault("id", attachment.get("volumeId"))
        attachment["serverId"] = parts[1]
        return Answer(200, {"volumeAttachment": attachment})
    if len(parts) >= 3 and parts[2] in ("action", "file"):
        return Answer(202)
    return Answer(200, sent)
