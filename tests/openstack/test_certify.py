"""`cpi certify` (#11 part 6) against the OpenStack services, through the real `cpi`
executable: the whole scenario passes, each call's request count is in the report, and the
server, volume, snapshot and port it made are gone afterwards."""

from __future__ import annotations

from tests.support import certify


def test_certify_passes_on_openstack_and_leaves_nothing(cloud):
    image_path, stemcell_properties = cloud.stemcell_args()
    steps = certify.passed("openstack", cloud.config_path, stemcell=image_path,
                           stemcell_properties=stemcell_properties, vm_type=cloud.vm_cloud_properties(),
                           network=cloud.dynamic_network())
    for name in ("create_vm", "create_disk", "snapshot_disk"):
        assert steps[name]["created"], steps[name]
    # what this run made is gone (compared by cid, not with a before/after inventory: another
    # test session on the same services may create things meanwhile)
    after = cloud.client.inventory()
    made = {"servers": steps["create_vm"]["created"], "volumes": steps["create_disk"]["created"],
            "snapshots": steps["snapshot_disk"]["created"]}
    assert {kind: cid for kind, cid in made.items() if cid in after[kind]} == {}
    assert cloud.client.ports(device_id=made["servers"]) == []
