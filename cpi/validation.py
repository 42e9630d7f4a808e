"""Validate what the director and the operator send, and say what is wrong in one line a
person can act on.

pydantic's own `str(ValidationError)` prints every input value, which for config and
cloud_properties may be a password; here a value is shown only when its key does not look
secret, masked of every secret this call knows (before it is cut short, so no secret's
head survives the cut) and cut to 80 characters.

A key no model knows is ignored on the wire, with a warning in the call's log naming it and
the closest known key, as the official AWS and OpenStack CPIs ignore it (a copied cpi.json
or cloud-config keeps working, and a director with several CPIs merges vm_extensions
written for another IaaS); `cpi validate` reports it as an error, where a typo is safe to
stop on; `cloud.properties.validation.strict: true` makes the wire refuse it too.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from cpi import logs
from cpi.errors import CpiError
from cpi.logs import Redactor, looks_secret, shown

#: Errors listed in one message; a list of a million bad items gets a short answer.
MAX_ERRORS = 10

@dataclass(frozen=True)
class Ignored:
    """A key no model knows, left out of what the call reads: `path` as the call's warning
    names it (`cloud.properties.local.stat_dir`), `hint` the closest known key
    (`, did you mean state_dir?`) or nothing. `cpi validate` reports these, from the same
    list the warnings are made from."""

    path: str
    hint: str


def _loc(prefix: str, loc: tuple) -> str:
    parts = [prefix] if prefix else []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts) or "(top level)"


def describe(exc: ValidationError, prefix: str = "", label: Callable[[str], str] | None = None,
             model: type[BaseModel] | None = None) -> str:
    """`a.b: message (got 'x'); c: Field required` — secret-looking fields never show a value.

    `label`, when given, renames the first element of each location (api.py uses it to say
    "argument 2 (stemcell_cid)" instead of the internal field name). `model`, when given,
    is the one validated: an unknown key then names the closest known one, as the
    warning of a call that ignores it does."""
    messages = []
    errors = exc.errors(include_url=False)
    redactor = logs.active if logs.active is not None else Redactor()
    for err in errors[:MAX_ERRORS]:
        loc = _plain(err["loc"])
        where = _loc(label(loc[0]), loc[1:]) if label and loc else _loc(prefix, loc)
        where = redactor.text(where, limit=200)
        msg = redactor.text(err["msg"], limit=200)
        keys = [p for p in loc if isinstance(p, str)]
        if err["type"] not in ("missing", "extra_forbidden") and not any(map(looks_secret, keys)):
            msg = f"{msg} (got {shown(err.get('input'))})"
        if err["type"] == "extra_forbidden":
            msg = "unknown property" + (closest(model, loc) if model is not None else "")
        messages.append(f"{where}: {msg}")
    if len(errors) > MAX_ERRORS:
        messages.append(f"and {len(errors) - MAX_ERRORS} more errors")
    return "; ".join(messages)


def parse(model: type[BaseModel], data: Any, what: str, *, strict: bool = False) -> Any:
    """Validate `data` as `model`, raising CpiError naming `what` and each bad field.
    `strict` is the call's (cpi.models.CallContext.strict, which every cloud passes):
    whether a key no model knows is refused rather than left out with a warning; by
    default it is left out, as by a call under a config without validation.strict."""
    try:
        return validate(model, {} if data is None else data, what, strict=strict)
    except ValidationError as exc:
        raise CpiError(f"invalid {what}: {describe(exc)}") from None


def validate(model: type[BaseModel], data: Any, where: str, ignored: list[Ignored] | None = None, *,
             strict: bool) -> Any:
    """`model.model_validate(data)`; unless `strict`, a key the model does not know is left
    out with a warning naming it (`where` and its path) and the closest known key, and what
    remains is validated again, so that any other mistake is still an error. Each key left
    out is appended to `ignored` when given (cpi.config keeps them for `cpi validate`)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        if strict:
            raise
        unknown = [tuple(err["loc"]) for err in exc.errors(include_url=False) if err["type"] == "extra_forbidden"]
        if not unknown:
            raise
    import copy

    cleaned = copy.deepcopy(data)
    for loc in unknown:
        _drop(cleaned, loc)
    _leave_out([(_loc(where, _plain(loc)), closest(model, loc)) for loc in unknown], where, ignored)
    return model.model_validate(cleaned)


def _leave_out(unknown: list[tuple[str, str]], where: str, ignored: list[Ignored] | None) -> None:
    """Each (path, hint) warned of (the first MAX_ERRORS), redacted, and added to `ignored`."""
    import logging

    log = logging.getLogger("cpi.validation")
    redactor = logs.active if logs.active is not None else Redactor()
    for number, (path, hint) in enumerate(unknown):
        left_out = Ignored(redactor.text(path, limit=200), hint)
        if ignored is not None:
            ignored.append(left_out)
        if number < MAX_ERRORS:
            log.warning("%s: unknown property ignored%s (`cpi validate` reports it; "
                        "cloud.properties.validation.strict: true refuses it)", left_out.path, left_out.hint)
    if len(unknown) > MAX_ERRORS:
        log.warning("%s: %d more unknown properties ignored", where, len(unknown) - MAX_ERRORS)


def sections(data: dict, known: set[str], where: str, ignored: list[Ignored] | None = None, *,
             strict: bool) -> None:
    """The sections of `data` (cloud.properties) that no model reads, each left out as an
    unknown key of a model is: a warning naming it and the closest known section, added to
    `ignored` for `cpi validate`, or refused under `strict`. A misspelt `agnet` would
    otherwise be passed over without a word, and the agent given no settings of its own."""
    unknown = [key for key in data if key not in known]
    if not unknown:
        return
    if strict:
        redactor = logs.active if logs.active is not None else Redactor()
        names = ", ".join(redactor.text(f"{where}.{key}", limit=200) + suggest(key, known) for key in unknown)
        raise CpiError(f"invalid config: {names}: unknown property (cloud.properties.validation.strict is on)")
    _leave_out([(f"{where}.{key}", suggest(key, known)) for key in unknown], where, ignored)


def _plain(loc: tuple) -> tuple:
    return tuple(p for p in loc if not (isinstance(p, str) and p.startswith("function-")))


def _drop(data: Any, loc: tuple) -> None:
    """Remove the key at `loc` from `data` (in place); a step that names no key of the data
    (a union's tag in pydantic's location) is passed over."""
    current = data
    for item in loc[:-1]:
        in_dict = isinstance(current, dict) and item in current
        in_list = isinstance(current, list) and isinstance(item, int) and 0 <= item < len(current)
        if in_dict or in_list:
            current = current[item]
    if isinstance(current, dict) and loc:
        current.pop(loc[-1], None)


def closest(model: type[BaseModel], loc: tuple) -> str:
    """`, did you mean NAME?` for the known key closest to the unknown one at `loc`."""
    where = model_at(model, loc)
    if where is None or not loc:
        return ""
    return suggest(loc[-1], {*where.model_fields, *(f.alias for f in where.model_fields.values() if f.alias)})


def suggest(name: Any, known: set) -> str:
    """`, did you mean NAME?` for the closest of `known`, or nothing (difflib is imported
    only when a name is unknown: it is not on the path of a call that has none)."""
    if not isinstance(name, str):
        return ""
    import difflib

    close = difflib.get_close_matches(name, sorted(k for k in known if isinstance(k, str)), n=1)
    return f", did you mean {close[0]}?" if close else ""


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation may hold (through Optional, unions, lists, dicts)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += models_in(arg)
    return found


def model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The model whose fields the key at the end of `loc` was checked against."""
    current: type[BaseModel] | None = model
    for item in loc[:-1]:
        if current is None:
            return None
        if isinstance(item, int):
            continue  # a list index: the list's item model is already `current`
        field = current.model_fields.get(item)
        if field is None:
            continue  # a dict key (or a union tag): stay on the value's model
        models = models_in(field.annotation)
        current = models[0] if models else None
    return current


def yaml_error(name: str, exc: Any) -> str:
    """PyYAML's error in one line, as a compiler says where a file is wrong:
    `NAME:LINE:COLUMN: problem (context at LINE:COLUMN)`, lines and columns counted from 1
    (PyYAML's own text spans four lines). Every YAML an operator hands a command is
    reported so: a cloud-config, release.yml, a job's spec."""
    mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", None)
    if mark is None or not problem:
        return f"{name}: " + " ".join(str(exc).split())
    text = f"{name}:{mark.line + 1}:{mark.column + 1}: {problem}"
    context, where = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context:
        text += f" ({context}" + (f" at {where.line + 1}:{where.column + 1}" if where is not None else "") + ")"
    return " ".join(text.split())
