"""Waiting for a vCenter task (a clone, an import, a reconfiguration, a disk copy): told by
the vCenter the moment it ends, bounded, logged, and cancelled when the call gives up on it.

The official CPI polls a task with a fixed pause and no bound, so a task stuck in the
vCenter (a host that went away mid-clone) holds the director's call for as long as it stays
stuck, and a task that took 0.3 s is reported a whole pause later. Here the wait is the
vCenter's own: a property collector of this wait follows the task's `info`, and
WaitForUpdatesEx answers as soon as it changes: a task is reported when it ends, with no
pause to guess. Each such request is held open for a slice of time (1 s, then twice as long
each time, at most `WAIT_SLICE` and well inside `read_timeout`); a slice that ends with no
update is followed by one direct read of the task, so an update that never came (a
collector that missed it, a connection that lost it) costs a slice, not the task_timeout.
Every change of state is logged with the time it took, and a task still
running after `task_timeout` is cancelled and the call fails, naming it and how far it got.

Under `cpi plan` a task the plan made up (planned.py: its method was withheld) is noted in
the plan and not waited for; a real one (a datastore search) is waited for as always.

A task that fails raises the vCenter's own fault (a vmodl.MethodFault), so callers can tell
a DuplicateName or a FileNotFound from the rest; what nobody expects is translated at the
cloud's boundary.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cpi import waits
from cpi.errors import CloudError

from .. import errors

if TYPE_CHECKING:
    from typing import Protocol

    from cpi.channel import Channel

    from ..job_config import VsphereProperties

    class Session(Protocol):
        """What a wait reads of session.Session, named here rather than imported: the
        session's plan path (planned.py) waits on tasks."""

        content: Any
        channel: Channel

        @property
        def properties(self) -> VsphereProperties: ...

log = logging.getLogger("cpi.clouds.vsphere")

#: the longest one WaitForUpdatesEx may hold its request open (seconds)
WAIT_SLICE = 60
#: how many times a task whose start was lost, and not carried out, is started in all
STARTS = 6
#: how many property collectors one look may make, each found gone with a dropped session
REOPENS = 8


class _Watch:
    """A property collector of this wait, following the task's `info`. Property collectors
    belong to the session that made them: when a request finds this one gone (the session
    was dropped and logged in again), another is made and followed from the start."""

    def __init__(self, session: Session, task: Any):
        self.session = session
        self.task = task
        self.collector: Any = None
        self.version = ""

    def _open(self) -> None:
        from pyVmomi import vim, vmodl

        spec = vmodl.query.PropertyCollector
        self.collector = self.session.content.propertyCollector.CreatePropertyCollector()
        self.collector.CreateFilter(spec.FilterSpec(objectSet=[spec.ObjectSpec(obj=self.task)],
                                                    propSet=[spec.PropertySpec(type=vim.Task, pathSet=["info"])]),
                                    partialUpdates=False)
        self.version = ""

    def info(self, seconds: int) -> Any:
        """The task's info once it changed, or after `seconds` without a change, as the task
        itself says then (one more request)."""
        from pyVmomi import vmodl

        for attempt in range(1, REOPENS + 1):
            try:
                if self.collector is None:
                    self._open()
                update = self.collector.WaitForUpdatesEx(version=self.version, options=vmodl.query.PropertyCollector
                                                         .WaitOptions(maxWaitSeconds=seconds))
                break
            except vmodl.fault.ManagedObjectNotFound:
                if attempt == REOPENS:
                    raise
                self.collector = None  # gone with the session it was made in
        if update is None:
            return self.task.info
        self.version = update.version
        found = None
        for filter_update in update.filterSet or []:
            for object_update in filter_update.objectSet or []:
                for change in object_update.changeSet or []:
                    if change.name == "info" and change.val is not None:
                        found = change.val
        return found

    def close(self, what: str) -> None:
        if self.collector is None:
            return
        try:
            self.collector.DestroyPropertyCollector()
        except Exception as exc:  # noqa: BLE001 - the session's end takes it too; the wait's outcome stands
            log.debug("%s: its property collector could not be destroyed (%s)", what, errors.describe(exc))


def wait(session: Session, task: Any, what: str) -> Any:
    """The result of `task` once it succeeded; its fault if it failed; WaitTimeout (after
    cancelling it) when it runs longer than `task_timeout`."""
    timeout = session.properties.task_timeout
    if session.channel.plan is not None:  # a task the plan made up is noted, not waited for
        from . import made_up

        invented, result = made_up.waited(session.channel.plan, task, what, timeout)
        if invented:
            return result
    slice_seconds = max(1, int(min(WAIT_SLICE, session.properties.read_timeout / 2)))
    started = time.monotonic()
    watch = _Watch(session, task)
    info: Any = None
    state, looks, held = None, 0, 1
    try:
        while state not in ("success", "error"):
            remaining = timeout - (time.monotonic() - started)
            if remaining <= 0:
                _cancel(task, what)
                progress = f", {info.progress}% done" if info is not None and info.progress else ""
                raise waits.WaitTimeout(f"timed out after {time.monotonic() - started:.0f}s (task_timeout "
                                        f"{timeout:.0f}s) waiting for {what} (still {state}{progress})",
                                        ok_to_retry=True)
            info = watch.info(max(1, int(min(remaining, held)))) or info
            looks += 1
            held = min(slice_seconds, held * 2)
            now = str(info.state) if info is not None else None
            if now is not None and now != state:
                if state is not None or now not in ("success", "error"):
                    log.info("%s: %s (after %.2fs)", what, now, time.monotonic() - started)
                state = now
    finally:
        watch.close(what)
    log.info("%s: done after %.2fs, %d look%s", what, time.monotonic() - started, looks, "" if looks == 1 else "s")
    if state == "error":
        if info.error is None:
            raise CloudError(f"{what}: the vCenter's task {task._moId} failed without saying why")
        raise info.error
    return info.result


def run(session: Session, start: Callable[[], Any], what: str, *, done: Callable[[], Any] | None = None) -> Any:
    """Start a task (`start()` sends the request) and wait for it. When the request's answer
    was lost (errors.Unsure: the vCenter may have started it), `done()` looks whether what
    it does is there: its result (anything but None) ends the call, None starts the task
    again (at most STARTS times in all). Without `done`, Unsure leaves as the call's error
    (ok_to_retry)."""
    for attempt in range(1, STARTS + 1):
        try:
            task = start()
            break
        except errors.Unsure as exc:
            if done is None or attempt == STARTS:
                raise
            log.warning("%s: %s; looking whether the vCenter carried it out", what, exc.message)
            found = done()
            if found is not None:
                log.info("%s: it did", what)
                return found
            log.info("%s: it did not; starting it again", what)
    return wait(session, task, what)


def _cancel(task: Any, what: str) -> None:
    """Ask the vCenter to cancel `task`; a task that cannot be cancelled (or finished in the
    meantime) is logged, never hidden: the call fails either way."""
    try:
        task.CancelTask()
        log.warning("%s: cancelled the vCenter's task %s", what, task._moId)
    except Exception as exc:  # noqa: BLE001 - the wait's own error is the one the call reports
        log.warning("%s: the vCenter's task %s could not be cancelled (%s)", what, task._moId, errors.describe(exc))
