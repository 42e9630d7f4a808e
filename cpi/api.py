"""The BOSH method table: positional arguments → typed arguments → the cloud → the result
shape the caller's api_version expects (v1: bare cids and null hints; v2+: create_vm
returns [vm_cid, networks] and attach_disk a non-empty disk hint)."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    Strict,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
    create_model,
)

from cpi import audit, config, errors, tracing
from cpi.cids import AgentId, DiskCid, NetworkCid, SnapshotCid, StemcellCid, VmCid
from cpi.clouds.bosh import BoshCloud, DiskHint
from cpi.config import Config
from cpi.logs import plural, shown
from cpi.models import CallContext, Network, VMResources
from cpi.opening import Opening, open_cloud
from cpi.validation import describe

if TYPE_CHECKING:
    from cpi.plan import Plan

log = logging.getLogger(__name__)

#: The cids as the request carries them: a non-empty JSON string each, typed as BOSH names
#: it (cpi.cids) from here to the cloud.
VmCidArg = Annotated[VmCid, Strict(), StringConstraints(min_length=1)]
DiskCidArg = Annotated[DiskCid, Strict(), StringConstraints(min_length=1)]
StemcellCidArg = Annotated[StemcellCid, Strict(), StringConstraints(min_length=1)]
SnapshotCidArg = Annotated[SnapshotCid, Strict(), StringConstraints(min_length=1)]
NetworkCidArg = Annotated[NetworkCid, Strict(), StringConstraints(min_length=1)]
AgentIdArg = Annotated[AgentId, Strict(), StringConstraints(min_length=1)]


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("holds a NUL byte, which no path can hold")
    return value


#: a string the CPI hands to the operating system as a path (no NUL: the OS cannot hold one)
OsPath = Annotated[StrictStr, AfterValidator(_no_nul)]
#: cloud properties, env or metadata: a JSON null is {}. An optional one defaults to None
#: (`= None  # type: ignore[assignment]`): `Props | None` would change the wire model.
Props = Annotated[dict[str, Any], BeforeValidator(lambda v: {} if v is None else v)]
#: MiB, as BOSH counts disk sizes; below 2^31 MiB (2 PiB), the director's own integer range
#: and far past any volume an IaaS makes.
SizeMiB = Annotated[StrictInt, Field(gt=0, lt=2**31)]
#: No cloud issues a cid longer than this (in UTF-8 bytes) or with control characters.
MAX_CID_BYTES = 255
#: Which kind of resource each cid argument names, for the answers about one that cannot exist.
CID_KINDS = {"vm_cid": "vm", "disk_cid": "disk", "stemcell_cid": "stemcell", "snapshot_cid": "snapshot"}
#: What a method answers for a resource that is not there (docs/protocol.md "Deleting what is gone").
ABSENT_ANSWERS = {"has_vm": False, "has_disk": False, "delete_vm": None, "delete_disk": None,
                  "delete_stemcell": None, "delete_snapshot": None}


@dataclass
class Call:
    """One call: the method, the caller's api_version, and the config opened for it
    (cpi.opening), whose cloud is made only when a handler first asks for it."""

    method: str
    api_version: int
    opening: Opening

    @property
    def context(self) -> CallContext:
        return self.opening.context

    @property
    def config(self) -> Config:
        return self.opening.config

    @property
    def cloud_class(self) -> type[BoshCloud]:
        return self.opening.config.cloud_class

    @property
    def cloud(self) -> BoshCloud:
        return self.opening.cloud


METHODS: dict[str, Callable[..., Any]] = {}


def method(fn: Callable[..., Any]) -> Callable[..., Any]:
    METHODS[fn.__name__] = fn
    return fn


def handle(raw: dict, method: str, api_version: int, context: dict, arguments: list[Any],
           plan: Plan | None = None) -> Any:
    """One call, from cpi.json as read (`raw`) and the request's fields to its result: the
    one place the wire's calls open their cloud (cpi.opening), as bosh-cpi-go keeps config
    and clouds out of its dispatcher; under `cpi plan`, with its `plan` (cpi.plan). Raises
    the cpi.errors types.

    `info` without arguments is answered here, from the config alone: it answers the same
    whatever the context says (the director asks it before it knows which cpi-config
    applies, and a context must not be able to make it fail), and opens no cloud. With
    arguments it goes through the table, which refuses them as it does for any method."""
    if method == "info" and not arguments:
        return config.info(raw)
    ready = open_cloud(raw, context, plan)
    return dispatch(Call(method=method, api_version=api_version, opening=ready), arguments)


def dispatch(call: Call, arguments: list[Any]) -> Any:
    handler = METHODS.get(call.method)
    if handler is None:
        raise errors.NotImplemented(f"Must call implemented method: {shown(call.method, 64)} is not a CPI method")
    kwargs = _bind(call.method, handler, arguments)
    audit.begin(call, kwargs)
    _annotate_trace(call, kwargs)
    for name, kind in CID_KINDS.items():
        value = kwargs.get(name)
        if isinstance(value, str) and not possible_cid(value):
            return _cannot_exist(call, name, kind, kwargs)
    if call.method not in ("info", "ping"):
        call.cloud.before_call(call.method)
    return handler(call, **kwargs)


def _annotate_trace(call: Call, kwargs: dict[str, Any]) -> None:
    """The traced call's span names its cloud, account and the cids it was given
    (cpi.tracing; nothing when tracing is off)."""
    trace = tracing.active()
    if trace is None:
        return
    try:
        account = audit.account_of(call.config)
    except Exception as exc:  # noqa: BLE001 - a span without its account beats a failed call
        log.debug("tracing: cannot tell the account: %s", shown(str(exc), 200))
        account = None
    cids = {f"bosh.{name}": kwargs[name] for name in (*CID_KINDS, "agent_id") if isinstance(kwargs.get(name), str)}
    trace.annotate(**{"cloud.provider": call.config.plugin, "cloud.account.id": account, **cids})


def possible_cid(cid: str) -> bool:
    """False for a cid no cloud can have issued: over 255 bytes, or holding a control
    character or a lone surrogate. Such a cid never reaches a cloud (as a file name, a
    URL, a filter), whose errors for it would differ from cloud to cloud."""
    if len(cid) > MAX_CID_BYTES or not cid.isprintable():
        return False
    try:
        return len(cid.encode("utf-8")) <= MAX_CID_BYTES
    except UnicodeEncodeError:
        return False


def _cannot_exist(call: Call, name: str, kind: str, kwargs: dict[str, Any]) -> Any:
    """The documented answer for a resource that is not there, without asking the cloud."""
    what = f"{kind} {shown(kwargs[name], 64)}"
    if call.method in ABSENT_ANSWERS:
        log.info("%s cannot exist (not a cid any cloud issues): nothing to %s", what, call.method.split("_")[0])
        return ABSENT_ANSWERS[call.method]
    if call.method == "detach_disk" and kind == "disk":
        if not call.cloud.has_vm(kwargs["vm_cid"]):
            raise errors.VMNotFound(f"VM '{kwargs['vm_cid']}' not found")
        log.info("%s cannot exist: nothing to detach", what)
        return None
    if kind == "vm":
        raise errors.VMNotFound(f"VM {shown(kwargs[name], 64)} not found")
    if kind == "disk":
        raise errors.DiskNotFound(f"disk {shown(kwargs[name], 64)} not found", ok_to_retry=False)
    if call.method == "create_vm":
        raise errors.VMCreationFailed(f"stemcell {shown(kwargs[name], 64)} not found", ok_to_retry=False)
    raise errors.CloudError(f"{what} not found")


def _bind(name: str, handler: Callable[..., Any], arguments: list[Any]) -> dict[str, Any]:
    """Positional JSON arguments → validated keyword arguments, or a CpiError that names the
    argument by position and name."""
    params = list(inspect.signature(handler).parameters.values())[1:]
    required = [p for p in params if p.default is inspect.Parameter.empty]
    if not len(required) <= len(arguments) <= len(params):
        names = ", ".join(p.name for p in params) or "none"
        count = (plural(len(required), "argument") if len(required) == len(params)
                 else f"{len(required)} to {len(params)} arguments")
        raise errors.CpiError(f"{name} takes {count} ({names}), got {len(arguments)}")
    model = _argument_model(name, handler)
    values = dict(zip((p.name for p in params), arguments, strict=False))  # optional ones may be left out
    try:
        parsed = model.model_validate(values)
    except ValidationError as exc:
        index = {p.name: i + 1 for i, p in enumerate(params)}

        def label(field: str) -> str:
            return f"{name} argument {index.get(field, '?')} ({field})"

        raise errors.CpiError(f"invalid arguments: {describe(exc, label=label)}") from None
    return {p.name: getattr(parsed, p.name) for p in params}


_models: dict[str, type[BaseModel]] = {}


def _argument_model(name: str, handler: Callable[..., Any]) -> type[BaseModel]:
    """Built on first use only: a call pays for its own method's model, not all 26."""
    if name not in _models:
        hints = inspect.get_annotations(handler, eval_str=True)
        fields: dict[str, Any] = {}
        for param in list(inspect.signature(handler).parameters.values())[1:]:
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (hints[param.name], default)
        _models[name] = create_model(f"{name}_arguments", **fields)
    return _models[name]


def _v2(call: Call) -> bool:
    return call.api_version >= 2


# ---------------------------------------------------------------- info and housekeeping


@method
def info(call: Call) -> dict[str, Any]:
    """Reached with arguments only (`handle` answers `info` without any), which `_bind`
    refuses before this runs: in the table so that `info` is refused as every method is."""
    return config.info(call.config.raw)


@method
def ping(call: Call) -> str:
    return "pong"


@method
def current_vm_id(call: Call) -> str:
    return call.cloud.current_vm_id()


# ---------------------------------------------------------------- stemcells


@method
def create_stemcell(call: Call, image_path: OsPath, cloud_properties: Props,
                    env: Props = None) -> StemcellCid:  # type: ignore[assignment]  # see Props
    tags = (env or {}).get("tags") or {}
    if not isinstance(tags, dict):
        raise errors.CpiError("create_stemcell argument 3 (env): env.tags must be an object")
    tags = {str(k): _text(v) for k, v in tags.items()}  # as set_vm_metadata: clouds store strings
    stemcell_cid = call.cloud.create_stemcell(image_path, cloud_properties, tags)
    log.info("created stemcell %s", stemcell_cid)
    return stemcell_cid


@method
def delete_stemcell(call: Call, stemcell_cid: StemcellCidArg) -> None:
    call.cloud.delete_stemcell(stemcell_cid)


# ---------------------------------------------------------------- VMs


@method
def create_vm(
    call: Call,
    agent_id: AgentIdArg,
    stemcell_cid: StemcellCidArg,
    cloud_properties: Props,
    networks: dict[str, Network],
    disk_cids: list[DiskCidArg] | None = None,
    env: Props = None,  # type: ignore[assignment]  # see Props
) -> VmCid | list[Any]:
    vm_cid, vm_networks = call.cloud.create_vm(
        agent_id, stemcell_cid, cloud_properties, networks, list(disk_cids or []), env or {}
    )
    log.info("created vm %s for agent %s", vm_cid, agent_id)
    return [vm_cid, vm_networks] if _v2(call) else vm_cid


@method
def delete_vm(call: Call, vm_cid: VmCidArg) -> None:
    call.cloud.delete_vm(vm_cid)


@method
def has_vm(call: Call, vm_cid: VmCidArg) -> bool:
    return bool(call.cloud.has_vm(vm_cid))


@method
def reboot_vm(call: Call, vm_cid: VmCidArg) -> None:
    call.cloud.reboot_vm(vm_cid)


@method
def set_vm_metadata(call: Call, vm_cid: VmCidArg, metadata: Props) -> None:
    call.cloud.set_vm_metadata(vm_cid, {str(k): _text(v) for k, v in metadata.items()})


@method
def calculate_vm_cloud_properties(call: Call, vm_resources: VMResources) -> dict[str, Any]:
    return call.cloud.calculate_vm_cloud_properties(vm_resources)


@method
def configure_networks(call: Call, vm_cid: Any = None, networks: Any = None) -> None:
    raise errors.NotSupported("configure_networks is not supported: the VM is recreated instead")


# ---------------------------------------------------------------- disks


@method
def create_disk(call: Call, size: SizeMiB, cloud_properties: Props, vm_cid: VmCidArg | None = None) -> DiskCid:
    disk_cid = call.cloud.create_disk(size, cloud_properties, vm_cid)
    log.info("created disk %s (%d MiB)", disk_cid, size)
    return disk_cid


@method
def delete_disk(call: Call, disk_cid: DiskCidArg) -> None:
    call.cloud.delete_disk(disk_cid)


@method
def resize_disk(call: Call, disk_cid: DiskCidArg, new_size: SizeMiB) -> None:
    call.cloud.resize_disk(disk_cid, new_size)


@method
def update_disk(call: Call, disk_cid: DiskCidArg, new_size: SizeMiB, cloud_properties: Props) -> DiskCid | None:
    return call.cloud.update_disk(disk_cid, new_size, cloud_properties)


@method
def has_disk(call: Call, disk_cid: DiskCidArg) -> bool:
    return bool(call.cloud.has_disk(disk_cid))


@method
def attach_disk(call: Call, vm_cid: VmCidArg, disk_cid: DiskCidArg) -> DiskHint | None:
    hint = call.cloud.attach_disk(vm_cid, disk_cid)
    if not hint:
        # The director raises "No disk_hint" on an empty hint; fail here with the cause instead.
        raise errors.CloudError(f"attach_disk: the {call.cloud.name} cloud returned no disk hint for {disk_cid}")
    log.info("attached disk %s to vm %s as %s", disk_cid, vm_cid, hint)
    return hint if _v2(call) else None


@method
def detach_disk(call: Call, vm_cid: VmCidArg, disk_cid: DiskCidArg) -> None:
    call.cloud.detach_disk(vm_cid, disk_cid)


@method
def get_disks(call: Call, vm_cid: VmCidArg) -> list[DiskCid]:
    return list(call.cloud.get_disks(vm_cid) or [])


@method
def set_disk_metadata(call: Call, disk_cid: DiskCidArg, metadata: Props) -> None:
    call.cloud.set_disk_metadata(disk_cid, {str(k): _text(v) for k, v in metadata.items()})


# ---------------------------------------------------------------- snapshots


@method
def snapshot_disk(call: Call, disk_cid: DiskCidArg,
                  metadata: Props = None) -> SnapshotCid:  # type: ignore[assignment]  # see Props
    snapshot_cid = call.cloud.snapshot_disk(disk_cid, metadata or {})
    log.info("snapshot %s of disk %s", snapshot_cid, disk_cid)
    return snapshot_cid


@method
def delete_snapshot(call: Call, snapshot_cid: SnapshotCidArg) -> None:
    call.cloud.delete_snapshot(snapshot_cid)


# ---------------------------------------------------------------- networks


@method
def create_network(call: Call, network_definition: Props) -> list:
    return call.cloud.create_network(network_definition)


@method
def delete_network(call: Call, network_cid: NetworkCidArg) -> None:
    call.cloud.delete_network(network_cid)


def _text(value: Any) -> str:
    """Metadata values as the IaaS stores them: strings (the director sends `index` as an
    integer in snapshot metadata and booleans in some tags)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)
