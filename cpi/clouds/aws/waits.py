"""Waiting for EC2 resources: adaptive polling instead of botocore's fixed-interval waiters.

botocore's stock `instance_running` waiter polls every 15 s, so a VM that is up after 9 s
is reported after 15; polling first after half a second and then doubling the pause up
to a few seconds returns within moments of EC2 and spends few requests doing it. Throttling
during a wait is absorbed by cpi.retry inside each check (aws-cpi #75: throttled polling
failed delete_vm), and a timeout names the resource and the state it was stuck in.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from cpi.errors import CloudError

log = logging.getLogger("cpi.clouds.aws")

T = TypeVar("T")


@dataclass
class Check(Generic[T]):
    """One look at a resource: `done`, its state in words, and what to hand back."""

    done: bool
    state: str
    value: T | None = None


@dataclass(frozen=True)
class Schedule:
    first: float = 1.0
    factor: float = 1.5
    cap: float = 5.0

    def delays(self):
        delay = self.first
        while True:
            yield delay
            delay = min(self.cap, delay * self.factor)


#: Instances take 5-60 s to start and to terminate on EC2 (EC2-compatible clouds can be
#: quicker): look at 0.25, 0.75, 1.75, 3.75, 7.75 s, then every 5 s, so the call returns
#: at most 5 s after EC2 is done, for about one request per 5 s of waiting.
INSTANCE = Schedule(first=0.25, factor=2.0, cap=5.0)
#: Volumes are created, attached and detached in a second or a few.
VOLUME = Schedule(first=0.25, factor=2.0, cap=3.0)
#: Snapshots, images and copies take minutes.
IMAGE = Schedule(first=1.0, factor=2.0, cap=15.0)


class WaitTimeout(CloudError):
    pass


def until(check: Callable[[], Check[T]], *, what: str, timeout: float, schedule: Schedule,
          sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
          check_first: bool = False) -> T | None:
    """Poll `check` until it reports done; raise WaitTimeout after `timeout` seconds.

    `check` raises (a cpi error) to abort the wait, e.g. an instance that terminated while
    starting. With `check_first` the first look is immediate (when the state may already be
    reached); otherwise the first look is after `schedule.first`."""
    started = clock()
    delays = schedule.delays()
    checks = 0
    last_state = None
    if not check_first:
        sleep(next(delays))
    while True:
        result = check()
        checks += 1
        if result.state != last_state:
            if last_state is not None or not result.done:
                log.info("%s: %s (after %.1fs)", what, result.state, clock() - started)
            last_state = result.state
        if result.done:
            log.info("%s: done after %.1fs, %d check%s", what, clock() - started, checks, "" if checks == 1 else "s")
            return result.value
        delay = next(delays)
        elapsed = clock() - started
        if elapsed + delay > timeout:
            raise WaitTimeout(f"timed out after {elapsed:.0f}s waiting for {what} (still {result.state})", ok_to_retry=True)
        sleep(delay)
