"""The OpenStack project as an operator sees it: read-only lists, filtered to what a BOSH
CPI made (servers carry `agent_id` metadata from their create request; volumes made by
create_disk are described "BOSH persistent disk")."""

from __future__ import annotations

import urllib.parse
from typing import Any

from cpi.clouds.inventory import Offer, Resource, read_so_far

from . import flavors

DISK_DESCRIPTION = "BOSH persistent disk"


def _strings(metadata: dict[str, Any] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (metadata or {}).items()}


#: Items asked for per page: a listing is read page after page (limit and marker), since a
#: service answers at most its own maximum (Nova's and Cinder's osapi_max_limit, 1000 by
#: default) to a request without them, and would hide the rest.
PAGE = 500


def _pages(api, service: str, path: str, key: str) -> list[dict[str, Any]]:
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


def inventory(api, kind: str) -> list[Resource]:
    if kind == "vms":
        servers = _pages(api, "compute", "/servers/detail", "servers")
        return [Resource("vm", s["id"], str(s.get("status", "?")).lower(), s.get("created"),
                         _strings(s.get("metadata")),
                         {"name": s.get("name"), "flavor": (s.get("flavor") or {}).get("original_name")
                          or (s.get("flavor") or {}).get("id"),
                          "zone": s.get("OS-EXT-AZ:availability_zone"),
                          "addresses": {net: [a.get("addr") for a in addrs]
                                        for net, addrs in (s.get("addresses") or {}).items()}})
                for s in servers if "agent_id" in (s.get("metadata") or {})]
    if kind == "disks":
        volumes = _pages(api, "block-storage", "/volumes/detail", "volumes")
        return [Resource("disk", v["id"], v.get("status", "?"), v.get("created_at"), _strings(v.get("metadata")),
                         {"name": v.get("name"), "size_gib": v.get("size"), "type": v.get("volume_type"),
                          "zone": v.get("availability_zone"),
                          "attached_to": next((a.get("server_id") for a in v.get("attachments") or []), None)})
                for v in volumes
                if v.get("description") == DISK_DESCRIPTION or (v.get("metadata") or {}).get("director")]
    if kind == "snapshots":
        snapshots = _pages(api, "block-storage", "/snapshots/detail", "snapshots")
        return [Resource("snapshot", s["id"], s.get("status", "?"), s.get("created_at"), _strings(s.get("metadata")),
                         {"volume": s.get("volume_id"), "size_gib": s.get("size"), "description": s.get("description")})
                for s in snapshots]
    images = _pages(api, "image", "/images", "images")
    return [Resource("stemcell", i["id"], i.get("status", "?"), i.get("created_at"),
                     {k: str(v) for k, v in i.items() if k in ("version", "os_distro", "director_uuid")},
                     {"name": i.get("name"), "size_bytes": i.get("size"), "visibility": i.get("visibility")})
            for i in images if i.get("version") is not None]  # create_stemcell sets the stemcell's version


def light_stemcell(api, stemcell_cid: str) -> Resource | None:
    """A light stemcell's cid ("<image id> light"): the Glance image it names."""
    image_id = stemcell_cid.removesuffix(" light")
    response = api.request("image", "GET", f"/images/{urllib.parse.quote(image_id, safe='')}", ok=(404,))
    if response.status_code == 404:
        return None
    image = response.json()
    return Resource("stemcell", stemcell_cid, image.get("status", "?"), image.get("created_at"), {},
                    {"light": True, "image": image_id, "name": image.get("name"),
                     "visibility": image.get("visibility")})


def available(api, offer: str) -> list[Offer]:
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
