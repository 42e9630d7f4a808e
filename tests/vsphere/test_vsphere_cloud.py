"""What the vsphere cloud does with the official CPI's settings, through bin/cpi against the
simulator, checked in the vCenter itself: the agent's settings on the CD-ROM, human-readable
names, CPU reservations, DRS rules and groups (made, joined, and deleted with their last
VM), IP conflicts refused, a disk moved to where the VM's pattern wants it, http_logging.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import urllib.request

from cpi.clouds.vsphere.vms import iso
from tests.vsphere import target as vsphere_target

VM_TYPE = {"cpu": 2, "ram": 512, "disk": 1024}
ENV = {"bosh": {"group": "d-dep-web", "groups": ["d", "dep", "web"]}}


def network(ip: str = "10.0.0.50") -> dict:
    return {"default": {"type": "manual", "ip": ip, "netmask": "255.255.255.0", "gateway": "10.0.0.1",
                        "dns": ["10.0.0.2"], "default": ["dns", "gateway"],
                        "cloud_properties": {"name": vsphere_target.NETWORK}}}


def vm_of(si, vm_cid: str):
    return si.content.searchIndex.FindByInventoryPath(f"DC0/vm/{vsphere_target.VM_FOLDER}/{vm_cid}")


def download(si, vcsim, datastore_path: str) -> bytes:
    """A datastore file (`[ds] path`) through the vCenter's file service, as the test's own session."""
    datastore, _, path = datastore_path[1:].partition("] ")
    url = f"https://{vcsim.host}:{vcsim.port}/folder/{path}?dcPath=DC0&dsName={datastore}"
    request = urllib.request.Request(url, headers={"Cookie": si._stub.cookie})
    with urllib.request.urlopen(request, context=ssl._create_unverified_context(), timeout=30) as answer:
        return answer.read()


def test_the_agent_reads_its_settings_from_the_cd_rom_as_from_guestinfo(cloud, si, vcsim):
    cpi = cloud.cpi()
    vm_cid, networks = cpi("create_vm", "agent-env", cloud.stemcell, VM_TYPE, network(), [], ENV)
    try:
        vm = vm_of(si, vm_cid)
        from pyVmomi import vim

        cdrom = next(d for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualCdrom))
        assert cdrom.backing.fileName.endswith(f"{vm_cid}/env.iso") and cdrom.connectable.startConnected
        on_cd = json.loads(iso.read_env(download(si, vcsim, cdrom.backing.fileName)))
        extra = {o.key: o.value for o in vm.config.extraConfig}
        assert json.loads(base64.b64decode(extra["guestinfo.userdata"])) == on_cd
        assert on_cd["agent_id"] == "agent-env" and on_cd["vm"] == {"name": vm_cid, "id": vm._moId}
        mac = next(d for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualEthernetCard)).macAddress
        assert on_cd["networks"]["default"]["mac"] == mac == networks["default"]["mac"]
        assert on_cd["networks"]["default"]["ip"] == "10.0.0.50"
        disks = {d.unitNumber: d.backing.fileName for d in vm.config.hardware.device
                 if isinstance(d, vim.vm.device.VirtualDisk)}
        assert disks[int(on_cd["disks"]["system"])].endswith(".vmdk")
        assert disks[int(on_cd["disks"]["ephemeral"])].endswith(f"{vm_cid}/ephemeral_disk.vmdk")
        assert on_cd["env"] == ENV and on_cd["disks"]["persistent"] == {}
        assert (vm.config.hardware.numCPU, vm.config.hardware.memoryMB) == (2, 512)
        assert str(vm.runtime.powerState) == "poweredOn"
    finally:
        cpi("delete_vm", vm_cid)
    assert vm_of(si, vm_cid) is None


def test_human_readable_names_cpu_reservation_and_http_logging(cloud, si):
    cpi = cloud.cpi(enable_human_readable_name=True, cpu_reserve_full_mhz=True, http_logging=True,
                    default_hw_version=15)
    response = cpi.call("create_vm", "agent-named", cloud.stemcell, VM_TYPE, network(), [], ENV)
    vm_cid = response.result[0]
    try:
        assert re.fullmatch(r"web_dep_[0-9a-f]{12}", vm_cid), vm_cid
        assert cpi("has_vm", vm_cid) is True
        vm = vm_of(si, vm_cid)
        fastest = max(h.summary.hardware.cpuMhz for h in vm.resourcePool.owner.host)
        assert vm.config.cpuAllocation.reservation == 2 * fastest
        assert f"hardware upgrade of {vm_cid} to vmx-15: done" in response.log  # the stemcell has vmx-13
        newest = cloud.cpi(upgrade_hw_version=True)
        upgraded = newest.call("create_vm", "agent-newest", cloud.stemcell, VM_TYPE, network("10.0.0.52"), [], {})
        assert f"hardware upgrade of {upgraded.result[0]} to the newest version: done" in upgraded.log
        newest("delete_vm", upgraded.result[0])
        assert re.search(r"http_logging: POST 127\.0\.0\.1:\d+/sdk VirtualMachine\.CloneVM_Task: answered in",
                         response.log)
        assert json.loads(cpi.config_path.read_text())["cloud"]["properties"]["vsphere"]["password"] not in response.log
        plain = cloud.cpi()("create_vm", "agent-plain", cloud.stemcell, VM_TYPE, network("10.0.0.51"), [],
                            {"bosh": {"groups": ["d", "dép", "web"]}})[0]
        assert plain.startswith("vm-")  # not ASCII: the usual name
        cpi("delete_vm", plain)
    finally:
        cpi("delete_vm", vm_cid)


def test_drs_rules_and_groups_are_made_joined_and_deleted_with_their_last_vm(cloud, si):
    from pyVim.task import WaitForTask
    from pyVmomi import vim

    cluster = si.content.searchIndex.FindByInventoryPath("DC0/host/DC0_C0")
    operation = vim.option.ArrayUpdateSpec.Operation
    WaitForTask(cluster.ReconfigureComputeResource_Task(spec=vim.cluster.ConfigSpecEx(groupSpec=[vim.cluster.GroupSpec(
        operation=operation.add, info=vim.cluster.HostGroup(name="fast-hosts", host=[cluster.host[0]]))]), modify=True))
    try:
        cpi = cloud.cpi(datacenters=[{**_datacenter(), "persistent_datastore_pattern": "^LocalDS_", "clusters": [
            {"DC0_C0": {"host_group": {"name": "fast-hosts", "drs_rule": "MUST"}}}]}],
            enable_auto_anti_affinity_drs_rules=True)
        vm_type = {**VM_TYPE, "vm_group": "web-vms"}
        made = [cpi("create_vm", f"agent-drs-{i}", cloud.stemcell, vm_type, network(f"10.0.0.{60 + i}"), [], ENV)[0]
                for i in range(2)]
        vms = [vm_of(si, cid) for cid in made]
        config = cluster.configurationEx
        groups = {g.name: g for g in config.group}
        rules = {r.name: r for r in config.rule}
        assert set(groups["web-vms"].vm) == set(vms) == set(groups["fast-hostsMUST_vm_group"].vm)
        tie = rules["fast-hostsMUST_vm_group_rule"]
        assert (tie.vmGroupName, tie.affineHostGroupName, tie.mandatory) == ("fast-hostsMUST_vm_group", "fast-hosts",
                                                                              True)
        assert set(rules["d-dep-web"].vm) == set(vms)  # the automatic anti-affinity rule, by instance group
        cpi("delete_vm", made[0])
        assert {g.name for g in cluster.configurationEx.group} >= {"web-vms", "fast-hostsMUST_vm_group"}
        cpi("delete_vm", made[1])
        config = cluster.configurationEx
        assert {g.name for g in config.group} == {"fast-hosts"}  # the VM groups went with their last VM
        assert "fast-hostsMUST_vm_group_rule" not in {r.name for r in config.rule}
    finally:
        config = cluster.configurationEx
        WaitForTask(cluster.ReconfigureComputeResource_Task(spec=vim.cluster.ConfigSpecEx(
            groupSpec=[vim.cluster.GroupSpec(operation=operation.remove, removeKey=g.name) for g in config.group],
            rulesSpec=[vim.cluster.RuleSpec(operation=operation.remove, removeKey=r.key) for r in config.rule]),
            modify=True))


def test_an_ip_another_vm_holds_on_the_same_network_is_refused(cloud, si):
    from pyVim.task import WaitForTask
    from pyVmomi import vim

    cpi = cloud.cpi()
    holder = si.content.searchIndex.FindByInventoryPath("DC0/vm/DC0_H0_VM0")  # a VM someone else made

    def guest_ip(ip: str) -> None:  # what VMware Tools would report of its guest (the simulator's way to say it)
        WaitForTask(holder.ReconfigVM_Task(spec=vim.vm.ConfigSpec(extraConfig=[
            vim.option.OptionValue(key="SET.guest.ipAddress", value=ip)])))

    guest_ip("10.0.0.70")
    try:
        assert "10.0.0.70" in holder.guest.net[0].ipAddress
        refused = cpi.call("create_vm", "agent-twin", cloud.stemcell, VM_TYPE, network("10.0.0.70"), [], {})
        assert refused.error["type"] == "Bosh::Clouds::VMCreationFailed" and not refused.error["ok_to_retry"]
        assert f"IP 10.0.0.70 is in use on '{vsphere_target.NETWORK}' by VM 'DC0_H0_VM0'" in refused.error["message"]
        folder = si.content.searchIndex.FindByInventoryPath(f"DC0/vm/{vsphere_target.VM_FOLDER}")
        assert folder is None or not folder.childEntity  # refused before anything was made
        allowed = cloud.cpi(ensure_no_ip_conflicts=False)
        twin = allowed("create_vm", "agent-twin", cloud.stemcell, VM_TYPE, network("10.0.0.70"), [], {})[0]
        allowed("delete_vm", twin)
    finally:
        guest_ip("")


def test_attach_moves_a_disk_to_where_the_pattern_wants_it_and_says_so(cloud, si):
    on_one = cloud.cpi(datacenters=[{**_datacenter(), "persistent_datastore_pattern": "^LocalDS_1$"}])
    on_zero = cloud.cpi(datacenters=[{**_datacenter(), "persistent_datastore_pattern": "^LocalDS_0$"}])
    disk_cid = on_one("create_disk", 1024, {}, None)
    vm_cid = on_zero("create_vm", "agent-move", cloud.stemcell, VM_TYPE, network("10.0.0.80"), [], {})[0]
    try:
        attached = on_zero.call("attach_disk", vm_cid, disk_cid)
        assert attached.error is None, attached.error
        assert re.search(rf"moving {disk_cid} \(1024 MiB\) from datastore LocalDS_1 to LocalDS_0", attached.log)
        from pyVmomi import vim

        files = [d.backing.fileName for d in vm_of(si, vm_cid).config.hardware.device
                 if isinstance(d, vim.vm.device.VirtualDisk)]
        assert f"[LocalDS_0] {vsphere_target.DISK_PATH}/{disk_cid}.vmdk" in files
        assert on_zero("get_disks", vm_cid) == [disk_cid]
        on_zero("detach_disk", vm_cid, disk_cid)
        assert on_one("has_disk", disk_cid) is True  # found wherever it is
    finally:
        on_zero("delete_vm", vm_cid)
        on_zero("delete_disk", disk_cid)


def _datacenter() -> dict:
    return {"name": "DC0", "vm_folder": vsphere_target.VM_FOLDER, "template_folder": vsphere_target.TEMPLATE_FOLDER,
            "disk_path": vsphere_target.DISK_PATH, "datastore_pattern": "^LocalDS_", "clusters": ["DC0_C0"]}


def validate_online(config, cloud_config: dict, path) -> tuple[int, dict[str, str], str]:
    """`cpi validate --online --json` of `cloud_config` (written to `path`) as a process:
    its exit status, its findings (YAML path -> problem) and what it wrote, both streams."""
    import subprocess
    import sys

    import yaml

    path.write_text(yaml.safe_dump(cloud_config))
    run = subprocess.run([sys.executable, "-m", "cpi.cli", "validate", str(path), "--config", str(config),
                          "--online", "--json"], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in run.stderr and run.returncode in (0, 1), run.stderr
    return (run.returncode, {f["path"]: f["problem"] for f in json.loads(run.stdout)["findings"]},
            run.stdout + run.stderr)


def test_validate_online_finds_what_the_cloud_config_names_that_is_not_there(vcsim, tmp_path):
    """`cpi validate --online`: networks, datastores, clusters and resource pools the
    cloud-config names are looked up in the datacenter (storage policies in its storage
    policy service, GPUs among the hosts of the clusters); cpi.json's patterns must match."""
    config = vsphere_target.write_config(tmp_path / "cpi.json", vcsim, datacenters=[
        {**_datacenter(), "persistent_datastore_pattern": "^NoSuchDS"}])
    good = {"azs": [{"name": "z1", "cloud_properties": {"datacenters": [{"name": "DC0", "clusters": ["DC0_C0"]}]}}],
            "vm_types": [{"name": "web", "cloud_properties": {**VM_TYPE, "datastores": ["LocalDS_0"]}},
                         {"name": "gold", "cloud_properties": {**VM_TYPE, "storage_policy": {
                             "name": "VVol No Requirements Policy"}}}],
            "disk_types": [{"name": "d", "disk_size": 1024, "cloud_properties": {"datastores": ["LocalDS_1"]}}],
            "networks": [{"name": "default", "subnets": [{"range": "10.0.0.0/24", "az": "z1", "cloud_properties": {
                "name": vsphere_target.NETWORK}}]}]}
    bad = json.loads(json.dumps(good))
    bad["azs"][0]["cloud_properties"]["datacenters"][0]["clusters"] = [{"DC0_C0": {"resource_pool": "nopool"}},
                                                                       "nocluster"]
    bad["vm_types"][0]["cloud_properties"]["datastores"] = ["LocalDS_9"]
    bad["vm_types"][1]["cloud_properties"]["storage_policy"]["name"] = "gold"
    bad["vm_types"].append({"name": "gpu", "cloud_properties": {**VM_TYPE, "vgpus": ["grid_t4-1q"]}})
    bad["networks"][0]["subnets"][0]["cloud_properties"]["name"] = "no-such-pg"
    code, found, _ = validate_online(config, good, tmp_path / "good.yml")
    assert found == {"cpi.json: cloud.properties.vsphere.datacenters[0].persistent_datastore_pattern":
                     "'^NoSuchDS' matches none of the datastores of 'DC0' (LocalDS_0, LocalDS_1)"}, found
    code, found, _ = validate_online(config, bad, tmp_path / "bad.yml")
    assert code == 1
    assert found["networks[name=default].subnets[0].cloud_properties.name"] == \
        "network 'no-such-pg' does not exist in datacenter 'DC0'"
    assert found["vm_types[name=web].cloud_properties.datastores[0]"].startswith("datastore 'LocalDS_9' does not exist")
    clusters = "azs[name=z1].cloud_properties.datacenters[0].clusters"
    assert found[f"{clusters}[1]"] == "cluster 'nocluster' does not exist in datacenter 'DC0'"
    assert "resource pool 'nopool' of cluster 'DC0_C0'" in found[f"{clusters}[0]"]
    assert found["vm_types[name=gold].cloud_properties.storage_policy"].startswith(
        "storage policy: the vCenter has no storage policy 'gold' (it has ")
    assert found["vm_types[name=gpu].cloud_properties"] == \
        "vm_type vgpus: no host of cluster DC0_C0 offers vGPU profile 'grid_t4-1q' (its hosts offer none)"


def test_validate_online_looks_up_the_nsx_groups_and_pools_as_create_vm_would_and_writes_nothing(
        vcsim, si, tmp_path):
    """`cpi validate --online` with NSX: `nsxt`'s groups and server pools through the NSX-T
    manager (here in migration mode: the Manager API's required, the Policy API's taken where
    they are), `nsx.lbs`' edges and pools through the NSX-V manager, each missing one named
    under its key; an `nsxt` or `nsx` cpi.json has no manager for is refused; neither
    manager is written to."""
    from tests.vsphere.nsxt_standin import NsxtStandin
    from tests.vsphere.nsxv_standin import NsxvStandin

    nsxt, nsxv = NsxtStandin(si), NsxvStandin(si)
    try:
        for group_id, name in (("ns-web", "web"), ("ns-mgr", "manager only"), ("ns-dyn", "lb members")):
            nsxt.add_ns_group(group_id, name)
        nsxt.add_lb_pool("lb-1", "web-pool")
        nsxt.add_lb_pool("lb-2", "dyn-pool", ns_group="ns-dyn")
        nsxt.add_group("web-group", "web")  # the Policy API has no 'manager only' yet, nor a pool
        for name in ("edge-a", "edge-b"):  # the load balancer's edge is on the second page
            nsxv.add_edge(name)
        nsxv.add_pool(nsxv.add_edge("lb-edge"), "web-pool")
        managers = {"nsxt": {"host": nsxt.host, "username": nsxt.username, "password": nsxt.password,
                             "policy_api_migration_mode": True},
                    "nsx": {"address": nsxv.address, "user": nsxv.user, "password": nsxv.password}}
        config = vsphere_target.write_config(tmp_path / "cpi.json", vcsim, **managers)
        lbs = [{"edge_name": "lb-edge", "pool_name": "web-pool", "security_group": "new-sg", "port": 80}]
        good = {"vm_types": [{"name": "web", "cloud_properties": {
                    **VM_TYPE, "nsxt": {"ns_groups": ["web", "manager only"]},
                    "nsx": {"security_groups": ["not-yet-made"], "lbs": lbs}}}],
                "vm_extensions": [{"name": "lb", "cloud_properties": {"nsxt": {"lb": {"server_pools": [
                    {"name": "web-pool", "port": 8080}, {"name": "dyn-pool"}]}}}}]}
        code, found, _ = validate_online(config, good, tmp_path / "good.yml")
        assert (code, found) == (0, {}), found
        asked = {path for _, path in nsxt.seen} | {path for _, path in nsxv.seen}
        assert {"/api/v1/ns-groups", "/api/v1/loadbalancer/pools", "/policy/api/v1/search/query",
                "/policy/api/v1/infra/lb-pools", "/api/4.0/edges",
                "/api/4.0/edges/edge-3/loadbalancer/config/pools"} <= asked, asked

        bad = json.loads(json.dumps(good))
        bad["vm_types"][0]["cloud_properties"]["nsxt"]["ns_groups"].append("gone")
        bad["vm_types"][0]["cloud_properties"]["nsx"]["lbs"] += [{**lbs[0], "edge_name": "no-edge"}]
        bad["vm_types"].append({"name": "api", "cloud_properties": {**VM_TYPE, "nsx": {"lbs": [
            {**lbs[0], "pool_name": "no-pool"}]}}})
        bad["vm_extensions"][0]["cloud_properties"]["nsxt"]["lb"]["server_pools"].append({"name": "no-pool"})
        code, found, said = validate_online(config, bad, tmp_path / "bad.yml")
        web, lb = "vm_types[name=web].cloud_properties", "vm_extensions[name=lb].cloud_properties"
        assert (code, found) == (1, {
            f"{web}.nsxt.ns_groups": f"vm_type nsxt.ns_groups: NSX-T at {nsxt.host} has no NSGroup 'gone'",
            f"{lb}.nsxt.lb.server_pools": f"vm_type nsxt.lb.server_pools: NSX-T at {nsxt.host} has no server pool "
                                          "'no-pool'",
            f"{web}.nsx.lbs": f"vm_type nsx.lbs: NSX-V at {nsxv.address} has no edge 'no-edge'",
            "vm_types[name=api].cloud_properties.nsx.lbs": f"vm_type nsx.lbs: NSX-V at {nsxv.address} has no load "
                                                           "balancer pool 'no-pool' on edge 'lb-edge'"}), found
        assert nsxt.password not in said and nsxv.password not in said

        # without the managers in cpi.json, create_vm would refuse the vm_type before the clone
        code, found, _ = validate_online(vsphere_target.write_config(tmp_path / "bare.json", vcsim), good,
                                         tmp_path / "good.yml")
        assert code == 1 and found[f"{web}.nsxt"].startswith("vm_type cloud_properties 'nsxt' needs the NSX-T "
                                                             "manager, which cpi.json does not name")
        assert found[f"{web}.nsx"].startswith("vm_type cloud_properties 'nsx' needs the NSX-V manager")
        assert found[f"{lb}.nsxt"] == found[f"{web}.nsxt"] and len(found) == 3, found
        assert nsxt.writes == [] and nsxv.writes() == []  # not a group made, not a member added
    finally:
        nsxt.close()
        nsxv.close()


def test_a_write_the_nsx_checks_asked_for_is_withheld_and_fails_the_check():
    """What makes `validate --online`'s NSX lookups read-only: a write asked for among them
    is not sent (rest.py withholds it, as under `cpi plan`), and the check fails naming it."""
    import ssl

    import pytest

    from cpi.channel import Channel
    from cpi.clouds.vsphere import inspect
    from cpi.clouds.vsphere.vcenter import rest
    from cpi.errors import CpiError

    call = Channel()  # a real call's: the checks' own channel withholds the write
    written = "/api/2.0/services/securitygroup/bulk/globalroot-0"
    with pytest.raises(CpiError, match=rf"asked to write \(POST {written}\); withheld, nothing was sent"), \
            inspect._reads_only(call) as checks:
        nowhere = rest.Client("127.0.0.1:9", peer="the NSX-V manager", ca_key="nsx.ca_cert", address_key="nsx.address",
                              context=ssl.create_default_context(), headers={}, user="admin", secrets=[], budget=1,
                              connect_timeout=1, read_timeout=1, channel=checks)
        assert nowhere.request("POST", written, b"<x/>").planned  # answered here: 127.0.0.1:9 serves nothing
    assert call.plan is None  # the call itself was never planned


class Rest:
    """The vSphere Automation REST API of the simulator, as the test's own client."""

    def __init__(self, vcsim):
        self.base = f"https://{vcsim.host}:{vcsim.port}/rest/com/vmware/cis"
        basic = base64.b64encode(f"{vcsim.username}:{vcsim.password}".encode()).decode()
        self.token = self.call("POST", "/session", headers={"Authorization": f"Basic {basic}"})

    def call(self, method: str, path: str, body=None, headers=None):
        data = json.dumps(body).encode() if body is not None else None
        sent = {"Content-Type": "application/json", **(headers or {"vmware-api-session-id": self.token})}
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=sent)
        with urllib.request.urlopen(request, context=ssl._create_unverified_context(), timeout=30) as answer:
            payload = answer.read()
        return json.loads(payload)["value"] if payload else None


def test_tags_are_attached_and_a_missing_one_refuses_the_vm_before_anything_is_made(cloud, vcsim, si):
    rest = Rest(vcsim)
    category = rest.call("POST", "/tagging/category", {"create_spec": {
        "name": "cpi-env", "description": "", "cardinality": "MULTIPLE", "associable_types": ["VirtualMachine"]}})
    tag = rest.call("POST", "/tagging/tag", {"create_spec": {"name": "production", "description": "",
                                                             "category_id": category}})
    cpi = cloud.cpi()
    tagged = {**VM_TYPE, "tags": [{"category": "cpi-env", "tag": "production"}]}
    vm_cid = cpi("create_vm", "agent-tags", cloud.stemcell, tagged, network("10.0.0.90"), [], {})[0]
    try:
        vm = vm_of(si, vm_cid)
        attached = rest.call("POST", "/tagging/tag-association?~action=list-attached-tags",
                             {"object_id": {"id": vm._moId, "type": "VirtualMachine"}})
        assert attached == [tag]
    finally:
        cpi("delete_vm", vm_cid)
    for wanted, message in (({"category": "cpi-env", "tag": "staging"}, "no tag 'staging' in category 'cpi-env'"),
                            ({"category": "nope", "tag": "production"}, "no tag category 'nope'")):
        refused = cpi.call("create_vm", "agent-untagged", cloud.stemcell, {**VM_TYPE, "tags": [wanted]},
                           network("10.0.0.91"), [], {})
        assert refused.error["type"] == "Bosh::Clouds::VMCreationFailed" and message in refused.error["message"]
        folder = si.content.searchIndex.FindByInventoryPath(f"DC0/vm/{vsphere_target.VM_FOLDER}")
        assert folder is None or not folder.childEntity
    assert vcsim.password not in refused.log


def test_vms_and_stemcells_show_as_managed_by_bosh_as_the_official_cpi_marks_them(cloud, si, image):
    """create_stemcell registers the official CPI's vCenter extension (once: a second CPI
    finds it), and the stemcell, its copies and the VMs carry its managedBy mark, so the
    vSphere client warns an operator who edits or deletes them by hand."""
    from cpi.clouds.vsphere import extension

    cpi = cloud.cpi()
    registered = si.content.extensionManager.FindExtension(extensionKey=extension.KEY)
    assert registered is not None and registered.managedEntityInfo[0].type == extension.RESOURCE
    vm_cid = cpi("create_vm", "agent-managed", cloud.stemcell, {**VM_TYPE, "datastores": ["LocalDS_0"]},
                 network("10.0.0.70"), [], {})[0]
    other = cpi("create_vm", "agent-managed-1", cloud.stemcell, {**VM_TYPE, "datastores": ["LocalDS_1"]},
                network("10.0.0.71"), [], {})[0]
    try:
        folder = si.content.searchIndex.FindByInventoryPath(f"DC0/vm/{vsphere_target.TEMPLATE_FOLDER}")
        templates = [vm for vm in folder.childEntity if vm.name.startswith(cloud.stemcell)]
        assert len(templates) == 2  # the stemcell and its copy on the other datastore
        for vm in [vm_of(si, vm_cid), vm_of(si, other), *templates]:
            assert (vm.config.managedBy.extensionKey, vm.config.managedBy.type) == (extension.KEY, extension.RESOURCE)
        again = cpi.call("create_stemcell", str(image), {})
        assert again.error is None and f"vCenter extension {extension.KEY} registered" not in again.log  # found
        assert "registering the vCenter extension" not in again.log  # not asked again, and refused
        cpi("delete_stemcell", again.result)
        assert [e.key for e in si.content.extensionManager.extensionList].count(extension.KEY) == 1
    finally:
        cpi("delete_vm", vm_cid)
        cpi("delete_vm", other)
