"""How the simulator's set-up fails (tests/support/vcsim.py) and how its patch refuses code
it was not written for (tests/vsphere/vcsim/patch.py); no simulator is started here."""

from __future__ import annotations

import pytest

from tests.support import vcsim
from tests.vsphere.vcsim import patch


def _package(tmp_path):
    """A fake simulator package holding each line the patch edits, once (and beside it the
    other govmomi packages an edit names by a relative path)."""
    package = tmp_path / "simulator"
    for name, old, _new, _why in patch.EDITS:
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((path.read_text() if path.exists() else "package simulator\n") + old)
    return package


def test_the_patch_edits_each_line_once_and_adds_its_go_file(tmp_path):
    package = _package(tmp_path)
    done = patch.apply(package)
    assert len(done) == len(patch.EDITS) + 1
    for name, old, new, _why in patch.EDITS:
        text = (package / name).read_text()
        assert new in text and text.count(old) <= new.count(old)
    assert (package / "cpi_fixes.go").read_text() == patch.FIXES.read_text()


@pytest.mark.parametrize("times", [0, 2])
def test_the_patch_refuses_a_simulator_whose_line_is_not_there_exactly_once(tmp_path, times):
    package = _package(tmp_path)
    name, old, _new, why = patch.EDITS[0]
    (package / name).write_text("package simulator\n" + old * times)
    with pytest.raises(patch.PatchError, match=f"found {times} times") as refused:
        patch.apply(package)
    assert why in str(refused.value) and name in str(refused.value)


def test_switched_off_it_skips_saying_so(monkeypatch):
    monkeypatch.setenv(vcsim.SWITCH_ENV, "0")
    result = vcsim._prepare(lambda line: None)
    assert not result.ok and not result.required
    assert "CPI_TEST_VSPHERE=0" in result.reason


def test_a_failure_where_it_could_work_fails_the_tests_and_elsewhere_skips_them(monkeypatch):
    monkeypatch.setattr(vcsim, "_outcome", vcsim.Outcome(False, "apt-get failed", required=True))
    with pytest.raises(pytest.fail.Exception, match="could not be set up: apt-get failed"):
        vcsim.server()
    monkeypatch.setattr(vcsim, "_outcome", vcsim.Outcome(False, "not root"))
    with pytest.raises(pytest.skip.Exception, match="not root"):
        vcsim.server()


def test_a_build_prunes_what_a_killed_build_left_and_other_keys_unused_for_a_week(tmp_path):
    """Other checkouts' builds in use stay: removing one would fail a run about to start it."""
    import os
    import time

    key, recent, stale = "a" * 24, "b" * 24, "c" * 24
    for name in (key, recent, stale, "build-x1y2", "unrelated"):
        (tmp_path / name).mkdir()
    week_and_a_day = time.time() - vcsim.KEEP_UNUSED_SECONDS - 86400
    os.utime(tmp_path / stale, (week_and_a_day, week_and_a_day))
    vcsim._prune(tmp_path, key)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([key, recent, "unrelated"])
