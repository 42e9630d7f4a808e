"""A value as the operator may see it: every secret the config or the call holds masked.

For printing only: the IaaS is untouched, and the wire's results are never altered (a cid
reaches the director exactly as the cloud made it). A plan's answer (cpi.operator.plan) and
everything the commands print (cpi/cli) go through it."""

from __future__ import annotations

from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cpi.logs import Redactor


def masked(value: Any, redactor: Redactor) -> Any:
    """`value` with every secret masked, by field and by value (`Redactor.masked`: the path
    a call's log and a validation error's echo take too)."""
    return redactor.masked(value)
