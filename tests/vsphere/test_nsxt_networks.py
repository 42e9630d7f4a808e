"""Managed networks on vsphere (#25): create_network and delete_network through NSX-T's
Manager API, as the official CPI makes them, driven through bin/cpi.

NSX-T cannot be had here: the manager is tests/vsphere/nsxt_standin.py. These calls need no
vCenter, so cpi.json names one that is not there: a call that asked it would fail."""

from __future__ import annotations

import types

import pytest

from tests.operator.test_plan import plan
from tests.support.runner import Cpi
from tests.vsphere import target as vsphere_target
from tests.vsphere.https_standin import TRUST_CASES, trust
from tests.vsphere.nsxt_standin import NsxtStandin

NOWHERE = types.SimpleNamespace(host="127.0.0.1", port=9, username="administrator@vsphere.local", password="vc-pw")
PROPS = {"t0_router_id": "t0-1", "transport_zone_id": "tz-overlay", "ip_block_id": "block-1",
         "switch_name": "bosh-net-1", "t1_name": "bosh-t1"}


@pytest.fixture
def nsx():
    standin = NsxtStandin()
    standin.add_t0("t0-1")
    standin.add_t0("t0-no-edge", edge_cluster_id=None)
    standin.add_ip_block("block-1", "10.10.0.0/16")
    yield standin
    standin.close()


def cpi_for(tmp_path, standin, ssl_verify: bool | None = None, **nsxt) -> Cpi:
    config: dict = {"nsxt": {"host": standin.host, "username": standin.username, "password": standin.password,
                             **nsxt}}
    if ssl_verify is not None:
        config["ssl_verify"] = ssl_verify
    return Cpi(vsphere_target.write_config(tmp_path / "cpi.json", NOWHERE, **config))


def test_a_network_from_an_ip_block_is_made_as_the_official_cpi_makes_it_and_deleted_whole(nsx, tmp_path):
    cpi = cpi_for(tmp_path, nsx)
    empty = nsx.networking()
    definition = {"type": "manual", "netmask_bits": 26, "cloud_properties": PROPS}

    # `cpi plan` reads what it must and makes nothing
    document = plan(cpi.config_path, "create_network", definition)
    assert nsx.networking() == empty and nsx.writes == []
    planned = [s["resource_type"] for s in document["steps"] if s["step"] == "mutation"]
    assert planned.count("nsxt_logical_router_port") == 3 and "nsxt_logical_switch" in planned, planned

    made = cpi.call("create_network", definition)
    assert made.error is None, made.error
    switch_id, network, cloud_properties = made.result
    assert network == {"range": "10.10.0.0/26", "gateway": "10.10.0.1", "reserved": []}
    assert cloud_properties == {"name": "bosh-net-1"}
    assert "vCenter requests" not in made.log  # the vCenter was not asked
    switch = nsx.switches[switch_id]
    [subnet] = nsx.subnets.values()
    assert switch["transport_zone_id"] == "tz-overlay" and switch["replication_mode"] == "MTEP"
    assert switch["tags"] == [{"scope": "bosh_cpi_subnet_id", "tag": subnet["id"]}] and subnet["size"] == 64
    [t1] = [r for r in nsx.routers.values() if r["router_type"] == "TIER1"]
    assert t1["display_name"] == "bosh-t1" and t1["edge_cluster_id"] == "edge-cluster-1"
    assert t1["advertisement"]["enabled"] and t1["advertisement"]["advertise_nsx_connected_routes"]
    by_type = {p["resource_type"]: p for p in nsx.router_ports.values()}
    assert by_type["LogicalRouterLinkPortOnTIER0"]["logical_router_id"] == "t0-1"
    assert by_type["LogicalRouterLinkPortOnTIER1"]["linked_logical_router_port_id"]["target_id"] == \
        by_type["LogicalRouterLinkPortOnTIER0"]["id"]
    downlink = by_type["LogicalRouterDownLinkPort"]
    assert downlink["logical_router_id"] == t1["id"]
    assert downlink["subnets"] == [{"ip_addresses": ["10.10.0.1"], "prefix_length": 26}]
    assert nsx.switch_ports[downlink["linked_logical_switch_port_id"]["target_id"]]["logical_switch_id"] == switch_id

    # a second network of that switch name is refused before anything is made
    again = cpi.call("create_network", definition)
    assert again.error is not None and "named 'bosh-net-1' already" in again.error["message"]
    assert len(nsx.switches) == 1

    cpi("delete_network", switch_id)
    assert nsx.networking() == empty
    assert cpi.call("delete_network", switch_id).error is None  # gone is deleted


def test_a_network_with_its_range_is_not_deleted_while_a_vm_is_on_it(nsx, tmp_path):
    cpi = cpi_for(tmp_path, nsx)
    empty = nsx.networking()
    switch_id, network, _ = cpi("create_network", {"type": "manual", "range": "192.168.5.0/24",
                                                   "gateway": "192.168.5.1",
                                                   "cloud_properties": {**PROPS, "switch_name": None}})
    assert network == {} and not nsx.subnets
    nsx.switch_ports["vm-port"] = {"id": "vm-port", "logical_switch_id": switch_id, "vm": True}
    refused = cpi.call("delete_network", switch_id)
    assert refused.error is not None and "2 ports in use" in refused.error["message"], refused.error
    assert switch_id in nsx.switches and len(nsx.routers) == 3
    del nsx.switch_ports["vm-port"]
    cpi("delete_network", switch_id)
    assert nsx.networking() == empty


@pytest.mark.parametrize(("definition", "nsxt", "wire_type", "message"), [
    ({"cloud_properties": {**PROPS, "t0_router_id": "t0-no-edge"}}, {}, "CloudError", "has no edge cluster"),
    ({"cloud_properties": {**PROPS, "transport_zone_id": "tz-gone"}}, {}, "CloudError",
     "transport zone tz-gone not found"),
    ({"cloud_properties": {**PROPS, "transport_zone_id": "tz-full"}}, {}, "CloudError",
     "the transport zone has no port left"),  # after the switch: all undone
    ({"cloud_properties": {**PROPS, "ip_block_id": "block-gone"}}, {}, "CloudError", "IpBlock/block-gone not found"),
    ({"cloud_properties": {**PROPS, "ip_block_id": None}}, {}, "CloudError", "need ip_block_id"),
    ({"gateway": "10.0.0.1", "cloud_properties": PROPS}, {}, "CloudError", "give no gateway"),
    ({"cloud_properties": PROPS}, {"use_policy_api": True}, "NotSupported", "not supported through NSX-T's Policy"),
    ({"cloud_properties": PROPS}, None, "CloudError", "names no NSX-T manager"),
])
def test_what_cannot_be_made_fails_and_leaves_nothing(definition, nsxt, wire_type, message, nsx, tmp_path):
    cpi = cpi_for(tmp_path, nsx, **nsxt) if nsxt is not None else Cpi(
        vsphere_target.write_config(tmp_path / "cpi.json", NOWHERE))
    empty = nsx.networking()
    response = cpi.call("create_network", {"type": "manual", **definition})
    assert response.error is not None and response.error["type"] == f"Bosh::Clouds::{wire_type}", response.error
    assert message in response.error["message"], response.error["message"]
    assert nsx.networking() == empty  # what a failed creation made is removed again


@pytest.mark.parametrize("ssl_verify, ca, works", TRUST_CASES.values(), ids=TRUST_CASES.keys())
def test_ssl_verify_decides_for_the_nsxt_manager_as_for_the_vcenter(ssl_verify, ca, works, nsx, tmp_path):
    """The job's ssl_verify holds for NSX-T too, through bin/cpi: true verifies it (against
    nsxt.ca_cert, else the system's CAs, which never signed the stand-in's self-signed
    certificate), so the admin's password is never sent to it; false verifies nothing,
    whatever CA is given. delete_network asks NSX-T only (cpi.json's vCenter is not there)."""
    cpi = cpi_for(tmp_path, nsx, ssl_verify=ssl_verify, **trust(nsx.host, ca))
    answer = cpi.call("delete_network", "switch-not-there")
    if works:
        assert answer.error is None, answer.error  # gone is deleted
        assert nsx.seen
        return
    assert answer.error is not None
    message = answer.error["message"]
    assert f"TLS with the NSX-T manager at {nsx.host} failed" in message, message
    assert "CERTIFICATE_VERIFY_FAILED" in message and "nsxt.ca_cert" in message and "ssl_verify" in message
    assert nsx.password not in message and nsx.password not in answer.log
    assert nsx.seen == []  # the handshake failed: no request, no Authorization header
