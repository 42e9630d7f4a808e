"""Plan mode (`cpi plan`, Salt's `test=True`): a CPI method runs with every read done and
every write withheld, and what it would have changed is collected instead.

Why here, at the bottom, and not in each cloud method: every mutation a cloud makes
already passes through one place that describes it for the audit trail (cpi.audit.record,
fed by each cloud's request hook). In plan mode that place hands the line to the plan
instead of the file, so a plan lists exactly what the real call's audit trail then holds,
with the same `changes`. What each cloud adds is only the withholding:

- a cloud's session does not send a mutating request: it answers it itself, with
  `placeholder` ids for what would be made (AWS first sends the request with
  `DryRun=True`, so the plan also proves the credentials may make it: `permission`);
- `cpi.waits.until` does not wait: a plan notes what the call would wait for (`wait`);
- a read that names a placeholder cannot be answered by the cloud: the plan stops there
  (`Horizon`), and says so, rather than invent what the cloud would answer.

Whether a call is planned travels with the call, not through a global: `cpi plan` hands its
Plan to the call's opening (cpi.opening), which puts it in the call's context
(`CallContext.plan`); the cloud makes its sessions' channels (cpi.channel) with it, and every
stage that behaves otherwise in a plan (the send, the wait, the audit line) asks its channel.
The wire never runs in this mode: nothing it reads can set a plan.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from cpi.errors import CpiError


class Refused(CpiError):
    """The selected cloud cannot withhold its writes (it does not declare `can_plan`): no
    plan can be made of its calls, and none is run."""


class Horizon(BaseException):
    """The call needs an answer only the real change could give. A BaseException, so the
    cloud code's `except Exception` clean-ups do not take it for a failure of its own."""


class Plan:
    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []
        self.placeholders: set[str] = set()
        self.horizon: str | None = None
        self._numbers = itertools.count(1)
        self._permission: str | None = None

    # -- what the cloud code tells the plan
    def placeholder(self, prefix: str) -> str:
        """An id for a resource the call would make: `prefix` keeps the cloud's id shape
        (AWS `i-`, `vol-`...), "planned" makes it unmistakable wherever it is printed."""
        value = f"{prefix}planned{next(self._numbers)}"
        self.placeholders.add(value)
        return value

    def names_placeholder(self, value: Any) -> str | None:
        """The first placeholder found in `value` (strings, lists, dicts, at any depth)."""
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                for placeholder in self.placeholders:
                    if placeholder in item:
                        return placeholder
            elif isinstance(item, dict):
                stack.extend(item.keys())
                stack.extend(item.values())
            elif isinstance(item, (list, tuple)):
                stack.extend(item)
        return None

    def read(self, what: str, request: Any) -> None:
        """Before a read: one that names a resource the plan only imagines ends the plan."""
        found = self.names_placeholder(request)
        if found is not None:
            raise self.stop(f"{what} reads {found}, which only the real call would make")

    def stop(self, reason: str) -> Horizon:
        if self.horizon is None:
            self.horizon = reason
            self.steps.append({"step": "horizon", "reason": reason})
        return Horizon(reason)

    @contextmanager
    def permission(self, verdict: str) -> Iterator[None]:
        """The mutations recorded inside were checked by the cloud as `verdict`."""
        self._permission = verdict
        try:
            yield
        finally:
            self._permission = None

    def mutation(self, entry: dict[str, Any]) -> None:
        """One audit line the real call would write (cpi.audit builds it)."""
        if self.horizon is not None:
            return  # a clean-up after the plan stopped: not what the real call does
        step = {"step": "mutation", **entry}
        if self._permission is not None:
            step["permission"] = self._permission
        self.steps.append(step)

    def wait(self, what: str, timeout: float | None) -> None:
        if self.horizon is None:
            self.steps.append({"step": "wait", "what": what, "timeout": timeout})

    # -- what the plan says
    @property
    def mutations(self) -> list[dict[str, Any]]:
        return [s for s in self.steps if s["step"] == "mutation"]

    def denied(self) -> list[dict[str, Any]]:
        return [s for s in self.mutations if str(s.get("permission", "")).startswith("denied")]
