"""The test run keeps to its own corner (tests/support/suite.py): what the CPI keeps under
its user's home by default lands in the suite's HOME, never in the real one."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support import suite
from tests.support.runner import DIRECTOR_ENV, Cpi


def test_the_cpis_defaults_under_home_land_in_the_suites_home():
    """The local cloud with no config at all: its state dir is ~/.local/state/bosh-cpi/local,
    and ~ is the suite's home for bin/cpi as the suite runs it."""
    home = Path(DIRECTOR_ENV["HOME"])
    assert home.is_relative_to(suite.root()) and home != suite.REAL_HOME
    real_state = suite.REAL_HOME / ".local/state/bosh-cpi/local"
    before = suite.snapshot(real_state)
    cpi = Cpi(None)
    disk_cid = cpi("create_disk", 1, {}, None)
    try:
        assert (home / ".local/state/bosh-cpi/local/disks" / disk_cid / "disk.img").is_file()
        assert not (real_state / "disks" / disk_cid).exists()
        assert suite.snapshot(real_state) == before
    finally:
        cpi("delete_disk", disk_cid)
    assert not (home / ".local/state/bosh-cpi/local/disks" / disk_cid).exists()


def test_the_suites_own_processes_and_files_are_in_its_directory():
    assert os.environ["TMPDIR"] == str(suite.root() / "tmp")
    assert os.environ["XDG_CACHE_HOME"] == str(suite.root() / "home/.cache")
    assert (suite.root().stat().st_mode & 0o777) == 0o700
