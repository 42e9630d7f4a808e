"""The OpenStack project as an operator sees it: read-only lists, servers and snapshots
filtered to what BOSH made (cpi/clouds/inventory.py's BOSH_TAGS in their metadata: this
CPI's `agent_id` and `director_uuid`, the director's `director`, which set_vm_metadata gives
the official CPI's servers too, snapshot_disk's metadata on either CPI's snapshots); every
volume, each with its role (a server's root volume apart from persistent disks); and one
resource by its id whatever its metadata (`cpi show`, as has_vm finds it)."""

from __future__ import annotations

import urllib.parse
from typing import Any

from cpi.cids import StemcellCid
from cpi.clouds.inventory import Offer, Resource, is_bosh, read_so_far

from . import flavors
from .session import OpenStack
from .vms import is_root_device


def _strings(metadata: dict[str, Any] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (metadata or {}).items()}


#: Items asked for per page: a listing is read page after page (limit and marker), since a
#: service answers at most its own maximum (Nova's and Cinder's osapi_max_limit, 1000 by
#: default) to a request without them, and would hide the rest.
PAGE = 500


def _pages(api: OpenStack, service: str, path: str, key: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    marker = None
    while True:
        query = {"limit": PAGE, **({"marker": marker} if marker else {})}
        page = api.get(service, f"{path}?{urllib.parse.urlencode(query)}")[key]
        found.extend(page)
        read_so_far(key, len(found))
        if len(page) < PAGE:
            return found
        marker = page[-1]["id"]


def _vm(s: dict[str, Any]) -> Resource:
    image = s.get("image")
    return Resource("vm", s["id"], str(s.get("status", "?")).lower(), s.get("created"), _strings(s.get("metadata")),
                    {"name": s.get("name"), "flavor": (s.get("flavor") or {}).get("original_name")
                     or (s.get("flavor") or {}).get("id"),
                     "image": image.get("id") if isinstance(image, dict) else None,  # "" when booted from a volume
                     "zone": s.get("OS-EXT-AZ:availability_zone"),
                     "addresses": {net: [a.get("addr") for a in addrs]
                                   for net, addrs in (s.get("addresses") or {}).items()}})


def _disk(v: dict[str, Any]) -> Resource:
    """A volume; its role (cpi.clouds.inventory.ROLES) as get_disks tells it: the one
    attached at a server's first device is its root (boot from volume), every other is a
    persistent disk (a flavor's ephemeral disk is no volume)."""
    attached: dict[str, Any] = next(iter(v.get("attachments") or []), {})
    return Resource("disk", v["id"], v.get("status", "?"), v.get("created_at"), _strings(v.get("metadata")),
                    {"role": "root" if is_root_device(attached.get("device")) else "persistent",
                     "name": v.get("name"), "size_gib": v.get("size"), "type": v.get("volume_type"),
                     "zone": v.get("availability_zone"), "attached_to": attached.get("server_id")})


def _snapshot(s: dict[str, Any]) -> Resource:
    return Resource("snapshot", s["id"], s.get("status", "?"), s.get("created_at"), _strings(s.get("metadata")),
                    {"volume": s.get("volume_id"), "size_gib": s.get("size"), "description": s.get("description")})


def _stemcell(i: dict[str, Any]) -> Resource:
    return Resource("stemcell", i["id"], i.get("status", "?"), i.get("created_at"),
                    {k: str(v) for k, v in i.items() if k in ("version", "os_distro", "director_uuid")},
                    {"name": i.get("name"), "size_bytes": i.get("size"), "visibility": i.get("visibility")})


def inventory(api: OpenStack, kind: str) -> list[Resource]:
    if kind == "vms":
        servers = _pages(api, "compute", "/servers/detail", "servers")
        return [_vm(s) for s in servers if is_bosh(s.get("metadata") or {})]
    if kind == "disks":
        return [_disk(v) for v in _pages(api, "block-storage", "/volumes/detail", "volumes")]
    if kind == "snapshots":
        return [_snapshot(s) for s in _pages(api, "block-storage", "/snapshots/detail", "snapshots")
                if is_bosh(s.get("metadata") or {})]
    return [_stemcell(i) for i in _pages(api, "image", "/images", "images")
            if i.get("version") is not None]  # create_stemcell sets the stemcell's version


#: Where `show` reads one resource: service, path and the key of its answer.
ONE = {"vms": ("compute", "/servers/{}", "server", _vm), "disks": ("block-storage", "/volumes/{}", "volume", _disk),
       "snapshots": ("block-storage", "/snapshots/{}", "snapshot", _snapshot),
       "stemcells": ("image", "/images/{}", None, _stemcell)}


def show(api: OpenStack, kind: str, cid: str) -> Resource | None:
    """One resource by its id, whoever made it and however it is tagged (None: not there)."""
    if kind == "stemcells" and cid.endswith(" light"):
        return light_stemcell(api, StemcellCid(cid))
    service, path, key, describe = ONE[kind]
    response = api.request(service, "GET", path.format(urllib.parse.quote(cid, safe="")), ok=(404,))
    if response.status_code == 404:
        return None
    body = response.json()
    found = body[key] if key else body
    if kind == "vms" and str(found.get("status", "")).upper() == "DELETED":
        return None
    return describe(found)


def light_stemcell(api: OpenStack, stemcell_cid: StemcellCid) -> Resource | None:
    """A light stemcell's cid ("<image id> light"): the Glance image it names."""
    image_id = stemcell_cid.removesuffix(" light")
    response = api.request("image", "GET", f"/images/{urllib.parse.quote(image_id, safe='')}", ok=(404,))
    if response.status_code == 404:
        return None
    image = response.json()
    return Resource("stemcell", stemcell_cid, image.get("status", "?"), image.get("created_at"), {},
                    {"light": True, "image": image_id, "name": image.get("name"),
                     "visibility": image.get("visibility")})


def available(api: OpenStack, offer: str) -> list[Offer]:
    if offer == "images":
        return [Offer("image", i.get("name") or i["id"], i["id"], {"status": i.get("status")})
                for i in _pages(api, "image", "/images", "images")]
    if offer == "sizes":
        return sorted((Offer("size", f["name"], f["id"], {"vcpus": f.get("vcpus"), "ram_mib": f.get("ram"),
                                                          "disk_gib": f.get("disk"),
                                                          "ephemeral_gib": f.get("OS-FLV-EXT-DATA:ephemeral")})
                       for f in flavors.all_flavors(api)), key=lambda o: o.name)
    if offer == "zones":
        zones = api.get("compute", "/os-availability-zone")["availabilityZoneInfo"]
        return [Offer("zone", z["zoneName"], None, {"available": (z.get("zoneState") or {}).get("available")})
                for z in zones]
    return [Offer("network", n.get("name") or n["id"], n["id"],
                  {"subnets": n.get("subnets"), "status": n.get("status")})
            for n in api.get("network", "/networks")["networks"]]
