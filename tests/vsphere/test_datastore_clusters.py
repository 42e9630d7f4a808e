"""Datastore clusters (Storage DRS), through bin/cpi against the simulator: the datastores of
the clusters a global cluster pattern matches, or a vm_type's or disk_type's `datastores`
names, take VMs and disks, those of a cluster whose Storage DRS is off do not, and a pattern
or name that leaves no datastore fails the call with CloudError before anything is made
(#25).

The simulator is shared by the session's vsphere tests: the `pods` fixture puts LocalDS_1 in
a datastore cluster with Storage DRS on and LocalDS_0 in one with it off, and afterwards
moves them back and destroys both clusters, checking that the inventory is as it was.
"""

from __future__ import annotations

import base64
import json

import pytest

from tests.vsphere import target as vsphere_target
from tests.vsphere.test_vsphere_cloud import VM_TYPE, _datacenter, network, vm_of

#: the stemcell image and the cloud that cleans up after itself, as the other vsphere tests have them
ON, OFF = "POD_ON", "POD_OFF"
MEMBERS = {ON: "LocalDS_1", OFF: "LocalDS_0"}


@pytest.fixture
def pods(si):
    """Two datastore clusters in DC0's datastore folder: POD_ON (Storage DRS on) holding
    LocalDS_1, POD_OFF (off) holding LocalDS_0; gone afterwards, the datastores back."""
    from pyVim.task import WaitForTask
    from pyVmomi import vim

    datacenter = si.content.searchIndex.FindByInventoryPath(vsphere_target.DATACENTER)
    folder = datacenter.datastoreFolder
    datastores = {d.name: d for d in datacenter.datastore}
    made = {}
    try:
        for name, member in MEMBERS.items():
            made[name] = folder.CreateStoragePod(name=name)
            WaitForTask(made[name].MoveIntoFolder_Task(list=[datastores[member]]))
            WaitForTask(si.content.storageResourceManager.ConfigureStorageDrsForPod_Task(
                pod=made[name], spec=vim.storageDrs.ConfigSpec(podConfigSpec=vim.storageDrs.PodConfigSpec(
                    enabled=name == ON)), modify=True))
        assert [d.name for d in made[ON].childEntity] == ["LocalDS_1"]
        yield made
    finally:
        WaitForTask(folder.MoveIntoFolder_Task(list=list(datastores.values())))
        for pod in made.values():
            WaitForTask(pod.Destroy_Task())
        assert all(d.parent == folder for d in datastores.values())
        assert not [c for c in folder.childEntity if isinstance(c, vim.StoragePod)]


def clustered(**keys) -> dict:
    """cpi.json's datacenter with these datastore keys instead of its patterns."""
    datacenter = {key: value for key, value in _datacenter().items() if key != "datastore_pattern"}
    return {"datacenters": [{**datacenter, **keys}]}


def disk_files(si, vm_cid: str) -> list[str]:
    from pyVmomi import vim

    return [d.backing.fileName for d in vm_of(si, vm_cid).config.hardware.device
            if isinstance(d, vim.vm.device.VirtualDisk)]


def datastore_of(path: str) -> str:
    return path[1:].partition("]")[0]


def test_the_datastores_of_matching_clusters_with_storage_drs_on_take_vms_and_disks(pods, cloud, si):
    cpi = cloud.cpi(**clustered(datastore_cluster_pattern="^POD_", persistent_datastore_cluster_pattern="^POD_"))
    vm_cid = cpi("create_vm", "agent-pod", cloud.stemcell, VM_TYPE, network("10.0.0.100"), [], {})[0]
    try:
        vm = vm_of(si, vm_cid)
        assert [d.name for d in vm.datastore] == ["LocalDS_1"]  # POD_OFF's LocalDS_0 is left out
        ephemeral = next(f for f in disk_files(si, vm_cid) if f.endswith("/ephemeral_disk.vmdk"))
        assert datastore_of(ephemeral) == "LocalDS_1"
        disk_cid = cpi("create_disk", 1024, {}, vm_cid)
        assert "." not in disk_cid  # the global pattern: nothing in the cid, as in the official CPI
        attached = cpi.call("attach_disk", vm_cid, disk_cid)
        assert attached.error is None, attached.error
        assert "moving" not in attached.log  # it is where the pattern wants it
        assert f"[LocalDS_1] {vsphere_target.DISK_PATH}/{disk_cid}.vmdk" in disk_files(si, vm_cid)
        assert "datastore cluster(s) POD_OFF left out: their Storage DRS is off" in attached.log
        cpi("detach_disk", vm_cid, disk_cid)
        cpi("delete_disk", disk_cid)
    finally:
        cpi("delete_vm", vm_cid)


def test_a_vm_type_and_a_disk_type_naming_a_cluster_put_their_disks_on_its_datastores(pods, cloud, si):
    cpi = cloud.cpi(**clustered(datastore_pattern="^LocalDS_0$", persistent_datastore_pattern="^LocalDS_0$"))
    in_pod = {"datastores": [{"clusters": [{ON: {}}]}]}
    vm_cid = cpi("create_vm", "agent-pod-type", cloud.stemcell, {**VM_TYPE, **in_pod}, network("10.0.0.101"), [], {})[0]
    try:
        assert [d.name for d in vm_of(si, vm_cid).datastore] == ["LocalDS_1"]
        disk_cid = cpi("create_disk", 1024, in_pod, None)
        value, _, encoded = disk_cid.partition(".")
        carried = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
        assert carried == {"target_datastore_pattern": "^(LocalDS_1)$"}  # the official CPI's cid
        cpi("attach_disk", vm_cid, disk_cid)
        assert f"[LocalDS_1] {vsphere_target.DISK_PATH}/{value}.vmdk" in disk_files(si, vm_cid)
        cpi("detach_disk", vm_cid, disk_cid)
        cpi("delete_disk", disk_cid)
    finally:
        cpi("delete_vm", vm_cid)


def test_clusters_that_leave_no_datastore_fail_the_call_before_anything_is_made(pods, cloud, si, vcsim):
    cloud.cpi()  # the stemcell, on the usual datastores
    vcenter = vsphere_target.Vcenter(vcsim, si)

    def made() -> tuple[dict, dict]:
        """The VMs of the VM folder and the files of disk_path on each datastore."""
        return (vcenter.vms(vsphere_target.VM_FOLDER),
                {d.name: vcenter.files(d, vsphere_target.DISK_PATH) for d in vcenter.datastores()})

    before = made()
    no_pod = cloud.cpi(**clustered(datastore_cluster_pattern="^NOPOD", persistent_datastore_cluster_pattern="^NOPOD"))
    plain = cloud.cpi()
    cases = [
        (no_pod, "create_vm", VM_TYPE,
         ("datastore_cluster_pattern '^NOPOD' matches no datastore cluster with Storage DRS on and a datastore in "
          "datacenter 'DC0' (its datastore clusters: POD_OFF (Storage DRS off), POD_ON), and datastore_pattern is not "
          "set: no datastore for ephemeral disks")),
        (no_pod, "create_disk", {},
         "persistent_datastore_cluster_pattern '^NOPOD' matches no datastore cluster"),
        (plain, "create_vm", {**VM_TYPE, "datastores": [{"clusters": [{"NOPOD": {}}]}]},
         "datastore cluster(s) 'NOPOD' not found in datacenter 'DC0'"),
        (plain, "create_vm", {**VM_TYPE, "datastores": [{"clusters": [{OFF: {}}]}]},
         ("the vm_type datastores: no datastore to put the disk on: the datastore cluster(s) POD_OFF have Storage "
          "DRS off or no datastores")),
        (plain, "create_disk", {"datastores": [{"clusters": [{OFF: {}}]}]},
         "the disk_type datastores: no datastore to put the disk on"),
    ]
    for cpi, method, cloud_properties, message in cases:
        if method == "create_vm":
            response = cpi.call("create_vm", "agent-no-pod", cloud.stemcell, cloud_properties, network("10.0.0.102"),
                                [], {})
        else:
            response = cpi.call("create_disk", 1024, cloud_properties, None)
        assert response.error is not None and response.error["type"] == "Bosh::Clouds::CloudError", response.error
        assert message in response.error["message"], response.error["message"]
    assert made() == before  # no VM, no disk file


def test_validate_online_names_the_datastore_clusters_that_are_not_there_or_off(pods, vcsim, tmp_path):
    """`cpi validate --online`: the clusters a cloud-config names must exist, and cpi.json's
    cluster patterns must match one with Storage DRS on, as create_vm and create_disk need."""
    import subprocess
    import sys

    import yaml

    config = vsphere_target.write_config(tmp_path / "cpi.json", vcsim, **clustered(
        datastore_cluster_pattern="^POD_ON$", persistent_datastore_cluster_pattern="^POD_OFF$"))
    cloud_config = {"vm_types": [{"name": "web", "cloud_properties": {**VM_TYPE, "datastores": [
        {"clusters": [{ON: {}}, {"NOPOD": {}}]}]}}],
                    "disk_types": [{"name": "d", "disk_size": 1024, "cloud_properties": {"datastores": [
                        "LocalDS_0", {"clusters": [{OFF: {}}]}]}}]}
    path = tmp_path / "cloud-config.yml"
    path.write_text(yaml.safe_dump(cloud_config))
    run = subprocess.run([sys.executable, "-m", "cpi.cli", "validate", str(path), "--config", str(config), "--online",
                          "--json"], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in run.stderr, run.stderr
    found = {f["path"]: f["problem"] for f in json.loads(run.stdout)["findings"]}
    listed = "(POD_OFF (Storage DRS off), POD_ON)"
    assert found == {
        "vm_types[name=web].cloud_properties.datastores[0].clusters[1]":
            f"datastore cluster 'NOPOD' does not exist in datacenter 'DC0' {listed}",
        "cpi.json: cloud.properties.vsphere.datacenters[0].persistent_datastore_cluster_pattern":
            f"'^POD_OFF$' matches no datastore cluster with Storage DRS on and a datastore in 'DC0' {listed}"}, found
    assert run.returncode == 1
