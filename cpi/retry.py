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

UNREACHABLE (the connection could not be opened: refused, a host name that does not
resolve, no route, no handshake within connect_timeout) is neither: the service never saw
the request, so it cannot be throttling, and an endpoint that refuses connections is far
more often misconfigured than restarting. It gets a few quick retries within
UNREACHABLE_BUDGET (10 s, or the call's budget if smaller), never the throttling budget:
the Ruby AWS CPI takes 80 s, and this one took 203 s here (226 s in #32), to say that a
closed port was closed. `unreached(exc)` recognises such a failure in whatever an SDK
wrapped it in (cpi.connecting), and `unreached_error` words the one error the operator
then sees: the endpoint and the cpi.json setting that names it. A TLS handshake that fails
is reported the same way, but not retried: a certificate does not become trusted in
seconds.

With `shared=KEY` the attempts also go through the backoff shared by every CPI process on
the machine (cpi.backoff): one throttled process slows its siblings down.
"""

from __future__ import annotations

import enum
import functools
import logging
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from cpi import backoff, tracing
from cpi.errors import CloudError

if TYPE_CHECKING:
    import tenacity

log = logging.getLogger("cpi.retry")

T = TypeVar("T")

#: Default time budget: generous, because a throttled director deploy would rather wait
#: than fail (aws-cpi #19: 64 parallel VMs needed minutes of backoff).
DEFAULT_BUDGET = 600.0
#: Backstop on attempts, far above what a budget normally allows.
DEFAULT_MAX_ATTEMPTS = 100
#: How long a connection that cannot be opened is tried again: long enough for a refusal
#: while a load balancer or an API service restarts, short enough that a wrong endpoint is
#: named well within 30 s (a silent host: one connect_timeout, 10 s by default).
UNREACHABLE_BUDGET = 10.0


class Kind(enum.Enum):
    THROTTLED = "throttled"
    TRANSIENT = "transient"
    UNREACHABLE = "unreachable"
    PERMANENT = "permanent"


@dataclass(frozen=True)
class Verdict:
    kind: Kind
    #: why, in a few words (the error code); goes into the log line
    reason: str = ""
    #: seconds the service asked us to wait (Retry-After), if it said
    retry_after: float | None = None
    #: the connection could not be opened, so nothing was sent (UNREACHABLE, or a TLS
    #: handshake that failed: PERMANENT): `call`'s `unreachable` words the error
    unopened: bool = False

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


#: Throttling wants longer pauses than a dropped connection; a closed port, short ones
#: within its short budget.
THROTTLED_BACKOFF = Backoff(base=1.0, cap=30.0)
TRANSIENT_BACKOFF = Backoff(base=0.25, cap=10.0)
UNREACHABLE_BACKOFF = Backoff(base=0.5, cap=4.0)
_BACKOFFS = {Kind.THROTTLED: THROTTLED_BACKOFF, Kind.UNREACHABLE: UNREACHABLE_BACKOFF}


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
        #: time.monotonic() when the attempt now failing began (set by `call`), and when the
        #: first of the unbroken run of UNREACHABLE attempts it ends began: the short budget
        #: counts from there, so a refusal after minutes of throttling still gets its retries
        self.attempt_started = 0.0
        self.unreachable_since: float | None = None

    def retry(self, state: tenacity.RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome else None
        if exc is None:
            return False
        self.verdict = self.classify(exc)
        if self.verdict.kind is not Kind.UNREACHABLE:
            self.unreachable_since = None
        elif self.unreachable_since is None:
            self.unreachable_since = self.attempt_started
        return self.verdict.retryable

    def wait(self, state: tenacity.RetryCallState) -> float:
        curve = _BACKOFFS.get(self.verdict.kind, TRANSIENT_BACKOFF)
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
        if self.unreachable_since is not None:
            unreachable = time.monotonic() - self.unreachable_since
            limit = min(UNREACHABLE_BUDGET, self.budget)
            if unreachable + upcoming > limit:
                self._give_up(state, f"after {unreachable:.1f}s of unopened connections: the next wait "
                                     f"({upcoming:.1f}s) would pass their budget ({limit:g}s)")
                return True
        return False

    def elapsed(self, state: tenacity.RetryCallState) -> float:
        return (state.seconds_since_start or 0.0) + self.spent

    def _give_up(self, state: tenacity.RetryCallState, when: str) -> None:
        log.warning("%s: giving up %s: still %s (%s)", self.what, when, self.verdict.kind.value,
                    self.verdict.reason or _describe(state))

    def before_sleep(self, state: tenacity.RetryCallState) -> None:
        unopened = "" if self.unreachable_since is None else (
            f", connections unopened for {time.monotonic() - self.unreachable_since:.1f}s of "
            f"{min(UNREACHABLE_BUDGET, self.budget):g}s")
        log.info(
            "%s %s (%s); attempt %d failed, retrying in %.1fs (%.1fs of %.0fs budget used)%s",
            self.what,
            self.verdict.kind.value,
            self.verdict.reason or _describe(state),
            state.attempt_number,
            state.upcoming_sleep,
            self.elapsed(state),
            self.budget,
            unopened,
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
    unreachable: Callable[[Verdict], BaseException] | None = None,
    peer: str | None = None,
    service: str | None = None,
) -> T:
    """Run `fn()` until it succeeds, a PERMANENT error, or the budget/attempts run out;
    the last exception is re-raised unchanged, so callers translate it as usual, but for
    one whose connection could not be opened (`Verdict.unopened`): `unreachable(verdict)`,
    when given, is raised instead (the caller knows which endpoint and setting to name).
    An answer that passed cpi.bounded's bounds (a trickle, a flood) is never retried, and
    leaves, when `peer` (the endpoint, as an error names it) is given, as a CloudError
    naming it and the bound.

    `shared` names the endpoint whose rate all CPI processes on this machine share
    (cpi.backoff): every attempt waits for its turn, a throttled answer slows every
    sibling process, a success speeds them up again.

    The first attempt runs bare: tenacity is imported only when something needs a retry,
    which keeps it out of the start-up of nearly every CPI process.

    Traced (cpi.tracing), the request is one span named `what`, with `service` (the API:
    "ec2", "compute", "vim25"), the operation, the peer, the attempts, the seconds slept
    between them and waiting for the shared rate, and the last answer's HTTP status."""
    limiter = backoff.limiter(shared) if shared else None
    deadline = time.monotonic() + budget  # the shared rate's waits count against the budget too
    verdicts: dict[int, Verdict] = {}
    attempts = 0
    paused = 0.0  # seconds slept between attempts
    shared_wait = limiter.waited if limiter is not None else 0.0

    def verdict_of(exc: BaseException) -> Verdict:
        # classify once per exception: a classifier may itself ask the cloud
        if id(exc) not in verdicts:
            verdicts[id(exc)] = PERMANENT if _exceeded(exc) else classify(exc)
        return verdicts[id(exc)]

    def one() -> T:
        nonlocal attempts
        attempts += 1
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

    def pause(seconds: float) -> None:
        nonlocal paused
        paused += seconds
        (sleep or time.sleep)(seconds)

    # one span per request, its attempts and waits included (cpi.tracing: nothing when off)
    operation = what.removeprefix(f"{service}:").removeprefix(f"{service} ") if service else what
    with tracing.span(what, **{"cpi.request": what, "cpi.service": service, "cpi.operation": operation,
                               "server.address": peer}) as span:
        try:
            answer = _retried(one, verdict_of, what, budget, max_attempts, pause, rng)
            span.set("http.response.status_code", http_status(answer))
            return answer
        except Exception as exc:
            span.set("http.response.status_code", http_status(exc))
            span.set("error.kind", verdict_of(exc).kind.name.lower())
            bound = _exceeded(exc)
            if bound is not None and peer is not None:
                from cpi import bounded

                raise CloudError(f"{what}: {bounded.message(bound, shown(peer))}") from None
            if unreachable is None or not verdict_of(exc).unopened:
                raise
            raise unreachable(verdict_of(exc)) from None
        finally:
            span.set("cpi.attempts", attempts)
            span.set("cpi.retry_wait_s", round(paused, 3))
            if limiter is not None:
                span.set("cpi.shared_rate_wait_s", round(limiter.waited - shared_wait, 3))


def http_status(answer: object) -> int | None:
    """The HTTP status an SDK's answer or error carries, where it carries one: botocore's
    ResponseMetadata (in an answer, or an error's `response`), a `status_code` (requests,
    keystoneauth, openstacksdk's errors) or a `status` (http.client); None otherwise."""
    for candidate in (answer, getattr(answer, "response", None)):
        if isinstance(candidate, dict):
            status = (candidate.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        else:
            status = getattr(candidate, "status_code", None) or getattr(candidate, "status", None)
        if isinstance(status, int) and not isinstance(status, bool):
            return status
    return None


def _retried(one: Callable[[], T], verdict_of: Classifier, what: str, budget: float, max_attempts: int,
             sleep: Callable[[float], None] | None, rng: random.Random | None) -> T:
    """`one()`, then under tenacity when it failed retryably."""
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
        policy.attempt_started = time.monotonic()
        return one()

    import tenacity

    policy = _Policy(verdict_of, what, budget, max(1, max_attempts), rng, spent)
    policy.attempt_started = started
    retrying = tenacity.Retrying(
        retry=policy.retry,
        wait=policy.wait,
        stop=policy.stop,
        before_sleep=policy.before_sleep,
        sleep=sleep or time.sleep,
        reraise=True,
    )
    return retrying(attempt)


def unreached(exc: BaseException) -> Verdict | None:
    """The verdict on a request whose connection could not be opened (cpi.connecting): a
    TLS handshake that failed is PERMANENT, the rest UNREACHABLE; None when `exc` says
    nothing of the kind (a read timeout or a reset: the request may have arrived). Callers
    pass only what their SDK raises when connecting."""
    from cpi import connecting

    failed = connecting.failure(exc)
    if failed is None:
        return None
    return Verdict(Kind.PERMANENT if failed.tls else Kind.UNREACHABLE, failed.reason, unopened=True)


@dataclass(frozen=True)
class Account:
    """How the requests of one account are retried, from its config: the time `budget`
    (retry_budget_seconds), the attempts (max_retries + 1, the official CPIs' count) and
    `tls_setting`, the cpi.json setting of the CA that an endpoint whose TLS handshake
    fails is told to check. AWS and OpenStack differ only in these and in how they name an
    endpoint, so both retry through `call` here."""

    budget: float
    max_attempts: int
    tls_setting: str

    def call(self, fn: Callable[[], T], *, classify: Classifier, what: str, endpoint: str, setting: str,
             shared: str, service: str, budget: float | None = None) -> T:
        """`fn()` under cpi.retry with this account's budget (or `budget`, a request's own)
        and attempts, its rate shared as `shared`; an `endpoint` that cannot be reached
        leaves as one CloudError naming it and `setting`, the cpi.json key that chose it."""
        return call(fn, classify=classify, what=what, budget=self.budget if budget is None else budget,
                    max_attempts=self.max_attempts, shared=shared, peer=endpoint, service=service,
                    unreachable=lambda verdict: unreached_error(verdict, what=what, endpoint=endpoint,
                                                                setting=setting, tls_setting=self.tls_setting))


def unreached_error(verdict: Verdict, *, what: str, endpoint: str, setting: str, tls_setting: str) -> CloudError:
    """The one error of a call whose endpoint could not be reached: which endpoint, why,
    and the cpi.json setting that names it (`tls_setting`, the CA's, for a TLS failure).
    Not ok_to_retry: the director would only ask again, and wait as long again, for an
    answer a configuration has to change (it acts on the flag only for create_vm)."""
    endpoint = shown(endpoint)
    if verdict.kind is Kind.PERMANENT:
        return CloudError(f"{what}: cannot open a connection to {endpoint}: {verdict.reason}; check {tls_setting} "
                          f"and {setting}")
    return CloudError(f"{what}: cannot open a connection to {endpoint}: {verdict.reason}; check {setting}, and "
                      "that it is up and reachable from this machine")


def _exceeded(exc: BaseException) -> Any:
    """cpi.bounded.exceeded, imported on a failure only (http.client stays out of a
    process's start-up)."""
    from cpi import bounded

    return bounded.exceeded(exc)


def shown(endpoint: str) -> str:
    """`endpoint` for a message: one written with user:password@ shows neither."""
    return re.sub(r"//[^/@\s]*@", "//", endpoint)


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
