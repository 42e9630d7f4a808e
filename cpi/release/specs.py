"""Job and package `spec` files, as typed models.

bosh-cli reads only a few keys of each spec and silently ignores the rest, so a typo such
as `dependancies:` builds a release that fails later, on the compile host. These models
know every key BOSH defines and reject the others, naming the file and the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cpi.release.definition import check_name
from cpi.release.errors import ReleaseError, describe_validation
from cpi.validation import yaml_error


class PropertyDefinition(BaseModel):
    """One job property: BOSH reads `description` and `default`; the rest is documentation
    that rides along in job.MF."""

    model_config = ConfigDict(extra="forbid")

    description: str | None = None
    default: Any = None
    example: Any = None
    type: str | None = None
    # Whether `default` was written (a `default: null` and no default look alike otherwise).
    has_default: bool = Field(False, exclude=True)


class JobSpec(BaseModel):
    """jobs/<job>/spec, stored verbatim in the release as job.MF."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str | None = None
    templates: dict[str, str] = Field(default_factory=dict)
    packages: list[str] = Field(default_factory=list)
    properties: dict[str, PropertyDefinition] = Field(default_factory=dict)
    consumes: list[dict[str, Any]] = Field(default_factory=list)
    provides: list[dict[str, Any]] = Field(default_factory=list)
    logs: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name("job", value)

    @field_validator("templates")
    @classmethod
    def _templates(cls, value: dict[str, str]) -> dict[str, str]:
        for source, destination in value.items():
            for path in (source, destination):
                parts = Path(path).parts
                if not path or Path(path).is_absolute() or ".." in parts:
                    raise ValueError(f"template path {path!r} must be relative, without '..'")
        destinations = list(value.values())
        twice = sorted({d for d in destinations if destinations.count(d) > 1})
        if twice:
            raise ValueError(f"several templates render to {', '.join(twice)}")
        return value

    @field_validator("properties", mode="before")
    @classmethod
    def _properties(cls, value: Any) -> Any:
        if value is None:
            return {}
        if isinstance(value, dict):
            marked = {}
            for key, definition in value.items():
                if definition is None:
                    definition = {}
                if isinstance(definition, dict):
                    definition = {**definition, "has_default": "default" in definition}
                marked[key] = definition
            return marked
        return value

    def defaults(self) -> dict[str, Any]:
        """Property name -> default, for the properties that declare one."""
        return {name: d.default for name, d in self.properties.items() if d.has_default}


class PackageSpec(BaseModel):
    """packages/<package>/spec (not stored in the package archive; its dependencies count
    in the fingerprint)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    dependencies: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    excluded_files: list[str] = Field(default_factory=list)
    no_compression: bool = False

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name("package", value)

    @field_validator("dependencies", "files", "excluded_files", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any) -> Any:
        return [] if value is None else value


def _load_yaml(path: Path, what: str) -> dict:
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ReleaseError(f"{path}: {what} spec not found") from None
    except yaml.YAMLError as exc:
        raise ReleaseError(f"not valid YAML: {yaml_error(str(path), exc)}") from None
    if not isinstance(data, dict):
        raise ReleaseError(f"{path}: expected a mapping (name, ...), got {type(data).__name__}")
    return data


def load_job_spec(path: Path) -> JobSpec:
    try:
        return JobSpec.model_validate(_load_yaml(path, "job"))
    except ValidationError as exc:
        raise ReleaseError(describe_validation(exc, str(path))) from None


def load_package_spec(path: Path) -> PackageSpec:
    try:
        return PackageSpec.model_validate(_load_yaml(path, "package"))
    except ValidationError as exc:
        raise ReleaseError(describe_validation(exc, str(path))) from None
