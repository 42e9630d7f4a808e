"""The shared wait loop (cpi.waits) on a fake clock: schedules, first look, timeouts, aborts
and what it logs."""

from __future__ import annotations

import itertools
import logging

import pytest

from cpi import waits
from cpi.errors import CloudError, VMCreationFailed


class FakeTime:
    """A clock that only moves when the loop sleeps; records every pause."""

    def __init__(self):
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def looks(*states: str, done: str = "ready"):
    """A check that reports `states` in turn (the last one repeats); done at `done`."""
    seen: list[str] = []
    sequence = itertools.chain(states, itertools.repeat(states[-1]))

    def check() -> waits.Check[str]:
        state = next(sequence)
        seen.append(state)
        return waits.Check(state == done, state, f"value at {state}")

    check.seen = seen
    return check


def run(check, fake: FakeTime, **kw):
    kw.setdefault("what", "thing t-1 to be ready")
    kw.setdefault("timeout", 60)
    kw.setdefault("schedule", waits.Schedule(first=0.25, factor=2.0, cap=3.0))
    return waits.until(check, sleep=fake.sleep, clock=fake.clock, **kw)


def test_delays_start_at_first_grow_by_factor_and_stop_at_cap():
    delays = waits.Schedule(first=0.25, factor=2.0, cap=3.0).delays()
    assert list(itertools.islice(delays, 6)) == [0.25, 0.5, 1.0, 2.0, 3.0, 3.0]
    delays = waits.Schedule(first=0.25, factor=1.5, cap=1.0).delays()
    assert list(itertools.islice(delays, 5)) == [0.25, 0.375, 0.5625, 0.84375, 1.0]
    # a cap below the first pause wins: no pause is ever longer than the cap
    assert list(itertools.islice(waits.Schedule(first=0.25, factor=1.5, cap=0.1).delays(), 3)) == [0.1] * 3


def test_first_look_comes_after_the_first_pause_then_pauses_follow_the_schedule():
    fake = FakeTime()
    check = looks("pending", "pending", "pending", "pending", "ready")
    assert run(check, fake) == "value at ready"
    assert check.seen == ["pending"] * 4 + ["ready"]
    assert fake.slept == [0.25, 0.5, 1.0, 2.0, 3.0]  # one pause before each look


def test_check_first_looks_at_once():
    fake = FakeTime()
    assert run(looks("ready"), fake, check_first=True) == "value at ready"
    assert fake.slept == []
    fake = FakeTime()
    check = looks("pending", "ready")
    run(check, fake, check_first=True)
    assert check.seen == ["pending", "ready"] and fake.slept == [0.25]


def test_timeout_names_the_resource_its_last_state_and_the_setting():
    fake = FakeTime()
    check = looks("pending", "attaching")
    with pytest.raises(waits.WaitTimeout) as caught:
        run(check, fake, what="volume vol-1 to attach", timeout=10, setting="volume_wait_timeout")
    error = caught.value
    assert isinstance(error, CloudError) and error.ok_to_retry
    assert error.to_wire()["type"] == "Bosh::Clouds::CloudError"
    assert error.message.startswith("timed out after 10s (volume_wait_timeout 10s) waiting for volume vol-1 to attach")
    assert "(still attaching, 6 looks)" in error.message
    # it gives up instead of sleeping past the timeout
    assert sum(fake.slept) <= 10 and sum(fake.slept) + 3.0 > 10


def test_timeout_without_a_setting_says_no_more_than_the_wait():
    with pytest.raises(waits.WaitTimeout,
                       match=r"^timed out after \ds waiting for thing t-1 to be ready \(still pending, "):
        run(looks("pending"), FakeTime(), timeout=5)


def test_a_check_that_raises_aborts_the_wait():
    fake = FakeTime()
    calls = []

    def check() -> waits.Check:
        calls.append(1)
        if len(calls) == 2:
            raise VMCreationFailed("instance i-1 went terminated while starting", ok_to_retry=False)
        return waits.Check(False, "pending")

    with pytest.raises(VMCreationFailed, match="went terminated"):
        run(check, fake)
    assert len(calls) == 2 and fake.slept == [0.25, 0.5]


def test_each_change_of_state_is_logged_once_to_the_callers_logger(caplog):
    fake = FakeTime()
    caplog.set_level(logging.INFO)
    run(looks("not visible yet", "pending", "pending", "pending", "ready"), fake, what="instance i-1 to be running")
    lines = [(r.name, r.getMessage()) for r in caplog.records]
    assert lines == [
        (__name__, "instance i-1 to be running: not visible yet (after 0.25s)"),
        (__name__, "instance i-1 to be running: pending (after 0.75s)"),
        (__name__, "instance i-1 to be running: ready (after 6.75s)"),
        (__name__, "instance i-1 to be running: done after 6.75s, 5 looks"),
    ]


def test_a_resource_done_at_the_first_look_logs_only_done_and_a_given_logger_is_used(caplog):
    caplog.set_level(logging.INFO)
    run(looks("ready"), FakeTime(), check_first=True, log=logging.getLogger("cpi.clouds.somewhere"))
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("cpi.clouds.somewhere", "thing t-1 to be ready: done after 0.00s, 1 look"),
    ]
