"""The Redis store of the shared backoff (cpi/backoff/redis_store.py) against a real
redis-server (Debian's, tests/support/redis_server.py): the Lua script keeps policy.py's
rules step by step, "machines" with separate state dirs share one rate through it, keys
expire, and a Redis that is gone, dead or mute costs one warning and the file store."""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpi.backoff import SharedLimiter, ThrottleConfig, policy
from cpi.backoff.redis_store import RedisStore
from tests.support import redis_server

PASSWORD = "redis-pw-Hq81zz"


@pytest.fixture(scope="module")
def redis():
    server = redis_server.server(password=PASSWORD)
    yield server
    server.stop()


def config(redis, tmp_path, **kw) -> ThrottleConfig:
    return ThrottleConfig(state_dir=tmp_path, redis_url=redis.url, **kw)


OPS = st.lists(st.tuples(st.sampled_from(["acquire", "throttled", "succeeded"]),
                         st.one_of(st.none(), st.floats(0, 30), st.floats(30, 100_000)),  # beyond max_retry_after
                         st.floats(0, 200)), min_size=1, max_size=40)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(ops=OPS, max_rate=st.floats(1, 50), burst=st.floats(1, 20))
def test_the_lua_script_keeps_the_python_rules_step_by_step(redis, ops, max_rate, burst):
    cfg = ThrottleConfig(redis_url=redis.url, max_rate=max_rate, burst=burst, min_rate=0.5, forget_after=60,
                         max_retry_after=45, redis_key_prefix=f"test-{time.monotonic_ns()}:")
    store = RedisStore("ec2", cfg)
    state, now = None, 1_000_000.0
    for op, retry_after, dt in ops:
        now += dt
        state = policy.current(state, cfg, now)
        expected = policy.apply(op, state, cfg, now, retry_after)
        got = store.step(op, retry_after, now=now)
        assert got == pytest.approx(expected, rel=1e-9, abs=1e-9), (op, retry_after, now)
        kept = {k.decode(): float(v) for k, v in redis.client().hgetall(store.key).items()}
        for field, value in vars(state).items():
            assert kept[field] == pytest.approx(value, rel=1e-9, abs=1e-9), field


@pytest.mark.parametrize("stored", [
    {"not_before": "1e300"}, {"tokens": "-1e300"}, {"rate": "nan"}, {"updated": "inf"}, {"tokens": "many"},
    {"last_decrease": str(1_000_000.0 + 3600)}, "a string key", ["a", "list", "key"],
], ids=["far-not-before", "huge-negative-tokens", "nan", "inf", "word", "future", "string-type", "list-type"])
def test_a_stored_state_no_rule_could_have_written_is_reset_as_the_python_rules_do(redis, stored):
    """Other directors write this Redis: a hash with garbage in it, or a key of another type,
    is dropped and a fresh state written, exactly as policy.current() does for the file."""
    cfg = ThrottleConfig(redis_url=redis.url, max_rate=8, burst=2, redis_key_prefix=f"garbage-{time.monotonic_ns()}:")
    store = RedisStore("ec2", cfg)
    now = 1_000_000.0
    assert store.step("acquire", now=now) == 0
    client = redis.client()
    if isinstance(stored, dict):
        client.hset(store.key, mapping=stored)
        try:
            state = policy.State(**{k.decode(): float(v) for k, v in client.hgetall(store.key).items()})
        except ValueError:
            pass  # not a number at all
        else:
            assert not policy.sane(state, cfg, now + 1)
    else:
        client.delete(store.key)
        client.set(store.key, stored) if isinstance(stored, str) else client.rpush(store.key, *stored)
    assert store.step("acquire", now=now + 1) == 0  # no wait, no error
    kept = {k.decode(): float(v) for k, v in client.hgetall(store.key).items()}
    assert kept["rate"] == 8 and kept["not_before"] == 0 and kept["tokens"] == pytest.approx(1)


def test_machines_with_separate_state_dirs_share_one_rate_and_keys_expire(redis, tmp_path):
    prefix = f"share-{time.monotonic_ns()}:"
    one = SharedLimiter("aws-ec2-us-east-1-ec2.example:443",
                        config(redis, tmp_path / "one", max_rate=8, burst=1, redis_key_prefix=prefix))
    two = SharedLimiter("aws-ec2-us-east-1-ec2.example:443",
                        config(redis, tmp_path / "two", max_rate=8, burst=1, redis_key_prefix=prefix))
    one.acquire()
    one.throttled(retry_after=0.6)
    started = time.monotonic()
    two.acquire()  # another machine, told nothing: it waits for the first one's throttle
    assert time.monotonic() - started >= 0.5
    key = one.store.primary.key
    assert key == f"{prefix}aws-ec2-us-east-1-ec2.example:443"
    assert 60 < redis.client().ttl(key) <= 120 + 61  # forget_after (120) + the pause + 60 s
    assert not (tmp_path / "one").exists() and not (tmp_path / "two").exists()  # no file made or used


def test_an_unreachable_redis_costs_one_warning_and_the_file_store(tmp_path, caplog):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once closed
    cfg = ThrottleConfig(state_dir=tmp_path, redis_url=f"redis://:{PASSWORD}@127.0.0.1:{port}/0")
    limiter = SharedLimiter("ec2", cfg)
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="cpi.backoff"):
        for _ in range(3):
            limiter.acquire()
        limiter.throttled(0.0)
        limiter.succeeded()
    assert time.monotonic() - started < 1.0
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "Redis at 127.0.0.1" in warnings[0].getMessage()
    assert PASSWORD not in caplog.text
    assert limiter.store.name == "file" and any(p.suffix == ".json" for p in tmp_path.iterdir())


def test_a_redis_that_never_answers_is_given_up_after_redis_timeout(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted = []
    threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True).start()
    try:
        cfg = ThrottleConfig(state_dir=tmp_path, redis_url=f"redis://127.0.0.1:{listener.getsockname()[1]}/0",
                             redis_timeout=0.2)
        limiter = SharedLimiter("ec2", cfg)
        started = time.monotonic()
        limiter.acquire()
        assert 0.15 < time.monotonic() - started < 1.0 and limiter.store.name == "file"
    finally:
        listener.close()


def test_a_redis_killed_between_requests_is_left_for_the_file_store(tmp_path):
    server = redis_server.server()
    try:
        state_dir = tmp_path / "throttle"
        limiter = SharedLimiter("ec2", ThrottleConfig(state_dir=state_dir, redis_url=server.url))
        limiter.acquire()
        assert limiter.store.name == "redis"
        server.kill()
        limiter.acquire()
        limiter.succeeded()
        assert limiter.store.name == "file"
    finally:
        server.stop()


def test_redis_settings_are_checked():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="redis://, rediss://"):
        ThrottleConfig(redis_url="http://127.0.0.1:6379")
    with pytest.raises(ValidationError):
        ThrottleConfig(redis_timeout=0)


@pytest.mark.parametrize("url, words", [
    ("redis://127.0.0.1:notaport/0", "redis-py cannot use this URL"),
    ("redis://[::1:6379/0", "redis-py cannot use this URL"),
    ("redis://127.0.0.1:6379/0?socket_timeout=soon", "redis-py cannot use this URL"),
])
def test_a_redis_url_redis_py_cannot_use_is_a_config_error_naming_the_field(tmp_path, url, words):
    """At the first call, through bin/cpi: a CpiError naming throttle.redis_url, not an
    'unexpected ValueError' on every call."""
    import json

    from tests.support.runner import Cpi

    config = tmp_path / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {
        "local": {"state_dir": str(tmp_path / "state")}, "throttle": {"redis_url": url}}}}))
    response = Cpi(config).call("has_disk", "disk-x")
    assert response.error["type"] == "Bosh::Clouds::CpiError", response.error
    assert "redis_url" in response.error["message"] and words in response.error["message"]
    assert "unexpected" not in response.error["message"].lower()


def test_redis_timeout_bounds_the_whole_operation_not_each_read(tmp_path):
    """A 'Redis' that answers every command, one byte every 0.2 s (each read within the 0.25 s
    socket timeout): a create_disk took 5.5 s; the store now gives up at redis_timeout."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def trickle():
        while not stop.is_set():
            try:
                listener.settimeout(0.5)
                connection, _ = listener.accept()
            except OSError:
                continue
            with connection:
                connection.settimeout(0.5)
                while not stop.is_set():
                    try:
                        if not connection.recv(65536):
                            break
                    except OSError:
                        break
                    for byte in b"$1\r\n0\r\n":
                        if stop.wait(0.2):
                            return
                        try:
                            connection.send(bytes([byte]))
                        except OSError:
                            return

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        cfg = ThrottleConfig(state_dir=tmp_path, redis_url=f"redis://127.0.0.1:{listener.getsockname()[1]}/0",
                             redis_timeout=0.25)
        limiter = SharedLimiter("ec2", cfg)
        started = time.monotonic()
        limiter.acquire()
        limiter.succeeded()
        assert time.monotonic() - started < 1.0
        assert limiter.store.name == "file"
    finally:
        stop.set()
        listener.close()
        thread.join(5)
