"""One retry policy for every cloud: classify, back off with full jitter, give up on time.

Why a time budget and not a count: the complaints against the Ruby AWS CPI (aws-cpi #19,
#75) were parallel deploys failing once "Request limit exceeded" outlasted 8 SDK retries.
Throttling ends when the account's token bucket refills, which is a matter of seconds to
minutes, not of attempts; so a call keeps trying until `budget` seconds have passed (a
count is kept only as a backstop). Every wait is logged through the `cpi` logger, so the
director's task log says what was throttled, why and for how long.

The SDK's own retries must be switched off (boto3: `retries={"mode": "standard",
"total_max_attempts": 1}`) so the two layers do not multiply.

API:

    retry.call(fn, classify=..., what="DescribeInstances", budget=600)
    @retry.retrying(classify=..., what="DeleteVolume", budget=300)

`classify(exc)` returns a `Verdict`: THROTTLED and TRANSIENT are retried (throttling with a
larger base delay), PERMANENT is raised at once. A verdict may carry `retry_after`
(seconds), which the wait honours as a minimum.

With `shared=KEY` the attempts also go through the backoff shared by every CPI process on
the machine (cpi.backoff): one throttled process slows its siblings down.
"""

from __future__ import annotations

import enum
import functools
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from cpi import backoff

if TYPE_CHECKING:
    import tenacity

log = logging.getLogger("cpi.retry")

T = TypeVar("T")

#: Default time budget: generous, because a throttled director deploy would rather wait
#: than fail (aws-cpi #19: 64 parallel VMs needed minutes of backoff).
DEFAULT_BUDGET = 600.0
#: Backstop on attempts, far above what a budget normally allows.
DEFAULT_MAX_ATTEMPTS = 100


class Kind(enum.Enum):
    THROTTLED = "throttled"
    TRANSIENT = "transient"
    PERMANENT = "permanent"


@dataclass(frozen=True)
class Verdict:
    kind: Kind
    #: why, in a few words (the error code); goes into the log line
    reason: str = ""
    #: seconds the service asked us to wait (Retry-After), if it said
    retry_after: float | None = None

    @property
    def retryable(self) -> bool:
        return self.kind is not Kind.PERMANENT


PERMANENT = Verdict(Kind.PERMANENT)

Classifier = Callable[[BaseException], Verdict]


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter: sleep uniform(0, min(cap, base * 2**n))."""

    base: float
    cap: float

    def delay(self, attempt: int, rng: random.Random) -> float:
        ceiling = min(self.cap, self.base * (2 ** max(attempt - 1, 0)))
        return rng.uniform(0, ceiling)


#: Throttling wants longer pauses than a dropped connection.
THROTTLED_BACKOFF = Backoff(base=1.0, cap=30.0)
TRANSIENT_BACKOFF = Backoff(base=0.25, cap=10.0)


class _Policy:
    """The tenacity callbacks of one call: remembers the last verdict so the wait, the
    stop test and the log line agree on why we are waiting."""

    def __init__(self, classify: Classifier, what: str, budget: float, max_attempts: int,
                 rng: random.Random | None, spent: float = 0.0):
        self.classify = classify
        self.what = what
        self.budget = budget
        #: what the bare first attempt took before tenacity's clock started (a read timeout:
        #: all of it), counted against the budget like every later attempt
        self.spent = spent
        self.max_attempts = max_attempts
        self.rng = rng or random.Random()
        self.verdict: Verdict = PERMANENT

    def retry(self, state: tenacity.RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome else None
        if exc is None:
            return False
        self.verdict = self.classify(exc)
        return self.verdict.retryable

    def wait(self, state: tenacity.RetryCallState) -> float:
        curve = THROTTLED_BACKOFF if self.verdict.kind is Kind.THROTTLED else TRANSIENT_BACKOFF
        delay = curve.delay(state.attempt_number, self.rng)
        if self.verdict.retry_after is not None:
            # a server's Retry-After, cut to throttle.max_retry_after (a day-long one would
            # otherwise only end the call, never be waited for)
            delay = max(delay, min(self.verdict.retry_after, backoff.max_retry_after()))
        return delay

    def stop(self, state: tenacity.RetryCallState) -> bool:
        if state.attempt_number >= self.max_attempts:
            self._give_up(state, f"after {state.attempt_number} attempts")
            return True
        elapsed = self.elapsed(state)
        # tenacity (>= 8.3) computes the wait before asking whether to stop, so a sleep
        # that would end beyond the budget is never started.
        upcoming = getattr(state, "upcoming_sleep", 0.0)
        if elapsed + upcoming > self.budget:
            self._give_up(state, f"after {elapsed:.1f}s: the next wait ({upcoming:.1f}s) would pass the budget "
                                 f"({self.budget:.0f}s)")
            return True
        return False

    def elapsed(self, state: tenacity.RetryCallState) -> float:
        return (state.seconds_since_start or 0.0) + self.spent

    def _give_up(self, state: tenacity.RetryCallState, when: str) -> None:
        log.warning("%s: giving up %s: still %s (%s)", self.what, when, self.verdict.kind.value,
                    self.verdict.reason or _describe(state))

    def before_sleep(self, state: tenacity.RetryCallState) -> None:
        log.info(
            "%s %s (%s); attempt %d failed, retrying in %.1fs (%.1fs of %.0fs budget used)",
            self.what,
            self.verdict.kind.value,
            self.verdict.reason or _describe(state),
            state.attempt_number,
            state.upcoming_sleep,
            self.elapsed(state),
            self.budget,
        )


def _describe(state: tenacity.RetryCallState) -> str:
    exc = state.outcome.exception() if state.outcome else None
    return f"{type(exc).__name__}: {exc}" if exc else "no error"


def call(
    fn: Callable[[], T],
    *,
    classify: Classifier,
    what: str,
    budget: float = DEFAULT_BUDGET,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    sleep: Callable[[float], None] | None = None,
    rng: random.Random | None = None,
    shared: str | None = None,
) -> T:
    """Run `fn()` until it succeeds, a PERMANENT error, or the budget/attempts run out;
    the last exception is re-raised unchanged, so callers translate it as usual.

    `shared` names the endpoint whose rate all CPI processes on this machine share
    (cpi.backoff): every attempt waits for its turn, a throttled answer slows every
    sibling process, a success speeds them up again.

    The first attempt runs bare: tenacity is imported only when something needs a retry,
    which keeps it out of the start-up of nearly every CPI process."""
    limiter = backoff.limiter(shared) if shared else None
    deadline = time.monotonic() + budget  # the shared rate's waits count against the budget too
    verdicts: dict[int, Verdict] = {}

    def verdict_of(exc: BaseException) -> Verdict:
        # classify once per exception: a classifier may itself ask the cloud
        if id(exc) not in verdicts:
            verdicts[id(exc)] = classify(exc)
        return verdicts[id(exc)]

    def one() -> T:
        if limiter is not None:
            limiter.acquire(what, deadline)
        try:
            result = fn()
        except Exception as exc:
            if limiter is not None:
                verdict = verdict_of(exc)
                if verdict.kind is Kind.THROTTLED:
                    limiter.throttled(verdict.retry_after)
            raise
        if limiter is not None:
            limiter.succeeded()
        return result

    started = time.monotonic()
    try:
        return one()
    except Exception as exc:
        if max_attempts <= 1 or not verdict_of(exc).retryable:
            raise
        first_failure: list[BaseException] = [exc]
    spent = time.monotonic() - started

    def attempt() -> T:
        if first_failure:  # replay the bare attempt's failure, so tenacity counts and logs it
            raise first_failure.pop()
        return one()

    import tenacity

    policy = _Policy(verdict_of, what, budget, max(1, max_attempts), rng, spent)
    retrying = tenacity.Retrying(
        retry=policy.retry,
        wait=policy.wait,
        stop=policy.stop,
        before_sleep=policy.before_sleep,
        sleep=sleep or time.sleep,
        reraise=True,
    )
    return retrying(attempt)


def unsure(classifier: Callable[..., Classifier], exc: BaseException) -> bool:
    """Whether a failed request may nevertheless have been carried out (a dropped
    connection, a read timeout): `classifier(idempotent=...)` would retry it only if it
    were safe to repeat."""
    return not classifier(idempotent=False)(exc).retryable and classifier(idempotent=True)(exc).retryable


def retrying(*, classify: Classifier, what: str | None = None, budget: float = DEFAULT_BUDGET,
             max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorator form of `call`: `what` defaults to the function's name."""

    def decorate(fn: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> T:
            return call(lambda: fn(*args, **kwargs), classify=classify, what=what or fn.__name__,
                        budget=budget, max_attempts=max_attempts)

        return wrapper

    return decorate
