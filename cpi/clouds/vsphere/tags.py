"""vCenter tags (a vm_type's `tags`), through the vSphere Automation REST API that vCenter
6.5 and later serve beside SOAP: a session of its own (the same user), the categories and
their tags by name, and the attachment of each tag to the VM.

The names are resolved before the VM is cloned (`resolve`), so a tag that is not there
refuses create_vm with nothing made; the attachment follows the clone (`attach`). One
request per category and per tag of a wanted category, a handful in all.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from typing import TYPE_CHECKING, Any

from cpi.errors import VMCreationFailed

from .vcenter import transfer

if TYPE_CHECKING:
    from .props import Tag
    from .vcenter.session import Session

REST = "/rest/com/vmware/cis"
SESSION_HEADER = "vmware-api-session-id"


class Tagging:
    def __init__(self, session: Session):
        self.session = session
        self.token: str | None = None

    def _call(self, method: str, path: str, body: Any = None, *, auth: dict[str, str] | None = None,
              changes: bool | None = None) -> Any:
        headers = auth if auth is not None else {SESSION_HEADER: self.token or ""}
        status, data = transfer.request(self.session, method, REST + path, ok=(200,), headers=headers,
                                        body=json.dumps(body).encode() if body is not None else None,
                                        content_type="application/json", changes=changes)
        if status == 404:
            return None
        return json.loads(data).get("value") if data else None

    def __enter__(self) -> Tagging:
        secret = self.session.properties.password.get_secret_value()
        basic = base64.b64encode(f"{self.session.user}:{secret}".encode()).decode()
        self.token = self._call("POST", "/session", auth={"Authorization": f"Basic {basic}"}, changes=False)
        return self

    def __exit__(self, *exc: object) -> None:
        self._call("DELETE", "/session", changes=False)

    def _named(self, kind: str, ids: list[str]) -> dict[str, str]:
        found = {}
        for item_id in ids or []:
            item = self._call("GET", f"/tagging/{kind}/id:{urllib.parse.quote(item_id, safe=':')}")
            if item is not None:
                found[item["name"]] = item["id"]
        return found

    def resolve(self, wanted: list[Tag]) -> list[str]:
        """The id of each wanted tag; VMCreationFailed naming the first that is not there."""
        categories = self._named("category", self._call("GET", "/tagging/category"))
        in_category: dict[str, dict[str, str]] = {}
        ids = []
        for tag in wanted:
            category_id = categories.get(tag.category)
            if category_id is None:
                raise VMCreationFailed(f"vm_type tags: the vCenter has no tag category '{tag.category}'",
                                       ok_to_retry=False)
            if tag.category not in in_category:
                listed = self._call("POST", f"/tagging/tag/id:{urllib.parse.quote(category_id, safe=':')}"
                                    "?~action=list-tags-for-category", changes=False)
                in_category[tag.category] = self._named("tag", listed)
            tag_id = in_category[tag.category].get(tag.tag)
            if tag_id is None:
                raise VMCreationFailed(f"vm_type tags: the vCenter has no tag '{tag.tag}' in category "
                                       f"'{tag.category}'", ok_to_retry=False)
            ids.append(tag_id)
        return ids

    def attach(self, tag_ids: list[str], vm: Any) -> None:
        for tag_id in tag_ids:
            self._call("POST", f"/tagging/tag-association/id:{urllib.parse.quote(tag_id, safe=':')}?~action=attach",
                       {"object_id": {"id": vm._moId, "type": "VirtualMachine"}})
