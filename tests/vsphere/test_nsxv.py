"""NSX-V (cpi.json's `nsx`) as the official CPI drives it (#25): a new VM joins, by its moref,
its vm_type's security groups, the director's `env.bosh.groups` and its load balancers'
groups (made when missing), and each load balancer's group joins its edge's pool once; an
edge or pool that is not there refuses create_vm with nothing made, a refusal after the
clone deletes the VM; delete_vm leaves NSX-V alone; `cpi plan` sends no write.

NSX-V cannot be had here: the manager is tests/vsphere/nsxv_standin.py, a stand-in for the
endpoints of NSX-V's REST API the official CPI uses (see its docstring)."""

from __future__ import annotations

import types

import pytest

from cpi import plan as plan_mode
from cpi.channel import Channel
from cpi.clouds.vsphere.job_config import Nsx
from cpi.clouds.vsphere.nsx import nsxv
from cpi.clouds.vsphere.props import NsxVmProperties
from cpi.errors import CloudError
from tests.operator.test_plan import plan
from tests.support.runner import COLD_ENV, Cpi
from tests.vsphere import target as vsphere_target
from tests.vsphere.https_standin import TRUST_CASES, trust
from tests.vsphere.nsxv_standin import NsxvStandin
from tests.vsphere.test_not_yet import vm_names
from tests.vsphere.test_vsphere_cloud import ENV, VM_TYPE, network, vm_of

NSX = {"security_groups": ["web", "dmz"],
       "lbs": [{"edge_name": "lb-edge", "pool_name": "web-pool", "security_group": "lb-sg", "port": 80,
                "monitor_port": 8080},
               {"edge_name": "lb-edge", "pool_name": "web-pool", "security_group": "lb-sg", "port": 80,
                "monitor_port": 8080}]}
#: a member of the pool that is not this CPI's: it stays
OTHERS = {"name": "theirs", "groupingObjectId": "securitygroup-99", "port": "443", "monitorPort": "443"}


def make_standin(si=None) -> NsxvStandin:
    """Three edges (two pages), the load balancer's on the second page; group `web` with a
    member already; the pool with another's member."""
    made = NsxvStandin(si)
    made.add_edge("edge-a")
    made.add_edge("edge-b")
    edge = made.add_edge("lb-edge")
    made.add_pool(edge, "other-pool")
    made.add_pool(edge, "web-pool", members=[OTHERS])
    made.add_group("web", members=["vm-1"])
    return made


@pytest.fixture
def manager(si):
    made = make_standin(si)
    yield made
    made.close()


def nsx_config(standin: NsxvStandin, **overrides) -> dict:
    return {"nsx": {"address": standin.address, "user": standin.user, "password": standin.password, **overrides}}


def test_vms_join_their_security_groups_and_pool_once_and_delete_vm_leaves_nsx_alone(cloud, si, manager):
    cpi = cloud.cpi(**nsx_config(manager))
    manager.busy = manager.unseen = manager.stale = 1  # NSX-V busy once for each kind of change: asked again
    vm_cids = []
    try:
        made = cpi.call("create_vm", "agent-nsxv-1", cloud.stemcell, {**VM_TYPE, "nsx": NSX}, network("10.0.0.70"),
                        [], ENV)
        assert made.error is None, made.error
        vm_cids.append(made.result[0])
        first = vm_of(si, vm_cids[0])._moId
        # the vm_type's groups, the director's (d, dep, web) and the load balancer's; made when missing
        assert manager.members("web") == ["vm-1", first]
        for name in ("dmz", "lb-sg", "d", "dep"):
            assert manager.members(name) == [first], name
        assert manager.busy == manager.unseen == manager.stale == 0 and "busy or not ready yet" in made.log
        lb_sg = manager.group_id("lb-sg")
        member = {"name": f"BOSH-{lb_sg}-80-8080", "groupingObjectId": lb_sg, "groupingObjectName": "lb-sg",
                  "port": "80", "monitorPort": "8080"}
        assert manager.pool_members(manager.edge_id("lb-edge"), "web-pool") == [OTHERS, member]
        assert manager.pool_members(manager.edge_id("lb-edge"), "other-pool") == []

        # a second VM joins the groups; the pool has the group already and is not written again
        pool_writes = [w for w in manager.writes() if "/loadbalancer/" in w[1]]
        made = cpi.call("create_vm", "agent-nsxv-2", cloud.stemcell, {**VM_TYPE, "nsx": NSX}, network("10.0.0.71"),
                        [], ENV)
        assert made.error is None, made.error
        vm_cids.append(made.result[0])
        second = vm_of(si, vm_cids[1])._moId
        assert manager.members("lb-sg") == [first, second] and manager.members("web") == ["vm-1", first, second]
        assert [w for w in manager.writes() if "/loadbalancer/" in w[1]] == pool_writes
        assert manager.pool_members(manager.edge_id("lb-edge"), "web-pool") == [OTHERS, member]

        assert manager.password not in made.log

        # what NSX-V refuses after the clone fails create_vm, which deletes the VM (the
        # stemcell's copy on the datastore it chose, made for it, stays: delete_stemcell's)
        before = [name for name in vm_names(si) if not name.startswith("sc-")]
        manager.refused_names.add("bad name")
        refused = cpi.call("create_vm", "agent-nsxv-bad", cloud.stemcell,
                           {**VM_TYPE, "nsx": {"security_groups": ["bad name"]}}, network("10.0.0.74"), [], ENV)
        assert refused.error is not None and refused.error["type"] == "Bosh::Clouds::VMCreationFailed", refused.error
        assert "making security group 'bad name': 400 (error 1)" in refused.error["message"], refused.error
        assert [name for name in vm_names(si) if not name.startswith("sc-")] == before

        # `cpi plan` of either call sends NSX-V no write
        writes = len(manager.writes())
        plan(cpi.config_path, "create_vm", "agent-nsxv-3", cloud.stemcell, {**VM_TYPE, "nsx": NSX},
             network("10.0.0.72"), [], ENV)
        plan(cpi.config_path, "delete_vm", vm_cids[0])
        assert len(manager.writes()) == writes
    finally:
        asked = len(manager.seen)
        for vm_cid in vm_cids:
            cpi("delete_vm", vm_cid)
    # NSX-V drops a deleted VM from its groups itself: delete_vm asks it nothing, and the groups stay
    assert len(manager.seen) == asked
    assert manager.members("lb-sg") == [first, second]


@pytest.mark.parametrize(("case", "vm_type_nsx", "overrides", "message"), [
    ("missing edge", {"lbs": [{**NSX["lbs"][0], "edge_name": "nope"}]}, {}, "has no edge 'nope'"),
    ("missing pool", {"lbs": [{**NSX["lbs"][0], "pool_name": "nope"}]}, {},
     "has no load balancer pool 'nope' on edge 'lb-edge'"),
    ("wrong password", {"security_groups": ["web"]}, {"password": "not-the-password"}, ": 403 (error 403)"),
])
def test_what_is_not_there_refuses_create_vm_before_anything_is_made(case, vm_type_nsx, overrides, message, vcsim,
                                                                      si, manager, tmp_path):
    config = vsphere_target.write_config(tmp_path / "cpi.json", vcsim, **nsx_config(manager, **overrides))
    before = vm_names(si)
    response = Cpi(config, env={**COLD_ENV, "HOME": str(tmp_path)}).call(
        "create_vm", "agent-nsxv-no", "sc-00000000-0000-0000-0000-000000000000", {**VM_TYPE, "nsx": vm_type_nsx},
        network("10.0.0.73"), [], ENV)
    assert response.error is not None and message in response.error["message"], response.error
    assert response.error["ok_to_retry"] is False
    if case != "wrong password":
        assert response.error["type"] == "Bosh::Clouds::VMCreationFailed"
    assert "not-the-password" not in response.error["message"] + response.log
    assert vm_names(si) == before and manager.writes() == []


def test_a_plan_lists_the_nsxv_writes_and_sends_none():
    """In plan mode the lookups go out, the changes are listed with their audit kinds."""
    made = make_standin()
    properties = types.SimpleNamespace(
        nsx=Nsx.model_validate({"address": made.address, "user": made.user, "password": made.password}),
        ssl_verify=None, retry_budget_seconds=10.0, connect_timeout=5.0, read_timeout=10.0)
    the_plan = plan_mode.Plan()
    try:
        joining = nsxv.prepare(properties, NsxVmProperties.model_validate(NSX), {"bosh": {"groups": ["web"]}},
                               Channel(the_plan))
        assert joining is not None
        joining.run("vm-42")
    finally:
        made.close()
    assert made.writes() == [] and made.members("web") == ["vm-1"]
    listed = [(s["action"], s["resource_type"], s["resource_id"], (s["changes"]["new"] or {}))
              for s in the_plan.mutations]
    created = [step for step in listed if step[0] == "create"]
    assert [(action, kind, name) for action, kind, name, _ in created] == [
        ("create", "nsxv_security_group", "dmz"), ("create", "nsxv_security_group", "lb-sg")]
    members = [(kind, new.get("member")) for action, kind, _, new in listed if action == "update"]
    assert members.count(("nsxv_security_group", "vm-42")) == 3
    pools = [(name, new) for _, kind, name, new in listed if kind == "nsxv_lb_pool"]
    assert len(pools) == 1 and pools[0][1]["edge"] == made.edge_id("lb-edge") and len(pools[0][1]["members"]) == 2


def test_a_document_with_a_doctype_is_refused_unread():
    bomb = b'<!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;&a;">]><list>&b;</list>'
    with pytest.raises(CloudError, match="DOCTYPE"):
        nsxv.parse(bomb, "GET /api/2.0/services/securitygroup/scope/globalroot-0")
    assert nsxv.parse(b"<list><securitygroup/></list>", "GET").tag == "list"


@pytest.mark.parametrize("ssl_verify, ca, joins", TRUST_CASES.values(), ids=TRUST_CASES.keys())
def test_ssl_verify_decides_for_the_nsxv_manager_as_for_the_vcenter(ssl_verify, ca, joins):
    """The job's ssl_verify holds for NSX-V too: true verifies it (against nsx.ca_cert, else
    the system's CAs, which never signed the stand-in's self-signed certificate), so the
    admin's password is never sent to it; false verifies nothing, whatever CA is given."""
    made = make_standin()
    try:
        properties = types.SimpleNamespace(nsx=Nsx.model_validate(nsx_config(made, **trust(made.address, ca))["nsx"]),
                                           ssl_verify=ssl_verify, retry_budget_seconds=10.0, connect_timeout=5.0,
                                           read_timeout=10.0)
        if joins:
            assert nsxv.prepare(properties, None, {"bosh": {"groups": ["web"]}}, Channel()) is not None
            assert made.seen and made.writes() == []  # asked, and (prepare only reads) nothing changed
            return
        with pytest.raises(CloudError) as refused:
            nsxv.prepare(properties, None, {"bosh": {"groups": ["web"]}}, Channel())
        message = str(refused.value)
        assert f"TLS with the NSX-V manager at {made.address} failed" in message, message
        assert "CERTIFICATE_VERIFY_FAILED" in message and "nsx.ca_cert" in message and "ssl_verify" in message
        assert made.password not in message
        assert made.seen == []  # the handshake failed: no request, no Authorization header
    finally:
        made.close()
