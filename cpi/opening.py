"""From cpi.json to a cloud ready to call, one way for every caller: the wire's calls
(cpi.api.handle) and the operator's commands that open the cloud in their own process
(`cpi list`, `show`, `avail`, `orphans`, `certify`, `validate`). A cloud opened any other
way could skip a step — the throttle every CPI process on the host shares, the refusal to
plan a cloud that would write for real — and so behave unlike the one the director calls.

Reading the file is the caller's: the wire reads it before it knows the request (`info`
answers from the raw file alone), the commands read the operator's path.

Start-up is on every call's path: nothing is imported here at module level; the config
models, pydantic and the cloud come in with the first call that needs them.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`: it costs a few ms of every call
if TYPE_CHECKING:
    from typing import Any

    from cpi.clouds.base import Cloud
    from cpi.config import Config
    from cpi.models import CallContext
    from cpi.plan import Plan


class Opening:
    """A config ready to call, and its cloud, made on first use only: the wire answers
    `info` and `ping` without making it, and `cpi validate` without --online never does."""

    __slots__ = ("_cloud", "config", "context")

    def __init__(self, config: Config, context: CallContext):
        self.config, self.context = config, context
        self._cloud: Cloud | None = None

    @property
    def cloud(self) -> Cloud:
        if self._cloud is None:
            self._cloud = self.config.cloud_class(self.config.properties, self.config.agent, self.context)
        return self._cloud


def open_cloud(raw: dict, context: dict, plan: Plan | None = None) -> Opening:
    """`raw` (cpi.json as read) made ready to call under `context` (the request's, or one a
    command makes up) and, for `cpi plan`, its `plan` (cpi.plan): the context checked, the
    config built with the context's overrides, a plan refused that the cloud cannot keep,
    the shared throttle configured. Raises the cpi.errors types."""
    from cpi import backoff, config
    from cpi.models import CallContext

    cfg = config.build(raw, context)
    call_context = CallContext.of_call(context, plan, strict=cfg.validation.strict)
    if plan is not None:
        _refuse_a_plan_it_cannot_keep(cfg.cloud_class)
    backoff.configure(cfg.throttle)
    return Opening(cfg, call_context)


def _refuse_a_plan_it_cannot_keep(cloud_class: Any) -> None:
    """Under `cpi plan`, a cloud that does not declare `can_plan` would make its changes for
    real while the plan reports none: refuse before it is built."""
    from cpi import plan

    if not cloud_class.can_plan:
        raise plan.Refused(f"the {cloud_class.name} cloud cannot withhold its writes (its class does not declare "
                           f"can_plan), so `cpi plan` will not run it: nothing was called")
