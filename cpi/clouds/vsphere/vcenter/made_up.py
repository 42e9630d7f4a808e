"""What one `cpi plan` of a vsphere call made up (planned.py): the tasks of its withheld
methods, with the result each would have had, and the properties of each object a withheld
change would have changed. Apart from planned.py so that tasks.py, which asks whether a task
is made up, and planned.py, which waits for real reads through tasks.py, do not import each
other."""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cpi.plan import Plan

log = logging.getLogger("cpi.clouds.vsphere")


@dataclass
class _State:
    """What one plan's withheld changes left: task results, and what each object would be."""

    results: dict[str, Any] = field(default_factory=dict)  # placeholder task -> its result
    touched: dict[str, set[str]] = field(default_factory=dict)  # moref -> properties changed ("*": all)


_states: weakref.WeakKeyDictionary[Plan, _State] = weakref.WeakKeyDictionary()


def state(plan: Plan) -> _State:
    """What `plan` (the call's) made up so far."""
    found = _states.get(plan)
    if found is None:
        found = _states[plan] = _State()
    return found


def waited(plan: Plan, task: Any, what: str, timeout: float) -> tuple[bool, Any]:
    """(True, the task's result) for a task the plan made up: the wait is noted, not waited
    for. (False, None) for a real task (a datastore search, a read): that one is waited for."""
    results = state(plan).results
    if task._moId not in results:
        return False, None
    plan.wait(what, timeout)
    log.info("plan: the call would wait for %s (at most %.0fs)", what, timeout)
    return True, results[task._moId]
