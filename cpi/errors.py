"""The `Bosh::Clouds::*` error tree as the director and bosh-cli read it off the wire.

Each class carries its wire `type` and the `ok_to_retry` default the director expects
(only the Retriable subclasses are read; create_vm is the only caller that acts on it).
Clouds raise these at their own boundary, so rpc.py only has to serialise them.
"""

from __future__ import annotations


class BoshError(Exception):
    """Common shape of every error that goes on the wire; never raised itself."""

    wire_type = "Bosh::Clouds::CloudError"
    default_ok_to_retry = False

    def __init__(self, message: str, *, ok_to_retry: bool | None = None):
        super().__init__(message)
        self.message = message
        self.ok_to_retry = self.default_ok_to_retry if ok_to_retry is None else bool(ok_to_retry)

    def to_wire(self) -> dict:
        return {"type": self.wire_type, "message": self.message, "ok_to_retry": self.ok_to_retry}


class CpiError(BoshError):
    """`Bosh::Clouds::CpiError`: a problem with the call itself (bad arguments, bad config)."""

    wire_type = "Bosh::Clouds::CpiError"


class NotImplemented(CpiError):  # noqa: A001 - the name BOSH gives it
    """The director treats this as "feature absent" (metadata calls, snapshots, resize fall back)."""

    wire_type = "Bosh::Clouds::NotImplemented"


class NotSupported(CpiError):
    """Known method, but this cloud cannot do it (e.g. shrinking a disk): director falls back."""

    wire_type = "Bosh::Clouds::NotSupported"


class CloudError(BoshError):
    """`Bosh::Clouds::CloudError`: the IaaS (or the local cloud) failed to do what was asked."""

    wire_type = "Bosh::Clouds::CloudError"


class VMNotFound(CloudError):
    wire_type = "Bosh::Clouds::VMNotFound"


class NetworkNotFound(CloudError):
    wire_type = "Bosh::Clouds::NetworkNotFound"


class StemcellNotFound(CloudError):
    """Not in the director's whitelist, but bosh-cli reads it as "already deleted"."""

    wire_type = "Bosh::Clouds::StemcellNotFound"


class RetriableCloudError(CloudError):
    wire_type = "Bosh::Clouds::RetriableCloudError"
    default_ok_to_retry = True


class NoDiskSpace(RetriableCloudError):
    wire_type = "Bosh::Clouds::NoDiskSpace"


class DiskNotAttached(RetriableCloudError):
    wire_type = "Bosh::Clouds::DiskNotAttached"


class DiskNotFound(RetriableCloudError):
    wire_type = "Bosh::Clouds::DiskNotFound"


class VMCreationFailed(RetriableCloudError):
    wire_type = "Bosh::Clouds::VMCreationFailed"


#: Every error a response may carry, by wire type (used by fault injection and tests).
BY_WIRE_TYPE: dict[str, type[BoshError]] = {
    cls.wire_type: cls
    for cls in (
        CpiError,
        NotImplemented,
        NotSupported,
        CloudError,
        VMNotFound,
        NetworkNotFound,
        StemcellNotFound,
        NoDiskSpace,
        DiskNotAttached,
        DiskNotFound,
        VMCreationFailed,
    )
}
