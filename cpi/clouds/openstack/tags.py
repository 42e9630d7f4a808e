"""Server, volume and snapshot metadata from BOSH metadata.

Nova and Cinder take string keys and values of at most 255 characters each; BOSH metadata
may be longer (long deployment names, manifest tags) and carries non-strings (`index` is an
integer in snapshot metadata), so keys and values are stringified and truncated to 255/255
(as the Ruby CPI does) rather than failing the call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cpi.models import metadata_strings

MAX_KEY = 255
MAX_VALUE = 255


def clean(metadata: Mapping[str, Any]) -> dict[str, str]:
    return metadata_strings(metadata, MAX_KEY, MAX_VALUE)


def vm_name(metadata: Mapping[str, str]) -> str | None:
    """A server's human-readable name: the director's `name` ("ig/uuid"), else "job/index",
    else "compiling/<package>" for compilation VMs."""
    if metadata.get("name"):
        return str(metadata["name"])[:MAX_VALUE]
    if metadata.get("job") and metadata.get("index") not in (None, ""):
        return f"{metadata['job']}/{metadata['index']}"[:MAX_VALUE]
    if metadata.get("compiling"):
        return f"compiling/{metadata['compiling']}"[:MAX_VALUE]
    return None
