"""release.yml: the builder's input, as a typed model.

BOSH has no such file (bosh-cli takes the name from config/final.yml and scans jobs/ and
packages/). Declaring the release in one small file keeps the builder free of bosh-cli's
directory conventions while still reading jobs/ and packages/ exactly as bosh-cli does.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from cpi.release.errors import ReleaseError, describe_validation
from cpi.validation import yaml_error

DEFINITION_FILE = "release.yml"

# Release, job and package names end up in file names (jobs/<name>.tgz, blob paths) and in
# the director's database; keep them to the characters every BOSH tool handles.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
NAME_RULE = "must start with a letter or digit and contain only letters, digits, '.', '_' and '-'"

# bosh-cli parses versions as "semi-semantic": dot-separated release segments, then optional
# -pre-release and +post-release segments (1, 0.1.0, 0+dev.4, 2.0.0-rc.1).
VERSION_RE = re.compile(r"^[0-9A-Za-z_]+(\.[0-9A-Za-z_]+)*(-[0-9A-Za-z_.]+)?(\+[0-9A-Za-z_.]+)?$")


def check_name(kind: str, name: str) -> str:
    if not NAME_RE.match(name):
        raise ValueError(f"{kind} name {name!r} {NAME_RULE}")
    return name


def check_version(version: str) -> str:
    if not VERSION_RE.match(version):
        raise ValueError(f"version {version!r} is not a BOSH version (e.g. 1, 0.1.0, 0+dev.4, 2.0.0-rc.1)")
    return version


class VendorSettings(BaseModel):
    """Where `cpi release vendor` puts the blobs the packages need, and for what."""

    model_config = ConfigDict(extra="forbid")

    blobs_root: str = Field("blobs", description="The source root (git-ignored) that holds blobs.")
    python: str = Field(..., description="CPython minor version of package python3, e.g. '3.11'.")
    python_source_dir: str = Field("python3", description="Blob directory of the CPython source tarball.")
    wheels_dir: str = Field("wheels", description="Blob directory of the vendored wheels.")
    platforms: dict[str, list[str]] = Field(
        ..., min_length=1, description="Compile-host platform name -> pip --platform tags."
    )

    @field_validator("python")
    @classmethod
    def _python(cls, value: str) -> str:
        if not re.fullmatch(r"3\.\d+", value):
            raise ValueError(f"python must be a CPython minor version such as '3.11', not {value!r}")
        return value

    @field_validator("platforms")
    @classmethod
    def _platforms(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for name, tags in value.items():
            check_name("platform", name)
            if not tags:
                raise ValueError(f"platform {name!r} needs at least one pip --platform tag")
        return value


class JobAlias(BaseModel):
    """A job of the release built from another job's directory under a name of its own,
    with some property defaults of its own: what a name the director derives from a
    cpi-config's `type` (`/var/vcap/jobs/<type>_cpi/bin/cpi`) needs, without a second copy
    of the job's files."""

    model_config = ConfigDict(extra="forbid")

    job: str = Field(..., description="The job (a directory under jobs/) whose spec, monit and templates it takes.")
    defaults: dict[str, Any] = Field(
        default_factory=dict, description="Properties of that job whose default this name changes.")


class ReleaseDefinition(BaseModel):
    """The contents of release.yml."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., description="Release name (release.MF `name`).")
    version: str = Field(..., description="Release version (release.MF `version`).")
    jobs: list[str] = Field(..., min_length=1, description="Job directories under jobs/.")
    job_aliases: dict[str, JobAlias] = Field(
        default_factory=dict, description="More jobs, each one of `jobs` under another name (JobAlias).")
    packages: list[str] = Field(default_factory=list, description="Package directories under packages/.")
    source_roots: list[str] = Field(
        default_factory=lambda: ["src", "blobs"],
        min_length=1,
        description="Directories where package `files` globs match, in order of precedence.",
    )
    license: list[str] = Field(
        default_factory=lambda: ["LICENSE*", "NOTICE*"],
        description="Globs of root files that form license.tgz.",
    )
    no_compression: bool = Field(False, description="Write the outer tarball without gzip.")
    vendor: VendorSettings | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name("release", value)

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, value: object) -> str:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        elif isinstance(value, float):
            # YAML read 1.10 as the number 1.1: the version the author meant is lost.
            raise ValueError(f'version {value!r} was read as a number: quote it in YAML, e.g. version: "{value}"')
        if not isinstance(value, str):
            raise ValueError(f"version must be a string, not {type(value).__name__}")
        return check_version(value)

    @field_validator("jobs", "packages")
    @classmethod
    def _names(cls, value: list[str], info: ValidationInfo) -> list[str]:
        kind = str(info.field_name)[:-1]  # jobs -> job: a field validator always has its field's name
        for name in value:
            check_name(kind, name)
        duplicates = sorted({name for name in value if value.count(name) > 1})
        if duplicates:
            raise ValueError(f"{kind}s listed twice: {', '.join(duplicates)}")
        return value

    @model_validator(mode="after")
    def _aliases(self) -> ReleaseDefinition:
        for name, alias in self.job_aliases.items():
            check_name("job", name)
            if name in self.jobs:
                raise ValueError(f"job alias {name!r} is also a job directory listed in jobs")
            if alias.job not in self.jobs:
                raise ValueError(f"job alias {name!r} is of job {alias.job!r}, which jobs does not list")
        return self

    @field_validator("license")
    @classmethod
    def _license(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if "/" in pattern:
                raise ValueError(f"license pattern {pattern!r} must name files at the release root (no '/')")
        return value

    def check_vendor_root(self) -> None:
        if self.vendor and self.vendor.blobs_root not in self.source_roots:
            raise ReleaseError(
                f"{DEFINITION_FILE}: vendor.blobs_root {self.vendor.blobs_root!r} must be one of "
                f"source_roots {self.source_roots}, or package files could never match the blobs"
            )


def load_definition(release_dir: Path) -> ReleaseDefinition:
    """Read and check release.yml in `release_dir`."""
    path = release_dir / DEFINITION_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ReleaseError(
            f"{path}: not found. Run from the project root or pass --release-dir; "
            f"{DEFINITION_FILE} declares the release's name, version, jobs and packages"
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ReleaseError(f"not valid YAML: {yaml_error(str(path), exc)}") from None
    if not isinstance(data, dict):
        raise ReleaseError(f"{path}: expected a mapping with name, version, jobs and packages")
    try:
        definition = ReleaseDefinition.model_validate(data)
    except ValidationError as exc:
        raise ReleaseError(describe_validation(exc, str(path))) from None
    definition.check_vendor_root()
    return definition
