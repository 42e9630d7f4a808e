"""Comparing two runs of the same calls (warm and cold, tests/conformance/test_warm.py and
tests/lifecycle/test_warm_cold.py): what legitimately differs from one run to the next is
set aside: times, durations, random ids (the CPI's and the clouds'), request ids, each
run's own directory, pids."""

from __future__ import annotations

import re

PATTERNS = [
    (rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?", b"<time>"),
    (rb"\d+(\.\d+)?\s?(ms|s)\b", b"<duration>"),
    (rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", b"<uuid>"),
    (rb"\b(vol|i|snap|ami|eni)-[0-9a-f]{8,17}\b", rb"\1-<id>"),
    (rb"agent\.log|/[^ \"]*/(cold|warm)/", b"<dir>/"),
    (rb"pid \d+", b"pid <n>"),
    # the datastore a vSphere disk is drawn onto (the simulator's LocalDS_N): random by design,
    # so that disks spread (cpi/clouds/vsphere/place.py)
    (rb"\bLocalDS_\d+\b", b"<datastore>"),
    # ... and so how many datastores a lookup of that disk asks before the one that holds it
    (rb"\d+ vCenter requests", b"<n> vCenter requests"),
]


def normalized(data: bytes) -> bytes:
    for pattern, replacement in PATTERNS:
        data = re.sub(pattern, replacement, data)
    return data
