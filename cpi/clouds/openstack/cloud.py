"""The openstack cloud: Nova, Neutron, Cinder, Glance (and Octavia when asked) through an
openstacksdk Connection built from cpi.json.

This module is what `cpi.clouds.openstack:OpenStackCloud` loads for every openstack call,
`info` included, so it imports neither openstacksdk nor keystoneauth1: the connection is
built by session.OpenStack on the first request.

Its BOSH methods are cpi.clouds.base.PartsCloud's, made of this cloud's parts (vms.py,
disks.py, stemcells.py). Each runs inside `boundary`: API errors nobody expected become a CloudError
naming the request and the service's answer, auth failures one naming the identity Keystone
refused (never a secret); and the call's request count is logged, for the bench and for
whoever reads the task log.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar

from cpi.clouds import STEMCELL_FORMATS
from cpi.clouds.base import PartsCloud, boundary
from cpi.errors import BoshError

from . import errors
from .props import (
    DiskCloudProperties,
    NetworkCloudProperties,
    OpenStackProperties,
    StemcellCloudProperties,
    VipCloudProperties,
    VMCloudProperties,
)

if TYPE_CHECKING:  # the parts and the session: imported by the first call that needs them
    from cpi.clouds.inventory import Offer, Resource

    from .disks import Disks
    from .session import OpenStack
    from .stemcells import Stemcells
    from .vms import Vms


class OpenStackCloud(PartsCloud["OpenStack"]):
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
        api = self.session_opened
        if api is not None:
            api.keep_token()
            if api.requests:
                self.log.info("%s: %s in %.2fs", method, api.summary(), time.monotonic() - mark)

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

    def open_session(self) -> OpenStack:
        from .session import OpenStack

        return OpenStack(self.properties, self.context.plan)

    def vms(self) -> Vms:
        from .vms import Vms

        return Vms(self.session, self.properties, self.agent, self.context)

    def disks(self) -> Disks:
        from .disks import Disks

        return Disks(self.session, self.properties, self.vms())

    def stemcells(self) -> Stemcells:
        from .stemcells import Stemcells

        return Stemcells(self.session, self.properties)

    # -- the operator's side (read-only)
    @boundary
    def inventory(self, kind: str) -> list[Resource]:
        from . import inventory

        return inventory.inventory(self.session, kind)

    @boundary
    def show(self, kind: str, cid: str) -> Resource | None:
        """By its id, as has_vm finds it: a server the official CPI made (no metadata of this
        CPI's), and a light stemcell's cid (an image someone else owns), which no listing
        holds."""
        from . import inventory

        return inventory.show(self.session, kind, cid)

    @boundary
    def available(self, offer: str) -> list[Offer]:
        from . import inventory

        return inventory.available(self.session, offer)

    def check_cloud_config(self, items: list) -> list:
        from . import inspect  # `cpi validate --online`'s read-only checks: not on bin/cpi's path

        return inspect.check_cloud_config(self, items)
