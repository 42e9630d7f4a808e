"""`cpi validate --online` for the openstack cloud: read-only list calls that check what a
cloud-config's cloud_properties name exists (flavors, Neutron networks, security groups,
key pairs, availability zones, Cinder volume types), and the defaults cpi.json names too.
One request per kind of thing named, whatever the number of names."""

from __future__ import annotations

import urllib.parse
from typing import Any, Protocol

from cpi.clouds.findings import Finding, Item, missing, references

from . import errors
from .props import OpenStackProperties
from .session import OpenStack

SPEC = {
    "vm": {
        "instance_type": "flavor",
        "availability_zone": "availability_zone",
        "availability_zones": "availability_zone",
        "key_name": "key_pair",
        "security_groups": "security_group",
    },
    "network": {"net_id": "network", "security_groups": "security_group"},
    "disk_type": {"type": "volume_type"},
}
CONFIG = "cpi.json: cloud.properties.openstack"


#: What a cloud-config names, by kind of resource: name -> the YAML paths that name it.
Refs = dict[str, dict[str, list[str]]]


class _Cloud(Protocol):
    """What the checks read of the openstack cloud (its facade imports this module: named
    by shape, not by import): `session_opened` is the session if one was opened, whose token is kept."""

    @property
    def session(self) -> OpenStack: ...

    @property
    def session_opened(self) -> OpenStack | None: ...

    @property
    def properties(self) -> OpenStackProperties: ...


def check_cloud_config(cloud: _Cloud, items: list[Item]) -> list[Finding]:
    refs = references(items, SPEC)
    p = cloud.properties
    if p.default_key_name:
        refs.setdefault("key_pair", {}).setdefault(p.default_key_name, []).append(f"{CONFIG}.default_key_name")
    for index, group in enumerate(p.default_security_groups):
        refs.setdefault("security_group", {}).setdefault(group, []).append(f"{CONFIG}.default_security_groups[{index}]")
    if p.default_volume_type:
        refs.setdefault("volume_type", {}).setdefault(p.default_volume_type, []).append(f"{CONFIG}.default_volume_type")
    try:
        return _check(cloud.session, refs)
    except Exception as exc:
        if not (isinstance(exc, errors.ApiError) or type(exc).__module__.startswith(("keystoneauth1", "openstack"))):
            raise
        raise errors.to_cloud_error(exc, "validate --online", p.describe_identity(), p.auth_url) from None
    finally:
        api = cloud.session_opened
        if api is not None:
            api.keep_token()


def _check(api: OpenStack, refs: Refs) -> list[Finding]:
    findings: list[Finding] = []
    if "flavor" in refs:
        from .flavors import all_flavors

        flavors: list[Any] = all_flavors(api)  # as Nova sent them (the other APIs here are untyped too)
        names = {f.get("name") for f in flavors}
        findings += missing(refs, "flavor", names | {f.get("id") for f in flavors}, "flavor", known=names)
    if "network" in refs:
        wanted = sorted(refs["network"])
        query = urllib.parse.urlencode([("id", n) for n in wanted] + [("fields", "id")])
        found = {n["id"] for n in api.get("network", f"/networks?{query}")["networks"]}
        findings += missing(refs, "network", found, "network")
    if "security_group" in refs:
        groups = api.get("network", "/security-groups?fields=id&fields=name")["security_groups"]
        names = {g["name"] for g in groups}
        findings += missing(refs, "security_group", names | {g["id"] for g in groups}, "security group", known=names)
    if "key_pair" in refs:
        pairs = api.get("compute", "/os-keypairs")["keypairs"]
        found = {entry.get("keypair", entry).get("name") for entry in pairs}
        findings += missing(refs, "key_pair", found, "key pair")
    if "availability_zone" in refs:
        zones = api.get("compute", "/os-availability-zone")["availabilityZoneInfo"]
        found = {z["zoneName"] for z in zones if (z.get("zoneState") or {}).get("available", True)}
        findings += missing(refs, "availability_zone", found, "availability zone")
    if "volume_type" in refs:
        types = api.get("block-storage", "/types")["volume_types"]
        names = {t["name"] for t in types}
        findings += missing(refs, "volume_type", names | {t["id"] for t in types}, "volume type", known=names)
    return findings
