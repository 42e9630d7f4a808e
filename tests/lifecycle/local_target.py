"""The embedded local cloud as a lifecycle target: checks look at the state dir's files
and the VM processes themselves."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

from tests.lifecycle.targets import Target


class LocalTarget(Target):
    name = "local"

    def __init__(self, workdir: Path, **local_properties):
        self.workdir = workdir
        self.state_dir = workdir / "state"
        config = {
            "cloud": {
                "plugin": "local",
                "properties": {
                    "local": {"state_dir": str(self.state_dir), **local_properties},
                    "agent": {"mbus": "nats://nats:nats-secret-pw@127.0.0.1:4222", "ntp": ["0.pool.ntp.org"]},
                },
            }
        }
        config_path = workdir / "cpi.json"
        config_path.write_text(json.dumps(config))
        super().__init__(config_path)
        self.image = workdir / "image"
        self.image.write_bytes(b"stemcell-root-image\n" * 100)

    def stemcell_args(self):
        return [str(self.image), {"name": "bosh-dummy-stemcell", "version": "1.0", "infrastructure": "local"}]

    def vm_cloud_properties(self):
        return {"cpu": 1, "ram": 512, "ephemeral_disk": {"size": 64}}

    def manual_network(self, index: int):
        return {
            "default": {
                "type": "manual",
                "ip": f"10.244.{index // 250}.{index % 250 + 2}",
                "netmask": "255.255.0.0",
                "gateway": "10.244.0.1",
                "dns": ["10.244.0.2"],
                "default": ["dns", "gateway"],
                "cloud_properties": {},
            }
        }

    def dynamic_network(self):
        return {"default": {"type": "dynamic", "default": ["dns", "gateway"], "cloud_properties": {}}}

    # -- checks
    def vm_dir(self, vm_cid: str) -> Path:
        return self.state_dir / "vms" / vm_cid

    def vm_record(self, vm_cid: str) -> dict:
        return json.loads((self.vm_dir(vm_cid) / "vm.json").read_text())

    def settings(self, vm_cid: str) -> dict:
        return json.loads((self.vm_dir(vm_cid) / "cpi-agent-env.json").read_text())

    def disk_file(self, disk_cid: str) -> Path:
        return self.state_dir / "disks" / disk_cid / "disk.img"

    def disk_size_mib(self, disk_cid: str) -> int:
        return self.disk_file(disk_cid).stat().st_size // (1024 * 1024)

    def vm_exists(self, vm_cid: str) -> bool:
        if not (self.vm_dir(vm_cid) / "vm.json").exists():
            return False
        return pid_alive(self.vm_record(vm_cid)["pid"])

    def disk_attached_to(self, disk_cid: str) -> str | None:
        return json.loads((self.state_dir / "disks" / disk_cid / "disk.json").read_text())["vm_cid"]

    def stemcell_tags(self, stemcell_cid: str) -> dict[str, str]:
        return json.loads((self.state_dir / "stemcells" / stemcell_cid / "stemcell.json").read_text())["tags"]

    def offered_resources(self, vm_cloud_properties):
        # the local cloud's VM is what its cloud_properties say (no catalogue of types)
        return {"cpu": vm_cloud_properties["cpu"], "ram": vm_cloud_properties["ram"],
                "ephemeral_disk": vm_cloud_properties["ephemeral_disk"]["size"]}

    def leftovers(self):
        found = {}
        for kind in ("vms", "disks", "snapshots", "stemcells", "ips"):
            directory = self.state_dir / kind
            entries = sorted(p.name for p in directory.iterdir()) if directory.exists() else []
            if entries:
                found[kind] = entries
        return found

    def cleanup(self):
        vms = self.state_dir / "vms"
        for record in vms.glob("*/vm.json") if vms.exists() else []:
            pid = json.loads(record.read_text()).get("pid")
            if pid and pid_alive(pid):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass  # exited between the check and the kill
        shutil.rmtree(self.state_dir, ignore_errors=True)


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def make(tmp_path_factory) -> LocalTarget:
    return LocalTarget(tmp_path_factory.mktemp("local-cloud"))
