"""`cpi list|show|avail` on every cloud, through the real `cpi` executable, after the CPI
made something: the operator sees what a director made, with its BOSH tags."""

from __future__ import annotations

import json
import subprocess
import uuid
from typing import ClassVar

from tests.support.operator_cli import bosh_vms_json
from tests.support.runner import DIRECTOR_ENV, ROOT, Cpi

CPI = [str(ROOT / ".venv" / "bin" / "python"), "-m", "cpi.cli"]


def cli(target, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([*CPI, *args, "--config", str(target.config_path)], capture_output=True, text=True,
                          timeout=300, env={**DIRECTOR_ENV, "COLUMNS": "250"})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_list_show_and_avail_see_what_the_cpi_made(target):
    agent_id = f"agent-{uuid.uuid4()}"
    stemcell_cid = target.cpi("create_stemcell", *target.stemcell_args())
    vm_cid = target.cpi("create_vm", agent_id, stemcell_cid, target.vm_cloud_properties(), target.dynamic_network(),
                        [], {})[0]
    disk_cid = target.cpi("create_disk", 1024, target.disk_cloud_properties(), vm_cid)
    try:
        target.cpi("set_vm_metadata", vm_cid, {"director": "d", "deployment": "dep-see", "job": "web", "index": "0"})
        listed = cli(target, "list", "vms", "--json")
        assert listed.returncode == 0, listed.stderr
        vms = {vm["cid"]: vm for vm in json.loads(listed.stdout)}
        assert vm_cid in vms
        tags = vms[vm_cid]["tags"]
        assert tags["agent_id"] == agent_id and tags["deployment"] == "dep-see" and tags["job"] == "web"
        assert tags["director_uuid"] == target.cpi.director_uuid
        mine = json.loads(cli(target, "list", "vms", "--json", "--director-uuid", target.cpi.director_uuid).stdout)
        assert vm_cid in {vm["cid"] for vm in mine}
        assert not json.loads(cli(target, "list", "vms", "--json", "--director-uuid", "someone-else").stdout)
        disks = {disk["cid"]: disk for disk in json.loads(cli(target, "list", "disks", "--json").stdout)}
        assert disks[disk_cid]["details"]["role"] == "persistent"
        table = cli(target, "list", "vms")
        assert vm_cid in table.stdout and "dep-see" in table.stdout
        shown = cli(target, "show", "vm", vm_cid, "--json")
        assert json.loads(shown.stdout)["tags"]["agent_id"] == agent_id
        assert cli(target, "show", "vm", "vm-nonexistent").returncode == 1
        # every cid create_stemcell returns, a light stemcell's ("ami-... light") included
        stemcell = cli(target, "show", "stemcell", stemcell_cid, "--json")
        assert stemcell.returncode == 0, stemcell.stdout + stemcell.stderr
        assert json.loads(stemcell.stdout)["cid"] == stemcell_cid
        for offer in ("sizes", "zones", "networks"):
            offers = cli(target, "avail", offer, "--json")
            assert offers.returncode == 0 and json.loads(offers.stdout), (offer, offers.stderr)
    finally:
        target.cpi("delete_vm", vm_cid)
        target.cpi("delete_disk", disk_cid)
        target.cpi("delete_stemcell", stemcell_cid)
    assert vm_cid not in {vm["cid"] for vm in json.loads(cli(target, "list", "vms", "--json").stdout)}


def test_an_unknown_cloud_is_one_line_not_a_traceback(tmp_path):
    config = tmp_path / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "nosuch"}}))
    proc = subprocess.run([*CPI, "list", "vms", "--config", str(config)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "unknown cloud plugin 'nosuch'" in proc.stderr and "Traceback" not in proc.stderr


def test_a_cloud_without_listing_says_so():
    """A third-party cloud that implements no listing gets a clear NotImplemented."""
    import pytest
    from pydantic import BaseModel

    from cpi import errors
    from cpi.clouds.base import Cloud
    from cpi.models import AgentConfig, CallContext

    class NoProperties(BaseModel):
        pass

    class Bare(Cloud):
        name = "bare"
        stemcell_formats: ClassVar[list[str]] = ["raw"]
        Properties = NoProperties

    cloud = Bare(NoProperties(), AgentConfig(), CallContext())
    for call in (lambda: cloud.inventory("vms"), lambda: cloud.show("vms", "x"), lambda: cloud.available("sizes")):
        with pytest.raises(errors.NotImplemented) as err:
            call()
        assert "bare cloud" in err.value.message


def test_orphans_finds_what_the_director_forgot_and_deletes_it(target, tmp_path):
    """Two VMs and a disk of this director; the director knows one VM (as `bosh vms --json`
    prints it, naming no disk), which holds a disk of the director's with a snapshot:
    orphans lists the other VM and the lone disk, never the held disk nor its snapshot
    (the cloud shows them alive), and --delete -n removes exactly those."""
    director_uuid = f"director-{uuid.uuid4()}"
    cpi = Cpi(target.config_path, director_uuid=director_uuid)
    stemcell_cid = target.cpi("create_stemcell", *target.stemcell_args())
    made = []
    try:
        kept = cpi("create_vm", f"agent-{uuid.uuid4()}", stemcell_cid, target.vm_cloud_properties(),
                   target.dynamic_network(), [], {})[0]
        made.append(("delete_vm", kept))
        lost = cpi("create_vm", f"agent-{uuid.uuid4()}", stemcell_cid, target.vm_cloud_properties(),
                   target.dynamic_network(), [], {})[0]
        made.append(("delete_vm", lost))
        disk = cpi("create_disk", 1024, target.disk_cloud_properties(), None)
        made.append(("delete_disk", disk))
        held = cpi("create_disk", 1024, target.disk_cloud_properties(), kept)
        made.insert(0, ("delete_disk", held))
        # taken while detached: vSphere cannot copy a disk a running VM holds
        snapshot = cpi("snapshot_disk", held, {"deployment": "dep", "job": "db", "index": 0, "director_name": "bosh-1",
                                               "director_uuid": director_uuid, "agent_id": "agent-db",
                                               "instance_id": "uuid-db"})
        made.insert(0, ("delete_snapshot", snapshot))
        cpi("attach_disk", kept, held)
        made.insert(0, ("detach_disk", kept, held))
        known = tmp_path / "known.json"
        known.write_text(bosh_vms_json("web/0", kept))
        listed = cli(target, "orphans", "--director-uuid", director_uuid, "--known", str(known), "--json")
        assert listed.returncode == 0, listed.stderr
        orphaned = {("vm", lost), ("disk", disk)} if target.disks_carry_director else {("vm", lost)}
        assert {(r["kind"], r["cid"]) for r in json.loads(listed.stdout)} == orphaned
        deleted = cli(target, "orphans", "--director-uuid", director_uuid, "--known", str(known), "--delete", "-n")
        assert deleted.returncode == 0, deleted.stdout + deleted.stderr
        assert cpi("has_vm", lost) is False and cpi("has_disk", disk) is (not target.disks_carry_director)
        assert cpi("has_vm", kept) is True and cpi("has_disk", held) is True
        assert snapshot in {r["cid"] for r in json.loads(cli(target, "list", "snapshots", "--json").stdout)}
        again = cli(target, "orphans", "--director-uuid", director_uuid, "--known", str(known), "--json")
        assert json.loads(again.stdout) == []
    finally:
        for method, *cids in made:
            target.cpi(method, *cids)
        target.cpi("delete_stemcell", stemcell_cid)
