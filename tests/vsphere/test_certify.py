"""`cpi certify` against VMware's simulator, through the real `cpi` executable: the whole
scenario passes with a stemcell image built by the tests (tests/vsphere/stemcell.py), each
call's vCenter request count is in the report, and nothing the run made is left in the
vCenter's folders or on its datastores."""

from __future__ import annotations

from tests.support import certify
from tests.vsphere import stemcell, target


def test_certify_passes_on_the_simulator_and_leaves_nothing(vcsim, si, tmp_path):
    config = target.write_config(tmp_path / "cpi.json", vcsim)
    vcenter = target.Vcenter(vcsim, si)
    before = vcenter.state()
    image, stemcell_properties = target.stemcell_args(stemcell.build(tmp_path / "stemcell"))
    network = {"default": {"type": "manual", "ip": "10.0.0.41", "netmask": "255.255.255.0", "gateway": "10.0.0.1",
                           "dns": ["10.0.0.2"], "default": ["dns", "gateway"],
                           "cloud_properties": {"name": target.NETWORK}}}
    steps = certify.passed("vsphere", config, stemcell=image, stemcell_properties=stemcell_properties,
                           vm_type={"cpu": 1, "ram": 512, "disk": 1024}, network=network, secret=vcsim.password)
    assert steps["create_stemcell"]["created"].startswith("sc-")
    assert steps["create_vm"]["created"].startswith("vm-")
    assert steps["create_disk"]["created"].startswith("disk-")
    assert steps["snapshot_disk"]["created"].startswith("snap-")
    # what the run made is gone: the VMs and files are as before (the folders and the custom
    # field definitions it made stay, as the director's would)
    after = vcenter.state()
    assert after["vms"] == before["vms"]
    made_files = {path for path in after["files"] if path not in before["files"]}
    assert {p for p in made_files if p.endswith((".vmdk", ".json", ".iso"))} == set(), made_files
