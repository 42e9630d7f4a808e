"""`cpi orphans` deletes only what it can be sure the director forgot: an input it cannot
trust is refused before anything is listed; what the cloud shows alive (a disk attached to
a known VM, the snapshots of a disk that stays, the stemcell a VM runs) is never offered,
whatever the input lacks, and the lists it lacks are named; stemcells nothing runs and the
director does not know are listed too. On the local cloud, through the `cpi` command and
bin/cpi (tests/aws/test_fleet.py does the same against moto)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support import suite
from tests.support.runner import DIRECTOR_ENV, ROOT, Cpi

CPI = [str(ROOT / ".venv" / "bin" / "python"), "-m", "cpi.cli"]
DIRECTOR = "director-orphans-1"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A stemcell and a VM made from it, a disk with a snapshot, a second disk and a second
    stemcell no VM runs, all of DIRECTOR's."""
    work = tmp_path_factory.mktemp("orphans")
    config = work / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {
        "local": {"state_dir": str(work / "state")}}}}))
    (work / "image").write_bytes(b"stemcell")
    cpi = Cpi(config, director_uuid=DIRECTOR)
    stemcell = cpi("create_stemcell", str(work / "image"), {})
    vm = cpi("create_vm", "agent-o", stemcell, {}, {"default": {"type": "dynamic", "cloud_properties": {}}}, [], {})[0]
    disk = cpi("create_disk", 1, {}, None)
    snapshot = cpi("snapshot_disk", disk, {})
    other = cpi("create_disk", 1, {}, None)
    spare = cpi("create_stemcell", str(work / "image"), {})
    yield {"config": config, "work": work, "cpi": cpi, "stemcell": stemcell, "vm": vm, "disk": disk,
           "snapshot": snapshot, "other": other, "spare": spare}
    for method, cid in (("delete_vm", vm), ("delete_snapshot", snapshot), ("delete_disk", disk),
                        ("delete_disk", other), ("delete_stemcell", stemcell), ("delete_stemcell", spare)):
        cpi(method, cid)
    suite.stop_vms(work / "state")


def orphans(made, known_text: str, *flags: str) -> subprocess.CompletedProcess:
    known = made["work"] / "known.json"
    known.write_text(known_text)
    return subprocess.run([*CPI, "orphans", "--director-uuid", DIRECTOR, "--known", str(known),
                           "--config", str(made["config"]), *flags],
                          capture_output=True, text=True, env={**DIRECTOR_ENV, "COLUMNS": "250"}, timeout=120)


@pytest.mark.parametrize("text, words", [
    ("", "is empty"),
    ("  \n", "is empty"),
    ("[]", "not a non-empty list of cids"),
    ('{"Tables":null,"Blocks":null,"Lines":["Expected non-empty Director URL"]}',
     "without tables: Expected non-empty Director URL"),
    ('{"Tables": [{"Content": "instances", "Rows": [{"vm_cid": "vm-1"', "not complete JSON"),
    ('{"deployments": ["cf"]}', "not bosh-cli's --json output"),
    ('{"Tables": [{"Content": "vms", "Rows": []}], "Blocks": null, "Lines": []}', "names no cid"),
    ("Using environment '10.0.0.6' as client 'admin'\n", "is not a cid"),
])
def test_an_input_it_cannot_trust_is_refused_and_nothing_is_deleted(made, text, words):
    proc = orphans(made, text, "--delete", "-n")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert words in proc.stderr and "nothing listed or deleted" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ""
    cpi = made["cpi"]
    assert cpi("has_vm", made["vm"]) and cpi("has_disk", made["disk"]) and cpi("has_disk", made["other"])


def test_the_snapshot_of_a_known_disk_is_no_orphan_and_unknown_stemcells_are_listed(made):
    """What `bosh instances --details --json` says of an instance whose VM is stopped and
    whose persistent disk is detached: its disk is known, so is the snapshot of it; the
    stemcell the VM runs is not offered, the one nothing runs is."""
    known = {"Tables": [{"Content": "instances", "Rows": [
        {"instance": "db/0", "process_state": "stopped", "vm_cid": made["vm"], "disk_cids": made["disk"]}]}],
        "Blocks": None, "Lines": ["Succeeded"]}
    proc = orphans(made, json.dumps(known), "--json")
    assert proc.returncode == 0, proc.stderr
    found = {(r["kind"], r["cid"]) for r in json.loads(proc.stdout)}
    assert found == {("disk", made["other"]), ("stemcell", made["spare"])}
    # with the stemcells known too (bosh stemcells --json, concatenated): only the other disk
    stemcells = {"Tables": [{"Content": "stemcells", "Rows": [{"name": "s", "version": "1", "cid": made["spare"]}]}],
                 "Blocks": None, "Lines": []}
    proc = orphans(made, json.dumps(known) + "\n" + json.dumps(stemcells), "--json")
    assert {(r["kind"], r["cid"]) for r in json.loads(proc.stdout)} == {("disk", made["other"])}


def bosh_json(content: str, *rows: dict) -> str:
    """One document as bosh-cli's --json prints it."""
    return json.dumps({"Tables": [{"Content": content, "Header": {key: key for row in rows[:1] for key in row},
                                   "Rows": list(rows), "Notes": None}], "Blocks": None, "Lines": ["Succeeded"]})


def test_what_the_cloud_shows_alive_is_never_offered_whatever_the_input_lacks(made):
    """The README's old recipe (`bosh vms --json` and `bosh disks --orphaned --json`) names
    the VM but not its attached disk nor that disk's snapshot: neither is offered, and
    --delete removes only the disk and snapshot nothing holds; stderr names the lists the
    input lacks."""
    cpi = made["cpi"]
    cpi("attach_disk", made["vm"], made["disk"])
    lost = cpi("create_disk", 1, {}, None)
    lost_snapshot = cpi("snapshot_disk", lost, {})
    try:
        known = "\n".join([
            bosh_json("vms", {"instance": "db/0", "process_state": "running", "vm_cid": made["vm"], "active": "true"}),
            bosh_json("disks", {"disk_cid": made["other"], "size": "1 MiB", "deployment": "d", "instance": "db/0",
                                "az": "", "orphaned_at": "Sat Nov 28 10:00:00 UTC 2026"}),
            bosh_json("stemcells", {"name": "s", "version": "2", "os": "ubuntu", "cpi": "", "cid": made["spare"]})])
        listed = orphans(made, known, "--json")
        assert listed.returncode == 0, listed.stderr
        assert {(r["kind"], r["cid"]) for r in json.loads(listed.stdout)} == {("disk", lost),
                                                                                ("snapshot", lost_snapshot)}
        assert "`bosh vms --json` names no disk and `bosh instances --details --json` is not in the input" \
            in listed.stderr
        assert "no `bosh orphaned-vms --json` in the input" in listed.stderr
        assert "bosh disks --orphaned" not in listed.stderr and "bosh stemcells" not in listed.stderr
        deleted = orphans(made, known, "--delete", "-n")
        assert deleted.returncode == 0, deleted.stdout + deleted.stderr
        assert cpi("has_disk", lost) is False and cpi("has_disk", made["disk"]) is True
        assert cpi("has_vm", made["vm"]) is True and cpi("has_disk", made["other"]) is True
        left = {(r["kind"], r["cid"]) for kind in ("snapshots", "stemcells") for r in json.loads(subprocess.run(
            [*CPI, "list", kind, "--json", "--config", str(made["config"])], capture_output=True, text=True,
            env=DIRECTOR_ENV, timeout=60, check=True).stdout)}
        assert ("snapshot", made["snapshot"]) in left and ("snapshot", lost_snapshot) not in left
        assert ("stemcell", made["stemcell"]) in left
    finally:
        cpi("detach_disk", made["vm"], made["disk"])
        cpi("delete_snapshot", lost_snapshot)
        cpi("delete_disk", lost)


def test_the_lists_the_input_lacks_are_named():
    """bosh-cli names each table it prints: the reader tells the four lists of the complete
    recipe apart (instances only with --details, which gives them their disks)."""
    from cpi.operator.known import read

    instances = bosh_json("instances", {"instance": "db/0", "vm_cid": "vm-1", "disk_cids": "disk-1"})
    complete = "\n".join([instances, bosh_json("disks", {"disk_cid": "disk-2"}),
                          bosh_json("orphaned_vms", {"vm_cid": "vm-2"}), bosh_json("stemcells", {"cid": "sc-1"})])
    assert read(complete).missing() == [] and read(complete).cids == {"vm-1", "disk-1", "disk-2", "vm-2", "sc-1"}
    short = read(bosh_json("instances", {"instance": "db/0", "vm_cid": "vm-1"}))
    assert short.missing()[0].startswith("`bosh instances --json` without --details names no disk")
    assert len(short.missing()) == 4
    assert "cannot be told" in read("vm-1\ndisk-1\n").missing()[0]
