"""The openstack cloud: Nova, Neutron, Cinder, Glance (and Octavia when asked) through an
openstacksdk Connection built from cpi.json.

This module is what `cpi.clouds.openstack:OpenStackCloud` loads for every openstack call,
`info` included, so it imports neither openstacksdk nor keystoneauth1: the connection is
built by session.OpenStack on the first request.

Each public method runs inside `boundary` (cpi.clouds.base): API errors nobody expected become a CloudError
naming the request and the service's answer, auth failures one naming the identity Keystone
refused (never a secret); and the call's request count is logged, for the bench and for
whoever reads the task log.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from cpi.cids import AgentId, DiskCid, SnapshotCid, StemcellCid, VmCid
from cpi.clouds import STEMCELL_FORMATS
from cpi.clouds.base import Cloud, DiskHint, boundary
from cpi.errors import BoshError
from cpi.models import Network, VMResources

from . import errors
from .props import (
    DiskCloudProperties,
    NetworkCloudProperties,
    OpenStackProperties,
    StemcellCloudProperties,
    VipCloudProperties,
    VMCloudProperties,
)


class OpenStackCloud(Cloud):
    can_plan = True  # cpi.plan: its session withholds mutations, its waits are noted
    name = "openstack"
    stemcell_formats: ClassVar[list[str]] = STEMCELL_FORMATS["openstack"]
    Properties = OpenStackProperties
    #: Not ca_cert (PEM text or a file's path), ssl_verify (switching TLS checks off is the
    #: operator's call), token_cache or token_cache_dir (what the CPI writes, and where).
    context_overrides = frozenset({
        "auth_url", "username", "api_key", "user_domain_name", "project_domain_name", "project",
        "project_id", "domain", "application_credential_id", "application_credential_secret",
        "region", "endpoint_type", "endpoint_overrides", "connect_timeout", "read_timeout",
        "default_key_name", "default_security_groups", "default_volume_type", "boot_from_volume",
        "config_drive", "use_dhcp", "human_readable_vm_names", "ignore_server_availability_zone",
        "stemcell_public_visibility", "state_timeout", "wait_resource_poll_interval",
        "retry_budget_seconds", "max_retries",
    })
    context_endpoints = frozenset({"auth_url", "endpoint_overrides"})
    context_secrets = frozenset({"api_key", "application_credential_secret"})
    cloud_property_models: ClassVar[dict[str, type]] = {
        "vm_type": VMCloudProperties,
        "disk_type": DiskCloudProperties,
        "network (manual and dynamic)": NetworkCloudProperties,
        "network (vip)": VipCloudProperties,
        "stemcell": StemcellCloudProperties,
    }

    properties: OpenStackProperties

    def translate_error(self, exc: Exception, method: str) -> BoshError | None:
        if not (isinstance(exc, errors.ApiError) or type(exc).__module__.startswith(("keystoneauth1", "openstack"))):
            return None
        p = self.properties
        return errors.to_cloud_error(exc, method, p.describe_identity(), p.auth_url)

    def call_started(self) -> float:
        return time.monotonic()

    def call_ended(self, method: str, mark: Any) -> None:
        if self._api is not None:
            self._api.keep_token()
        if self._api is not None and self._api.requests:
            self.log.info("%s: %s in %.2fs", method, self._api.summary(), time.monotonic() - mark)

    @staticmethod
    def audit_account(properties: OpenStackProperties) -> str:
        """The account its audit lines name (cpi.audit.account_of), from the config alone
        (no Keystone request): the Keystone URL, the project as the config names it (the
        application credential that carries one, or its id, or domain/name), and the region
        when set."""
        from cpi import audit

        if properties.application_credential_id:  # it carries its project: the config's is not used
            project = f"application_credential {properties.application_credential_id}"
        elif properties.project_id:
            project = f"project_id {properties.project_id}"
        else:
            project = f"project {properties.project_domain_name or properties.domain}/{properties.project}"
        region = f" region {properties.region}" if properties.region else ""
        return f"{audit.endpoint(properties.auth_url)} {project}{region}"

    @classmethod
    def preload(cls) -> None:
        from .session import preload

        preload()

    def __init__(self, properties, agent, context):
        super().__init__(properties, agent, context)
        self._api = None

    @property
    def api(self):
        if self._api is None:
            from .session import OpenStack

            self._api = OpenStack(self.properties, self.context.plan)
        return self._api

    def _vms(self):
        from .vms import Vms

        return Vms(self.api, self.properties, self.agent, self.context)

    def _disks(self):
        from .disks import Disks

        return Disks(self.api, self.properties, self._vms())

    def _stemcells(self):
        from .stemcells import Stemcells

        return Stemcells(self.api, self.properties)

    # -- the operator's side (read-only)
    @boundary
    def inventory(self, kind: str):
        from . import inventory

        return inventory.inventory(self.api, kind)

    @boundary
    def show(self, kind: str, cid: str):
        """By its id, as has_vm finds it: a server the official CPI made (no metadata of this
        CPI's), and a light stemcell's cid (an image someone else owns), which no listing
        holds."""
        from . import inventory

        return inventory.show(self.api, kind, cid)

    @boundary
    def available(self, offer: str):
        from . import inventory

        return inventory.available(self.api, offer)

    def check_cloud_config(self, items: list) -> list:
        from . import inspect  # `cpi validate --online`'s read-only checks: not on bin/cpi's path

        return inspect.check_cloud_config(self, items)

    # -- stemcells
    @boundary
    def create_stemcell(self, image_path: str, cloud_properties: dict, tags: dict[str, str]) -> StemcellCid:
        return StemcellCid(self._stemcells().create(image_path, cloud_properties, tags))

    @boundary
    def delete_stemcell(self, stemcell_cid: StemcellCid) -> None:
        self._stemcells().delete(stemcell_cid)

    # -- VMs
    @boundary
    def create_vm(self, agent_id: AgentId, stemcell_cid: StemcellCid, cloud_properties: dict,
                  networks: dict[str, Network], disk_cids: list[DiskCid], env: dict) -> tuple[VmCid, dict[str, Any]]:
        vm_cid, vm_networks = self._vms().create(agent_id, stemcell_cid, cloud_properties, networks, disk_cids, env)
        return VmCid(vm_cid), vm_networks

    @boundary
    def delete_vm(self, vm_cid: VmCid) -> None:
        self._vms().delete(vm_cid)

    @boundary
    def has_vm(self, vm_cid: VmCid) -> bool:
        return self._vms().exists(vm_cid)

    @boundary
    def reboot_vm(self, vm_cid: VmCid) -> None:
        self._vms().reboot(vm_cid)

    @boundary
    def set_vm_metadata(self, vm_cid: VmCid, metadata: dict[str, str]) -> None:
        self._vms().set_metadata(vm_cid, metadata)

    @boundary
    def calculate_vm_cloud_properties(self, resources: VMResources) -> dict[str, Any]:
        return self._vms().calculate_cloud_properties(resources)

    # -- disks
    @boundary
    def create_disk(self, size: int, cloud_properties: dict, vm_cid: VmCid | None) -> DiskCid:
        return DiskCid(self._disks().create(size, cloud_properties, vm_cid))

    @boundary
    def delete_disk(self, disk_cid: DiskCid) -> None:
        self._disks().delete(disk_cid)

    @boundary
    def resize_disk(self, disk_cid: DiskCid, new_size: int) -> None:
        self._disks().resize(disk_cid, new_size)

    @boundary
    def has_disk(self, disk_cid: DiskCid) -> bool:
        return self._disks().exists(disk_cid)

    @boundary
    def attach_disk(self, vm_cid: VmCid, disk_cid: DiskCid) -> DiskHint:
        return self._disks().attach(vm_cid, disk_cid)

    @boundary
    def detach_disk(self, vm_cid: VmCid, disk_cid: DiskCid) -> None:
        self._disks().detach(vm_cid, disk_cid)

    @boundary
    def get_disks(self, vm_cid: VmCid) -> list[DiskCid]:
        return [DiskCid(disk_cid) for disk_cid in self._vms().disks(vm_cid)]

    @boundary
    def set_disk_metadata(self, disk_cid: DiskCid, metadata: dict[str, str]) -> None:
        self._disks().set_metadata(disk_cid, metadata)

    # -- snapshots
    @boundary
    def snapshot_disk(self, disk_cid: DiskCid, metadata: dict[str, Any]) -> SnapshotCid:
        return SnapshotCid(self._disks().snapshot(disk_cid, metadata))

    @boundary
    def delete_snapshot(self, snapshot_cid: SnapshotCid) -> None:
        self._disks().delete_snapshot(snapshot_cid)
