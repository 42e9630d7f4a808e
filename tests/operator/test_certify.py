"""`cpi certify` (#11 part 6) on the local cloud, through the real `cpi` executable: the
whole scenario passes and leaves nothing; a failing step is reported, exits 1 and still
leaves nothing; what cleanup cannot delete is reported as left behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cpi.operator.certify import requests_in
from tests.support.runner import ROOT

KINDS = ("vms", "disks", "snapshots", "stemcells")


def certify(tmp_path: Path, *extra: str, faults: list | None = None,
            own_stemcell: bool = False) -> tuple[subprocess.CompletedProcess, Path]:
    """own_stemcell: no stemcell flags, the local cloud's own (#24)."""
    argv, state = certify_argv(tmp_path, *extra, faults=faults, own_stemcell=own_stemcell)
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120), state


def certify_argv(tmp_path: Path, *extra: str, faults: list | None = None,
                 own_stemcell: bool = False) -> tuple[list[str], Path]:
    """`cpi certify`'s command line on a local cloud of its own, and that cloud's state dir."""
    state = tmp_path / "state"
    local = {"state_dir": str(state)}
    if faults:
        local["faults"] = faults
    config = tmp_path / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {"local": local}}}))
    image = tmp_path / "image"
    image.write_bytes(b"root image\n" * 1000)
    stemcell = [] if own_stemcell else ["--stemcell", str(image), "--stemcell-properties",
                                        json.dumps({"name": "certify-stemcell", "version": "1"})]
    return [sys.executable, "-m", "cpi.cli", "certify", "--config", str(config), *stemcell, *extra], state


def left_in(state: Path) -> dict[str, list[str]]:
    return {kind: sorted(p.name for p in (state / kind).iterdir()) for kind in KINDS if (state / kind).is_dir()
            and any((state / kind).iterdir())}


def test_certify_passes_on_the_local_cloud_and_leaves_nothing(tmp_path):
    proc, state = certify(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "CERTIFIED" in proc.stdout and "NOT CERTIFIED" not in proc.stdout
    assert "clean" in proc.stdout
    for step in ("create_stemcell", "create_vm", "attach_disk", "snapshot_disk", "resize_disk", "reboot_vm",
                 "delete_vm (again)", "delete_stemcell"):
        assert step in proc.stdout
    assert left_in(state) == {}


def test_certify_json_report(tmp_path):
    """Without stemcell flags on the local cloud: a stemcell of its own, removed after."""
    import tempfile

    before = set(Path(tempfile.gettempdir()).glob("cpi-certify-*"))
    proc, state = certify(tmp_path, "--json", own_stemcell=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)  # stdout is only the report: the progress bar is on stderr
    assert report["ok"] is True and report["clean"] is True and report["leftovers"] == []
    assert [s["status"] for s in report["steps"] if s["name"] == "create_stemcell"] == ["passed"]
    assert set(Path(tempfile.gettempdir()).glob("cpi-certify-*")) == before
    assert report["cloud"] == "local" and report["director_uuid"].startswith("cpi-certify-")
    names = [s["name"] for s in report["steps"]]
    assert names[:3] == ["info", "create_stemcell", "create_vm"] and names[-1] == "delete_stemcell"
    assert all(s["status"] == "passed" and s["seconds"] >= 0 for s in report["steps"])
    created = {s["name"]: s["created"] for s in report["steps"] if s["created"]}
    assert set(created) == {"create_stemcell", "create_vm", "create_disk", "snapshot_disk"}
    assert created["create_vm"].startswith("vm-") and created["create_disk"].startswith("disk-")
    assert report["cleanup"] == []  # the scenario deleted everything itself
    assert left_in(state) == {}


def test_a_failing_step_is_reported_and_everything_is_still_cleaned_up(tmp_path):
    proc, state = certify(tmp_path, "--json", faults=[{"method": "attach_disk", "error": "CloudError"}])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    status = {s["name"]: s["status"] for s in report["steps"]}
    failed = [s for s in report["steps"] if s["status"] == "failed"]
    assert [s["name"] for s in failed] == ["attach_disk"]
    assert "CloudError" in failed[0]["error"]
    assert status["has_disk"] == "passed" and status["get_disks"] == "skipped"
    assert report["ok"] is False and report["clean"] is True
    assert [(c["kind"], c["status"]) for c in report["cleanup"]] == [
        ("vm", "deleted"), ("disk", "deleted"), ("stemcell", "deleted")]
    assert left_in(state) == {}


def test_the_table_names_the_failing_step(tmp_path):
    proc, state = certify(tmp_path, faults=[{"method": "resize_disk", "error": "CloudError"}])
    assert proc.returncode == 1
    assert "NOT CERTIFIED" in proc.stdout and "injected fault" in proc.stdout
    assert "clean" in proc.stdout
    assert left_in(state) == {}


def test_the_progress_bar_counts_the_steps_the_verdict_counts(tmp_path):
    """#32: the bar said 6/21 of a run whose verdict then said 20/20 (it counted the cleanup
    as a step, and a failed step as done). On a terminal, with a step failing: every count
    the bar drew is of the verdict's steps, and it ends at the verdict's passed ones."""
    from tests.support import terminal

    argv, state = certify_argv(tmp_path, faults=[{"method": "resize_disk", "error": "CloudError"}])
    seen = terminal.run(argv, columns=120, cwd=ROOT)
    assert seen.returncode == 1, seen.screen
    [(passed, total)] = re.findall(r"^(\d+)/(\d+) steps passed", "\n".join(seen.lines), re.M)
    screen = terminal._CONTROL.sub("", seen.screen)  # every redraw of the bar, colours dropped
    drawn = re.findall(r"certify \S+[^\n\r]*? (\d+)/(\d+) +\d+:\d\d:\d\d", screen)
    assert drawn and {t for _, t in drawn} == {total}, drawn
    assert max(int(p) for p, _ in drawn) == int(passed) < int(total)
    assert left_in(state) == {}


def test_what_cleanup_cannot_delete_is_reported_left_behind(tmp_path):
    proc, state = certify(tmp_path, "--json", faults=[{"method": "delete_disk", "error": "CloudError"}])
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["clean"] is False
    disk = next(s["created"] for s in report["steps"] if s["name"] == "create_disk")
    assert [(left["kind"], left["cid"]) for left in report["leftovers"]] == [("disk", disk)]
    assert left_in(state) == {"disks": [disk]}


def test_requests_are_read_from_the_clouds_log_summary():
    assert requests_in("INFO cpi: 7 AWS requests (DescribeInstances 2, RunInstances 1)\n") == 7
    assert requests_in("INFO 1 OpenStack request (compute 1)") == 1
    assert requests_in("nothing counted here") is None


def _certify_in_flight(tmp_path: Path, stderr, error: str | None = "Bosh::Clouds::CloudError",
                       ) -> tuple[subprocess.Popen, Path, Path]:
    """`cpi certify` on the local cloud, held up in create_disk (a 4 s delay fault, then
    `error`, or the disk made when it is None)."""
    import time

    state = tmp_path / "state"
    config = tmp_path / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {"local": {
        "state_dir": str(state), "faults": [{"method": "create_disk", "delay": 4, "error": error}]}}}}))
    image = tmp_path / "image"
    image.write_bytes(b"root image\n" * 1000)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cpi.cli", "certify", "--config", str(config), "--stemcell", str(image),
         "--stemcell-properties", json.dumps({"name": "certify-stemcell", "version": "1"}), "--json"],
        stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=ROOT,
    )
    deadline = time.monotonic() + 60
    while not (state / "vms").is_dir() or not any((state / "vms").iterdir()):
        assert time.monotonic() < deadline and proc.poll() is None, "no VM was created"
        time.sleep(0.05)
    time.sleep(1.5)  # in create_disk's delay by now
    return proc, state, config


@pytest.mark.parametrize("signum, why", [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM"),
                                         (signal.SIGHUP, "SIGHUP")], ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_ctrl_c_sigterm_and_sighup_still_clean_up_everything(tmp_path, signum, why):
    """A signal while a step runs (create_disk, held up by a delay fault): the report says
    interrupted, exit 1, and what the run had made is deleted. A cancelled CI job (SIGTERM)
    or a closed terminal (SIGHUP) used to end the run on the spot, leaving its VM and
    stemcell."""
    proc, state, _ = _certify_in_flight(tmp_path, subprocess.PIPE)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, out + err
    report = json.loads(out)
    assert report["interrupted"] is True and report["ok"] is False and report["clean"] is True
    assert [s["error"] for s in report["steps"] if s["status"] == "failed"] == [f"interrupted ({why})"]
    assert {c["kind"] for c in report["cleanup"]} >= {"vm", "stemcell"}
    assert left_in(state) == {}


def test_the_call_in_flight_ends_before_the_cleanup_looks(tmp_path):
    """Interrupted while bin/cpi is making a disk: the call goes on to its answer, as a
    director's would, and the cleanup then finds the disk by the run's director_uuid and
    deletes it. The cleanup once ran at once, and the disk appeared after the run had
    reported itself clean."""
    proc, state, _ = _certify_in_flight(tmp_path, subprocess.PIPE, error=None)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    report = json.loads(out)
    assert report["interrupted"] is True and report["clean"] is True, out + err
    assert {c["kind"] for c in report["cleanup"]} == {"vm", "stemcell", "disk"}
    assert left_in(state) == {}


def test_a_run_killed_outright_is_cleaned_up_by_the_next_one(tmp_path):
    """SIGKILL cannot be caught: the run says its director_uuid before it makes anything and
    keeps a journal of what it made; the next `cpi certify` of that config deletes it."""
    import time

    with open(tmp_path / "first.err", "w") as stderr:
        proc, state, config = _certify_in_flight(tmp_path, stderr)
        proc.kill()
        proc.communicate(timeout=30)
    said = (tmp_path / "first.err").read_text()
    director = re.search(r"this run's director_uuid is (cpi-certify-[0-9a-f-]+)", said).group(1)
    time.sleep(3)  # the killed run's create_disk call ends (its delay, then the fault's error)
    left = left_in(state)
    assert left.get("vms") and left.get("stemcells"), left
    journal = Path(os.environ["HOME"]) / ".cache/bosh-cpi/certify" / f"{director}.json"
    assert json.loads(journal.read_text())["made"]["vm"] == left["vms"][0]
    # `cpi orphans` with that director_uuid finds the VM too
    orphans = subprocess.run([sys.executable, "-m", "cpi.cli", "orphans", "--director-uuid", director, "--known", "-",
                              "--config", str(config), "--json"], input="vm-none\n", capture_output=True, text=True,
                             cwd=ROOT, timeout=60)
    assert left["vms"][0] in {r["cid"] for r in json.loads(orphans.stdout)}
    config.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {"local": {"state_dir": str(state)}}}}))
    image = tmp_path / "image"
    again = subprocess.run(
        [sys.executable, "-m", "cpi.cli", "certify", "--config", str(config), "--stemcell", str(image),
         "--stemcell-properties", json.dumps({"name": "certify-stemcell", "version": "1"}), "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"cleaned up after the killed run {director}: vm {left['vms'][0]} deleted" in again.stderr
    assert left_in(state) == {} and not journal.exists()
    second = re.search(r"this run's director_uuid is (cpi-certify-[0-9a-f-]+)", again.stderr).group(1)
    assert not (journal.parent / f"{second}.json").exists()  # a clean run's journal is gone too
