"""cpi/retry.py: classification, full-jitter backoff, Retry-After, the time budget, and a
log line per wait. Time is simulated: `sleep` advances a fake clock that tenacity reads."""

from __future__ import annotations

import logging
import random

import pytest

from cpi import retry


class Throttled(Exception):
    pass


class Broken(Exception):
    pass


class Clock:
    """Fake monotonic time: tenacity measures elapsed time with time.monotonic."""

    def __init__(self, monkeypatch):
        self.now = 1000.0
        self.sleeps: list[float] = []
        monkeypatch.setattr("tenacity.time.monotonic", lambda: self.now)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def classify(exc):
    if isinstance(exc, Throttled):
        return retry.Verdict(retry.Kind.THROTTLED, "RequestLimitExceeded", getattr(exc, "retry_after", None))
    if isinstance(exc, TimeoutError):
        return retry.Verdict(retry.Kind.TRANSIENT, "ReadTimeout")
    return retry.PERMANENT


def failing(times: int, exc_factory):
    calls = {"n": 0}

    def fn():
        calls["n"] += 1
        if calls["n"] <= times:
            raise exc_factory()
        return "ok"

    fn.calls = calls
    return fn


def test_throttled_calls_are_retried_until_they_succeed_and_each_wait_is_logged(monkeypatch, caplog):
    clock = Clock(monkeypatch)
    fn = failing(3, Throttled)
    with caplog.at_level(logging.INFO, logger="cpi"):
        assert retry.call(fn, classify=classify, what="ec2:DescribeInstances", sleep=clock.sleep,
                          rng=random.Random(1)) == "ok"
    assert fn.calls["n"] == 4
    assert len(clock.sleeps) == 3
    lines = [r.getMessage() for r in caplog.records if r.name == "cpi.retry"]
    assert len(lines) == 3
    assert all("ec2:DescribeInstances throttled (RequestLimitExceeded)" in line for line in lines)
    assert all("retrying in" in line for line in lines)


def test_backoff_is_full_jitter_under_an_exponential_ceiling(monkeypatch):
    clock = Clock(monkeypatch)
    retry.call(failing(6, Throttled), classify=classify, what="x", sleep=clock.sleep, rng=random.Random(7))
    base, cap = retry.THROTTLED_BACKOFF.base, retry.THROTTLED_BACKOFF.cap
    for attempt, slept in enumerate(clock.sleeps, start=1):
        assert 0 <= slept <= min(cap, base * 2 ** (attempt - 1))
    # jitter: not every wait sits at its ceiling
    assert any(s < min(cap, base * 2 ** i) * 0.9 for i, s in enumerate(clock.sleeps))


def test_transient_errors_use_the_shorter_backoff(monkeypatch):
    clock = Clock(monkeypatch)
    retry.call(failing(3, TimeoutError), classify=classify, what="x", sleep=clock.sleep, rng=random.Random(3))
    assert all(s <= retry.TRANSIENT_BACKOFF.cap for s in clock.sleeps)
    assert clock.sleeps[0] <= retry.TRANSIENT_BACKOFF.base


def test_permanent_errors_are_raised_at_once(monkeypatch):
    clock = Clock(monkeypatch)
    fn = failing(5, Broken)
    with pytest.raises(Broken):
        retry.call(fn, classify=classify, what="x", sleep=clock.sleep)
    assert fn.calls["n"] == 1 and clock.sleeps == []


def test_retry_after_is_a_minimum_wait(monkeypatch):
    clock = Clock(monkeypatch)

    def throttled_with_hint():
        exc = Throttled()
        exc.retry_after = 7.5
        return exc

    retry.call(failing(2, throttled_with_hint), classify=classify, what="x", sleep=clock.sleep, rng=random.Random(0))
    assert clock.sleeps and all(s >= 7.5 for s in clock.sleeps)


def test_the_budget_ends_retries_before_a_sleep_would_overrun_it(monkeypatch, caplog):
    clock = Clock(monkeypatch)
    fn = failing(10_000, Throttled)
    with caplog.at_level(logging.INFO, logger="cpi"), pytest.raises(Throttled):
        retry.call(fn, classify=classify, what="ec2:RunInstances", budget=60, sleep=clock.sleep, rng=random.Random(2))
    assert sum(clock.sleeps) <= 60
    assert fn.calls["n"] > 3  # a budget, not a small count
    assert any("giving up" in r.getMessage() and "budget (60s)" in r.getMessage() for r in caplog.records)


def test_a_days_retry_after_is_cut_to_max_retry_after_or_ends_the_call_at_once(monkeypatch, caplog):
    """`Retry-After: 86400` is waited for at most throttle.max_retry_after (60 s); a budget
    that cannot hold even that ends the call before any sleep, saying why."""
    def throttled_for_a_day():
        exc = Throttled()
        exc.retry_after = 86400.0
        return exc

    clock = Clock(monkeypatch)
    assert retry.call(failing(1, throttled_for_a_day), classify=classify, what="x", budget=600, sleep=clock.sleep,
                      rng=random.Random(0)) == "ok"
    assert clock.sleeps == [60.0]
    clock = Clock(monkeypatch)
    with caplog.at_level(logging.INFO, logger="cpi"), pytest.raises(Throttled):
        retry.call(failing(1, throttled_for_a_day), classify=classify, what="x", budget=30, sleep=clock.sleep,
                   rng=random.Random(0))
    assert clock.sleeps == []
    assert any("the next wait (60.0s) would pass the budget (30s)" in r.getMessage() for r in caplog.records)


def test_max_attempts_is_a_backstop(monkeypatch):
    clock = Clock(monkeypatch)
    fn = failing(100, Throttled)
    with pytest.raises(Throttled):
        retry.call(fn, classify=classify, what="x", budget=10_000, max_attempts=4, sleep=clock.sleep)
    assert fn.calls["n"] == 4


def test_decorator_form(monkeypatch):
    clock = Clock(monkeypatch)
    calls = {"n": 0}

    @retry.retrying(classify=classify, budget=100)
    def describe(x):
        calls["n"] += 1
        if calls["n"] < 3:
            raise TimeoutError
        return x * 2

    monkeypatch.setattr(retry.time, "sleep", clock.sleep)
    assert describe(21) == 42
    assert calls["n"] == 3


def test_each_failure_is_classified_once(monkeypatch):
    """A classifier may itself ask the cloud (is the volume's holder still alive?)."""
    clock = Clock(monkeypatch)
    seen = []

    def counting(exc):
        seen.append(exc)
        return classify(exc)

    retry.call(failing(2, Throttled), classify=counting, what="x", sleep=clock.sleep, rng=random.Random(5))
    assert len(seen) == 2 and seen[0] is not seen[1]


def test_a_call_that_succeeds_at_once_does_not_load_tenacity():
    import subprocess
    import sys

    code = ("import sys; from cpi import retry; "
            "assert retry.call(lambda: 1, classify=lambda e: retry.PERMANENT, what='x') == 1; "
            "print('tenacity' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]))
    assert out.stdout.strip() == "False"
