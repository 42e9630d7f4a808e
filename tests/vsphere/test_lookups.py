"""Lookups by name (cpi/clouds/vsphere/lookups.py) against the simulator's default inventory,
and the point of them: finding a network costs the same requests with 10 port groups as with
hundreds (the official CPI reads every network's name)."""

from __future__ import annotations

import time

import pytest
from pyVim.task import WaitForTask
from pyVmomi import vim

from cpi.clouds.vsphere import lookups
from cpi.clouds.vsphere.vcenter import session
from cpi.errors import CloudError, NetworkNotFound
from tests.support import vcsim as vcsim_server
from tests.vsphere.conftest import vsphere_properties


def _counted(current, find):
    """What `find()` returns, and the SOAP requests it sent."""
    before = current.requests
    found = find()
    return found, current.requests - before


def test_each_kind_is_found_by_name_in_one_request(properties):
    current = session.get(properties)
    cases = [
        (lambda: lookups.datacenter(current, "DC0"), vim.Datacenter, "DC0"),
        (lambda: lookups.cluster(current, "DC0", "DC0_C0"), vim.ClusterComputeResource, "DC0_C0"),
        (lambda: lookups.resource_pool(current, "DC0", "DC0_C0"), vim.ResourcePool, "Resources"),
        (lambda: lookups.datastore(current, "DC0", "LocalDS_0"), vim.Datastore, "LocalDS_0"),
        (lambda: lookups.folder(current, "DC0", ""), vim.Folder, "vm"),
        (lambda: lookups.network(current, "DC0", "VM Network"), vim.Network, "VM Network"),
        (lambda: lookups.network(current, "DC0", "DC0_DVPG0"), vim.dvs.DistributedVirtualPortgroup, "DC0_DVPG0"),
    ]
    for find, kind, name in cases:
        found, requests = _counted(current, find)
        assert isinstance(found, kind), found
        assert requests == 1, (name, requests)
        assert found.name == name


def test_a_missing_name_is_a_clear_error_naming_it(properties):
    current = session.get(properties)
    with pytest.raises(NetworkNotFound, match="network 'no-such-net' in datacenter 'DC0' not found") as missing:
        lookups.network(current, "DC0", "no-such-net")
    assert "DC0/network/no-such-net" in str(missing.value)
    with pytest.raises(CloudError, match="datacenter 'DC9' not found"):
        lookups.datacenter(current, "DC9")
    with pytest.raises(CloudError, match="cluster 'DC0_C9' in datacenter 'DC0' not found"):
        lookups.cluster(current, "DC0", "DC0_C9")
    with pytest.raises(CloudError, match="resource pool 'pool-9' of cluster 'DC0_C0'"):
        lookups.resource_pool(current, "DC0", "DC0_C0", "pool-9")
    with pytest.raises(CloudError, match="datastore 'LocalDS_9' in datacenter 'DC0' not found"):
        lookups.datastore(current, "DC0", "LocalDS_9")
    with pytest.raises(CloudError, match="VM folder 'BOSH_VMs' in datacenter 'DC0' not found"):
        lookups.folder(current, "DC0", "BOSH_VMs")
    # the right name of the wrong kind: a standalone host is no cluster
    with pytest.raises(CloudError, match="'DC0/host/DC0_H0' is a ComputeResource, not a ClusterComputeResource"):
        lookups.cluster(current, "DC0", "DC0_H0")


def add_port_groups(si, count: int, prefix: str = "cpi-test-pg-") -> None:
    """`count` distributed port groups on the datacenter's distributed switch, in one task."""
    dc = si.content.searchIndex.FindByInventoryPath("DC0")
    switch = next(n for n in dc.networkFolder.childEntity if isinstance(n, vim.DistributedVirtualSwitch))
    start = len(switch.portgroup)
    spec = vim.dvs.DistributedVirtualPortgroup.ConfigSpec
    specs = [spec(name=f"{prefix}{start + i}", type="earlyBinding", numPorts=8) for i in range(count)]
    WaitForTask(switch.AddDVPortgroup_Task(spec=specs))


def test_a_network_lookup_costs_the_same_requests_with_hundreds_of_port_groups():
    server = vcsim_server.server()  # a simulator of its own: the shared one keeps its default inventory
    try:
        props = vsphere_properties(server)
        current = session.get(props)
        assert len(lookups.datacenter(current, "DC0").network) < 10
        names = ["VM Network", "DC0_DVPG0"]
        few = {name: _counted(current, lambda name=name: lookups.network(current, "DC0", name))[1] for name in names}

        add_port_groups(current.si, 300)
        networks = lookups.datacenter(current, "DC0").network
        assert len(networks) > 300
        started = time.monotonic()
        many = {name: _counted(current, lambda name=name: lookups.network(current, "DC0", name))[1] for name in names}
        newest, requests = _counted(current, lambda: lookups.network(current, "DC0", "cpi-test-pg-300"))
        took = time.monotonic() - started
        assert few == many == {"VM Network": 1, "DC0_DVPG0": 1}
        assert requests == 1 and isinstance(newest, vim.dvs.DistributedVirtualPortgroup)
        assert took < 1.0, took
    finally:
        session.forget()
        server.stop()


def test_a_resource_pool_is_found_by_path_or_by_name_below_the_cluster(properties, si):
    root = si.content.searchIndex.FindByInventoryPath("DC0/host/DC0_C0/Resources")
    spec = vim.ResourceConfigSpec(
        cpuAllocation=vim.ResourceAllocationInfo(reservation=0, limit=-1, expandableReservation=True,
                                                 shares=vim.SharesInfo(level="normal")),
        memoryAllocation=vim.ResourceAllocationInfo(reservation=0, limit=-1, expandableReservation=True,
                                                    shares=vim.SharesInfo(level="normal")))
    parent = root.CreateResourcePool(name="cpi-test-parent", spec=spec)
    child = parent.CreateResourcePool(name="cpi-test-child", spec=spec)
    try:
        current = session.get(properties)
        by_path, requests = _counted(current, lambda: lookups.resource_pool(current, "DC0", "DC0_C0",
                                                                            "cpi-test-parent/cpi-test-child"))
        assert by_path == child and requests == 1
        by_name, requests = _counted(current, lambda: lookups.resource_pool(current, "DC0", "DC0_C0",
                                                                            "cpi-test-child"))
        assert by_name == child and requests == 3  # the path, the root pool, the names below it
        with pytest.raises(CloudError, match="resource pool 'cpi-test-nope' of cluster 'DC0_C0'"):
            lookups.resource_pool(current, "DC0", "DC0_C0", "cpi-test-nope")
    finally:
        WaitForTask(parent.Destroy_Task())
