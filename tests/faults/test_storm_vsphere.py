"""A storm against VMware's simulator behind a fault proxy (HTTPS in front of HTTPS): 16 CPI
processes at once, 30% injected faults — the vCenter's reverse proxy busy (503), connections
dropped before the request reached it, answers lost after it carried the request out, and
(a tenth of them) its session dropped (a SOAP NotAuthenticated). Every call must succeed, and afterwards the
vCenter holds nothing the lifecycles made. Then create_vm killed at random moments leaves
only VMs that say whose they are, which delete_vm removes.
"""

from __future__ import annotations

import json
import random
import uuid
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.faults import storm
from tests.faults.proxy import FaultProxy
from tests.support.runner import Cpi
from tests.vsphere import target as vsphere_target

WORKERS = 16


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    made = vsphere_target.simulated(tmp_path_factory)  # faults need a vCenter of the test's own
    yield made
    made.cleanup()


def proxied_config(cloud, proxy: FaultProxy, tmp_path: Path) -> Path:
    path = vsphere_target.write_config(tmp_path / f"cpi-{uuid.uuid4().hex[:8]}.json", cloud.site.server,
                                       host=proxy.url.split("://", 1)[1], retry_budget_seconds=300)
    config = json.loads(path.read_text())
    config["cloud"]["properties"]["throttle"] = {"state_dir": str(tmp_path / "throttle")}
    path.write_text(json.dumps(config))
    return path


def test_16_processes_through_faults(cloud, tmp_path):
    stemcell = Cpi(cloud.config_path)("create_stemcell", *cloud.stemcell_args())
    try:
        with ExitStack() as stack:
            proxy = stack.enter_context(FaultProxy(f"https://{cloud.site.server.host}:{cloud.site.server.port}",
                                                   flavor="vsphere", fault_rate=0.3, retry_after=1, seed=25,
                                                   # a dropped session is a tenth of the faults (3%
                                                   # of requests): more, and several in a row are
                                                   # a vCenter refusing sessions, which fails calls
                                                   kinds=("unavailable", "drop", "lost") * 3 + ("session",)))
            cpi = Cpi(proxied_config(cloud, proxy, tmp_path))
            vms = storm.lifecycles(cpi, stemcell, cloud.vm_cloud_properties(), cloud.manual_network,
                                   workers=WORKERS)
            stats = dict(proxy.stats)
            lost_mutations = sum(1 for seen in proxy.seen if seen.status is None and seen.action.endswith("_Task"))
        assert len(set(vms)) == WORKERS
        # the vCenter really was hostile, and the CPI rode it out
        assert stats["unavailable"] > 10 and stats["session"] > 10 and stats["drop"] > 10 and stats["lost"] > 10, stats
        assert lost_mutations > 5, stats  # tasks whose start the CPI could not be sure of
    finally:
        Cpi(cloud.config_path)("delete_stemcell", stemcell)
    assert cloud.leftovers() == {}


def test_create_vm_killed_midway_leaves_only_vms_that_say_whose_they_are(cloud, tmp_path):
    stemcell = Cpi(cloud.config_path)("create_stemcell", *cloud.stemcell_args())
    cpi = Cpi(cloud.config_path, director_uuid="director-storm")
    try:
        for attempt, moment in enumerate(random.Random(7).uniform(0.4, 1.6) for _ in range(4)):
            request = cpi.request("create_vm", f"agent-killed-{attempt}", stemcell, cloud.vm_cloud_properties(),
                                  cloud.manual_network(40 + attempt), [], {})
            storm.kill_midway(cloud.config_path, request, moment)
        assert cpi("has_vm", f"vm-{uuid.uuid4()}") is False  # the CPI still works
        left = cloud.vcenter.vms(vsphere_target.VM_FOLDER)
        assert left, "no kill landed after the clone: adjust the moments"
        for vm_cid, vm in left.items():
            extra = {o.key: o.value for o in vm.config.extraConfig or []}
            assert extra.get("bosh.agent_id", "").startswith("agent-killed-"), (vm_cid, extra)
            assert extra.get("bosh.director_uuid") == "director-storm", (vm_cid, extra)
            cpi("delete_vm", vm_cid)
    finally:
        cpi("delete_stemcell", stemcell)
    assert cloud.leftovers() == {}


def test_a_lost_answer_to_a_task_is_looked_into_not_blindly_repeated(cloud, tmp_path):
    """The clone's answer lost after the vCenter made the VM: create_vm finds it by its name
    and goes on (one clone, one VM). The attach's request dropped before the vCenter saw it:
    attach_disk finds the disk not attached and sends it again (one disk on the VM)."""
    stemcell = Cpi(cloud.config_path)("create_stemcell", *cloud.stemcell_args())
    try:
        with FaultProxy(f"https://{cloud.site.server.host}:{cloud.site.server.port}", flavor="vsphere") as proxy:
            cpi = Cpi(proxied_config(cloud, proxy, tmp_path))
            proxy.inject(r"^CloneVM_Task$", "lost")
            created = cpi.call("create_vm", "agent-lost", stemcell, cloud.vm_cloud_properties(),
                               cloud.manual_network(60), [], {})
            vm_cid = created.result[0]
            assert "looking whether the vCenter carried it out" in created.log and ": it did\n" in created.log
            # the first clone (the stemcell's copy onto the VM's datastore, or the VM) carried out,
            # its answer lost, and not sent again: one clone request per VM made
            copies = [name for name in cloud.vcenter.vms(vsphere_target.TEMPLATE_FOLDER) if " %2f " in name]
            assert proxy.count(r"^CloneVM_Task$") == 1 + len(copies)
            assert list(cloud.vcenter.vms(vsphere_target.VM_FOLDER)) == [vm_cid]
            disk_cid = cpi("create_disk", 1024, {}, vm_cid)
            proxy.inject(r"^ReconfigVM_Task$", "drop")
            attached = cpi.call("attach_disk", vm_cid, disk_cid)
            assert attached.result and ": it did not; starting it again" in attached.log
            # the attach dropped, the attach again, then the disk's record (records.py)
            assert [s.status for s in proxy.seen if s.action == "ReconfigVM_Task"][-3:] == [None, 200, 200]
            assert cpi("get_disks", vm_cid) == [disk_cid]
            cpi("delete_vm", vm_cid)
            cpi("delete_disk", disk_cid)
    finally:
        Cpi(cloud.config_path)("delete_stemcell", stemcell)
    assert cloud.leftovers() == {}
