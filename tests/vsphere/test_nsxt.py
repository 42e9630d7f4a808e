"""A vm_type's `nsxt` through NSX-T's Policy API, as the official CPI does it (#25): the VM
joins the groups and server pools it names once it is on, and leaves them when deleted; a
group or pool that is not there, the Manager API, VIF types, or pools without a manual
network refuse create_vm before anything is made.

NSX-T itself cannot be had here: the manager is tests/vsphere/nsxt_standin.py, a stand-in
for the Policy API's endpoints the official CPI's client uses, which finds VMs in the
simulator as NSX finds them in a vCenter (see its docstring)."""

from __future__ import annotations

import pytest

from tests.operator.test_plan import plan
from tests.vsphere.nsxt_standin import NsxtStandin
from tests.vsphere.test_not_yet import vm_names
from tests.vsphere.test_vsphere_cloud import VM_TYPE, network, vm_of


@pytest.fixture
def nsx(si):
    standin = NsxtStandin(si)
    standin.add_group("web-group", "web")
    standin.add_group("all-group", "all", expression=[{"resource_type": "Condition", "member_type": "VirtualMachine",
                                                       "key": "Tag", "operator": "EQUALS", "value": "bosh"}])
    standin.add_pool("pool-1", "web-pool")
    standin.add_group("dyn-group", "dynamic members")
    standin.add_pool("pool-2", "dyn-pool", member_group="/infra/domains/default/groups/dyn-group")
    yield standin
    standin.close()


def nsxt_config(standin, **overrides) -> dict:
    return {"nsxt": {"host": standin.host, "username": standin.username, "password": standin.password,
                     "use_policy_api": True, **overrides}}


NSXT = {"ns_groups": ["web", "all"], "lb": {"server_pools": [{"name": "web-pool", "port": 8080}, {"name": "dyn-pool"}]}}


def test_the_vm_joins_its_groups_and_pools_and_leaves_them_when_deleted(cloud, si, nsx):
    cpi = cloud.cpi(**nsxt_config(nsx))
    nsx.conflicts = 2  # two of the writes meet a newer revision first: read and written again
    made = cpi.call("create_vm", "agent-nsx", cloud.stemcell, {**VM_TYPE, "nsxt": NSXT}, network("10.0.0.60"), [], {})
    assert made.error is None, made.error
    vm_cid = made.result[0]
    external_id = vm_of(si, vm_cid).config.instanceUuid
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
        # `cpi plan delete_vm` reads NSX but changes nothing there, and lists the changes
        writes = len([seen for seen in nsx.seen if seen[0] == "PUT"])
        document = plan(cpi.config_path, "delete_vm", vm_cid)
        assert len([seen for seen in nsx.seen if seen[0] == "PUT"]) == writes
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


@pytest.mark.parametrize(("case", "vm_type_nsxt", "overrides", "message"), [
    ("missing group", {"ns_groups": ["web", "nope"]}, {}, "has no group 'nope' in domain 'default'"),
    ("missing pool", {"lb": {"server_pools": [{"name": "nope"}]}}, {}, "has no server pool 'nope'"),
    ("manager api", {"ns_groups": ["web"]}, {"use_policy_api": False}, "not yet through the Manager API"),
    ("vif type", {"vif_type": "PARENT"}, {}, "VIF types are set through NSX-T's Manager API"),
    ("migration mode", {"ns_groups": ["web"]}, {"policy_api_migration_mode": True}, "keep the official CPI while"),
    ("pool without a manual network", {"lb": {"server_pools": [{"name": "web-pool"}]}}, {"dynamic": True},
     "only a manual network gives one"),
])
def test_what_cannot_be_done_refuses_create_vm_before_anything_is_made(case, vm_type_nsxt, overrides, message,
                                                                         cloud, si, nsx):
    dynamic = overrides.pop("dynamic", False)
    cpi = cloud.cpi(**nsxt_config(nsx, **overrides))
    nets = {"default": {"type": "dynamic", "cloud_properties": {"name": "VM Network"}}} if dynamic \
        else network("10.0.0.61")
    before = vm_names(si)
    response = cpi.call("create_vm", "agent-nsx-no", cloud.stemcell, {**VM_TYPE, "nsxt": vm_type_nsxt}, nets, [], {})
    assert response.error is not None and response.error["type"] == "Bosh::Clouds::VMCreationFailed", response.error
    assert message in response.error["message"], response.error["message"]
    assert response.error["ok_to_retry"] is False
    assert vm_names(si) == before
    assert not [seen for seen in nsx.seen if seen[0] == "PUT"]
