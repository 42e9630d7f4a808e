"""Waiting for a cloud resource to reach a state: one adaptive, logged, bounded loop.

Why not the SDKs' own waiters (docs/architecture.md "Waits")? They poll at a
fixed interval: botocore's `instance_running` every 15 s, the Ruby OpenStack CPI every
`wait_resource_poll_interval` (5 s), its Go port every 10 s. A VM that is up after 3 s is
then reported after 5, 10 or 15. Here the first look comes after a fraction of a second and
the pause grows by a factor each time up to a cap (a `Schedule`), so a call returns within
moments of the IaaS and spends few requests doing it. Each cloud picks its schedules: AWS
one per kind of resource (cpi/clouds/aws/{vms,disks,stemcells}.py), OpenStack one bounded
by `wait_resource_poll_interval` (cpi/clouds/openstack/waits.py).

- A look (`check`) is one request. Throttling and transient errors during a wait are
  absorbed by cpi.retry inside that request (aws-cpi #75: throttled polling failed
  delete_vm), so this loop never retries; a `check` that raises aborts the wait (e.g. an
  instance that terminated, or a server that went ERROR, while starting).
- Every change of state is logged with the time it took, so a slow call's log shows where
  the time went; a look that finds the resource already done logs only "done".
- In plan mode (cpi.plan; a session's channel, cpi.channel, says) nothing is waited for:
  the plan notes the wait.
- The wait gives up rather than sleep past `timeout`, with a WaitTimeout (ok_to_retry)
  that names the resource, the state it was stuck in and, given `setting`, the config
  property that bounds it.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from cpi import tracing
from cpi.errors import CloudError

if TYPE_CHECKING:
    from cpi import transitions
    from cpi.plan import Plan

T = TypeVar("T")


@dataclass
class Check(Generic[T]):
    """One look at a resource: `done`, its state in words, and what to hand back."""

    done: bool
    state: str
    value: T | None = None


@dataclass(frozen=True)
class Schedule:
    """Pauses between looks: `first`, then each `factor` times the last, at most `cap`."""

    first: float
    factor: float
    cap: float

    def delays(self) -> Iterator[float]:
        delay = min(self.first, self.cap)
        while True:
            yield delay
            delay = min(self.cap, delay * self.factor)


class WaitTimeout(CloudError):
    """The resource did not reach the state in time; the director may retry the call."""


def until(
    check: Callable[[], Check[T]],
    *,
    what: str,
    timeout: float,
    schedule: Schedule,
    setting: str | None = None,
    log: logging.Logger | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    check_first: bool = False,
    history: transitions.History | None = None,
    plan: Plan | None = None,
    stacklevel: int = 1,
) -> T | None:
    """Look with `check` until it reports done and return its `value`; WaitTimeout after
    `timeout` seconds.

    `what` names the wait in the log and the error ("instance i-1 to be running").
    `setting` names the property `timeout` comes from ("state_timeout"), for the error.
    `log` defaults to the logger of the calling module (`stacklevel` frames up, as
    warnings.warn counts them: 2 for a wrapper's caller). With `check_first` the first look
    is immediate (the state may already be reached); otherwise it comes after the
    schedule's first pause. With `history` (cpi.transitions), the pauses follow how long
    this kind of transition took lately, and this one's duration is added to it. With `plan`
    (the call's, cpi.plan; a session's channel passes it) nothing is waited for: the plan
    notes the wait."""
    if log is None:
        log = logging.getLogger(sys._getframe(stacklevel).f_globals.get("__name__", __name__))
    if plan is not None:  # a plan changes nothing, so there is nothing to wait for
        plan.wait(what, timeout)
        log.info("plan: the call would wait for %s (at most %.0fs)", what, timeout)
        return None
    # one span per wait (cpi.tracing: nothing when off); its looks are the requests' spans
    with tracing.span(f"wait for {what}", **{"cpi.wait": what, "cpi.timeout_s": timeout}) as span:
        started = clock()
        learned = history.schedule(schedule.factor, schedule.cap) if history is not None else None
        delays = (learned or schedule).delays()
        looks = 0
        last_state = None
        not_yet = 0.0  # when a look last found it not done: the transition ended after that
        if not check_first:
            sleep(next(delays))
        while True:
            looked = clock() - started
            result = check()
            looks += 1
            if result.state != last_state:
                if last_state is not None or not result.done:
                    log.info("%s: %s (after %.2fs)", what, result.state, clock() - started)
                last_state = result.state
            if result.done:
                span.set("cpi.looks", looks)
                log.info("%s: done after %.2fs, %d look%s", what, clock() - started, looks, "" if looks == 1 else "s")
                if history is not None and not (check_first and looks == 1):  # not: done before it began
                    history.record((not_yet + looked) / 2)
                return result.value
            not_yet = looked
            delay = next(delays)
            elapsed = clock() - started
            if elapsed + delay > timeout:
                span.set("cpi.looks", looks)
                span.set("cpi.state", str(result.state))
                bound = f" ({setting} {timeout:.0f}s)" if setting else ""
                raise WaitTimeout(
                    f"timed out after {elapsed:.0f}s{bound} waiting for {what} (still {result.state}, {looks} "
                    f"look{'' if looks == 1 else 's'})",
                    ok_to_retry=True,
                )
            sleep(delay)
