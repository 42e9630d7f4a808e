"""Turn pydantic's errors into one line a person can act on.

pydantic's own `str(ValidationError)` prints every input value, which for config and
cloud_properties may be a password; here a value is shown only when its key does not look
secret, and always truncated.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from cpi.errors import CpiError
from cpi.logs import looks_secret


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
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        if label and loc:
            where = _loc(label(loc[0]), loc[1:])
        else:
            where = _loc(prefix, loc)
        msg = err["msg"]
        keys = [p for p in loc if isinstance(p, str)]
        if err["type"] not in ("missing", "extra_forbidden") and not any(map(looks_secret, keys)):
            shown = repr(err.get("input"))
            if len(shown) > 80:
                shown = shown[:77] + "..."
            msg = f"{msg} (got {shown})"
        if err["type"] == "extra_forbidden":
            msg = "unknown property"
        messages.append(f"{where}: {msg}")
    return "; ".join(messages)


def parse(model: type[BaseModel], data: Any, what: str) -> Any:
    """Validate `data` as `model`, raising CpiError naming `what` and each bad field."""
    try:
        return model.model_validate({} if data is None else data)
    except ValidationError as exc:
        raise CpiError(f"invalid {what}: {describe(exc)}") from None
