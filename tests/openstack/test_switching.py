"""A director that switches from bosh-openstack-cpi keeps managing what that CPI made (#22).

On the loopback OpenStack services, a VM and a persistent disk are made with the API calls
and shapes bosh-openstack-cpi uses (read from its source, not run: it needs Ruby gems this
machine cannot install): a Neutron port of its own on the network, a server booted on it
with the agent settings in user_data, a plain Cinder volume attached through Nova, none of
this CPI's metadata. This CPI then does what a director does after the switch.
"""

from __future__ import annotations

import base64
import json
import time
import uuid


def wait_for(check, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.5)


def made_the_official_way(cloud, client) -> tuple[str, str, str]:
    port = client.request("network", "POST", "/v2.0/ports",
                          json={"port": {"network_id": cloud.net_id, "name": f"port-{uuid.uuid4()}"}})["port"]
    flavors = client.get("compute", "/flavors")["flavors"]
    flavor = next(f["id"] for f in flavors if f["name"] == cloud.env["flavor"])
    settings = {"agent_id": f"agent-{uuid.uuid4()}", "vm": {"name": "vm-official"}, "env": {"bosh": {}}}
    server = {"name": f"vm-{uuid.uuid4()}", "imageRef": cloud.image_id, "flavorRef": flavor,
              "networks": [{"port": port["id"]}],
              "user_data": base64.b64encode(json.dumps(settings).encode()).decode()}
    if cloud.env.get("keypair"):
        server["key_name"] = cloud.env["keypair"]["name"]
    vm_cid = client.request("compute", "POST", "/servers", json={"server": server})["server"]["id"]
    wait_for(lambda: (client.server(vm_cid) or {}).get("status") == "ACTIVE", f"server {vm_cid} ACTIVE")
    disk_cid = client.request("block-storage", "POST", "/volumes",
                              json={"volume": {"size": 1, "name": f"volume-{uuid.uuid4()}"}})["volume"]["id"]
    wait_for(lambda: (client.volume(disk_cid) or {}).get("status") == "available", f"volume {disk_cid} available")
    client.request("compute", "POST", f"/servers/{vm_cid}/os-volume_attachments",
                   json={"volumeAttachment": {"volumeId": disk_cid}})
    wait_for(lambda: (client.volume(disk_cid) or {}).get("status") == "in-use", f"volume {disk_cid} in-use")
    return vm_cid, disk_cid, port["id"]


def test_this_cpi_manages_what_the_official_cpi_made(cloud, client, cpi):
    vm_cid, disk_cid, port_id = made_the_official_way(cloud, client)
    try:
        assert cpi("has_vm", vm_cid) is True
        assert cpi("has_disk", disk_cid) is True
        assert cpi("get_disks", vm_cid) == [disk_cid]
        cpi("set_vm_metadata", vm_cid, {"deployment": "cf", "job": "router", "index": "0"})
        assert client.server(vm_cid)["metadata"]["job"] == "router"
        cpi("detach_disk", vm_cid, disk_cid)
        assert cpi("get_disks", vm_cid) == []
        hint = cpi("attach_disk", vm_cid, disk_cid)
        assert hint and cpi("get_disks", vm_cid) == [disk_cid]
        cpi("detach_disk", vm_cid, disk_cid)
        cpi("delete_vm", vm_cid)
        assert cpi("has_vm", vm_cid) is False
        cpi("delete_disk", disk_cid)
        assert cpi("has_disk", disk_cid) is False
    finally:
        # what the test made itself and the CPI was not asked to remove (a failed step)
        client.request("compute", "DELETE", f"/servers/{vm_cid}", ok=(204, 404))
        wait_for(lambda: client.server(vm_cid) is None or client.server(vm_cid).get("status") == "DELETED",
                 f"server {vm_cid} gone")
        client.request("block-storage", "DELETE", f"/volumes/{disk_cid}", ok=(202, 400, 404))
        left_port = client.request("network", "GET", f"/v2.0/ports/{port_id}", ok=(200, 404))
        client.request("network", "DELETE", f"/v2.0/ports/{port_id}", ok=(204, 404))
    assert not isinstance(left_port, dict) or "port" not in left_port, \
        "delete_vm left the port the official CPI made for the VM (it deletes its ports with the VM)"
