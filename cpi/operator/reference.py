"""Render a cloud's config and cloud_properties models as a Markdown reference, so the
docs are generated from the models the CPI validates with and cannot drift from them."""

from __future__ import annotations

import json
from pathlib import Path, PosixPath
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined


def _type_name(annotation: Any) -> str:
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin in (Union, UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is Annotated:
        return _type_name(args[0])
    if origin is Literal:
        return " \\| ".join(f"`{json.dumps(a)}`" for a in args)
    if origin is list:
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return "object"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return f"object ({annotation.__name__})"
        if issubclass(annotation, SecretStr):
            return "string (secret)"
        return _NAMES.get(annotation, annotation.__name__)
    return str(annotation)


_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", Path: "path", PosixPath: "path"}


def _constraint(meta: Any) -> str | None:
    for attr, symbol in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"), ("min_length", "min length"),
                         ("max_length", "max length"), ("pattern", "pattern")):
        value = getattr(meta, attr, None)
        if value is not None:
            return f"{symbol} {value}"
    return None


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "**required**"
    if field.default_factory is not None:
        try:
            value = field.default_factory()  # type: ignore[call-arg]  # typed as maybe taking the data; ours take none
        except TypeError:
            return "(computed)"
        if isinstance(value, BaseModel):
            return "(see below)"
        if isinstance(value, Path):
            return f"`{str(value).replace(str(Path.home()), '~', 1)}`"
        return f"`{json.dumps(value, default=str)}`"
    if field.default is PydanticUndefined:
        return ""
    return f"`{json.dumps(field.default, default=str)}`"


def _nested(annotation: Any) -> list[type[BaseModel]]:
    found = []
    for arg in getattr(annotation, "__args__", ()) or ():
        found.extend(_nested(arg))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        found.append(annotation)
    return found


def model_table(model: type[BaseModel], prefix: str = "") -> list[str]:
    lines = ["| property | type | default | description |", "|---|---|---|---|"]
    nested: list[tuple[str, type[BaseModel]]] = []
    for name, field in model.model_fields.items():
        constraints = [c for c in map(_constraint, field.metadata) if c]
        description = (field.description or "").replace("|", "\\|")
        if constraints:
            description += f" Constraints: {', '.join(constraints)}."
        lines.append(f"| `{prefix}{name}` | {_type_name(field.annotation)} | {_default(field)} | {description} |")
        nested.extend((f"{prefix}{name}", sub) for sub in _nested(field.annotation))
    for path, sub in nested:
        lines += ["", f"`{path}` ({sub.__name__}):", "", *model_table(sub, f"{path}.")]
    return lines


def markdown(cloud_class: Any) -> str:
    out = [f"## The `{cloud_class.name}` cloud", "",
           f"Stemcell formats: {', '.join(cloud_class.stemcell_formats)}.", "",
           f"### cpi.json `cloud.properties.{cloud_class.name}`", ""]
    out += model_table(cloud_class.Properties)
    overridable = sorted(cloud_class.context_overrides)
    out += ["", "A request's `context` (a director's cpi-config) may override, for one call: "
            + (", ".join(f"`{name}`" for name in overridable) if overridable else "nothing")
            + ". Every other property (commands, paths, TLS checks) is set only in cpi.json; "
            "context keys naming one are ignored, with a warning in the log."]
    for kind, model in cloud_class.cloud_property_models.items():
        out += ["", f"### {kind} cloud_properties", ""]
        if model.__doc__:
            out += [" ".join(model.__doc__.split()), ""]
        out += model_table(model)
    return "\n".join(out) + "\n"
