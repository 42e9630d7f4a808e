"""EC2 tags from BOSH metadata: limits, the Name rule, and create-time tag specifications.

EC2 allows 128-character keys and 256-character values and reserves the `aws:` prefix;
BOSH metadata may exceed both (long deployment names, manifest tags), so keys and values
are truncated to 127/255 as the Ruby CPI does, and reserved keys are dropped with a log
line rather than failing the call.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from cpi.models import metadata_strings

log = logging.getLogger("cpi.clouds.aws")

MAX_KEY = 127
MAX_VALUE = 255


def clean(tags: Mapping[str, Any]) -> dict[str, str]:
    kept = {}
    for key, value in tags.items():
        if str(key).lower().startswith("aws:"):
            log.info("tag '%s' skipped: the aws: prefix is reserved by AWS", key)
            continue
        kept[key] = value
    return metadata_strings(kept, MAX_KEY, MAX_VALUE)


def api(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def specifications(tags: Mapping[str, str], resource_types: Iterable[str]) -> list[dict[str, Any]]:
    """TagSpecifications for a create call: tags land atomically with the resource, so
    there is no window in which a VM or volume exists untagged, and no extra request.
    EC2 rejects an empty Tags list, so no tags → no specification."""
    if not tags:
        return []
    return [{"ResourceType": kind, "Tags": api(tags)} for kind in resource_types]


def vm_name(metadata: Mapping[str, str]) -> str | None:
    """The `Name` tag of a VM: the director's `name` ("ig/uuid"), else "job/index", else
    "compiling/<package>" for compilation VMs."""
    if metadata.get("name"):
        return metadata["name"]
    if metadata.get("job") and metadata.get("index") is not None and metadata.get("index") != "":
        return f"{metadata['job']}/{metadata['index']}"
    if metadata.get("compiling"):
        return f"compiling/{metadata['compiling']}"
    return None
