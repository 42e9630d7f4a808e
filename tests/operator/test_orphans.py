"""`cpi orphans` deletes only what it can be sure the director forgot: an input it cannot
trust is refused before anything is listed; snapshots of a known disk are not orphans;
stemcells the director does not know are listed too. On the local cloud, through the
`cpi` command and bin/cpi."""

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
    """A stemcell, a VM, a disk with a snapshot, and a second disk, all of DIRECTOR's."""
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
    yield {"config": config, "work": work, "cpi": cpi, "stemcell": stemcell, "vm": vm, "disk": disk,
           "snapshot": snapshot, "other": other}
    for method, cid in (("delete_vm", vm), ("delete_snapshot", snapshot), ("delete_disk", disk),
                        ("delete_disk", other), ("delete_stemcell", stemcell)):
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
    whose persistent disk is detached: its disk is known, so is the snapshot of it."""
    known = {"Tables": [{"Content": "instances", "Rows": [
        {"instance": "db/0", "process_state": "stopped", "vm_cid": made["vm"], "disk_cids": made["disk"]}]}],
        "Blocks": None, "Lines": ["Succeeded"]}
    proc = orphans(made, json.dumps(known), "--json")
    assert proc.returncode == 0, proc.stderr
    found = {(r["kind"], r["cid"]) for r in json.loads(proc.stdout)}
    assert found == {("disk", made["other"]), ("stemcell", made["stemcell"])}
    # with the stemcell known too (bosh stemcells --json, concatenated): only the other disk
    stemcells = {"Tables": [{"Content": "stemcells", "Rows": [{"name": "s", "version": "1", "cid": made["stemcell"]}]}],
                 "Blocks": None, "Lines": []}
    proc = orphans(made, json.dumps(known) + "\n" + json.dumps(stemcells), "--json")
    assert {(r["kind"], r["cid"]) for r in json.loads(proc.stdout)} == {("disk", made["other"])}
