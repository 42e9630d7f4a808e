"""A vm_type's `nsxt`, as the official CPI carries it out (#25), through each API cpi.json's
`nsxt` chooses: the Manager API (NSGroups of the VM's logical ports, pools, VIF types, the
instance id on the ports), the Policy API (groups, pools, the metadata on the segment
ports), and migration mode (both); the VM leaves them all when deleted. A group or pool that
is not there refuses create_vm before anything is made.

NSX-T itself cannot be had here: the manager is tests/vsphere/nsxt_standin.py, a stand-in
for the endpoints the official CPI's clients use, which finds VMs and their NICs on NSX port
groups in the simulator as NSX finds them in a vCenter (see its docstring)."""

from __future__ import annotations

import hashlib
import threading
import uuid

import pytest

from tests.operator.test_plan import plan
from tests.support import vcsim as vcsim_server
from tests.vsphere.nsxt_standin import NsxtStandin
from tests.vsphere.test_not_yet import vm_names
from tests.vsphere.test_vsphere_cloud import VM_TYPE, network, vm_of

SEGMENT = "nsx-segment-web"


@pytest.fixture(scope="module")
def vcsim():
    """A simulator of this module's own that plays vSphere 7, whose port groups NSX can back
    (the shared one plays 6.5, where NSX-T's networks were opaque)."""
    with vcsim_server.running("-api-version", "7.0.0.0") as server:
        yield server


@pytest.fixture(scope="module")
def si(vcsim):
    with vcsim_server.service_instance(vcsim) as instance:
        yield instance
METADATA = {"id": "3c1b5e0a-instance", "deployment": "cf", "name": "router/0"}


@pytest.fixture(scope="module")
def segment(si):
    """A port group NSX backs, on the simulator's distributed switch, for the module's tests."""
    from pyVim.task import WaitForTask
    from pyVmomi import vim

    view = si.content.viewManager.CreateContainerView(si.content.rootFolder, [vim.DistributedVirtualSwitch], True)
    try:
        switch = view.view[0]
    finally:
        view.DestroyView()
    spec = vim.dvs.DistributedVirtualPortgroup.ConfigSpec(name=SEGMENT, type="earlyBinding", numPorts=16,
                                                           backingType="nsx", logicalSwitchUuid=str(uuid.uuid4()))
    WaitForTask(switch.AddDVPortgroup_Task([spec]))
    made = next(group for group in switch.portgroup if group.name == SEGMENT)
    assert made.config.backingType == "nsx"
    yield SEGMENT
    WaitForTask(made.Destroy_Task())


@pytest.fixture
def nsx(si):
    standin = NsxtStandin(si)
    standin.add_group("web-group", "web")
    standin.add_group("all-group", "all", expression=[{"resource_type": "Condition", "member_type": "VirtualMachine",
                                                       "key": "Tag", "operator": "EQUALS", "value": "bosh"}])
    standin.add_pool("pool-1", "web-pool")
    standin.add_group("dyn-group", "dynamic members")
    standin.add_pool("pool-2", "dyn-pool", member_group="/infra/domains/default/groups/dyn-group")
    for group_id, name in (("ns-web", "web"), ("ns-other", "other"), ("ns-dyn", "lb members"),
                           ("ns-mgr", "manager only")):
        standin.add_ns_group(group_id, name)
    standin.add_lb_pool("lb-1", "web-pool")
    standin.add_lb_pool("lb-2", "dyn-pool", ns_group="ns-dyn")
    yield standin
    standin.close()


def nsxt_config(standin, **overrides) -> dict:
    return {"nsxt": {"host": standin.host, "username": standin.username, "password": standin.password,
                     "use_policy_api": True, **overrides}}


def on(segment_name: str, ip: str) -> dict:
    nets = network(ip)
    nets["default"]["cloud_properties"] = {"name": segment_name}
    return nets


def sha1(text: str) -> str:
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


NSXT = {"ns_groups": ["web", "all"], "lb": {"server_pools": [{"name": "web-pool", "port": 8080}, {"name": "dyn-pool"}]}}


def test_policy_api_the_vm_joins_groups_and_pools_tags_its_ports_and_leaves_when_deleted(cloud, si, nsx, segment):
    cpi = cloud.cpi(**nsxt_config(nsx, tag_nsx_vm_objects=True))
    nsx.conflicts = 2  # two of the writes meet a newer revision first: read and written again
    made = cpi.call("create_vm", "agent-nsx", cloud.stemcell, {**VM_TYPE, "nsxt": NSXT}, on(segment, "10.0.0.60"),
                    [], {})
    assert made.error is None, made.error
    vm_cid = made.result[0]
    vm = vm_of(si, vm_cid)
    external_id = vm.config.instanceUuid
    try:
        assert nsx.members("web-group") == [external_id]
        # a group with other members gets the VM after an OR, named as the official CPI names it
        expression = nsx.groups["all-group"]["expression"]
        assert expression[1] == {"resource_type": "ConjunctionOperator", "conjunction_operator": "OR",
                                 "id": f"conjunction-{vm_cid}-0"}
        assert expression[2]["external_ids"] == [external_id]
        assert nsx.pools["pool-1"]["members"] == [{"display_name": vm_cid, "ip_address": "10.0.0.60",
                                                   "port": "8080"}]
        # a dynamic pool's members are its group's: the VM joins that group, the pool is left as it is
        assert nsx.members("dyn-group") == [external_id] and nsx.pools["pool-2"]["members"] == []
        assert nsx.conflicts == 0 and "changed meanwhile" in made.log
        assert not [seen for seen in nsx.writes if seen[1].startswith("/api/")], "the Manager API was written"
        assert nsx.overwrites == []  # never with the Policy API, as the official CPI's Policy client

        # the director's metadata lands on the VM's segment port, the instance id hashed, and on its NSX record
        cpi("set_vm_metadata", vm_cid, METADATA)
        [port] = nsx.segment_ports_of(vm)
        assert sorted((t["scope"], t["tag"]) for t in port["tags"]) == [
            ("bosh/deployment", "cf"), ("bosh/id", sha1(METADATA["id"])), ("bosh/name", "router/0")]
        cpi("set_vm_metadata", vm_cid, {**METADATA, "name": "router/1"})  # replaced, not added beside
        [port] = nsx.segment_ports_of(vm)
        assert ("bosh/name", "router/1") in [(t["scope"], t["tag"]) for t in port["tags"]] and len(port["tags"]) == 3
        assert len(nsx.vm_tags[external_id]) == 3
        # `cpi plan set_vm_metadata` finds the port as the call would, and lists its tagging unsent
        writes = len(nsx.writes)
        document = plan(cpi.config_path, "set_vm_metadata", vm_cid, {**METADATA, "name": "router/2"})
        [port] = nsx.segment_ports_of(vm)
        assert len(nsx.writes) == writes and ("bosh/name", "router/1") in [(t["scope"], t["tag"]) for t in port["tags"]]
        assert ("update", "nsxt_segment_port", port["id"]) in {
            (s["action"], s["resource_type"], s["resource_id"]) for s in document["steps"] if s["step"] == "mutation"}

        # `cpi plan delete_vm` reads NSX but changes nothing there, and lists the changes
        writes = len(nsx.writes)
        document = plan(cpi.config_path, "delete_vm", vm_cid)
        assert len(nsx.writes) == writes
        assert nsx.members("web-group") == [external_id]
        planned = {(s["action"], s["resource_type"], s["resource_id"]) for s in document["steps"]
                   if s["step"] == "mutation"}
        assert {("update", "nsxt_group", "web-group"), ("update", "nsxt_group", "all-group"),
                ("update", "nsxt_server_pool", "pool-1")} <= planned, planned
    finally:
        cpi("delete_vm", vm_cid)
    assert nsx.members("web-group") == [] and nsx.members("all-group") == []
    assert nsx.groups["all-group"]["expression"] == [{"resource_type": "Condition", "member_type": "VirtualMachine",
                                                      "key": "Tag", "operator": "EQUALS", "value": "bosh"}]
    assert nsx.pools["pool-1"]["members"] == [] and nsx.members("dyn-group") == []


def test_manager_api_the_vm_s_ports_join_nsgroups_get_their_vif_type_and_tag_and_leave_when_deleted(
        cloud, si, nsx, segment):
    cpi = cloud.cpi(**nsxt_config(nsx, use_policy_api=False, default_vif_type="CHILD"))
    nsx.conflicts = 2  # two member actions meet a concurrent change first: made again
    nsx.throttled = 1  # and one write NSX's rate limit refuses (429): sent again, not failed
    asked = {"ns_groups": ["web"], "vif_type": "PARENT",
             "lb": {"server_pools": [{"name": "web-pool", "port": 80}, {"name": "dyn-pool"}]}}
    made = cpi.call("create_vm", "agent-nsx-m", cloud.stemcell, {**VM_TYPE, "nsxt": asked}, on(segment, "10.0.0.62"),
                    [], {})
    assert made.error is None, made.error
    vm_cid = made.result[0]
    vm = vm_of(si, vm_cid)
    try:
        [port] = nsx.ports_of(vm)
        # the NIC's attachment is the one vSphere shows, and its port is what the groups hold
        [nic] = [d for d in vm.config.hardware.device if hasattr(d, "macAddress")]
        assert port["attachment"]["id"] == nic.externalId
        assert nsx.ns_members("ns-web") == [port["id"]] and nsx.ns_members("ns-other") == []
        assert nsx.ns_members("ns-dyn") == [port["id"]]  # the dynamic pool's NSGroup
        assert nsx.lb_pools["lb-1"]["members"] == [{"display_name": vm_cid, "ip_address": "10.0.0.62", "port": "80"}]
        assert nsx.lb_pools["lb-2"]["members"] == []
        assert port["attachment"]["context"] == {"resource_type": "VifAttachmentContext", "vif_type": "PARENT"}
        assert nsx.conflicts == 0 and nsx.throttled == 0
        assert not [seen for seen in nsx.writes if seen[1].startswith("/policy/")], "the Policy API was written"
        assert nsx.overwrites and all(path.startswith("/api/v1/") for path in nsx.overwrites)

        # the Manager API's ports carry the instance id only, as the official CPI tags them
        cpi("set_vm_metadata", vm_cid, METADATA)
        [port] = nsx.ports_of(vm)
        assert port["tags"] == [{"scope": "bosh/id", "tag": sha1(METADATA["id"])}]
        assert nsx.vm_tags == {}  # tag_nsx_vm_objects is off

        # a VM whose vm_type says nothing of NSX gets default_vif_type on its ports all the same
        plain = cpi("create_vm", "agent-nsx-plain", cloud.stemcell, VM_TYPE, on(segment, "10.0.0.63"), [], {})[0]
        try:
            [other] = nsx.ports_of(vm_of(si, plain))
            assert other["attachment"]["context"]["vif_type"] == "CHILD"
            assert nsx.ns_members("ns-web") == [port["id"]]
        finally:
            cpi("delete_vm", plain)
    finally:
        cpi("delete_vm", vm_cid)
    assert nsx.ns_members("ns-web") == [] and nsx.ns_members("ns-dyn") == []
    assert nsx.lb_pools["lb-1"]["members"] == []


def test_migration_mode_adds_through_both_apis_and_a_dynamic_network_s_address_is_waited_for(cloud, si, nsx, segment):
    """In migration mode the Manager API's objects are required, the Policy API's taken where
    they are; on a dynamic network the pools get the address VMware Tools report (here the
    test plays the Tools once the VM is on)."""
    from pyVim.task import WaitForTask
    from pyVmomi import vim

    cpi = cloud.cpi(**nsxt_config(nsx, policy_api_migration_mode=True))
    before = set(vm_names(si))
    stop = threading.Event()

    def tools() -> None:
        while not stop.wait(0.3):
            for vm in [vm_of(si, name) for name in set(vm_names(si)) - before]:
                if vm is not None and str(vm.runtime.powerState) == "poweredOn":
                    spec = vim.vm.ConfigSpec(extraConfig=[vim.option.OptionValue(key="SET.guest.ipAddress",
                                                                                 value="10.0.0.77")])
                    WaitForTask(vm.ReconfigVM_Task(spec=spec))
                    return

    playing = threading.Thread(target=tools, daemon=True)
    playing.start()
    nets = {"default": {"type": "dynamic", "cloud_properties": {"name": segment}}}
    asked = {"ns_groups": ["web", "manager only"], "lb": {"server_pools": [{"name": "web-pool", "port": 443}]}}
    try:
        made = cpi.call("create_vm", "agent-nsx-mig", cloud.stemcell, {**VM_TYPE, "nsxt": asked}, nets, [], {})
    finally:
        stop.set()
        playing.join()
    assert made.error is None, made.error
    vm_cid = made.result[0]
    vm = vm_of(si, vm_cid)
    try:
        [port] = nsx.ports_of(vm)
        assert nsx.ns_members("ns-web") == [port["id"]] and nsx.ns_members("ns-mgr") == [port["id"]]
        assert nsx.members("web-group") == [vm.config.instanceUuid]  # "manager only" is not in the Policy API
        member = {"display_name": vm_cid, "ip_address": "10.0.0.77", "port": "443"}
        assert nsx.lb_pools["lb-1"]["members"] == [member] and nsx.pools["pool-1"]["members"] == [member]
        assert "report its address through VMware Tools" in made.log
        # members an older official CPI added unnamed are the VM's when at its address
        nsx.lb_pools["lb-1"]["members"] += [{"ip_address": "10.0.0.77", "port": "80"},
                                            {"ip_address": "10.0.0.78", "port": "80"}]
        nsx.pools["pool-1"]["members"].append({"ip_address": "10.0.0.77", "port": "80"})
    finally:
        cpi("delete_vm", vm_cid)
    assert nsx.ns_members("ns-web") == [] and nsx.ns_members("ns-mgr") == [] and nsx.members("web-group") == []
    assert nsx.lb_pools["lb-1"]["members"] == [{"ip_address": "10.0.0.78", "port": "80"}]
    assert nsx.pools["pool-1"]["members"] == []


@pytest.mark.parametrize(("case", "vm_type_nsxt", "overrides", "message"), [
    ("policy group", {"ns_groups": ["web", "nope"]}, {}, "has no group 'nope' in domain 'default'"),
    ("policy pool", {"lb": {"server_pools": [{"name": "nope"}]}}, {}, "has no server pool 'nope'"),
    ("nsgroup", {"ns_groups": ["web", "nope"]}, {"use_policy_api": False}, "has no NSGroup 'nope'"),
    ("manager pool", {"lb": {"server_pools": [{"name": "web-pool"}, {"name": "nope"}]}},
     {"policy_api_migration_mode": True}, "has no server pool 'nope'"),
    ("no manager", {"ns_groups": ["web"]}, None, "cpi.json does not name"),
])
def test_what_is_missing_refuses_create_vm_before_anything_is_made(case, vm_type_nsxt, overrides, message,
                                                                    cloud, si, nsx):
    cpi = cloud.cpi(**nsxt_config(nsx, **overrides)) if overrides is not None else cloud.cpi()
    before = vm_names(si)
    response = cpi.call("create_vm", "agent-nsx-no", cloud.stemcell, {**VM_TYPE, "nsxt": vm_type_nsxt},
                        network("10.0.0.61"), [], {})
    assert response.error is not None and response.error["type"] == "Bosh::Clouds::VMCreationFailed", response.error
    assert message in response.error["message"], response.error["message"]
    assert response.error["ok_to_retry"] is False
    assert vm_names(si) == before
    assert nsx.writes == []
