"""The plan of one CPI call: what it would change, changing nothing (`cpi plan`).

The call runs in this process through the same code as bin/cpi's (cpi.rpc.handle), with
the call's cpi.plan: reads go to the cloud, mutations are described instead of made (on AWS,
each is sent with DryRun=True so the plan also proves it is allowed), waits are noted.
The answer is a JSON-ready document, masked of every secret; cpi/cli/plan.py prints it.
It holds the warnings the call logs (a key of cpi.json or of a cloud_properties ignored, a
context key left out), each as the call's log words it: the plan is of the call as the
director would make it, and what that call would pass over silently is part of it.
"""

from __future__ import annotations

import io
import json
import logging
import uuid
from typing import Any


class _Warnings(logging.Handler):
    """The call's warnings and errors as its log words them (the message, masked), in order."""

    def __init__(self, clean: Any):
        super().__init__(logging.WARNING)
        self.clean = clean
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(self.clean(record.getMessage()))


def make_plan(method: str, arguments: list[Any], config: str | None, *, director_uuid: str | None = None,
              api_version: int = 2, log_stream: Any = None, context: dict[str, Any] | None = None) -> dict[str, Any]:
    """The plan of one call, as a JSON-ready document. `context`: more keys of the call's
    context, as a director's cpi-config adds them (the command's --timeout)."""
    from cpi import errors, plan, rpc
    from cpi.logs import CallLog


    call_log = CallLog(log_stream if log_stream is not None else io.StringIO())
    warnings = _Warnings(call_log.redactor.text)
    logging.getLogger().addHandler(warnings)  # beside the call log's own handlers, which it installed
    context = {**(context or {}), "request_id": f"plan-{uuid.uuid4().hex[:8]}"}
    if director_uuid:
        context["director_uuid"] = director_uuid
    request = {"method": method, "arguments": arguments, "context": context, "api_version": api_version}
    the_plan = plan.Plan()
    result, failure, complete = None, None, True
    try:
        result = rpc.handle(json.dumps(request).encode(), config, call_log, plan=the_plan)
    except plan.Horizon:
        complete = False
    except plan.Refused:
        raise  # no plan at all, not a plan of a failing call
    except errors.BoshError as exc:
        failure = exc.to_wire()
    except Exception as exc:  # noqa: BLE001 - a bug in the planned call is reported like a failure
        failure = rpc._unexpected(exc).to_wire()
    finally:
        logging.getLogger().removeHandler(warnings)
    redactor = call_log.redactor
    if failure is not None:
        failure["message"] = redactor.text(str(failure["message"]))
    return {
        "method": method,
        "request_id": context["request_id"],
        "complete": complete,
        "stopped_at": the_plan.horizon,
        "would_return": redactor.masked(result) if failure is None and complete else None,
        "would_fail": failure,
        "denied": len(the_plan.denied()),
        "mutations": len(the_plan.mutations),
        "steps": the_plan.steps,
        "warnings": warnings.messages,
    }
