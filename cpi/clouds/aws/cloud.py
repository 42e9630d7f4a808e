"""The aws cloud: EC2 and EBS (and, when asked, ELB and STS) through botocore.

This module is what `cpi.clouds.aws:AwsCloud` loads for every aws call, `info` included,
so it imports no AWS SDK: the clients are built by session.Aws on the first request.

Its BOSH methods are cpi.clouds.base.PartsCloud's, made of this cloud's parts (vms.py,
disks.py, stemcells.py; a cid that cannot be an EC2 ID is answered there without a
request, ids.py). Each runs inside `boundary`: botocore errors nobody expected become a
CloudError naming the request, the AWS code and, for auth failures, the credentials used
(never a secret); and the call's AWS request count is logged, for the bench and for
whoever reads the task log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from cpi.cids import DiskCid, VmCid
from cpi.clouds import STEMCELL_FORMATS
from cpi.clouds.base import PartsCloud, boundary
from cpi.errors import BoshError

from . import errors
from .job_config import AwsProperties
from .props import (
    DiskCloudProperties,
    NetworkCloudProperties,
    StemcellCloudProperties,
    VMCloudProperties,
)

if TYPE_CHECKING:  # the parts and the session: imported by the first call that needs them
    from cpi.clouds.inventory import Offer, Resource

    from .disks import Disks
    from .session import Aws
    from .stemcells import Stemcells
    from .vms import Vms


class AwsCloud(PartsCloud["Aws"]):
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
        return errors.to_cloud_error(exc, method, self.session.describe_credentials())

    def call_ended(self, method: str, mark: Any) -> None:
        aws = self.session_opened
        if aws is not None and aws.requests:
            self.log.info("%s: %s", method, aws.summary())

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

    def open_session(self) -> Aws:
        from .session import Aws

        return Aws(self.properties, self.context.plan)

    def vms(self) -> Vms:
        from .vms import Vms

        return Vms(self.session, self.properties, self.agent, self.context)

    def disks(self) -> Disks:
        from .disks import Disks

        return Disks(self.session, self.properties, self.context)

    def stemcells(self) -> Stemcells:
        from .stemcells import Stemcells

        return Stemcells(self.session, self.properties, self.context)

    # -- the operator's side (read-only)
    @boundary
    def inventory(self, kind: str) -> list[Resource]:
        from . import inventory

        return inventory.inventory(self.session, kind)

    @boundary
    def show(self, kind: str, cid: str) -> Resource | None:
        """By its id, as has_vm finds it: a VM the official CPI made (no tag of this CPI's),
        and a light stemcell's cid (an image someone else owns), which no listing holds."""
        from . import inventory

        return inventory.show(self.session, kind, cid)

    @boundary
    def available(self, offer: str) -> list[Offer]:
        from . import inventory

        return inventory.available(self.session, offer)

    def check_cloud_config(self, items: list) -> list:
        from . import inspect  # `cpi validate --online`'s read-only checks: not on bin/cpi's path

        return inspect.check_cloud_config(self, items)

    # -- what not every cloud has (cpi.clouds.parts)
    def current_vm_id(self) -> VmCid:
        """The instance this CPI runs on, from the instance metadata service (IMDSv2, with
        an IMDSv1 fallback); used by the director's snapshot_self."""
        from .imds import instance_id

        return VmCid(instance_id())

    @boundary
    def update_disk(self, disk_cid: DiskCid, new_size: int, cloud_properties: dict) -> DiskCid | None:
        new_disk_cid = self.disks().update(disk_cid, new_size, cloud_properties)
        return None if new_disk_cid is None else DiskCid(new_disk_cid)
