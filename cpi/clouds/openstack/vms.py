"""VMs: create_vm, delete_vm, has_vm, reboot_vm, set_vm_metadata, get_disks,
calculate_vm_cloud_properties.

create_vm, in the common case (one manual network): the flavor list and the security
groups (and a vip's floating IP) are looked up at once, in parallel; the port is created;
the server is created on it with the agent settings as user_data (Nova checks the stemcell
image itself, so no Glance request is needed); and the server is watched until ACTIVE with
adaptive polling. Whatever fails after the port exists deletes the server (waiting until it
is gone) and the ports, then raises VMCreationFailed with Nova's own fault text, so the
director's retry finds the IP free.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import urllib.parse
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cpi import agent_env, waits
from cpi.cids import AgentId, DiskCid, StemcellCid, VmCid
from cpi.errors import BoshError, CloudError, VMCreationFailed, VMNotFound
from cpi.models import AgentConfig, CallContext, Network, VMResources
from cpi.validation import parse

from . import errors, flavors, lbaas, networks, tags
from .props import OpenStackProperties, VMCloudProperties
from .session import OpenStack
from .waits import history, poll_schedule

log = logging.getLogger("cpi.clouds.openstack")

#: Nova's limit on user_data (base64-encoded).
USER_DATA_LIMIT = 65535
SYSTEM_DISK = "/dev/sda"
EPHEMERAL_DISK = "/dev/sdb"
#: Server states a server does not come back from by itself while being created.
_GONE = ("DELETED", "SOFT_DELETED")


class ServerFailed(VMCreationFailed):
    """The server went ERROR; `no_valid_host` when the scheduler found no room (another
    availability zone may have some)."""

    def __init__(self, message: str, no_valid_host: bool):
        super().__init__(message, ok_to_retry=True)
        self.no_valid_host = no_valid_host


class Vms:
    def __init__(self, api: OpenStack, properties: OpenStackProperties, agent: AgentConfig, context: CallContext):
        self.api = api
        self.properties = properties
        self.agent = agent
        self.context = context

    # ------------------------------------------------------------ lookups

    def server(self, vm_cid: VmCid) -> dict[str, Any] | None:
        """The server, or None when Nova does not know it."""
        response = self.api.request("compute", "GET", f"/servers/{_quote(vm_cid)}", ok=(404,))
        if response.status_code == 404:
            return None
        return response.json()["server"]

    def require(self, vm_cid: VmCid) -> dict[str, Any]:
        server = self.server(vm_cid)
        if server is None or server.get("status") in _GONE:
            raise VMNotFound(f"VM '{vm_cid}' not found")
        return server

    def attachments(self, vm_cid: VmCid) -> list[dict[str, Any]]:
        response = self.api.request("compute", "GET", f"/servers/{_quote(vm_cid)}/os-volume_attachments", ok=(404,))
        if response.status_code == 404:
            raise VMNotFound(f"VM '{vm_cid}' not found")
        return response.json()["volumeAttachments"]

    # ------------------------------------------------------------ create_vm

    def create(self, agent_id: AgentId, stemcell_cid: StemcellCid, cloud_properties: dict, nets: dict[str, Network],
               disk_cids: list[DiskCid], env: dict) -> tuple[VmCid, dict[str, Any]]:
        props = parse(VMCloudProperties, cloud_properties, "vm_type cloud_properties", strict=self.context.strict)
        if self.properties.use_nova_networking:
            raise VMCreationFailed("use_nova_networking: Nova networking is gone from OpenStack (removed in Rocky); "
                                   "this CPI creates ports with Neutron: remove the key", ok_to_retry=False)
        if props.availability_zones and not self.properties.ignore_server_availability_zone:
            raise VMCreationFailed(
                "availability_zones needs ignore_server_availability_zone: true (a VM's disks could not follow it "
                "from zone to zone)",
                ok_to_retry=False,
            )
        plan = networks.plan(nets, self.properties, strict=self.context.strict)
        if self.context.stemcell_api_version < 2:
            log.warning("stemcell API version %d: this CPI runs no registry; the agent gets its full settings in "
                        "user_data (stemcells of API version 2 and later read them there)",
                        self.context.stemcell_api_version)
        if disk_cids:
            log.info("disk locality hint %s: OpenStack places the VM by its availability zone", ", ".join(disk_cids))
        wanted_groups = props.security_groups or plan.security_groups or self.properties.default_security_groups
        server_name = f"vm-{uuid.uuid4()}"
        made = _Made()
        try:
            self.api.authenticate()
            image_id = stemcell_cid.split(" ", 1)[0]  # "<id> light" for light stemcells
            # agent_id and director_uuid from the first request on: a port or server left by a
            # create_vm killed mid-way can be found and attributed
            origin: dict[str, str] = {"agent_id": agent_id}
            if self.context.director_uuid:
                origin["director_uuid"] = self.context.director_uuid
            # independent requests at once: the flavor and a vip's floating IP are looked up
            # while the security groups are resolved and then the ports made, so the server's
            # POST waits for the slowest of them rather than for their sum
            with ThreadPoolExecutor(4) as pool:
                flavor_f = pool.submit(flavors.find, self.api, props.instance_type)
                fip_f = (pool.submit(networks.find_floating_ip, self.api, plan.vip.ip, plan.vip_name)
                         if plan.vip and plan.vip.ip and plan.vip_name else None)  # networks.plan checked both
                group_ids = networks.resolve_security_groups(self.api, wanted_groups) if wanted_groups else []
                ports = [(planned, pool.submit(
                    networks.create_port, self.api, planned, name=f"{server_name}-{planned.name}", origin=origin,
                    security_group_ids=group_ids,
                    address_pairs=props.address_pairs if planned.network.type == "manual" else []))
                    for planned in plan.networks if planned.properties.net_id]
                failures = []
                for planned, port_f in ports:  # every port made is recorded before any error is raised
                    try:
                        planned.port = port_f.result()
                        made.ports.append(planned.port["id"])
                    except Exception as exc:  # noqa: BLE001 - raised below, once the others are recorded
                        failures.append(exc)
                if failures:
                    raise failures[0]
                flavor = flavor_f.result()
                floating_ip = fip_f.result() if fip_f else None
            boot_volume = self._boot_volume(props, flavor, image_id)
            user_data = self._user_data(agent_id, server_name, nets, plan, flavor, env)
            body = self._server_body(server_name, props, plan, flavor, image_id, boot_volume, user_data, wanted_groups,
                                     env, origin)
            zones = _zones(props)
            for index, zone in enumerate(zones):
                if zone:
                    body["server"]["availability_zone"] = zone
                made.server = self._post_server(body, server_name,
                                                f"stemcell '{stemcell_cid}', flavor '{flavor['name']}'")
                log.info("creating server %s (%s) from %s%s", made.server, flavor["name"], image_id,
                         f" in {zone}" if zone else "")
                try:
                    self._wait_active(made.server, f"{flavor['name']} {'volume' if boot_volume else 'image'}")
                    break
                except ServerFailed as exc:
                    if not (exc.no_valid_host and index + 1 < len(zones)):
                        raise
                    log.warning("%s; trying availability zone %s", exc.message, zones[index + 1])
                    self._delete_server(made.server)
                    made.server = None
            vm_cid = made.server
            assert vm_cid is not None, "each zone made a server or raised"
            if floating_ip is not None:
                port = plan.gateway.port or self._nova_port(vm_cid, plan.gateway)
                networks.associate_floating_ip(self.api, floating_ip, port)
            if props.loadbalancer_pools:
                self._join_pools(vm_cid, props, plan, made)
        except BaseException as exc:
            failure = self._clean_up(made, exc)
            if failure is None:
                raise
            raise failure from None
        return vm_cid, {name: net.wire() for name, net in nets.items()}

    def _boot_volume(self, props: VMCloudProperties, flavor: dict[str, Any], image_id: str) -> dict[str, Any] | None:
        from_volume = self.properties.boot_from_volume if props.boot_from_volume is None else props.boot_from_volume
        if flavor.get("disk", 0) == 0 and not from_volume:
            if props.root_disk is None:
                raise VMCreationFailed(
                    f"flavor '{flavor['name']}' has a root disk of 0 GiB: set root_disk.size in the vm_type (the VM "
                    "then boots from a volume of that size) or pick another flavor",
                    ok_to_retry=False,
                )
            log.info("flavor %s has no root disk: booting from a %d GiB volume (root_disk.size)", flavor["name"],
                     props.root_disk.size)
            from_volume = True
        if not from_volume:
            if props.root_disk is not None:
                log.info("root_disk.size is for boot volumes: the VM boots from flavor %s's %d GiB disk",
                         flavor["name"], flavor.get("disk", 0))
            return None
        size = props.root_disk.size if props.root_disk is not None else flavor.get("disk", 0)
        if not size:
            raise VMCreationFailed(
                f"boot from volume: flavor '{flavor['name']}' has a root disk of 0 GiB; set root_disk.size",
                ok_to_retry=False,
            )
        return {
            "uuid": image_id, "source_type": "image", "destination_type": "volume", "volume_size": size,
            "boot_index": 0, "delete_on_termination": True, "device_name": "/dev/vda",
        }

    def _user_data(self, agent_id: AgentId, server_name: str, nets: dict[str, Network], plan: networks.NetworkPlan,
                   flavor: dict[str, Any], env: dict) -> str:
        ports = {planned.name: planned.port for planned in plan.networks if planned.port}
        for_agent: dict[str, Network] = {}
        for name, net in nets.items():
            wire = net.wire()
            if net.type != "vip":
                wire["use_dhcp"] = self.properties.use_dhcp
                if name in ports and not wire.get("mac"):
                    wire["mac"] = ports[name].get("mac_address")
            for_agent[name] = Network.model_validate(wire)
        settings = agent_env.settings(
            agent_id=agent_id,
            vm_name=server_name,
            agent=self.agent,
            networks=for_agent,
            env=env,
            system_disk=SYSTEM_DISK,
            ephemeral_disk=EPHEMERAL_DISK if flavors.ephemeral(flavor) > 0 else None,
        )
        document = json.dumps(agent_env.user_data(settings, for_agent, server_name), separators=(",", ":"))
        encoded = base64.b64encode(document.encode()).decode()
        if len(encoded) > USER_DATA_LIMIT:
            raise VMCreationFailed(
                f"agent settings are {len(encoded)} bytes in base64; Nova's user_data holds at most {USER_DATA_LIMIT}",
                ok_to_retry=False,
            )
        return encoded

    def _server_body(self, server_name: str, props: VMCloudProperties, plan: networks.NetworkPlan,
                     flavor: dict[str, Any], image_id: str, boot_volume: dict[str, Any] | None,
                     user_data: str, wanted_groups: list[str], env: dict, origin: dict[str, str]) -> dict[str, Any]:
        server: dict[str, Any] = {"name": server_name, "flavorRef": flavor["id"], "user_data": user_data}
        if boot_volume is None:
            server["imageRef"] = image_id
        else:
            server["block_device_mapping_v2"] = [boot_volume]
        nova_made = [p for p in plan.networks if p.port is None]
        if nova_made:  # a dynamic network without net_id: Nova makes the port, and applies the groups
            server["networks"] = "auto"
            if wanted_groups:
                server["security_groups"] = [{"name": g} for g in wanted_groups]
        else:
            server["networks"] = [{"port": p.port["id"]} for p in plan.networks if p.port is not None]  # all of them
        key_name = props.key_name or self.properties.default_key_name
        if key_name:
            server["key_name"] = key_name
        if self.properties.config_drive:
            server["config_drive"] = True
        server["metadata"] = tags.clean({**origin, **(((env or {}).get("bosh") or {}).get("tags") or {})})
        body: dict[str, Any] = {"server": server}
        if props.scheduler_hints:
            body["os:scheduler_hints"] = props.scheduler_hints
        return body

    def _post_server(self, body: dict[str, Any], server_name: str, what: str) -> VmCid:
        try:
            return VmCid(self.api.create("compute", "/servers", body, key="server",
                                         find=lambda: self._named(server_name))["id"])
        except errors.ApiError as exc:
            if 400 <= exc.status < 500 and exc.status not in (429, 413):
                # Nova checks the image itself: a missing or inactive stemcell image is a 400 here
                raise VMCreationFailed(f"Nova refused to create the server ({what}): {exc.message}",
                                       ok_to_retry=False) from None
            raise

    def _named(self, server_name: str) -> dict[str, Any] | None:
        """The server this call made, if Nova made it (names are unique: vm-<uuid>)."""
        query = urllib.parse.urlencode({"name": f"^{server_name}$"})
        found = self.api.get("compute", f"/servers?{query}")["servers"]
        return found[0] if found else None

    def _wait_active(self, vm_cid: VmCid, kind: str) -> None:
        """Until ACTIVE, looking when servers of this `kind` (flavor, boot source) usually are."""
        def check() -> waits.Check:
            server = self.server(vm_cid)
            if server is None:
                raise VMCreationFailed(f"server {vm_cid} disappeared while building", ok_to_retry=True)
            status = server.get("status", "UNKNOWN")
            if status == "ACTIVE":
                return waits.Check(True, status)
            if status == "ERROR":
                fault = server.get("fault") or {}
                text = fault.get("message") or "no fault given"
                code = f" (code {fault['code']})" if fault.get("code") else ""
                raise ServerFailed(f"server {vm_cid} went ERROR: {text}{code}",
                                   no_valid_host="no valid host" in text.lower())
            if status in _GONE:
                raise VMCreationFailed(f"server {vm_cid} was deleted while building", ok_to_retry=True)
            task = server.get("OS-EXT-STS:task_state")
            return waits.Check(False, f"{status} ({task})" if task else status)

        self.api.channel.until(check, what=f"server {vm_cid} to be ACTIVE", timeout=self.properties.state_timeout,
                               setting="state_timeout", schedule=poll_schedule(self.properties),
                               history=history(self.properties, f"server ACTIVE {kind}"))

    def _nova_port(self, vm_cid: VmCid, planned: networks.PlannedNetwork) -> dict[str, Any]:
        ports = networks.server_ports(self.api, vm_cid)
        if planned.properties.net_id:
            ports = [p for p in ports if p.get("network_id") == planned.properties.net_id] or ports
        if not ports:
            raise VMCreationFailed(f"server {vm_cid} has no port for the floating IP", ok_to_retry=True)
        return ports[0]

    def _join_pools(self, vm_cid: VmCid, props: VMCloudProperties, plan: networks.NetworkPlan, made: _Made) -> None:
        port = plan.gateway.port or self._nova_port(vm_cid, plan.gateway)
        fixed = next((ip for ip in port.get("fixed_ips", []) if ":" not in ip["ip_address"]), None) \
            or (port.get("fixed_ips") or [None])[0]
        if fixed is None:
            raise VMCreationFailed(f"port {port['id']} has no IP for the load balancer pools", ok_to_retry=True)
        for pool in props.loadbalancer_pools:
            made.members.append(lbaas.add_member(self.api, self.properties, pool, fixed["ip_address"],
                                                 fixed.get("subnet_id")))
        self.api.post("compute", f"/servers/{vm_cid}/metadata", {"metadata": lbaas.metadata_for(made.members)},
                      idempotent=True)  # a merge

    def _clean_up(self, made: _Made, exc: BaseException) -> VMCreationFailed | None:
        """Delete what this create_vm made; returns the error to raise (None: re-raise `exc`
        as it is, e.g. KeyboardInterrupt)."""
        if made.empty:
            if isinstance(exc, BoshError) or not isinstance(exc, Exception):
                return None
            return self._as_creation_failure(exc, "")
        log.warning("create_vm failed (%s); removing what it made", errors.summary(exc))
        problems = []
        for pool_id, member_id in made.members:
            try:
                lbaas.remove_member(self.api, self.properties, pool_id, member_id)
            except Exception as cleanup_exc:  # noqa: BLE001 - reported in the error below
                problems.append(f"load balancer member {member_id}: {errors.summary(cleanup_exc)}")
        if made.server:
            try:
                self._delete_server(made.server)
            except Exception as cleanup_exc:  # noqa: BLE001 - reported in the error below
                problems.append(f"server {made.server}: {errors.summary(cleanup_exc)}")
        for port_id in made.ports:
            try:
                networks.delete_port(self.api, port_id)
            except Exception as cleanup_exc:  # noqa: BLE001 - reported in the error below
                problems.append(f"port {port_id}: {errors.summary(cleanup_exc)}")
        removed = ", ".join(([f"server {made.server}"] if made.server else []) + [f"port {p}" for p in made.ports])
        note = (f" ({removed} deleted)" if not problems
                else f" (cleanup failed for {'; '.join(problems)}: delete by hand)")
        for problem in problems:
            log.error("cleanup after a failed create_vm: %s", problem)
        if not isinstance(exc, Exception):
            return None
        return self._as_creation_failure(exc, note)

    def _as_creation_failure(self, exc: Exception, note: str) -> VMCreationFailed:
        if isinstance(exc, BoshError):
            return VMCreationFailed(f"{exc.message}{note}",
                                    ok_to_retry=exc.ok_to_retry or isinstance(exc, waits.WaitTimeout))
        cause = errors.to_cloud_error(exc, "create_vm", self.properties.describe_identity(), self.properties.auth_url)
        retryable = errors.classifier(idempotent=True)(exc).retryable or cause.ok_to_retry
        return VMCreationFailed(f"{cause.message}{note}", ok_to_retry=retryable)

    # ------------------------------------------------------------ delete_vm

    def _delete_server(self, vm_cid: VmCid) -> bool:
        """Delete the server and wait until Nova has it gone (its volumes detached, its ports
        unbound); False when there was no such server."""
        response = self.api.request("compute", "DELETE", f"/servers/{_quote(vm_cid)}", ok=(404,))
        if response.status_code == 404:
            return False

        def check() -> waits.Check:
            server = self.server(vm_cid)
            if server is None or server.get("status") in _GONE:
                return waits.Check(True, "deleted")
            task = server.get("OS-EXT-STS:task_state")
            if server.get("status") == "ERROR" and not task:
                fault = (server.get("fault") or {}).get("message") or "no fault given"
                raise CloudError(f"Nova could not delete server {vm_cid}: {fault}")
            return waits.Check(False, f"{server.get('status')} ({task})" if task else server.get("status", "?"))

        self.api.channel.until(check, what=f"server {vm_cid} to be deleted", timeout=self.properties.state_timeout,
                               setting="state_timeout", schedule=poll_schedule(self.properties),
                               history=history(self.properties, "server deleted"))
        return True

    def delete(self, vm_cid: VmCid) -> None:
        """Remove load balancer memberships, delete the server, wait until it is gone, then
        delete its ports (the ones this CPI made survive the server otherwise). A VM that no
        longer exists is success."""
        self.api.authenticate()
        with ThreadPoolExecutor(2) as pool:
            server_f = pool.submit(self.server, vm_cid)
            ports_f = pool.submit(networks.server_ports, self.api, vm_cid)
            server, ports = server_f.result(), ports_f.result()
        if server is None:
            log.info("VM %s not found: nothing to delete", vm_cid)
        for pool_id, member_id in lbaas.memberships((server or {}).get("metadata") or {}):
            lbaas.remove_member(self.api, self.properties, pool_id, member_id)
        if server is not None and not self._delete_server(vm_cid):
            log.info("VM %s was already gone", vm_cid)
        for port in ports:
            networks.delete_port(self.api, port["id"])
            log.info("deleted port %s", port["id"])

    # ------------------------------------------------------------ the rest

    def exists(self, vm_cid: VmCid) -> bool:
        server = self.server(vm_cid)
        return server is not None and server.get("status") not in _GONE

    def reboot(self, vm_cid: VmCid) -> None:
        response = self.api.request("compute", "POST", f"/servers/{_quote(vm_cid)}/action",
                                    json={"reboot": {"type": "SOFT"}}, ok=(404,))
        if response.status_code == 404:
            raise VMNotFound(f"VM '{vm_cid}' not found")
        log.info("rebooting %s", vm_cid)

        def check() -> waits.Check:
            server = self.require(vm_cid)
            status, task = server.get("status"), server.get("OS-EXT-STS:task_state")
            if status == "ERROR":
                fault = (server.get("fault") or {}).get("message") or "no fault given"
                raise CloudError(f"server {vm_cid} went ERROR while rebooting: {fault}")
            return waits.Check(status == "ACTIVE" and not task, f"{status} ({task})" if task else str(status))

        self.api.channel.until(check, what=f"server {vm_cid} to reboot", timeout=self.properties.state_timeout,
                               setting="state_timeout", schedule=poll_schedule(self.properties))

    def set_metadata(self, vm_cid: VmCid, metadata: dict[str, str]) -> None:
        wanted = tags.clean(metadata)
        if wanted:
            response = self.api.request("compute", "POST", f"/servers/{_quote(vm_cid)}/metadata",
                                        json={"metadata": wanted}, ok=(404,), idempotent=True)  # a merge
            if response.status_code == 404:
                raise VMNotFound(f"VM '{vm_cid}' not found")
        else:
            self.require(vm_cid)
        name = tags.vm_name(metadata) if self.properties.human_readable_vm_names else None
        if name:
            self.api.put("compute", f"/servers/{_quote(vm_cid)}", {"server": {"name": name}})
            log.info("renamed server %s to %s", vm_cid, name)

    def disks(self, vm_cid: VmCid) -> list[DiskCid]:
        """Persistent disks: the attached volumes except the boot volume (device letter a)."""
        return [DiskCid(a["volumeId"]) for a in self.attachments(vm_cid) if not is_root_device(a.get("device"))]

    def calculate_cloud_properties(self, resources: VMResources) -> dict[str, Any]:
        return flavors.calculate(self.api, resources, self.properties.boot_from_volume)


class _Made:
    """What a create_vm has made so far (for the cleanup of a failure)."""

    def __init__(self) -> None:
        self.ports: list[str] = []
        self.server: VmCid | None = None
        self.members: list[tuple[str, str]] = []

    @property
    def empty(self) -> bool:
        return not (self.ports or self.server or self.members)


def _zones(props: VMCloudProperties) -> list[str | None]:
    if props.availability_zones:
        return random.sample(props.availability_zones, len(props.availability_zones))
    return [props.availability_zone]


def is_root_device(device: str | None) -> bool:
    """Whether a volume attached at `device` is the server's root disk (device letter a)."""
    return bool(device and device.rstrip("0123456789").endswith("a"))


def _quote(value: str) -> str:
    return urllib.parse.quote(value, safe="")
