"""cpi.json: which cloud, its properties, and the agent settings every VM receives.

Shape (the same the BOSH job template renders):

    {"cloud": {"plugin": "local" | "aws" | "openstack" | "vsphere" | <third party>,
               "properties": {"<plugin>": {...}, "agent": {"mbus", "ntp", "blobstore"}}}}

or, on vSphere, the official vsphere_cpi job's own: `vcenters` and `plugins` in place of
`vsphere` (the cloud's `Properties.official_keys`).

Only the selected plugin's section is validated (strictly: an unknown key is an error, as a
typo'd property silently ignored is worse). Request `context` keys that name one of the
cloud's `context_overrides` (credentials, region, endpoints; never a command or a path)
override the file for that one call, as the AWS and OpenStack CPIs merge the context.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cpi import validation
from cpi.audit import AuditConfig
from cpi.backoff import ThrottleConfig
from cpi.clouds.base import CloudProperties
from cpi.errors import CpiError
from cpi.models import AgentConfig
from cpi.raw_config import info_result, read_file  # noqa: F401 - read_file: callers know it as config.read_file
from cpi.tracing.model import TracingConfig
from cpi.validation import describe

if TYPE_CHECKING:
    from cpi.clouds.base import Cloud

log = logging.getLogger(__name__)

class _DebugCpi(BaseModel):
    model_config = ConfigDict(extra="forbid")

    api_version: int | None = Field(
        None, ge=1, le=3, description="Highest CPI API version `info` reports (to debug the director's negotiation)."
    )


class DebugConfig(BaseModel):
    """`cloud.properties.debug` (the log level comes from the CPI_LOG_LEVEL environment
    variable, which the job's bin/cpi exports, so that bosh-cli users can set it too)."""

    model_config = ConfigDict(extra="forbid")

    cpi: _DebugCpi = Field(default_factory=_DebugCpi)


class ValidationConfig(BaseModel):
    """`cloud.properties.validation`."""

    model_config = ConfigDict(extra="forbid")

    strict: bool = Field(
        False, description="Refuse a key no model knows, in this file and in every cloud_properties, instead of "
                           "ignoring it with a warning in the call's log as the official CPIs ignore it "
                           "(`cpi validate` reports such a key as an error either way).")


class _CloudSection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    plugin: str = Field("local", description="The cloud: local, aws, openstack, vsphere or a registered plugin.")
    properties: dict[str, Any] = Field(default_factory=dict)


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cloud: _CloudSection = Field(default_factory=_CloudSection)


@dataclass
class Config:
    """The validated configuration of one call."""

    plugin: str
    cloud_class: type[Cloud]  # the selected cloud
    properties: BaseModel  # the plugin's own Properties model
    agent: AgentConfig
    debug: DebugConfig
    throttle: ThrottleConfig
    raw: dict  # the file as read, kept to collect secrets for redaction
    audit: AuditConfig = field(default_factory=AuditConfig)
    tracing: TracingConfig = field(default_factory=TracingConfig)
    #: the keys no model knows, left out with a warning (validation.strict off): `cpi validate` reports them
    ignored: list[validation.Ignored] = field(default_factory=list)
    #: how this config's calls read a key no model knows (CallContext.strict carries it to the cloud)
    validation: ValidationConfig = field(default_factory=ValidationConfig)


def _overrides(plugin: str, cloud_class: type[Cloud], context: dict, section: dict) -> dict:
    """The context keys that may override this cloud's properties for one call; keys that
    name a property only the config file may set (a command, a path) are left out, and
    the log says so. So are keys that move an endpoint (cloud_class.context_endpoints)
    when the context brings none of the secrets of its own (context_secrets): the file's
    credentials go only where the file sends them."""
    fields = cloud_class.Properties.model_fields
    allowed = cloud_class.context_overrides
    overrides = {}
    for key, value in context.items():
        if key in allowed and key in fields:
            overrides[key] = value
        elif key in fields:
            log.warning("context key '%s' is ignored: cloud.properties.%s.%s is set only in the config file",
                        key, plugin, key)
    endpoints, secrets = cloud_class.context_endpoints, cloud_class.context_secrets
    moved = [key for key in overrides if key in endpoints and overrides[key] != section.get(key)]
    if moved and not any(overrides.get(key) for key in secrets):
        for key in moved:
            del overrides[key]
            log.warning("context key '%s' is ignored: it sends this call's requests elsewhere than "
                        "cloud.properties.%s says, and the context brings no credentials of its own (%s): "
                        "the config file's are sent only where the file sends them", key, plugin,
                        " or ".join(sorted(secrets)))
    return overrides


#: The sections of cloud.properties this CPI reads besides the plugin's own and
#: `validation` (read first: it decides how these are read), with their models.
SECTIONS: dict[str, type[BaseModel]] = {"agent": AgentConfig, "debug": DebugConfig, "throttle": ThrottleConfig,
                                        "audit": AuditConfig, "tracing": TracingConfig}
#: Sections an official job renders that no CPI acts on, so its cpi.json verbatim warns of
#: nothing: `registry` (the BOSH registry, gone since agents read their settings from the
#: IaaS) and aws_cpi's `stemcell`, which its template writes beside `aws` while its CPI
#: reads `aws.stemcell` only (bosh-aws-cpi-release's config.rb).
OFFICIAL_ONLY = ("registry", "stemcell")


def official(cloud_class: type[Cloud]) -> type[CloudProperties]:
    """The cloud's `Properties` as a CloudProperties: a plugin's plain BaseModel takes an
    official CPI's shape nowhere, which are CloudProperties' defaults."""
    model = cloud_class.Properties
    return model if issubclass(model, CloudProperties) else CloudProperties


def _plugin_section(cloud_class: type[Cloud], sections: dict, plugin: str) -> tuple[Any, str]:
    """The plugin's section and its name in messages. An official CPI's job may render it
    not under the plugin's name but as keys of `cloud.properties` itself
    (`CloudProperties.official_keys`: the vsphere_cpi job's `vcenters` and `plugins`, beside
    `agent`); those keys are then the section, taken as rendered, so that the official job's
    cpi.json works verbatim."""
    official_keys = official(cloud_class).official_keys
    present = [key for key in official_keys if key in sections]
    if not present:
        return sections.get(plugin, {}), plugin
    if plugin in sections:
        raise CpiError(f"invalid config: cloud.properties has both {plugin} and the official CPI's "
                       f"{' and '.join(present)}: give the one or the other")
    return {key: sections[key] for key in present}, f"{official_keys[0]}[0]"


def _official_shape(cloud_class: type[Cloud], section: dict, plugin: str) -> dict:
    """The section in its model's own shape, when the model also takes an official CPI's
    (`CloudProperties.official_shape`: the vSphere CPI's `{"vcenters": [{...}]}`): done before the
    context is merged over it and before unknown keys are looked for, so that both happen
    where the model's keys are."""
    try:
        shaped = official(cloud_class).official_shape(section)
    except ValueError as exc:
        where = "cloud.properties" + ("" if plugin.endswith("]") else f".{plugin}")
        raise CpiError(f"invalid config: {where}: {exc}") from None
    return shaped if isinstance(shaped, dict) else section


def _section(model: type[BaseModel], data: dict, name: str, ignored: list[validation.Ignored] | None = None, *,
             strict: bool) -> Any:
    """`cloud.properties.<name>` validated (an unknown key ignored with a warning, and added
    to `ignored`, unless `strict`), or a CpiError naming each bad field."""
    try:
        return validation.validate(model, data, f"cloud.properties.{name}", ignored, strict=strict)
    except ValidationError as exc:
        raise CpiError(f"invalid config: {describe(exc, f'cloud.properties.{name}', model=model)}") from None


def _file(raw: dict) -> _File:
    try:
        return _File.model_validate(raw)
    except ValidationError as exc:
        raise CpiError(f"invalid config: {describe(exc, model=_File)}") from None


def info(raw: dict) -> dict:
    """`info`'s result for a built-in plugin, through the models: what cpi.raw_config.info
    answers for the plain shapes, and the same coercions and errors as `build` for the rest
    of what it reads (cloud.plugin, cloud.properties.debug); nothing else is looked at."""
    from cpi.clouds import builtin_stemcell_formats

    file = _file(raw)
    formats = builtin_stemcell_formats(file.cloud.plugin)
    if formats is None:
        return build_info(raw)
    debug = _section(DebugConfig, file.cloud.properties.get("debug") or {}, "debug", strict=False)
    return info_result(formats, debug.cpi.api_version)


def build_info(raw: dict) -> dict:
    """`info` of a third-party plugin: its formats are on its class, and its whole config is
    checked, as before `info` had a path of its own."""
    cfg = build(raw)
    return info_result(cfg.cloud_class.stemcell_formats, cfg.debug.cpi.api_version)


def _no_nul(value: Any, where: str) -> None:
    """A NUL byte in any string of the config (or of a context override): no path, command,
    URL or credential can hold one, and the OS would refuse it deep inside a call as an
    'unexpected ValueError'; refused here, naming the setting."""
    invalid = f"invalid {'context' if where == 'context' else 'config'}"
    stack = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise CpiError(f"{invalid}: {path} holds a NUL byte, which no path, command, URL or credential "
                               f"can hold")
        elif isinstance(item, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in item.items())
            if any("\x00" in str(k) for k in item):
                raise CpiError(f"{invalid}: a key under {path or 'the top level'} holds a NUL byte")
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item))


def _properties(file: _File, cloud_class: type[Cloud], context: dict,
                ignored: list[validation.Ignored] | None = None, *, strict: bool) -> Any:
    """The plugin's section of `file` as its `Properties`, with `context`'s overrides."""
    plugin = file.cloud.plugin
    section, where = _plugin_section(cloud_class, file.cloud.properties, plugin)
    if not isinstance(section, dict):
        raise CpiError(f"invalid config: cloud.properties.{plugin} must be an object")
    section = _official_shape(cloud_class, section, where)
    overrides = _overrides(plugin, cloud_class, context, section)
    _no_nul(overrides, "context")
    return _section(cloud_class.Properties, {**section, **overrides}, where, ignored, strict=strict)


def properties_with(cfg: Config, context: dict) -> Any:
    """`cfg`'s cloud properties again, with `context`'s overrides: what `build(cfg.raw,
    context)` would make of them, or its CpiError, without building the rest anew (the
    context changes nothing else). For whoever asks which overrides a config takes."""
    return _properties(_file(cfg.raw), cfg.cloud_class, context, strict=cfg.validation.strict)


def build(raw: dict, context: dict | None = None) -> Config:
    """Validate `raw` for its plugin, with `context` overrides applied."""
    from cpi.clouds import load_cloud

    _no_nul(raw, "")
    file = _file(raw)
    checking = _section(ValidationConfig, file.cloud.properties.get("validation") or {}, "validation", strict=True)
    strict = checking.strict  # this section first, strictly: it decides how the rest is read
    plugin = file.cloud.plugin
    cloud_class = load_cloud(plugin)
    ignored: list[validation.Ignored] = []
    properties = _properties(file, cloud_class, context or {}, ignored, strict=strict)
    sections = file.cloud.properties
    read = {name: _section(model, sections.get(name) or {}, name, ignored, strict=strict)
            for name, model in SECTIONS.items()}
    known = {plugin, *official(cloud_class).official_keys, *SECTIONS, "validation", *OFFICIAL_ONLY}
    validation.sections(sections, known, "cloud.properties", ignored, strict=strict)
    return Config(plugin=plugin, cloud_class=cloud_class, properties=properties, raw=raw, ignored=ignored,
                  validation=checking, **read)
