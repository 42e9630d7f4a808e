"""Names the vSphere modules share: the extraConfig keys that say whose a VM is, and the
folder snapshots are kept in. Here, not in vms/vms.py or vms/disks.py, so that a reader of VMs or
disks (inventory.py, `cpi list`, `cpi orphans`) takes two strings without importing the
modules that make and delete them."""

from __future__ import annotations

#: extraConfig keys that say whose a VM is (invisible in the vSphere client, free to set in the clone)
ORIGIN_KEYS = {"agent_id": "bosh.agent_id", "director_uuid": "bosh.director_uuid"}

#: the folder, beside the persistent disks (disk_path), that holds the snapshots' copies
SNAPSHOTS = "snapshots"
