"""The model of the official stemcells' agent the switching tests read settings with
(tests/support/bosh_agent.py): it must refuse what bosh-agent refuses, or those tests would
pass on settings an agent cannot boot from."""

from __future__ import annotations

import base64
import json

import pytest

from tests.support import bosh_agent

GOOD = {"agent_id": "a-1", "vm": {"name": "vm-1"}, "mbus": "nats://x", "ntp": ["ntp"],
        "networks": {"default": {"type": "manual", "ip": "10.0.0.5", "netmask": "255.255.255.0", "prefix": "32",
                                 "default": ["dns", "gateway"], "dns": ["10.0.0.2"], "use_dhcp": True,
                                 "cloud_properties": {"subnet": "s"}}},
        "disks": {"system": "/dev/sda", "ephemeral": "/dev/sdb", "persistent": {}},
        "env": {"bosh": {"password": "x", "swap_size": 0, "mbus": {"urls": ["nats://y"]}}},
        "dns": {"nameserver": ["10.0.0.2"]}, "server": {"name": "vm-1"}}


def test_settings_as_json_or_base64_are_read():
    assert bosh_agent.read_user_data(json.dumps(GOOD)) == GOOD
    assert bosh_agent.read_user_data(base64.urlsafe_b64encode(json.dumps(GOOD).encode()).rstrip(b"=")) == GOOD


@pytest.mark.parametrize(("path", "value", "why"), [
    (("networks", "default", "prefix"), 32, "not a JSON string"),
    (("disks", "persistent"), [], "not a JSON object"),
    (("networks", "default", "use_dhcp"), "true", "not true or false"),
    (("env", "bosh", "swap_size"), -1, "unsigned"),
    (("ntp",), "pool.ntp.org", "not a JSON array"),
    (("dns", "nameserver"), [1], "not a JSON string"),
    (("agent_id",), "", "no agent_id"),
])
def test_what_the_agent_refuses_is_refused(path, value, why):
    doc = json.loads(json.dumps(GOOD))
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(AssertionError, match=why):
        bosh_agent.read_user_data(json.dumps(doc))


def test_disk_hints_and_where_the_agent_looks():
    disk = bosh_agent.disk_settings("vol-0123456789abcdef0", "/dev/sdf")
    assert bosh_agent.paths_tried(disk) == ["/dev/sdf", "/dev/vdf", "/dev/xvdf"]
    assert bosh_agent.by_id_names(disk, bosh_agent.AWS_DISK_ID) == \
        "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123456789abcdef0"
    assert bosh_agent.disk_settings("d", {"path": "/dev/sdc", "volume_id": "3"})["volume_id"] == "3"
    with pytest.raises(AssertionError):
        bosh_agent.disk_settings("d", {"path": 3})
    with pytest.raises(AssertionError):
        bosh_agent.disk_settings("d", 3)
