"""Waiting for a vCenter task (a clone, an import, a reconfiguration, a disk copy): bounded,
logged, and cancelled when the call gives up on it.

The official CPI waits on a task with a fixed pause and no bound, so a task stuck in the
vCenter (a host that went away mid-clone) holds the director's call for as long as it
stays stuck. Here each look is one read of `task.info` (one request, retried by the
session like every request), the pauses grow from a tenth of a second up to two seconds
(cpi.waits: a reconfiguration that takes 0.3 s is reported after 0.3 s, not after a fixed
second), every change of state and the progress are logged, and a task still running after
`task_timeout` is cancelled and the call fails, naming it and how far it got.

A task that fails raises the vCenter's own fault (a vmodl.MethodFault), so callers can tell
a DuplicateName or a FileNotFound from the rest; what nobody expects is translated at the
cloud's boundary.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cpi import waits
from cpi.errors import CloudError

from . import errors

if TYPE_CHECKING:
    from .session import Session

log = logging.getLogger("cpi.clouds.vsphere")

SCHEDULE = waits.Schedule(first=0.1, factor=1.5, cap=2.0)


def wait(session: Session, task: Any, what: str) -> Any:
    """The result of `task` once it succeeded; its fault if it failed; WaitTimeout (after
    cancelling it) when it runs longer than `task_timeout`."""
    timeout = session.properties.task_timeout

    def look() -> waits.Check[Any]:
        info = task.info
        state = str(info.state)
        if state == "success":
            return waits.Check(True, state, info)
        if state == "error":
            return waits.Check(True, state, info)
        progress = f" {info.progress}%" if state == "running" and info.progress else ""
        return waits.Check(False, f"{state}{progress}")

    try:
        info = waits.until(look, what=what, timeout=timeout, schedule=SCHEDULE, setting="task_timeout", log=log,
                           check_first=False)
    except waits.WaitTimeout:
        _cancel(task, what)
        raise
    if info is None:  # cpi plan: nothing ran, nothing to hand back
        return None
    if str(info.state) == "error":
        fault = info.error
        if fault is None:
            raise CloudError(f"{what}: the vCenter's task {task._moId} failed without saying why")
        raise fault
    return info.result


def run(session: Session, start: Callable[[], Any], what: str, *, done: Callable[[], Any] | None = None) -> Any:
    """Start a task (`start()` sends the request) and wait for it. When the request's answer
    was lost (errors.Unsure: the vCenter may have started it), `done()` looks whether what
    it does is there: its result (anything but None) ends the call, None starts the task
    again, once more. Without `done`, Unsure leaves as the call's error (ok_to_retry)."""
    try:
        task = start()
    except errors.Unsure as exc:
        if done is None:
            raise
        log.warning("%s: %s; looking whether the vCenter carried it out", what, exc.message)
        found = done()
        if found is not None:
            log.info("%s: it did", what)
            return found
        log.info("%s: it did not; starting it again", what)
        task = start()
    return wait(session, task, what)


def _cancel(task: Any, what: str) -> None:
    """Ask the vCenter to cancel `task`; a task that cannot be cancelled (or finished in the
    meantime) is logged, never hidden: the call fails either way."""
    try:
        task.CancelTask()
        log.warning("%s: cancelled the vCenter's task %s", what, task._moId)
    except Exception as exc:  # noqa: BLE001 - the wait's own error is the one the call reports
        log.warning("%s: the vCenter's task %s could not be cancelled (%s)", what, task._moId, errors.describe(exc))
