"""Backoff shared by every CPI process on a machine.

Each CPI call is its own process, so a director creating 64 VMs runs 64 independent retry
loops, and when the IaaS throttles them they all come back at once and make the storm
worse (aws-cpi #19, #75; bosh #597). Here they share one adaptive rate per cloud endpoint,
kept in a small state file:

- before each request a process takes a token from a shared bucket (`acquire`);
- a throttled response cuts the shared rate (at most once a second, however many
  siblings were throttled at once) and closes the bucket until the time the service asked
  for (`throttled`), so every sibling slows down, not just the one that was told;
- each success raises the rate again by a small step (`succeeded`): additive increase,
  multiplicative decrease, as TCP does, so the processes settle just under the limit and
  all keep making progress, while an occasional throttle that has nothing to do with our
  rate costs little.

The file is read and replaced under an flock (released by the kernel if its holder dies)
with atomic renames, so a process killed at any point leaves a valid state; an unreadable
file is treated as fresh. After a quiet spell the rate is forgotten.

The state directory is the CPI user's own (~/.cache/bosh-cpi/throttle by default, never a
fixed name in a shared temp dir that another local user could make first): created 0700,
refused when anyone else could tamper with it (cpi.private), its files opened without
following links. A file is named by a hash of its key, so nothing from an endpoint URL
(such as a password in it) becomes a file name; the key, stripped of any user info, is
kept inside the file for whoever looks.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cpi import private

log = logging.getLogger("cpi.backoff")

#: The setting that chooses the state directory, as errors name it.
STATE_DIR_SETTING = "cloud.properties.throttle.state_dir"


def default_state_dir() -> Path:
    return private.cache_dir("throttle", STATE_DIR_SETTING)


def endpoint_key(url: str) -> str:
    """`host[:port]` of an endpoint URL, without any `user:password@` in front: what a
    shared key (and so a log line) may carry of an endpoint."""
    from urllib.parse import urlsplit

    netloc = urlsplit(url).netloc if "://" in url else url
    return netloc.rpartition("@")[2]


def _readable(key: str) -> str:
    """The key as logged and kept inside its file: callers build keys from endpoint_key,
    but should user info slip in, it never goes further than the hashed file name."""
    return "<redacted>@" + key.rpartition("@")[2] if "@" in key else key


class ThrottleConfig(BaseModel):
    """`cloud.properties.throttle` in cpi.json: the backoff shared across CPI processes."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="Share backoff between the CPI processes on this machine.")
    state_dir: Path | None = Field(
        None,
        description="Where the shared rate of each endpoint is kept: a directory of the CPI's user, created "
        "0700 and refused if anyone else can write to it. Default: `~/.cache/bosh-cpi/throttle` in the CPI "
        "user's home.",
    )
    max_rate: float = Field(
        20.0, gt=0, description="Requests per second all CPI processes together start at and return to."
    )
    min_rate: float = Field(0.2, gt=0, description="The shared rate never drops below this (requests per second).")
    burst: float = Field(10.0, ge=1, description="Requests that may go at once after a quiet spell.")
    decrease: float = Field(0.7, gt=0, lt=1, description="Factor the rate is multiplied by when throttled.")
    increase: float = Field(0.2, gt=0, description="Requests per second added back after each success.")
    forget_after: float = Field(120.0, gt=0, description="Seconds without throttling after which the rate resets.")


@dataclass
class _State:
    rate: float
    tokens: float
    updated: float
    not_before: float
    last_throttled: float
    last_decrease: float = 0.0


class SharedLimiter:
    def __init__(self, key: str, config: ThrottleConfig, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep):
        self.key = _readable(key)
        self.config = config
        self.clock = clock
        self.sleep = sleep
        directory = private.private_dir(config.state_dir or default_state_dir(), STATE_DIR_SETTING)
        name = hashlib.sha256(key.encode()).hexdigest()[:32]
        self._path = directory / f"{name}.json"
        self._lock_path = directory / f"{name}.lock"
        self.waited = 0.0

    @contextmanager
    def _state(self) -> Iterator[_State]:
        fd = private.open_nofollow(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            now = self.clock()
            state = self._read(now)
            # refill the bucket for the time that passed
            elapsed = max(0.0, now - state.updated)
            state.tokens = min(self.config.burst, state.tokens + elapsed * state.rate)
            state.updated = now
            yield state
            self._write(state)
        finally:
            os.close(fd)

    def _fresh(self, now: float) -> _State:
        return _State(rate=self.config.max_rate, tokens=self.config.burst, updated=now, not_before=0.0,
                      last_throttled=0.0)

    def _read(self, now: float) -> _State:
        try:
            fd = private.open_nofollow(self._path, os.O_RDONLY | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as handle:
                document = json.loads(handle.read(65536))
            document.pop("key", None)
            state = _State(**document)
        except (OSError, ValueError, TypeError, AttributeError):
            return self._fresh(now)
        if state.last_throttled and now - state.last_throttled > self.config.forget_after:
            return self._fresh(now)
        state.rate = min(max(state.rate, self.config.min_rate), self.config.max_rate)
        return state

    def _write(self, state: _State) -> None:
        private.replace_file(self._path, json.dumps({"key": self.key, **asdict(state)}).encode())

    def acquire(self, what: str = "request") -> None:
        """Wait for this process's turn; returns when it may send one request."""
        waited = 0.0
        while True:
            with self._state() as state:
                now = state.updated
                if now < state.not_before:
                    delay = state.not_before - now
                elif state.tokens >= 1.0 - 1e-6:  # float rounding must not starve a caller
                    state.tokens = max(0.0, state.tokens - 1.0)
                    break
                else:
                    delay = max(0.001, (1.0 - state.tokens) / state.rate)
            self.sleep(delay)
            waited += delay
        if waited >= 0.05:
            log.info("%s: waited %.2fs for the shared rate of %s (other CPI processes were throttled)",
                     what, waited, self.key)
        self.waited += waited

    def throttled(self, retry_after: float | None = None) -> None:
        with self._state() as state:
            now = state.updated
            if now - state.last_decrease >= 1.0:  # one cut per second, like TCP's once per RTT
                state.rate = max(self.config.min_rate, state.rate * self.config.decrease)
                state.last_decrease = now
            state.tokens = min(state.tokens, 0.0)
            pause = retry_after if retry_after is not None else 1.0 / state.rate
            state.not_before = max(state.not_before, now + pause)
            state.last_throttled = now
            rate = state.rate
        log.info("throttled by %s: shared rate now %.2f requests/s for all CPI processes on this host", self.key, rate)

    def succeeded(self) -> None:
        with self._state() as state:
            if state.rate < self.config.max_rate:
                state.rate = min(self.config.max_rate, state.rate + self.config.increase)


# One CPI process serves one call: rpc.py configures this once from cpi.json, and
# cpi.retry asks for the limiter of an endpoint by key.
_config: ThrottleConfig | None = None
_limiters: dict[str, SharedLimiter] = {}


def configure(config: ThrottleConfig | None) -> None:
    global _config
    _config = config
    _limiters.clear()


def limiter(key: str) -> SharedLimiter | None:
    """The shared limiter of `key`, or None when shared backoff is not configured or off."""
    if _config is None or not _config.enabled:
        return None
    if key not in _limiters:
        _limiters[key] = SharedLimiter(key, _config)
    return _limiters[key]
