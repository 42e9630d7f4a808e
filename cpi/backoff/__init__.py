"""Backoff shared by every CPI process on a machine (and, with Redis, across machines).

Each CPI call is its own process, so a director creating 64 VMs runs 64 independent retry
loops, and when the IaaS throttles them they all come back at once and make the storm
worse (aws-cpi #19, #75; bosh #597). Here they share one adaptive rate per cloud endpoint:

- before each request a process takes a token from a shared bucket (`acquire`);
- a throttled response cuts the shared rate (at most once a second, however many
  siblings were throttled at once) and closes the bucket until the time the service asked
  for (`throttled`), so every sibling slows down, not just the one that was told;
- each success raises the rate again by a small step (`succeeded`): additive increase,
  multiplicative decrease, as TCP does, so the processes settle just under the limit and
  all keep making progress, while an occasional throttle that has nothing to do with our
  rate costs little. After a quiet spell the rate is forgotten.

The rules are in policy.py; a store keeps each endpoint's state and applies them
atomically. The file store (files.py) is the default: a state file per endpoint under
flock in the CPI user's own directory (~/.cache/bosh-cpi/throttle by default, never a
fixed name in a shared temp dir that another local user could make first), created 0700
and refused when anyone else could tamper with it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cpi import private, tracing
from cpi.errors import RetriableCloudError

if TYPE_CHECKING:
    from .files import FileStore
    from .redis_store import WithFallback

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
    max_retry_after: float = Field(
        60.0, gt=0, le=3600, description="The longest a server's `Retry-After` closes the shared rate for (seconds): "
        "a longer one is cut to this, so that one answer cannot hold every CPI process back for hours.")
    redis_url: str | None = Field(
        None,
        description="Share the rate through this Redis instead of a file on this machine, so that several "
        "directors' CPIs in one IaaS account slow down together: `redis://host:6379/0`, `rediss://...` for TLS "
        "(credentials may be in the URL). Unreachable, slow or failing, it is skipped for the call (one warning) "
        "and this machine's file is used.",
    )
    redis_username: str | None = Field(None, description="Redis ACL user name (instead of one in the URL).")
    redis_password: str | None = Field(None, description="Redis password (instead of one in the URL); never logged.")
    redis_ca_cert: Path | None = Field(None, description="PEM file of the CA that signed the Redis server's "
                                       "certificate (`rediss://`); default: the system's CAs.")
    redis_key_prefix: str = Field("bosh-cpi:throttle:", min_length=1, description="Prefix of the Redis keys (one "
                                  "hash per IaaS endpoint, expiring when idle): one per IaaS account, if several "
                                  "accounts' directors share a Redis.")
    redis_timeout: float = Field(0.25, gt=0, le=5, description="Seconds to wait for Redis to connect or answer "
                                 "before this call falls back to the file.")

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// (TLS) or unix://")
        # What redis-py would refuse at the first request (a port that is no number, an
        # unclosed IPv6 bracket, an option it does not know or cannot read) is refused here,
        # naming the field, rather than as an unexpected error on every call. Nothing
        # connects: a pool is only a description until used.
        import redis

        try:
            redis.ConnectionPool.from_url(value)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"redis-py cannot use this URL: {_without_password(str(exc), value)}") from None
        return value


def _without_password(text: str, url: str) -> str:
    """`text` with the URL's password (if any) replaced: an error names the field, not the secret."""
    from urllib.parse import urlsplit

    try:
        password = urlsplit(url).password
    except ValueError:
        password = url.partition("://")[2].partition("@")[0].partition(":")[2] or None
    return text.replace(password, "<redacted>") if password else text


class SharedLimiter:
    """One endpoint's shared rate, as this process sees it: `acquire` before each request,
    `throttled` or `succeeded` after. The state and its rules live in a store (files.py,
    or redis_store.py when `throttle.redis_url` names a Redis), each operation atomic."""

    def __init__(self, key: str, config: ThrottleConfig, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, store: Any = None):
        self.key = _readable(key)
        self.config = config
        self.sleep = sleep
        self.store = store if store is not None else _store(key, self.key, config, clock)
        self.waited = 0.0

    def acquire(self, what: str = "request", deadline: float | None = None) -> None:
        """Wait for this process's turn; returns when it may send one request. `deadline`
        (time.monotonic()) is when the caller's retry budget runs out: a turn that comes
        later fails the call at once, retryably, naming the wait, rather than sleep past it."""
        waited = 0.0
        started_ns = time.time_ns()
        while (delay := self.store.step("acquire")) > 0:
            if deadline is not None and time.monotonic() + delay > deadline:
                left = max(0.0, deadline - time.monotonic())
                raise RetriableCloudError(
                    f"{what}: the shared rate of {self.key} has this call wait {delay:.1f}s more (after "
                    f"{waited:.1f}s), past the {left:.1f}s left of its retry budget: not sent; try again later")
            self.sleep(delay)
            waited += delay
        if waited >= 0.05:
            log.info("%s: waited %.2fs for the shared rate of %s (other CPI processes were throttled)",
                     what, waited, self.key)
            tracing.record(f"wait for the shared rate of {self.key}", started_ns,
                           **{"cpi.wait": "shared rate", "cpi.rate_key": self.key, "cpi.waited_s": round(waited, 3)})
        self.waited += waited

    def throttled(self, retry_after: float | None = None) -> None:
        rate = self.store.step("throttled", retry_after)
        log.info("throttled by %s: shared rate now %.2f requests/s for all CPI processes %s", self.key, rate,
                 "sharing this Redis" if self.store.name == "redis" else "on this host")

    def succeeded(self) -> None:
        self.store.step("succeeded")


def _store(key: str, readable: str, config: ThrottleConfig, clock: Callable[[], float]) -> FileStore | WithFallback:
    from .files import FileStore

    def files() -> FileStore:
        directory = private.private_dir(config.state_dir or default_state_dir(), STATE_DIR_SETTING)
        return FileStore(key, readable, config, directory, clock)

    if config.redis_url:
        from .redis_store import RedisStore, WithFallback

        return WithFallback(RedisStore(readable, config), files, _redis_down)
    return files()


# One CPI process serves one call: rpc.py configures this once from cpi.json, and
# cpi.retry asks for the limiter of an endpoint by key.
_config: ThrottleConfig | None = None
_limiters: dict[str, SharedLimiter] = {}
#: the Redis URLs that failed in this call: every endpoint's limiter then uses its file
_redis_down: set[str] = set()


def configure(config: ThrottleConfig | None) -> None:
    global _config
    _config = config
    _limiters.clear()
    _redis_down.clear()


def max_retry_after() -> float:
    """The longest wait a server's Retry-After may ask of this call (throttle.max_retry_after)."""
    return _config.max_retry_after if _config is not None else ThrottleConfig.model_fields["max_retry_after"].default


def limiter(key: str) -> SharedLimiter | None:
    """The shared limiter of `key`, or None when shared backoff is not configured or off."""
    if _config is None or not _config.enabled:
        return None
    if key not in _limiters:
        _limiters[key] = SharedLimiter(key, _config)
    return _limiters[key]
