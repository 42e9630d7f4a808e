"""Storage policies (SPBM) as the official CPI applies them, through bin/cpi against the
simulator's storage policy service: a vm_type's `storage_policy` (or the global
`vm_storage_policy_name` when the vm_type names no `datastores`) is given to the VM, its
system disk and its ephemeral disk, as the vCenter's policy service then reports; a policy
the vCenter lacks refuses create_vm with nothing made (#25)."""

from __future__ import annotations

import pytest

from tests.support import vcsim as vcsim_server
from tests.vsphere.test_not_yet import vm_names
from tests.vsphere.test_vsphere_cloud import VM_TYPE, network, vm_of

#: one of the policies a fresh vCenter (and the simulator) has
POLICY = "VVol No Requirements Policy"


@pytest.fixture(scope="module")
def policies(vcsim):
    """The simulator's storage policy service, as the test's own session: name → profile id,
    and the profile ids associated with an entity (a VM's moid, or "<moid>:<disk key>")."""
    with vcsim_server.service_instance(vcsim) as si:
        yield _policies(si, vcsim)


def _policies(si, vcsim):
    """The policy service on `si`'s session (its cookie on the /pbm endpoint)."""
    from pyVmomi import SoapStubAdapter, pbm

    stub = SoapStubAdapter(host=vcsim.host, port=vcsim.port, path="/pbm", version="pbm.version.version11",
                           sslContext=si._stub.schemeArgs.get("context"))
    stub.cookie = si._stub.cookie
    content = pbm.ServiceInstance("ServiceInstance", stub).RetrieveContent()

    class Policies:
        manager = content.profileManager

        def ids(self) -> dict[str, str]:
            found = self.manager.QueryProfile(resourceType=pbm.profile.ResourceType(resourceType="STORAGE"),
                                              profileCategory="REQUIREMENT")
            return {p.name: p.profileId.uniqueId for p in self.manager.RetrieveContent(profileIds=found)}

        def of(self, object_type: str, key: str) -> list[str]:
            ref = pbm.ServerObjectRef(objectType=object_type, key=key)
            return [p.uniqueId for p in self.manager.QueryAssociatedProfile(entity=ref)]

        def create(self, name: str, description: str) -> str:
            """A policy with one tag-based placement rule, as the vSphere client makes them."""
            tagged = pbm.capability.PropertyInstance(id="com.vmware.storage.tag.cpi-test.property",
                                                     value=pbm.capability.types.DiscreteSet(values=["cpi-test"]))
            rule = pbm.capability.CapabilityInstance(
                id=pbm.capability.CapabilityMetadata.UniqueId(namespace="http://www.vmware.com/storage/tag",
                                                              id="cpi-test"),
                constraint=[pbm.capability.ConstraintInstance(propertyInstance=[tagged])])
            spec = pbm.profile.CapabilityBasedProfileCreateSpec(
                name=name, description=description, category="REQUIREMENT",
                resourceType=pbm.profile.ResourceType(resourceType="STORAGE"),
                constraints=pbm.profile.SubProfileCapabilityConstraints(subProfiles=[
                    pbm.profile.SubProfileCapabilityConstraints.SubProfile(name="Tag based placement",
                                                                           capability=[rule])]))
            return self.manager.Create(createSpec=spec).uniqueId

        def delete(self, profile_id: str) -> None:
            self.manager.Delete(profileId=[pbm.profile.ProfileId(uniqueId=profile_id)])

    return Policies()


def disk_keys(vm) -> dict[str, int]:
    """The device key of the VM's system and ephemeral disks."""
    from pyVmomi import vim

    disks = [d for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualDisk)]
    ephemeral = next(d for d in disks if d.backing.fileName.endswith("ephemeral_disk.vmdk"))
    system = next(d for d in disks if d is not ephemeral)
    return {"system": system.key, "ephemeral": ephemeral.key}


def assert_policy(policies, vm, profile_id: str | None) -> None:
    expected = [profile_id] if profile_id else []
    assert policies.of("virtualMachine", vm._moId) == expected
    for name, key in disk_keys(vm).items():
        assert policies.of("virtualDiskId", f"{vm._moId}:{key}") == expected, name


def test_a_vm_types_storage_policy_is_the_vm_s_and_its_disks(cloud, si, policies):
    cpi = cloud.cpi()
    response = cpi.call("create_vm", "agent-policy", cloud.stemcell, {**VM_TYPE, "storage_policy": {"name": POLICY}},
                        network(), [], {})
    assert response.error is None, response.error
    vm_cid = response.result[0]
    try:
        assert f"storage policy '{POLICY}'" in response.log
        assert_policy(policies, vm_of(si, vm_cid), policies.ids()[POLICY])
    finally:
        cpi("delete_vm", vm_cid)


def test_the_global_policy_applies_unless_the_vm_type_names_datastores(cloud, si, policies):
    cpi = cloud.cpi(vm_storage_policy_name=POLICY)
    with_policy = cpi("create_vm", "agent-global", cloud.stemcell, VM_TYPE, network(), [], {})[0]
    named = cpi("create_vm", "agent-named", cloud.stemcell, {**VM_TYPE, "datastores": ["LocalDS_1"]},
                network("10.0.0.51"), [], {})[0]
    try:
        assert_policy(policies, vm_of(si, with_policy), policies.ids()[POLICY])
        vm = vm_of(si, named)
        assert_policy(policies, vm, None)
        assert {d.name for d in vm.datastore} == {"LocalDS_1"}
    finally:
        cpi("delete_vm", with_policy)
        cpi("delete_vm", named)


@pytest.mark.parametrize("where", ["vm_type", "global"])
def test_a_policy_the_vcenter_lacks_refuses_create_vm_with_nothing_made(where, cloud, si):
    cpi = cloud.cpi(**({"vm_storage_policy_name": "gold"} if where == "global" else {}))
    vm_type = {**VM_TYPE, "storage_policy": {"name": "gold"}} if where == "vm_type" else VM_TYPE
    before = vm_names(si)
    response = cpi.call("create_vm", "agent-gold", cloud.stemcell, vm_type, network(), [], {})
    key = "vm_type storage_policy" if where == "vm_type" else "vm_storage_policy_name"
    assert response.error["type"] == "Bosh::Clouds::VMCreationFailed"
    assert response.error["ok_to_retry"] is False
    assert response.error["message"].startswith(f"{key}: the vCenter has no storage policy 'gold' (it has ")
    assert f"'{POLICY}'" in response.error["message"]
    assert vm_names(si) == before


def test_the_vm_and_its_disks_go_only_on_datastores_the_policy_allows(cloud, si, policies):
    """The placement solver's answer bounds where the VM goes: a policy only LocalDS_1
    satisfies (tests/vsphere/vcsim/patch.py: the simulator's solver keeps to a policy's
    `vcsim-datastores:` list) puts every VM and its ephemeral disk there, though LocalDS_0
    matches datastore_pattern too; a policy no datastore satisfies refuses create_vm."""
    only_one = policies.create("cpi-test only LocalDS_1", "vcsim-datastores: LocalDS_1")
    nowhere = policies.create("cpi-test nowhere", "vcsim-datastores:")
    cpi = cloud.cpi()
    made = []
    try:
        for index in range(4):  # with both datastores open, each VM would have an even chance of LocalDS_0
            made.append(cpi("create_vm", f"agent-one-{index}", cloud.stemcell,
                            {**VM_TYPE, "storage_policy": {"name": "cpi-test only LocalDS_1"}},
                            network(f"10.0.0.{70 + index}"), [], {})[0])
        for vm_cid in made:
            vm = vm_of(si, vm_cid)
            assert {d.name for d in vm.datastore} == {"LocalDS_1"}, vm_cid
            assert_policy(policies, vm, only_one)
        before = vm_names(si)
        refused = cpi.call("create_vm", "agent-nowhere", cloud.stemcell,
                           {**VM_TYPE, "storage_policy": {"name": "cpi-test nowhere"}}, network("10.0.0.79"), [], {})
        assert refused.error is not None and refused.error["type"] == "Bosh::Clouds::VMCreationFailed"
        assert "no datastore of the datacenter satisfies storage policy 'cpi-test nowhere'" in \
            refused.error["message"]
        assert vm_names(si) == before
    finally:
        for vm_cid in made:
            cpi("delete_vm", vm_cid)
        policies.delete(only_one)
        policies.delete(nowhere)
