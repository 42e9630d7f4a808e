"""Where the audit trail goes by default (#32): on a BOSH VM the release's job names its
directory on the persistent disk ($CPI_JOB_STORE, jobs/cpi/templates/env.sh.erb), so the
trail outlives the VM; an explicit `audit.path` and the local cloud's own state dir still
win, and outside a job (no variable, or not an absolute path) it stays under the home.
tests/release/test_packaging.py runs the whole chain on the compiled package."""

from __future__ import annotations

from pathlib import Path

from cpi import audit, config

AWS = {"region": "eu-west-1", "access_key_id": "AKIASTORE", "secret_access_key": "store-secret-Kk"}


def aws_config(**extra):
    return config.build({"cloud": {"plugin": "aws", "properties": {"aws": AWS, **extra}}})


def test_a_job_on_a_vm_keeps_the_trail_on_its_persistent_disk(monkeypatch, tmp_path):
    monkeypatch.setenv(audit.JOB_STORE, str(tmp_path / "store/aws_cpi"))
    assert audit.default_path(aws_config()) == tmp_path / "store/aws_cpi/audit/audit.log"


def test_audit_path_and_the_local_clouds_state_dir_win_over_the_store(monkeypatch, tmp_path):
    monkeypatch.setenv(audit.JOB_STORE, str(tmp_path / "store/cpi"))
    assert audit.default_path(aws_config(audit={"path": str(tmp_path / "mine.log")})) == tmp_path / "mine.log"
    local = config.build({"cloud": {"plugin": "local", "properties": {"local": {"state_dir": str(tmp_path / "s")}}}})
    assert audit.default_path(local).parent == tmp_path / "s"


def test_outside_a_job_the_trail_stays_under_the_home(monkeypatch):
    monkeypatch.delenv(audit.JOB_STORE, raising=False)
    home = Path.home() / ".cache/bosh-cpi/audit/audit.log"
    assert audit.default_path(aws_config()) == home
    monkeypatch.setenv(audit.JOB_STORE, "relative/store")  # never a path relative to wherever the CPI runs
    assert audit.default_path(aws_config()) == home
