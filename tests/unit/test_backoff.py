"""The backoff shared across CPI processes: real processes contending for one state file."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time

import pytest

from cpi.backoff import SharedLimiter, ThrottleConfig


def config(tmp_path, **kw) -> ThrottleConfig:
    return ThrottleConfig(state_dir=tmp_path, **kw)


def state_file(tmp_path, key="ec2"):
    """The state file of `key` (named by a hash of the key)."""
    return SharedLimiter(key, config(tmp_path)).store.path


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_burst_then_rate(tmp_path):
    clock = FakeClock()
    limiter = SharedLimiter("ec2", config(tmp_path, max_rate=10, burst=5), clock=clock, sleep=clock.sleep)
    for _ in range(5):
        limiter.acquire()
    assert clock.now == 1000.0  # the burst goes at once
    for _ in range(10):
        limiter.acquire()
    assert clock.now == pytest.approx(1001.0)  # then 10 per second


def test_throttle_cuts_rate_blocks_until_retry_after_and_recovers(tmp_path):
    clock = FakeClock()
    cfg = config(tmp_path, max_rate=8, burst=1, min_rate=1)
    a = SharedLimiter("ec2", cfg, clock=clock, sleep=clock.sleep)
    b = SharedLimiter("ec2", cfg, clock=clock, sleep=clock.sleep)  # a sibling process
    a.acquire()
    a.throttled(retry_after=3.0)
    state = json.loads(state_file(tmp_path).read_text())
    assert state["rate"] == pytest.approx(8 * 0.7) and state["not_before"] == pytest.approx(1003.0)
    a.throttled(retry_after=3.0)  # a sibling throttled in the same second: no second cut
    assert json.loads(state_file(tmp_path).read_text())["rate"] == pytest.approx(8 * 0.7)
    b.acquire()  # the sibling waits too
    assert clock.now >= 1003.0
    for _ in range(200):
        b.succeeded()
    assert json.loads(state_file(tmp_path).read_text())["rate"] == 8  # back to the maximum


def test_rate_is_forgotten_after_a_quiet_spell(tmp_path):
    clock = FakeClock()
    limiter = SharedLimiter("ec2", config(tmp_path, max_rate=8, forget_after=60), clock=clock, sleep=clock.sleep)
    limiter.throttled()
    limiter.throttled()
    clock.now += 61
    limiter.acquire()
    assert json.loads(state_file(tmp_path).read_text())["rate"] == 8


def test_corrupt_state_is_treated_as_fresh(tmp_path):
    state_file(tmp_path).write_text("{half a document")
    limiter = SharedLimiter("ec2", config(tmp_path))
    limiter.acquire()
    assert json.loads(state_file(tmp_path).read_text())["rate"] == 20


def _worker(state_dir, count, results):
    limiter = SharedLimiter("shared", ThrottleConfig(state_dir=state_dir, max_rate=40, burst=2))
    for _ in range(count):
        limiter.acquire()
    results.put(time.time())


def test_processes_share_one_rate(tmp_path):
    """6 processes × 10 requests at a shared 40/s take at least (60 - burst) / 40 s."""
    results = multiprocessing.Queue()
    started = time.time()
    procs = [multiprocessing.Process(target=_worker, args=(tmp_path, 10, results)) for _ in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    finished = max(results.get(timeout=5) for _ in procs)
    assert finished - started >= (60 - 2) / 40 * 0.95


def _hold_lock(lock_path, ready):
    import fcntl

    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    ready.set()
    time.sleep(60)


def test_a_process_killed_holding_the_lock_blocks_nobody(tmp_path):
    ready = multiprocessing.Event()
    holder = multiprocessing.Process(target=_hold_lock,
                                     args=(str(SharedLimiter("ec2", config(tmp_path)).store.lock_path), ready))
    holder.start()
    assert ready.wait(10)
    os.kill(holder.pid, signal.SIGKILL)
    holder.join()
    started = time.monotonic()
    SharedLimiter("ec2", config(tmp_path)).acquire()
    assert time.monotonic() - started < 1.0


def test_file_names_carry_no_part_of_the_key(tmp_path):
    """A password in an endpoint URL must not become a file name; the key inside the file
    has any user info masked."""
    key = "aws-ec2-us-east-1-bosh:hunter2@ec2.example:443"
    limiter = SharedLimiter(key, config(tmp_path))
    limiter.acquire()
    limiter.throttled(0.0)
    names = [p.name for p in tmp_path.iterdir()]
    assert names and not any("hunter2" in n or "ec2" in n for n in names), names
    assert "hunter2" not in limiter.store.path.read_text()
    assert json.loads(limiter.store.path.read_text())["key"] == "<redacted>@ec2.example:443"


def test_endpoint_key_drops_user_info():
    from cpi.backoff import endpoint_key

    assert endpoint_key("https://bosh:pa%40ss@ec2.example:8443/path?x=1") == "ec2.example:8443"
    assert endpoint_key("https://ec2.example") == "ec2.example"


def test_state_dir_is_made_private_and_links_inside_are_not_followed(tmp_path):
    state_dir = tmp_path / "throttle"
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    limiter = SharedLimiter("ec2", config(state_dir))
    assert (state_dir.stat().st_mode & 0o777) == 0o700
    limiter.store.lock_path.symlink_to(victim)
    with pytest.raises(OSError):
        limiter.acquire()
    limiter.store.lock_path.unlink()
    limiter.store.path.symlink_to(victim)
    limiter.acquire()  # a link where the state was: read as fresh, replaced by a file
    assert victim.read_text() == "untouched"
    assert not limiter.store.path.is_symlink()


def test_a_state_dir_others_can_write_is_refused(tmp_path):
    from cpi.errors import CpiError

    state_dir = tmp_path / "throttle"
    state_dir.mkdir()
    state_dir.chmod(0o777)
    with pytest.raises(CpiError, match=r"cloud\.properties\.throttle\.state_dir"):
        SharedLimiter("ec2", config(state_dir))
    assert list(state_dir.iterdir()) == []


def test_default_state_dir_is_in_the_users_home(monkeypatch, tmp_path):
    from cpi import backoff

    monkeypatch.setenv("HOME", str(tmp_path))
    assert backoff.default_state_dir() == tmp_path / ".cache" / "bosh-cpi" / "throttle"
    SharedLimiter("ec2", ThrottleConfig()).acquire()
    assert (tmp_path / ".cache" / "bosh-cpi" / "throttle").stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("garbage", [
    {"not_before": 1000.0 + 86400},  # one server's Retry-After of a day, stored before the cap
    {"tokens": -1e300},
    {"tokens": float("nan")},
    {"rate": float("inf")},
    {"updated": "yesterday"},
    {"last_throttled": [1, 2]},
    {"rate": True},
], ids=["far-not-before", "huge-negative-tokens", "nan", "inf", "string", "list", "bool"])
def test_a_stored_state_no_rule_could_have_written_is_dropped_and_reset(tmp_path, garbage):
    """The state file is data from outside: whatever it holds, a call neither sleeps for it
    nor fails on it ('unexpected OverflowError'), and the file is rewritten sane."""
    clock = FakeClock()
    cfg = config(tmp_path, max_rate=8, burst=2)
    limiter = SharedLimiter("ec2", cfg, clock=clock, sleep=clock.sleep)
    limiter.acquire()  # writes a sane state
    path = state_file(tmp_path)
    document = {**json.loads(path.read_text()), **garbage}
    path.write_text(json.dumps(document))  # NaN and Infinity as Python's json writes them
    limiter.acquire()
    assert clock.now == 1000.0, "the call waited for a stored value"
    kept = json.loads(path.read_text())
    assert kept["rate"] == 8 and 0 <= kept["tokens"] <= 2 and kept["not_before"] == 0


def test_a_servers_retry_after_is_cut_to_max_retry_after(tmp_path):
    clock = FakeClock()
    limiter = SharedLimiter("ec2", config(tmp_path, max_retry_after=30), clock=clock, sleep=clock.sleep)
    limiter.throttled(retry_after=86400)
    assert json.loads(state_file(tmp_path).read_text())["not_before"] == pytest.approx(1030.0)
    limiter.acquire()
    assert clock.now == pytest.approx(1030.0)


def test_a_turn_past_the_budget_fails_the_call_at_once_retryably_naming_the_wait(tmp_path):
    from cpi.errors import RetriableCloudError

    clock = FakeClock()
    limiter = SharedLimiter("ec2", config(tmp_path), clock=clock, sleep=clock.sleep)
    limiter.throttled(retry_after=45)
    with pytest.raises(RetriableCloudError) as raised:
        limiter.acquire("ec2:DescribeInstances", deadline=time.monotonic() + 10)
    assert clock.now == 1000.0  # no sleep at all
    message = raised.value.message
    assert "ec2:DescribeInstances" in message and "wait 45.0s" in message and "retry budget" in message
    assert raised.value.ok_to_retry is True
    limiter.acquire("ec2:DescribeInstances", deadline=time.monotonic() + 60)  # a budget that allows it: waits
    assert clock.now == pytest.approx(1045.0)
