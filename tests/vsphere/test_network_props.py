"""A network's cloud_properties in create_vm are checked by the vsphere cloud's
NetworkCloudProperties, as AWS and OpenStack check theirs: a value of the wrong type fails
the call with CpiError naming the network and the key, before anything is made (it used to
reach the vCenter's network lookup as it was)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.runner import COLD_ENV, Cpi
from tests.vsphere import target as vsphere_target
from tests.vsphere.test_not_yet import NETWORKS, vm_names


def test_create_vm_refuses_a_network_name_of_a_wrong_type_before_making_a_vm(vcsim: Any, si: Any,
                                                                             tmp_path: Path) -> None:
    config_path = vsphere_target.write_config(tmp_path / "cpi.json", vcsim)
    networks = {"default": {**NETWORKS["default"], "cloud_properties": {"name": ["VM Network"]}}}
    before = vm_names(si)
    response = Cpi(config_path, env={**COLD_ENV, "HOME": str(tmp_path)}).call(
        "create_vm", "agent-1", "sc-00000000-0000-0000-0000-000000000000", {"cpu": 1, "ram": 256, "disk": 1024},
        networks, [], {})
    assert response.error == {"type": "Bosh::Clouds::CpiError", "ok_to_retry": False,
                              "message": "invalid network 'default' cloud_properties: name: Input should be a valid "
                                         "string (got [\"VM Network\"])"}
    assert vm_names(si) == before
