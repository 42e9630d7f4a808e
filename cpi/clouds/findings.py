"""What a cloud's online check of a cloud-config speaks (`Cloud.check_cloud_config` in
cpi/clouds/base.py): the `Item`s it is handed, the `Finding`s it answers, and the helpers
the clouds' inspect.py modules share to find what the cloud_properties name.

The checking itself (the cloud-config's shape, the models, `cpi validate`) is the
operator's, in cpi/operator/cloud_config.py; these shapes live here, beside the interface
that uses them, because the clouds build them and the clouds never import the operator.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from cpi.validation import suggest


@dataclass
class Finding:
    path: str
    problem: str
    severity: str = "error"  # "error" | "warning" | "info"

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass
class Item:
    """One set of cloud_properties in the cloud-config, as a cloud's online check sees it."""

    kind: str  # "vm_type", "vm_extension", "az", "disk_type", "network"
    path: str  # the YAML path of the cloud_properties mapping
    properties: dict[str, Any]
    network_type: str | None = None  # for kind "network": manual, dynamic or vip


VM_KINDS = ("vm_type", "vm_extension", "az")


def references(items: list[Item], spec: dict[str, dict[str, str]]) -> dict[str, dict[str, list[str]]]:
    """What the cloud_properties name, by resource kind: `spec` maps an item kind ("vm",
    "network", "disk_type") to {property: resource kind}; the answer maps each resource kind
    to {name: [YAML paths naming it]}. A property holding a list names each of its items."""
    found: dict[str, dict[str, list[str]]] = {}
    for item in items:
        group = "vm" if item.kind in VM_KINDS else item.kind
        for prop, resource in spec.get(group, {}).items():
            value = item.properties.get(prop)
            values = [(f"{item.path}.{prop}", value)] if isinstance(value, str) else []
            if isinstance(value, list):
                values = [(f"{item.path}.{prop}[{i}]", v) for i, v in enumerate(value) if isinstance(v, str)]
            for path, name in values:
                if name:
                    found.setdefault(resource, {}).setdefault(name, []).append(path)
    return found


def missing(refs: dict[str, dict[str, list[str]]], resource: str, existing: set[str], what: str,
            known: set[str] | None = None) -> list[Finding]:
    """A finding for every path naming a `resource` not in `existing` (suggesting a close
    name from `known`, default `existing`)."""
    findings = []
    for name, paths in refs.get(resource, {}).items():
        if name in existing:
            continue
        for path in paths:
            hint = suggest(name, known if known is not None else existing)
            findings.append(Finding(path, f"{what} '{name}' does not exist" + hint))
    return findings
