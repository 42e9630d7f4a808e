"""A director that switches from the official vSphere CPI keeps what it made (#25): its
stemcell copies (`sc-<uuid> %2f <datastore moid>`), and its VMs, which carry none of this
CPI's `bosh.*` extraConfig keys. The test makes them in those shapes with pyVmomi, as the
official CPI leaves them, then drives bin/cpi on them: the copy is cloned from rather than
copied again, the VM is found, rebooted, tagged, given and relieved of a disk and deleted,
and delete_stemcell removes the copy with the rest. `cpi list` shows the VM with the agent
of its settings, and `cpi orphans` never takes it for an orphan of this director."""

from __future__ import annotations

import json
import re

from tests.lifecycle.test_operator_see import cli
from tests.vsphere import target as vsphere_target
from tests.vsphere.test_vsphere_cloud import VM_TYPE, _datacenter, network, vm_of


def templates(si) -> dict[str, object]:
    return vsphere_target.Vcenter(None, si).vms(vsphere_target.TEMPLATE_FOLDER)


def official_copy(si, stemcell_cid: str, datastore_name: str):
    """The stemcell's copy on `datastore_name` as the official CPI makes it: a clone in the
    template folder named after the datastore's managed object id, with a snapshot."""
    from pyVim.task import WaitForTask
    from pyVmomi import vim

    source = templates(si)[stemcell_cid]
    datacenter = si.content.searchIndex.FindByInventoryPath(vsphere_target.DATACENTER)
    datastore = next(d for d in datacenter.datastore if d.name == datastore_name)
    pool = source.resourcePool
    # a vCenter's datastore ids are `datastore-<n>`; the simulator's are file paths, which a
    # VM name cannot hold: a vCenter's shape, as this CPI finds a copy by where it is
    name = f"{stemcell_cid} %2f datastore-{1000 + int(datastore_name[-1])}"
    spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(datastore=datastore, pool=pool), powerOn=False,
                            template=False)
    WaitForTask(source.CloneVM_Task(folder=source.parent, name=name, spec=spec))
    copy = templates(si)[name]
    WaitForTask(copy.CreateSnapshot_Task(name="initial", description="", memory=False, quiesce=False))
    return name


def strip_origin(vm) -> None:
    """Remove the `bosh.*` extraConfig keys this CPI sets (an empty value removes a key)."""
    from pyVim.task import WaitForTask
    from pyVmomi import vim

    keys = [o.key for o in vm.config.extraConfig if o.key.startswith("bosh.")]
    assert keys, "this CPI's VMs carry bosh.* keys"
    WaitForTask(vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(
        extraConfig=[vim.option.OptionValue(key=key, value="") for key in keys])))
    assert not [o.key for o in vm.config.extraConfig if o.key.startswith("bosh.")]


def test_what_the_official_cpi_made_is_used_and_removed_as_this_cpi_s_own(cloud, si, tmp_path):
    cpi = cloud.cpi()
    first = templates(si)
    origin = next(iter(first[cloud.stemcell].datastore)).name
    other = "LocalDS_1" if origin == "LocalDS_0" else "LocalDS_0"
    copy = official_copy(si, cloud.stemcell, other)
    on_other = cloud.cpi(datacenters=[{**_datacenter(), "datastore_pattern": f"^{other}$",
                                       "persistent_datastore_pattern": f"^{other}$"}])

    made = on_other.call("create_vm", "agent-switch", cloud.stemcell, VM_TYPE, network("10.0.0.90"), [], {})
    assert made.error is None, made.error
    vm_cid = made.result[0]
    try:
        assert re.search(rf"cloning {vm_cid} from {re.escape(copy)} ", made.log), made.log
        assert set(templates(si)) == {cloud.stemcell, copy}  # no second copy on that datastore
        vm = vm_of(si, vm_cid)
        strip_origin(vm)  # now a VM as the official CPI makes it

        listed = {vm["cid"]: vm for vm in json.loads(cli(on_other, "list", "vms", "--json").stdout)}
        assert listed[vm_cid]["tags"]["agent_id"] == "agent-switch"
        assert "director_uuid" not in listed[vm_cid]["tags"]
        # a director that knows none of these: all it tagged is orphaned
        (tmp_path / "known.json").write_text(json.dumps(["vm-of-another-deployment"]))
        orphans = cli(on_other, "orphans", "--json", "--director-uuid", on_other.director_uuid, "--known",
                      str(tmp_path / "known.json"))
        assert orphans.returncode == 0, orphans.stderr
        assert vm_cid not in {orphan["cid"] for orphan in json.loads(orphans.stdout)}
        assert on_other("has_vm", vm_cid) is True
        disk_cid = on_other("create_disk", 1024, {}, vm_cid)
        on_other("attach_disk", vm_cid, disk_cid)
        assert on_other("get_disks", vm_cid) == [disk_cid]
        on_other("set_vm_metadata", vm_cid, {"deployment": "dep", "job": "web", "index": "0"})
        names = {f.key: f.name for f in si.content.customFieldsManager.field or []}
        values = {names.get(v.key): v.value for v in vm_of(si, vm_cid).customValue or []}
        assert values["deployment"] == "dep" and values["job"] == "web"
        on_other("reboot_vm", vm_cid)
        on_other("detach_disk", vm_cid, disk_cid)
        assert on_other("get_disks", vm_cid) == []
        on_other("delete_disk", disk_cid)
        assert on_other("has_disk", disk_cid) is False
    finally:
        on_other("delete_vm", vm_cid)
    assert vm_of(si, vm_cid) is None
    cpi("delete_stemcell", cloud.stemcell)
    cloud.stemcell = None  # deleted here: the fixture has nothing left to delete
    assert templates(si) == {}
