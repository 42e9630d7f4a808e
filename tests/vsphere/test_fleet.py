"""`cpi orphans` on the simulator (#32): a disk whose disk_type named its datastores has the
official CPI's cid, the file's name followed by "." and the pattern it was made for, while
the datastore holds the file by its name alone; the director knows it by the whole cid
(`bosh disks --orphaned --json` of a detached disk), and it is never offered. `cpi list
disks` calls it persistent, `cpi show disk` finds it by that cid."""

from __future__ import annotations

import json

from tests.support.operator_cli import cli, listed


def test_a_disk_known_by_its_whole_cid_is_no_orphan(cloud, tmp_path):
    cpi = cloud.cpi()
    disk_cid = cpi("create_disk", 1024, {"datastores": ["LocalDS_0"]}, None)
    try:
        name, dot, _ = disk_cid.partition(".")
        assert dot, f"{disk_cid}: no datastore pattern in the cid"
        assert listed(cpi.config_path, "disks")[name]["details"]["role"] == "persistent"
        shown = cli(cpi.config_path, "show", "disk", disk_cid, "--json")  # by the cid the director knows
        assert shown.returncode == 0 and json.loads(shown.stdout)["cid"] == name, shown.stderr
        lone = cpi("create_disk", 1024, {}, None)
        known = tmp_path / "known.json"
        known.write_text(json.dumps({"Tables": [{"Content": "disks", "Header": {"disk_cid": "Disk CID"},
                                                 "Rows": [{"disk_cid": disk_cid, "deployment": "d"}]}],
                                     "Blocks": None, "Lines": ["Succeeded"]}))
        try:
            found = cli(cpi.config_path, "orphans", "--director-uuid", cpi.director_uuid, "--known", str(known),
                        "--json")
            assert found.returncode == 0, found.stderr
            # vSphere keeps no metadata of a disk, as the official CPI keeps none (#32): no disk
            # carries the director, so none is offered, the known one nor the lone one
            assert {(r["kind"], r["cid"]) for r in json.loads(found.stdout) if r["kind"] == "disk"} == set()
        finally:
            cpi("delete_disk", lone)
    finally:
        cpi("delete_disk", disk_cid)
