"""The aws cloud: EC2 and EBS (and, when asked, ELB and STS) through botocore.

This module is what `cpi.clouds.aws:AwsCloud` loads for every aws call, `info` included,
so it imports no AWS SDK: the clients are built by session.Aws on the first request.

Each public method runs inside `boundary` (cpi.clouds.base): botocore errors nobody expected become a
CloudError naming the request, the AWS code and, for auth failures, the credentials used
(never a secret); and the call's AWS request count is logged, for the bench and for
whoever reads the task log.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

from cpi.cids import AgentId, DiskCid, SnapshotCid, StemcellCid, VmCid
from cpi.clouds import STEMCELL_FORMATS
from cpi.clouds.base import Cloud, DiskHint, boundary
from cpi.errors import BoshError, DiskNotFound, VMNotFound
from cpi.models import Network, VMResources

from . import errors, ids
from .job_config import AwsProperties
from .props import (
    DiskCloudProperties,
    NetworkCloudProperties,
    StemcellCloudProperties,
    VMCloudProperties,
)


class AwsCloud(Cloud):
    can_plan = True  # cpi.plan: its session withholds mutations, its waits are noted
    name = "aws"
    stemcell_formats: ClassVar[list[str]] = STEMCELL_FORMATS["aws"]
    Properties = AwsProperties
    #: Not lock_dir or ca_cert_file (paths), nor slim_models (how the CPI loads itself).
    context_overrides = frozenset({
        "region", "ec2_endpoint", "elb_endpoint", "sts_endpoint", "ebs_endpoint", "dualstack",
        "credentials_source", "access_key_id", "secret_access_key", "session_token",
        "role_arn", "role_session_name", "role_external_id",
        "default_key_name", "default_security_groups", "default_iam_instance_profile",
        "default_availability_zone", "encrypted", "kms_key_arn", "metadata_options",
        "instance_type_families", "max_retries", "retry_budget_seconds", "connect_timeout",
        "read_timeout", "vm_wait_timeout", "volume_wait_timeout", "volume_in_use_timeout", "fast_path_delete",
        "image_wait_timeout",
    })
    context_endpoints = frozenset({"ec2_endpoint", "elb_endpoint", "sts_endpoint", "ebs_endpoint"})
    context_secrets = frozenset({"secret_access_key"})
    cloud_property_models: ClassVar[dict[str, type[BaseModel]]] = {
        "vm_type": VMCloudProperties,
        "disk_type": DiskCloudProperties,
        "network": NetworkCloudProperties,
        "stemcell": StemcellCloudProperties,
    }

    properties: AwsProperties

    def translate_error(self, exc: Exception, method: str) -> BoshError | None:
        if not type(exc).__module__.startswith("botocore"):
            return None
        return errors.to_cloud_error(exc, method, self.aws.describe_credentials())

    def call_ended(self, method: str, mark: Any) -> None:
        if self._aws is not None and self._aws.requests:
            self.log.info("%s: %s", method, self._aws.summary())

    @staticmethod
    def audit_account(properties: AwsProperties) -> str:
        """The account its audit lines name (cpi.audit.account_of), from the config alone
        (no STS request): the ec2_endpoint when one is set (a moto server, another partition
        or cloud), the region, and who signs: the role assumed, else a fingerprint of the
        static access key id (not masked as a secret, but STS tells anyone its AWS account,
        and a trail travels further than the config), else `env_or_profile` (the machine's
        own chain: environment, profile or instance role)."""
        from cpi import audit

        if properties.role_arn:
            who = f"role {properties.role_arn}"
        elif properties.credentials_source == "static" and properties.access_key_id:
            who = audit.fingerprint(properties.access_key_id, "key")
        else:
            who = "env_or_profile"
        where = [audit.endpoint(properties.ec2_endpoint)] if properties.ec2_endpoint else []
        return " ".join([*where, properties.signing_region, who])

    @classmethod
    def preload(cls) -> None:
        from .session import preload

        preload()

    def __init__(self, properties, agent, context):
        super().__init__(properties, agent, context)
        self._aws = None

    @property
    def aws(self):
        if self._aws is None:
            from .session import Aws

            self._aws = Aws(self.properties)
        return self._aws

    def _vms(self):
        from .vms import Vms

        return Vms(self.aws, self.properties, self.agent, self.context)

    def _disks(self):
        from .disks import Disks

        return Disks(self.aws, self.properties, self.context.director_uuid)

    def _stemcells(self):
        from .stemcells import Stemcells

        return Stemcells(self.aws, self.properties)

    # -- the operator's side (read-only)
    @boundary
    def inventory(self, kind: str):
        from . import inventory

        return inventory.inventory(self.aws, kind)

    @boundary
    def show(self, kind: str, cid: str):
        """By its id, as has_vm finds it: a VM the official CPI made (no tag of this CPI's),
        and a light stemcell's cid (an image someone else owns), which no listing holds."""
        from . import inventory

        return inventory.show(self.aws, kind, cid)

    @boundary
    def available(self, offer: str):
        from . import inventory

        return inventory.available(self.aws, offer)

    def check_cloud_config(self, items: list) -> list:
        from . import inspect  # `cpi validate --online`'s read-only checks: not on bin/cpi's path

        return inspect.check_cloud_config(self, items)

    # -- stemcells
    @boundary
    def create_stemcell(self, image_path: str, cloud_properties: dict, tags: dict[str, str]) -> StemcellCid:
        return StemcellCid(self._stemcells().create(image_path, cloud_properties, tags))

    @boundary
    def delete_stemcell(self, stemcell_cid: StemcellCid) -> None:
        if not stemcell_cid.endswith(" light") and not ids.is_image(stemcell_cid):
            self.log.info("stemcell %s not found (not an AMI ID): nothing to delete", stemcell_cid)
            return
        self._stemcells().delete(stemcell_cid)

    # -- VMs
    @boundary
    def create_vm(self, agent_id: AgentId, stemcell_cid: StemcellCid, cloud_properties: dict,
                  networks: dict[str, Network], disk_cids: list[DiskCid], env: dict) -> tuple[VmCid, dict[str, Any]]:
        vm_cid, vm_networks = self._vms().create(agent_id, stemcell_cid, cloud_properties, networks, disk_cids, env)
        return VmCid(vm_cid), vm_networks

    @boundary
    def delete_vm(self, vm_cid: VmCid) -> None:
        if not ids.is_instance(vm_cid):
            self.log.info("VM %s not found (not an instance ID): nothing to delete", vm_cid)
            return
        self._vms().delete(vm_cid)

    @boundary
    def has_vm(self, vm_cid: VmCid) -> bool:
        return ids.is_instance(vm_cid) and self._vms().exists(vm_cid)

    @boundary
    def reboot_vm(self, vm_cid: VmCid) -> None:
        self._vms().reboot(_vm(vm_cid))

    @boundary
    def set_vm_metadata(self, vm_cid: VmCid, metadata: dict[str, str]) -> None:
        self._vms().set_metadata(_vm(vm_cid), metadata)

    @boundary
    def calculate_vm_cloud_properties(self, resources: VMResources) -> dict[str, Any]:
        return self._vms().calculate_cloud_properties(resources)

    def current_vm_id(self) -> VmCid:
        """The instance this CPI runs on, from the instance metadata service (IMDSv2, with
        an IMDSv1 fallback); used by the director's snapshot_self."""
        from .imds import instance_id

        return VmCid(instance_id())

    # -- disks
    @boundary
    def create_disk(self, size: int, cloud_properties: dict, vm_cid: VmCid | None) -> DiskCid:
        return DiskCid(self._disks().create(size, cloud_properties, None if vm_cid is None else _vm(vm_cid)))

    @boundary
    def delete_disk(self, disk_cid: DiskCid) -> None:
        if not ids.is_volume(disk_cid):
            self.log.info("disk %s not found (not a volume ID): nothing to delete", disk_cid)
            return
        self._disks().delete(disk_cid)

    @boundary
    def resize_disk(self, disk_cid: DiskCid, new_size: int) -> None:
        self._disks().resize(_disk(disk_cid), new_size)

    @boundary
    def update_disk(self, disk_cid: DiskCid, new_size: int, cloud_properties: dict) -> DiskCid | None:
        new_disk_cid = self._disks().update(_disk(disk_cid), new_size, cloud_properties)
        return None if new_disk_cid is None else DiskCid(new_disk_cid)

    @boundary
    def has_disk(self, disk_cid: DiskCid) -> bool:
        return ids.is_volume(disk_cid) and self._disks().exists(disk_cid)

    @boundary
    def attach_disk(self, vm_cid: VmCid, disk_cid: DiskCid) -> DiskHint:
        return self._disks().attach(_vm(vm_cid), _disk(disk_cid))

    @boundary
    def detach_disk(self, vm_cid: VmCid, disk_cid: DiskCid) -> None:
        _vm(vm_cid)
        if not ids.is_volume(disk_cid):
            self.log.info("disk %s not found (not a volume ID): nothing to detach", disk_cid)
            return
        self._disks().detach(vm_cid, disk_cid)

    @boundary
    def get_disks(self, vm_cid: VmCid) -> list[DiskCid]:
        return [DiskCid(disk_cid) for disk_cid in self._disks().list_for_vm(_vm(vm_cid))]

    @boundary
    def set_disk_metadata(self, disk_cid: DiskCid, metadata: dict[str, str]) -> None:
        self._disks().set_metadata(_disk(disk_cid), metadata)

    # -- snapshots
    @boundary
    def snapshot_disk(self, disk_cid: DiskCid, metadata: dict[str, Any]) -> SnapshotCid:
        return SnapshotCid(self._disks().snapshot(_disk(disk_cid), metadata))

    @boundary
    def delete_snapshot(self, snapshot_cid: SnapshotCid) -> None:
        if not ids.is_snapshot(snapshot_cid):
            self.log.info("snapshot %s not found (not a snapshot ID): nothing to delete", snapshot_cid)
            return
        self._disks().delete_snapshot(snapshot_cid)


def _vm(vm_cid: str) -> str:
    """`vm_cid`, or VMNotFound when it cannot be an instance ID."""
    if not ids.is_instance(vm_cid):
        raise VMNotFound(f"VM '{vm_cid}' not found")
    return vm_cid


def _disk(disk_cid: str) -> str:
    if not ids.is_volume(disk_cid):
        raise DiskNotFound(f"disk '{disk_cid}' not found", ok_to_retry=False)
    return disk_cid
