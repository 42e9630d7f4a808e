"""One way out to an IaaS for every cloud and every peer it talks to — EC2 and the other AWS
APIs, OpenStack's services, the vCenter's SOAP API and its file transfers, the NSX managers'
REST APIs: whether a request is sent at all (`cpi plan`), how it is sent again (cpi.retry),
and what the audit trail keeps of it (cpi.audit), always in that order.

Why one channel: each session used to write the same stages itself (five times), each
reading whether the call was planned from a module global. A session now only describes
its peer — a `Request` (what it is called, whether it changes anything, what it reads), how
one attempt is sent, how the peer's failures are retried and worded, what a plan answers in
a mutation's place and what the audit says of a real answer — and the channel runs them.

Whether the call is planned travels with the call: the channel is made with the call's
plan (`CallContext.plan`, which only `cpi plan` sets; cpi.plan), and the waits and audit
lines that must behave otherwise in a plan ask the channel (`until`, `record`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from cpi.plan import Plan
    from cpi.waits import Check

T = TypeVar("T")


@dataclass(frozen=True)
class Request:
    """One request to a peer, as the plan and the audit trail see it. `what` names it in
    logs, plans and errors ("ec2:RunInstances", "compute POST /servers",
    "VirtualMachine.PowerOnVM_Task"); `changes`: a mutation (withheld by a plan, recorded by
    the audit trail); `names`: what a read names, which a plan checks for resources it only
    imagines."""

    what: str
    changes: bool
    names: Any = None


class Channel:
    """The stages every request of one call passes, for one session. `plan`: the call's
    plan, None for a real call."""

    __slots__ = ("plan",)

    def __init__(self, plan: Plan | None = None) -> None:
        self.plan = plan

    def send(self, request: Request, attempt: Callable[[], T], *, retrying: Callable[[Callable[[], T]], T],
             withhold: Callable[[Plan], T], audit: Callable[[T], None],
             before_read: Callable[[Plan], None] | None = None) -> T:
        """`attempt` sent under `retrying` (the peer's cpi.retry policy and the wording of its
        failures), then `audit` told of the answer when the request changes something.

        In a plan a mutation is not sent: `withhold(plan)` answers it (and puts it in the
        plan); a read goes out once `before_read(plan)` (by default: the plan's check that it
        names nothing the plan only imagines) lets it."""
        if self.plan is not None:
            if request.changes:
                return withhold(self.plan)
            if before_read is not None:
                before_read(self.plan)
            else:
                self.plan.read(request.what, request.names)
        answer = retrying(attempt)
        if request.changes:
            audit(answer)
        return answer

    def until(self, check: Callable[[], Check[T]], *, what: str, timeout: float, **kwargs: Any) -> T | None:
        """cpi.waits.until under the call's plan: a planned call notes the wait and does not
        wait. The wait's log is the calling module's, as with waits.until itself."""
        from cpi import waits

        return waits.until(check, what=what, timeout=timeout, plan=self.plan, stacklevel=2, **kwargs)

    def record(self, action: str, resource_id: Any, changes: dict[str, Any] | None = None, **extra: Any) -> None:
        """cpi.audit.record under the call's plan: a planned call's line goes to the plan."""
        from cpi import audit

        audit.record(action, resource_id, changes, plan=self.plan, **extra)
