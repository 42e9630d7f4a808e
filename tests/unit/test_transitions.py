"""Waits that learn how long a kind of transition takes (cpi.transitions, #23): the looks
come when it usually ends, each wait adds its duration, and the records stay private, named
by a digest, and optional (a file that cannot be used costs the learning, not the call)."""

from __future__ import annotations

import itertools
import json
import os
import stat

import pytest

from cpi import transitions, waits
from tests.unit.test_waits import FakeTime

FIXED = waits.Schedule(first=0.25, factor=1.5, cap=5.0)


def wait(history: transitions.History, fake: FakeTime, seconds: float) -> float:
    """Wait for a transition that ends `seconds` after the wait began; the time it returned."""
    began = fake.now
    done_at = began + seconds
    waits.until(lambda: waits.Check(fake.now >= done_at, "BUILD"), what="server to be ACTIVE", timeout=600,
                schedule=FIXED, sleep=fake.sleep, clock=fake.clock, history=history)
    return fake.now - began


def test_the_first_wait_uses_the_fixed_schedule_and_later_ones_look_near_the_usual_end(tmp_path):
    fake = FakeTime()
    history = transitions.History("openstack https://keystone:5000/v3 RegionOne server ACTIVE m1 image",
                                  directory=tmp_path)
    first = wait(history, fake, 1.3)
    assert first == pytest.approx(0.25 + 0.375 + 0.5625 + 0.84375)  # seen at 2.03 s: 0.73 s late
    for _ in range(4):
        later = wait(history, fake, 1.3)
    assert later - 1.3 <= 0.15, later  # within about a tenth of the usual duration
    assert len(fake.slept) < 40
    usual = transitions.History(history.kind, directory=tmp_path).durations()
    assert len(usual) == 5 and all(1.0 < d < 2.1 for d in usual)


def test_a_transition_far_longer_than_usual_is_looked_at_ever_less_often(tmp_path):
    schedule = transitions.Learned(usual=1.0, shortest=0.9, fallback_factor=1.5, fallback_cap=5.0)
    delays = list(itertools.islice(schedule.delays(), 40))
    assert delays[0] == pytest.approx(0.8)
    assert delays[1:8] == [pytest.approx(0.1)] * 7
    assert delays[-1] == 5.0 and sorted(delays[8:]) == delays[8:]
    # a slow cloud: a step of at most STEP_MAX; a fast one: at least STEP_MIN
    assert list(itertools.islice(transitions.Learned(300, 290, 1.5, 5).delays(), 2))[1] == transitions.STEP_MAX
    assert list(itertools.islice(transitions.Learned(0.2, 0.2, 1.5, 5).delays(), 2))[1] == transitions.STEP_MIN


def test_records_are_private_named_by_a_digest_and_keep_the_latest(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    kind = "openstack https://user:secret@keystone.example.com/v3 RegionOne volume available"
    history = transitions.History(kind)
    for duration in range(1, transitions.KEEP + 5):
        history.record(float(duration))
    directory = tmp_path / ".cache" / "bosh-cpi" / "transitions"
    (name,) = os.listdir(directory)
    assert "keystone" not in name and "secret" not in name and name.endswith(".json")
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE((directory / name).stat().st_mode) == 0o600
    assert json.loads((directory / name).read_text()) == [float(d) for d in range(5, transitions.KEEP + 5)]


def test_an_unusable_record_costs_the_learning_not_the_call(tmp_path, caplog):
    history = transitions.History("kind", directory=tmp_path)
    path = tmp_path / (transitions.hashlib.sha256(b"kind").hexdigest()[:24] + ".json")
    path.write_text("{not json")
    assert history.durations() == [] and history.schedule(1.5, 5.0) is None
    assert "unusable" in caplog.text
    # a link planted in its place is not followed
    path.unlink()
    target = tmp_path / "elsewhere.json"
    target.write_text("[1.0]")
    path.symlink_to(target)
    assert transitions.History("kind", directory=tmp_path).durations() == []


def test_a_cache_directory_others_can_write_is_refused_and_the_wait_goes_on(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("HOME", str(tmp_path))
    directory = tmp_path / ".cache" / "bosh-cpi" / "transitions"
    directory.mkdir(parents=True)
    directory.chmod(0o777)
    fake = FakeTime()
    history = transitions.History("kind")
    assert wait(history, fake, 0.5) > 0
    assert "not kept" in caplog.text or "unusable" in caplog.text
    assert os.listdir(directory) == []
