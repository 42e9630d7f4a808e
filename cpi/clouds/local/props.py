"""The local cloud's config section and cloud_properties models."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

from cpi.models import StrictModel


def default_state_dir() -> Path:
    """~/.local/state/bosh-cpi/local, resolved through the password database when HOME is
    unset (the director runs the CPI with no HOME)."""
    return Path.home() / ".local" / "state" / "bosh-cpi" / "local"


class Fault(StrictModel):
    """One injected fault, so operators can exercise their director's retry paths."""

    method: str = Field(..., description="CPI method name the fault applies to, e.g. create_vm.")
    times: StrictInt | None = Field(
        None, ge=1, description="Fail only the next N calls (counted across processes); unset = every call."
    )
    error: str | None = Field(
        "Bosh::Clouds::CloudError",
        description="Wire error type to raise (e.g. Bosh::Clouds::VMCreationFailed); null = no error, only delay.",
    )
    message: str = Field("injected fault", description="Error message.")
    ok_to_retry: bool | None = Field(None, description="Override the error type's ok_to_retry default.")
    delay: float = Field(0.0, ge=0, le=3600, description="Seconds to sleep before the method runs (or fails).")


class LocalProperties(BaseModel):
    """`cloud.properties.local` in cpi.json."""

    model_config = ConfigDict(extra="forbid")

    state_dir: Path = Field(
        default_factory=default_state_dir,
        description="Where stemcells, VMs, disks and snapshots live: an absolute path (`~` allowed), created "
        "0700 if missing; refused when another user owns it or could write to it.",
    )
    agent_command: list[str] | None = Field(
        None,
        min_length=1,
        description="The VM process to run, e.g. [\"/usr/local/bin/bosh-agent\"]; it is started as "
        "`<command> -b BASE -P dummy -M dummy -C BASE/agent.json`. Unset: a small built-in agent.",
    )
    agent_boot_timeout: float = Field(
        10.0, gt=0, description="Seconds to wait for the VM process to come up (and its mbus port to open)."
    )
    lock_timeout: float = Field(300.0, gt=0, description="Seconds to wait for a busy VM or disk.")
    current_vm_cid: str | None = Field(
        None, description="What current_vm_id answers (the VM this CPI runs on), if any."
    )
    faults: list[Fault] = Field(default_factory=list, description="Injected faults (testing aid).")

    @field_validator("state_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        """A relative (or empty) path would put the state wherever the director happens to
        start the CPI, a different place on every call."""
        if str(value).startswith("~"):
            value = value.expanduser()
        if not value.is_absolute():
            raise ValueError(f"must be an absolute path, got '{value}'")
        return value


class EphemeralDisk(StrictModel):
    size: StrictInt = Field(..., ge=0, description="Ephemeral disk size in MiB (0: none).")


class VMCloudProperties(StrictModel):
    """vm_type cloud_properties for the local cloud (recorded; the VM process is not limited)."""

    cpu: StrictInt = Field(1, ge=1, description="Virtual CPUs (recorded only).")
    ram: StrictInt = Field(1024, ge=1, description="Memory in MiB (recorded only).")
    ephemeral_disk: EphemeralDisk | None = Field(
        None, description="A sparse file given to the agent as /dev/sdb; unset: no ephemeral disk."
    )


class DiskCloudProperties(StrictModel):
    """disk_type cloud_properties for the local cloud. A disk is a directory of the state
    dir (disks/<disk_cid>/) holding disk.img, a file of the disk's size (what type and
    resize_disk act on), and store/, the files the disk holds. A VM sees the first disk
    attached to it at BASE/store (where a job's /var/vcap/store is under bosh-agent's dummy
    platform, and where that agent records its mount) and a second one, during a migration,
    at BASE/store_migration_target: what the VM writes there lands on the disk and outlives
    the VM; snapshot_disk copies it, delete_disk removes it. The size is not enforced on the
    files of store/ (a directory has no size of its own)."""

    type: Literal["sparse", "preallocated"] = Field(
        "sparse", description="sparse: a file with holes; preallocated: blocks reserved up front."
    )
    name: str | None = Field(None, description="Set by the director for dynamic disks.")
