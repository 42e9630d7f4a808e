"""Turn pydantic's errors into one line a person can act on.

pydantic's own `str(ValidationError)` prints every input value, which for config and
cloud_properties may be a password; here a value is shown only when its key does not look
secret, masked of every secret this call knows (before it is cut short, so no secret's
head survives the cut) and cut to 80 characters.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from cpi import logs
from cpi.errors import CpiError
from cpi.logs import Redactor, looks_secret, shown

#: Errors listed in one message; a list of a million bad items gets a short answer.
MAX_ERRORS = 10


def _loc(prefix: str, loc: tuple) -> str:
    parts = [prefix] if prefix else []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts) or "(top level)"


def describe(exc: ValidationError, prefix: str = "", label=None) -> str:
    """`a.b: message (got 'x'); c: Field required` — secret-looking fields never show a value.

    `label`, when given, renames the first element of each location (api.py uses it to say
    "argument 2 (stemcell_cid)" instead of the internal field name)."""
    messages = []
    errors = exc.errors(include_url=False)
    redactor = logs.active if logs.active is not None else Redactor()
    for err in errors[:MAX_ERRORS]:
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        where = _loc(label(loc[0]), loc[1:]) if label and loc else _loc(prefix, loc)
        where = redactor.text(where, limit=200)
        msg = redactor.text(err["msg"], limit=200)
        keys = [p for p in loc if isinstance(p, str)]
        if err["type"] not in ("missing", "extra_forbidden") and not any(map(looks_secret, keys)):
            msg = f"{msg} (got {shown(err.get('input'))})"
        if err["type"] == "extra_forbidden":
            msg = "unknown property"
        messages.append(f"{where}: {msg}")
    if len(errors) > MAX_ERRORS:
        messages.append(f"and {len(errors) - MAX_ERRORS} more errors")
    return "; ".join(messages)


def parse(model: type[BaseModel], data: Any, what: str) -> Any:
    """Validate `data` as `model`, raising CpiError naming `what` and each bad field."""
    try:
        return model.model_validate({} if data is None else data)
    except ValidationError as exc:
        raise CpiError(f"invalid {what}: {describe(exc)}") from None
