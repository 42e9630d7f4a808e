"""The shared rate's rules, on one endpoint's state: a token bucket whose rate rises by a
step per success and is cut by a factor per throttle (AIMD, as TCP), closed until the time
the service asked for, forgotten after a quiet spell.

Every store applies exactly these rules, atomically, to the state it keeps: the file store
by calling these functions under an flock (files.py), the Redis store in one Lua script on
the server (redis_store.py) — a transcription of this module kept side by side with it
and checked against it step by step (tests/unit/test_backoff_redis.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

#: How far ahead of this machine's clock a stored time may be (another director's clock,
#: or the Redis server's) before the state is taken for garbage.
SKEW = 60.0


@dataclass
class State:
    rate: float
    tokens: float
    updated: float
    not_before: float
    last_throttled: float
    last_decrease: float = 0.0


def fresh(config: Any, now: float) -> State:
    return State(rate=config.max_rate, tokens=config.burst, updated=now, not_before=0.0, last_throttled=0.0)


def sane(state: State, config: Any, now: float) -> bool:
    """Whether a stored state is one these rules could have written: every field a finite
    number, the bucket within [0, burst], no time further ahead than a throttle may close
    the bucket for (max_retry_after) plus clock skew. The store is data from outside (a
    file anyone with the CPI's uid may edit, a Redis other directors write): a
    `not_before` a day ahead, `tokens=-1e300`, NaN or a string must not freeze or break a
    call, so such a state is dropped and a fresh one written in its place."""
    values = [getattr(state, f.name) for f in fields(state)]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
        return False
    return (state.rate > 0 and 0 <= state.tokens <= config.burst + 1e-6
            and 0 <= state.not_before <= now + config.max_retry_after + SKEW
            and all(0 <= t <= now + SKEW for t in (state.updated, state.last_throttled, state.last_decrease)))


def current(state: State | None, config: Any, now: float) -> State:
    """The state as of `now`: fresh when there was none, it is not sane, or the last
    throttle is long past; the rate kept within bounds, the bucket refilled for the time
    that passed."""
    if state is None or not sane(state, config, now) or (
            state.last_throttled and now - state.last_throttled > config.forget_after):
        state = fresh(config, now)
    state.rate = min(max(state.rate, config.min_rate), config.max_rate)
    elapsed = max(0.0, now - state.updated)
    state.tokens = min(config.burst, state.tokens + elapsed * state.rate)
    state.updated = now
    return state


def acquire(state: State, config: Any, now: float) -> float:
    """Take a token: 0.0 when taken, else the seconds to wait before asking again."""
    if now < state.not_before:
        return state.not_before - now
    if state.tokens >= 1.0 - 1e-6:  # float rounding must not starve a caller
        state.tokens = max(0.0, state.tokens - 1.0)
        return 0.0
    return max(0.001, (1.0 - state.tokens) / state.rate)


def throttled(state: State, config: Any, now: float, retry_after: float | None) -> float:
    """Cut the rate (at most once a second, however many siblings were throttled at once),
    empty the bucket and close it for `retry_after` (or one request's time), never longer
    than max_retry_after: one server's `Retry-After: 86400` must not close the endpoint to
    every CPI process for a day. Returns the new rate."""
    if now - state.last_decrease >= 1.0:
        state.rate = max(config.min_rate, state.rate * config.decrease)
        state.last_decrease = now
    state.tokens = min(state.tokens, 0.0)
    pause = min(retry_after, config.max_retry_after) if retry_after is not None else 1.0 / state.rate
    state.not_before = max(state.not_before, now + pause)
    state.last_throttled = now
    return state.rate


def succeeded(state: State, config: Any, now: float) -> float:
    if state.rate < config.max_rate:
        state.rate = min(config.max_rate, state.rate + config.increase)
    return state.rate


def apply(op: str, state: State, config: Any, now: float, retry_after: float | None = None) -> float:
    """One operation of a store's interface: `acquire`, `throttled` or `succeeded`."""
    if op == "acquire":
        return acquire(state, config, now)
    if op == "throttled":
        return throttled(state, config, now, retry_after)
    if op == "succeeded":
        return succeeded(state, config, now)
    raise ValueError(f"unknown backoff operation {op!r}")
