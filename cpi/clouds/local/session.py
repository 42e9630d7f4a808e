"""One call's hold on the local cloud: its state dir, its locks, what plan mode withholds,
and the audit trail.

The local cloud's counterpart of the aws and openstack sessions: the one object the VM,
disk and stemcell modules work through, so that each rule is in one place. Every change
happens under the file locks of the resources it touches (cpi.locks), taken at once in one
global order; in plan mode (cpi.plan) nothing is locked, nothing is written and each file
or process step is only logged, while the audit lines still reach the plan.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from cpi.channel import Channel
from cpi.locks import collect_stale, locked
from cpi.models import AgentConfig, CallContext

from .props import LocalProperties
from .store import Store

if TYPE_CHECKING:
    from cpi.plan import Plan

P = ParamSpec("P")
R = TypeVar("R")


class Session:
    def __init__(self, properties: LocalProperties, agent: AgentConfig, context: CallContext, log: logging.Logger):
        self.properties = properties
        self.agent = agent
        self.context = context
        self.log = log
        #: the audit trail's way in under the call's plan (cpi.channel): the state dir is
        #: this cloud's only peer
        self.channel = Channel(context.plan)
        if self.plan is not None:
            from .planned import PlannedStore  # only a plan needs it: not on bin/cpi's start-up path

            self.store: Store = PlannedStore(properties.state_dir, self.plan)
        else:
            self.store = Store(properties.state_dir)

    @property
    def plan(self) -> Plan | None:
        """The call's plan (cpi.plan: `cpi plan`'s; None for a real call)."""
        return self.context.plan

    def effect(self, what: str) -> bool:
        """Whether to do file or process work now: in plan mode (cpi.plan) it is only logged."""
        if self.plan is None:
            return True
        self.log.info("plan: the call would %s", what)
        return False

    def lock(self, *names: str) -> contextlib.AbstractContextManager[object]:
        if self.plan is not None:  # a plan writes nothing, lock files included: it reads what is there
            return contextlib.nullcontext()
        return locked(self.store.lock_dir, *names, timeout=self.properties.lock_timeout)

    def audit(self, action: str, kind: str, cid: str, old: Any = None, new: Any = None) -> None:
        self.channel.record(action, cid, {"old": old, "new": new}, resource_type=kind)

    def audit_tags(self, kind: str, cid: str, current: dict[str, str], wanted: dict[str, str]) -> None:
        changed = {k: v for k, v in wanted.items() if current.get(k) != v}
        if changed:
            self.audit("tag", kind, cid, old={k: current.get(k) for k in changed}, new=changed)


def then_collect_stale_locks(method: Callable[P, R]) -> Callable[P, R]:
    """After a delete, remove lock files left by processes killed while holding them (a
    killed snapshot_disk's lock on its disk, say): deletes are what an operator runs after
    a kill, and the locks dir should then be empty. For methods of an object holding the
    call's `session`."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        result = method(*args, **kwargs)
        session = args[0].session  # type: ignore[attr-defined]  # a method of an object holding the call's session
        if session.plan is None:
            collect_stale(session.store.lock_dir)
        return result

    return wrapper
