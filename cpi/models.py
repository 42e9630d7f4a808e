"""Typed shapes of what the director sends, shared by api.py and every cloud."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StrictInt, field_validator

if TYPE_CHECKING:
    from cpi.plan import Plan

MIB_PER_GIB = 1024


def gib(size_mib: int) -> int:
    """IaaS volumes are sized in whole GiB, BOSH speaks MiB: round up, at least 1 (as the
    Ruby CPIs do)."""
    return max(1, math.ceil(size_mib / MIB_PER_GIB))


class StrictModel(BaseModel):
    """Config sections and cloud_properties: an unknown key is an error (a misspelt
    property must not be silently ignored); schemas are built on first use, off the
    start-up path of the calls that never validate them."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


class CallContext(BaseModel):
    """The request's `context`. Unknown keys are kept (they may override config)."""

    model_config = ConfigDict(extra="allow")

    director_uuid: str | None = None
    request_id: str | None = None
    vm: dict[str, Any] | None = None
    _plan: Plan | None = PrivateAttr(default=None)
    _strict: bool = PrivateAttr(default=False)

    @classmethod
    def of_call(cls, context: dict[str, Any], plan: Plan | None = None, *, strict: bool = False) -> CallContext:
        """The request's `context`, the plan the call runs under (`cpi plan`'s, cpi.plan) and
        how it reads a key no model knows (cpi.json's `validation.strict`): both travel with
        the call, and no key a request can send sets either."""
        made = cls.model_validate(context)
        made._plan, made._strict = plan, strict
        return made

    @property
    def strict(self) -> bool:
        """Whether the call refuses a key no model knows in a cloud_properties (cpi.validation),
        rather than leaving it out with a warning."""
        return self._strict

    @property
    def plan(self) -> Plan | None:
        """The call's plan; None for a real call (every call of the wire)."""
        return self._plan

    @property
    def stemcell_api_version(self) -> int:
        """`vm.stemcell.api_version`, 1 when absent (as the AWS and OpenStack CPIs read it)."""
        stemcell = (self.vm or {}).get("stemcell") or {}
        version = stemcell.get("api_version") if isinstance(stemcell, dict) else None
        return version if isinstance(version, int) and not isinstance(version, bool) else 1


class Network(BaseModel):
    """One entry of create_vm's `networks`. Unknown keys are kept: the agent gets the
    networks verbatim (`wire()`), the clouds read the typed fields."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    type: Literal["manual", "dynamic", "vip"] = "manual"
    ip: str | None = None
    netmask: str | None = None
    gateway: str | None = None
    prefix: str | int | None = None
    dns: list[str] | None = None
    default: list[str] | None = None
    mac: str | None = None
    nic_group: str | int | None = None
    cloud_properties: dict[str, Any] = Field(default_factory=dict)

    @field_validator("ip")
    @classmethod
    def _ip(cls, value: str | None) -> str | None:
        if value is not None:
            address = ipaddress.ip_address(value)  # ValueError names the bad address
            if getattr(address, "scope_id", None) is not None:
                # a zone (fe80::1%eth0) names an interface of the host that reads it: it
                # means nothing as a VM's address, and may carry any byte (a NUL, say)
                raise ValueError("an IPv6 zone index ('%...') is not allowed in a VM's address")
        return value

    @property
    def canonical_ip(self) -> str | None:
        """The one spelling of `ip` (fd00::5 for FD00:0:0:0:0:0:0:5), to compare and reserve by;
        `ip` itself is passed on as the director wrote it."""
        return ipaddress.ip_address(self.ip).compressed if self.ip else None

    def wire(self) -> dict[str, Any]:
        return self.model_dump(exclude_unset=True)


class VMResources(BaseModel):
    """calculate_vm_cloud_properties' argument: what an instance group asks for."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    cpu: StrictInt = Field(..., ge=1, description="Virtual CPUs")
    ram: StrictInt = Field(..., ge=1, description="Memory in MiB")
    ephemeral_disk_size: StrictInt = Field(..., ge=0, description="Ephemeral disk in MiB")


def dns_servers(networks: dict[str, Network]) -> list[str]:
    """The nameservers of the network that is default for dns (else the first that has any)."""
    chosen = next((n for n in networks.values() if n.dns and "dns" in (n.default or [])), None)
    chosen = chosen or next((n for n in networks.values() if n.dns), None)
    return list(chosen.dns) if chosen and chosen.dns else []


def metadata_strings(metadata: Mapping[str, Any], max_key: int, max_value: int) -> dict[str, str]:
    """BOSH metadata as an IaaS's tags or metadata items hold it: text keys and values cut
    to the IaaS's lengths (as the Ruby CPIs do, rather than failing the call on a long
    deployment name), booleans as YAML writes them (`true`), nothing as empty, empty keys
    left out (the director sends `index` as an integer in snapshot metadata, and booleans
    in some manifest tags)."""
    result: dict[str, str] = {}
    for key, value in metadata.items():
        key = str(key)
        if not key:
            continue
        text = "" if value is None else ("true" if value else "false") if isinstance(value, bool) else str(value)
        result[key[:max_key]] = text[:max_value]
    return result


def snapshot_tags(metadata: dict[str, Any]) -> dict[str, Any]:
    """snapshot_disk's metadata as both official CPIs tag a snapshot, so that what finds
    their snapshots (an operator's tooling, the official CPI after a rollback) finds this
    CPI's too: `director` for the director's `director_name`, `instance_index` (the index as
    a string) and `instance_name` (`job/instance_id`); the other keys as the director sent
    them (`job` and `index` kept, which the official CPIs drop)."""
    found = {key: value for key, value in metadata.items() if key != "director_name"}
    if metadata.get("director_name") is not None:
        found["director"] = metadata["director_name"]
    if metadata.get("index") is not None:
        found["instance_index"] = str(metadata["index"])
    if metadata.get("job") and metadata.get("instance_id"):
        found["instance_name"] = f"{metadata['job']}/{metadata['instance_id']}"
    return found


DEFAULT_BLOBSTORE = {
    "provider": "local",
    "options": {"blobstore_path": "/var/vcap/micro_bosh/data/cache"},
}


class AgentConfig(BaseModel):
    """What the CPI tells every agent it boots (the `agent` section)."""

    model_config = ConfigDict(extra="forbid")

    mbus: str | None = Field(
        None,
        description="Message bus URL the agent uses: `nats://...` under a director, "
        "`https://mbus:PASSWORD@0.0.0.0:6868` under create-env.",
    )
    ntp: list[str] = Field(default_factory=list, description="NTP servers for the VM.")
    blobstore: dict[str, Any] = Field(
        default_factory=lambda: dict(DEFAULT_BLOBSTORE),
        description="Blobstore settings (`provider`, `options`); directors usually send "
        "blobstores in env.bosh.blobstores instead.",
    )
