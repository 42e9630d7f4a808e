"""The director's metadata as NSX-T tags, as the official CPI writes them: scope
`bosh/<key>`, the value as given, except the instance `id`, whose SHA-1 is written (NSX
shows tags to whoever can read the inventory)."""

from __future__ import annotations

import hashlib
from typing import Any


def tag_of(key: str, value: str) -> dict[str, str]:
    text = hashlib.sha1(str(value).encode(), usedforsecurity=False).hexdigest() if key == "id" else str(value)
    return {"scope": f"bosh/{key}", "tag": text}


def bosh_tags(thing: dict[str, Any], metadata: dict[str, str]) -> bool:
    """Set `thing`'s tags of the metadata's keys, each replacing every tag of its scope and
    leaving the others; False when it has them already."""
    wanted = [tag_of(key, value) for key, value in metadata.items()]
    scopes = {tag["scope"] for tag in wanted}
    current = thing.get("tags") or []
    kept = [tag for tag in current if tag.get("scope") not in scopes]
    if sorted(map(str, kept + wanted)) == sorted(map(str, current)):
        return False
    thing["tags"] = kept + wanted
    return True
