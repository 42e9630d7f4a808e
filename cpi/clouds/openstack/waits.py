"""Waiting for OpenStack resources: adaptive polling bounded by `state_timeout`.

The Ruby CPI polls every `wait_resource_poll_interval` (5 s) and the Go port every 10 s,
so a server Nova builds in 3 s is reported after 5 or 10. Here the first look comes after
a fraction of a second and the pauses grow by half each time, capped by
`wait_resource_poll_interval`: a call returns within moments of the service, with a
handful of requests. Throttling during a wait is absorbed inside each look (cpi.retry);
a timeout names the resource and the state it was stuck in.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from cpi.errors import CloudError

log = logging.getLogger("cpi.clouds.openstack")

T = TypeVar("T")

FIRST = 0.25
FACTOR = 1.5


@dataclass
class Check(Generic[T]):
    """One look at a resource: `done`, its state in words, and what to hand back."""

    done: bool
    state: str
    value: T | None = None


class WaitTimeout(CloudError):
    pass


def delays(cap: float, first: float = FIRST, factor: float = FACTOR) -> Iterator[float]:
    delay = min(first, cap)
    while True:
        yield delay
        delay = min(cap, delay * factor)


def until(check: Callable[[], Check[T]], *, what: str, timeout: float, cap: float, first: float = FIRST,
          sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
          check_first: bool = False) -> T | None:
    """Look with `check` until it reports done; WaitTimeout after `timeout` seconds.

    `check` raises (a cpi error) to abort, e.g. a server that went ERROR. With `check_first`
    the first look is immediate (the state may already be reached)."""
    started = clock()
    schedule = delays(cap, first)
    looks = 0
    last_state = None
    if not check_first:
        sleep(next(schedule))
    while True:
        result = check()
        looks += 1
        if result.state != last_state:
            if last_state is not None or not result.done:
                log.info("%s: %s (after %.2fs)", what, result.state, clock() - started)
            last_state = result.state
        if result.done:
            log.info("%s: done after %.2fs, %d look%s", what, clock() - started, looks, "" if looks == 1 else "s")
            return result.value
        delay = next(schedule)
        elapsed = clock() - started
        if elapsed + delay > timeout:
            raise WaitTimeout(
                f"timed out after {elapsed:.0f}s (state_timeout {timeout:.0f}s) waiting for {what} "
                f"(still {result.state})",
                ok_to_retry=True,
            )
        sleep(delay)
