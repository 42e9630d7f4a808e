"""VMs: create_vm, delete_vm, has_vm, reboot_vm, set_vm_metadata,
calculate_vm_cloud_properties.

create_vm costs two requests in the common case (DescribeImages for the AMI's root device,
RunInstances with tags, disks, interface and user-data in one go) plus the polls of the
running wait; names of security groups, a vip, spot fallback and load balancers add their
own. Whatever fails after RunInstances terminates the instance (its root and ephemeral
volumes and its interface go with it) and waits until it is gone before raising
VMCreationFailed, so the director's retry finds the IP free.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from cpi import agent_env, retry, waits
from cpi.cids import AgentId, DiskCid, StemcellCid, VmCid
from cpi.errors import BoshError, CloudError, VMCreationFailed
from cpi.models import AgentConfig, CallContext, Network, VMResources
from cpi.validation import parse

from . import devices, errors, frontends, ids, lookups, nics, routes, tags
from .job_config import AwsProperties, MetadataOptions
from .nics import NetworkPlan
from .props import VMCloudProperties
from .session import Aws

log = logging.getLogger("cpi.clouds.aws")

#: Instances take 5-60 s to start and to terminate on EC2 (EC2-compatible clouds can be
#: quicker): look at 0.25, 0.75, 1.75, 3.75, 7.75 s, then every 5 s, so the call returns
#: at most 5 s after EC2 is done, for about one request per 5 s of waiting (botocore's
#: `instance_running` waiter looks every 15 s).
INSTANCE_WAIT = waits.Schedule(first=0.25, factor=2.0, cap=5.0)

#: EC2's limit on user-data before base64.
USER_DATA_LIMIT = 16 * 1024
#: RunInstances failures a later attempt (by the director) can get past.
RETRYABLE_LAUNCH_CODES = frozenset({
    "InsufficientInstanceCapacity", "InsufficientHostCapacity", "InsufficientReservedInstanceCapacity",
    "InsufficientCapacity", "InvalidIPAddress.InUse", "InsufficientFreeAddressesInSubnet",
    "SpotMaxPriceTooLow", "MaxSpotInstanceCountExceeded", "Unsupported", "VolumeLimitExceeded",
})
SPOT_UNAVAILABLE_CODES = frozenset({
    "InsufficientInstanceCapacity", "SpotMaxPriceTooLow", "MaxSpotInstanceCountExceeded",
    "InsufficientCapacity", "Unsupported",
})


class Vms:
    def __init__(self, aws: Aws, properties: AwsProperties, agent: AgentConfig, context: CallContext) -> None:
        self.aws = aws
        self.properties = properties
        self.agent = agent
        self.context = context
        self.instance_types = devices.InstanceTypes(aws)

    # ------------------------------------------------------------ create_vm

    def create(self, agent_id: AgentId, stemcell_cid: StemcellCid, cloud_properties: dict, networks: dict[str, Network],
               disk_cids: list[DiskCid], env: dict) -> tuple[VmCid, dict[str, Any]]:
        props = parse(VMCloudProperties, cloud_properties, "vm_type cloud_properties", strict=self.context.strict)
        self._check_stemcell_api_version()
        plan = nics.plan(networks, strict=self.context.strict)
        if disk_cids:
            log.info("disk locality hint %s: the VM goes in the AZ of its subnet", ", ".join(disk_cids))
        image = self._image(stemcell_cid)
        disks = self._disk_layout(props, image)
        if disks.ignored:
            log.warning("ephemeral_disk.use_root_disk: no ephemeral volume is made, so %s ignored",
                        f"{', '.join(disks.ignored)} {'is' if len(disks.ignored) == 1 else 'are'}")
        group_ids = self._security_groups(props, plan)
        # agent_id and director_uuid from the first request on: an instance (and its volumes
        # and interfaces) left by a create_vm killed mid-way can be found and attributed
        origin: dict[str, str] = {"agent_id": agent_id}
        if self.context.director_uuid:
            origin["director_uuid"] = self.context.director_uuid
        create_tags = tags.clean({**origin, **_env_tags(env), **props.tags})
        interfaces = nics.Interfaces(self.aws, self.properties.vm_wait_timeout)
        try:
            if plan.own_interfaces:
                interfaces.make(plan, group_ids, create_tags)
                if props.auto_assign_public_ip:
                    interfaces.associate_public_ips()
            networks = {name: interfaces.with_mac(name, net) for name, net in networks.items()}
            user_data = self._user_data(agent_id, networks, env, image, disks)
            params = self._run_params(props, plan, group_ids, user_data, create_tags, interfaces, image, disks)
            instance = self._run_instance(params, props)
        except BaseException:
            interfaces.delete()
            raise
        vm_cid = VmCid(instance["InstanceId"])
        log.info("launched %s (%s) from %s in %s", vm_cid, props.instance_type, image["ImageId"], plan.subnet)
        try:
            self._wait_running(vm_cid, instance, props.instance_type)
            interfaces.delete_on_termination()
            # a VM of several interfaces is a route's target by its primary interface (EC2
            # refuses an instance of several as one)
            routes.advertise(self.aws, vm_cid, props.advertised_routes, interfaces.at(0))
            if not props.source_dest_check:
                self.aws.ec2("ModifyInstanceAttribute", InstanceId=vm_cid, SourceDestCheck={"Value": False})
            if plan.vip is not None:
                frontends.associate_elastic_ip(self.aws, vm_cid, plan, interfaces)
            frontends.register_load_balancers(self.aws, vm_cid, props)
        except BaseException as exc:
            failure = self._clean_up_failed(vm_cid, exc)
            left = interfaces.delete()
            if failure is None:
                raise
            if left:
                failure = VMCreationFailed(failure.message + left, ok_to_retry=failure.ok_to_retry)
            raise failure from None
        return vm_cid, {name: net.wire() for name, net in networks.items()}

    def _user_data(self, agent_id: AgentId, networks: dict[str, Network], env: dict, image: dict[str, Any],
                   disks: devices.Layout) -> str:
        settings = agent_env.settings(
            agent_id=agent_id,
            vm_name=f"vm-{uuid.uuid4()}",
            agent=self.agent,
            networks={name: _with_dhcp(net) for name, net in networks.items()},
            env=env,
            system_disk=image["RootDeviceName"],
            ephemeral_disk=disks.ephemeral,
            raw_ephemeral=disks.raw_ephemeral,
        )
        if disks.ephemeral is None:  # use_root_disk: no key at all, as the official CPI writes it
            del settings["disks"]["ephemeral"]
        user_data = json.dumps(agent_env.user_data(settings, networks), separators=(",", ":"))
        if len(user_data.encode()) > USER_DATA_LIMIT:
            raise VMCreationFailed(
                f"agent settings are {len(user_data.encode())} bytes; EC2 user-data holds at most {USER_DATA_LIMIT}",
                ok_to_retry=False,
            )
        return user_data

    def _check_stemcell_api_version(self) -> None:
        """Registry-less only: a stemcell that says it is API version 1 wants a registry
        this CPI does not run. When the caller does not say (the director omits it when
        unknown), assume a current stemcell, which reads its settings from user-data."""
        stemcell = (self.context.vm or {}).get("stemcell") if isinstance(self.context.vm, dict) else None
        if not isinstance(stemcell, dict) or "api_version" not in stemcell:
            log.info("stemcell API version not given: assuming 2 or later (agent settings in user-data)")
            return
        if self.context.stemcell_api_version < 2:
            raise VMCreationFailed(
                f"stemcell API version {self.context.stemcell_api_version} needs a registry, which this CPI does not "
                "run; use a stemcell with api_version 2 or later (agent settings in user-data)",
                ok_to_retry=False,
            )

    def _image(self, stemcell_cid: StemcellCid) -> dict[str, Any]:
        image_id = stemcell_cid.split(" ", 1)[0]
        image = lookups.image(self.aws, image_id) if ids.is_image(image_id) else None
        if image is None:
            raise VMCreationFailed(f"stemcell '{stemcell_cid}': image {image_id} not found", ok_to_retry=False)
        if image.get("State") != "available":
            raise VMCreationFailed(
                f"stemcell '{stemcell_cid}': image {image_id} is {image.get('State')}, not available",
                ok_to_retry=image.get("State") == "pending",
            )
        image.setdefault("RootDeviceName", "/dev/xvda")
        return image

    def _security_groups(self, props: VMCloudProperties, plan: NetworkPlan) -> list[str]:
        """vm_type's groups, else the network's, else the global defaults; names become IDs
        (one DescribeSecurityGroups, plus DescribeSubnets only if a name is ambiguous)."""
        wanted = props.security_groups or plan.security_groups or self.properties.default_security_groups
        ids = [g for g in wanted if g.startswith("sg-")]
        names = [g for g in wanted if not g.startswith("sg-")]
        if not names:
            return _unique(ids)
        response = self.aws.ec2("DescribeSecurityGroups", Filters=[{"Name": "group-name", "Values": names}])
        by_name: dict[str, list[dict]] = {}
        for group in response.get("SecurityGroups", []):
            by_name.setdefault(group["GroupName"], []).append(group)
        missing = [n for n in names if n not in by_name]
        if missing:
            raise VMCreationFailed(f"security group(s) not found: {', '.join(missing)}", ok_to_retry=False)
        vpc_id = None
        for name in names:
            groups = by_name[name]
            if len(groups) > 1:
                vpc_id = vpc_id or self._subnet_vpc(plan.subnet)
                groups = [g for g in groups if g.get("VpcId") == vpc_id]
                if not groups:
                    raise VMCreationFailed(f"security group '{name}' not found in {vpc_id}", ok_to_retry=False)
            ids.append(groups[0]["GroupId"])
        return _unique(ids)

    def _subnet_vpc(self, subnet_id: str) -> str:
        try:
            response = self.aws.ec2("DescribeSubnets", SubnetIds=[subnet_id])
        except Exception as exc:
            if errors.is_not_found(exc):
                raise VMCreationFailed(f"subnet {subnet_id} not found", ok_to_retry=False) from None
            raise
        return response["Subnets"][0]["VpcId"]

    def _run_params(self, props: VMCloudProperties, plan: NetworkPlan, group_ids: list[str], user_data: str,
                    create_tags: dict[str, str], interfaces: nics.Interfaces, image: dict,
                    disks: devices.Layout) -> dict[str, Any]:
        p = self.properties
        if interfaces.made:
            network_interfaces = interfaces.attachments()
        else:
            interface: dict[str, Any] = {"DeviceIndex": 0, "DeleteOnTermination": True, **plan.groups[0].spec()}
            if group_ids:
                interface["Groups"] = group_ids
            if props.auto_assign_public_ip is not None:
                interface["AssociatePublicIpAddress"] = props.auto_assign_public_ip
            network_interfaces = [interface]
        params: dict[str, Any] = {
            "ImageId": image["ImageId"],
            "InstanceType": props.instance_type,
            "MinCount": 1,
            "MaxCount": 1,
            "UserData": user_data,  # botocore base64-encodes RunInstances' UserData
            "NetworkInterfaces": network_interfaces,
            "BlockDeviceMappings": disks.mappings,
        }
        kinds = ("instance", "volume") if interfaces.made else ("instance", "volume", "network-interface")
        specs = tags.specifications(create_tags, kinds)
        if specs:
            params["TagSpecifications"] = specs
        key_name = props.key_name or p.default_key_name
        if key_name:
            params["KeyName"] = key_name
        profile = props.iam_instance_profile or p.default_iam_instance_profile
        if profile:
            params["IamInstanceProfile"] = {"Arn": profile} if profile.startswith("arn:") else {"Name": profile}
        placement: dict[str, Any] = {}
        if props.availability_zone:
            placement["AvailabilityZone"] = props.availability_zone
        if props.placement_group:
            placement["GroupName"] = props.placement_group
        if props.tenancy != "default":
            placement["Tenancy"] = props.tenancy
        if placement:
            params["Placement"] = placement
        metadata = (props.metadata_options or MetadataOptions()).over(p.metadata_options).to_api()
        if metadata:
            params["MetadataOptions"] = metadata
        if props.spot_bid_price is not None:
            params["InstanceMarketOptions"] = {
                "MarketType": "spot",
                "SpotOptions": {
                    "MaxPrice": f"{props.spot_bid_price}",
                    "SpotInstanceType": "one-time",
                    "InstanceInterruptionBehavior": "terminate",
                },
            }
        return params

    def _disk_layout(self, props: VMCloudProperties, image: dict) -> devices.Layout:
        """The VM's block devices and what the agent is told of them (cpi.clouds.aws.devices);
        DescribeInstanceTypes once, only when the vm_type asks for instance storage."""
        storage = None
        if devices.needs_instance_types(props):
            wanted_by = "raw_instance_storage" if props.raw_instance_storage else "ephemeral_disk.use_instance_storage"
            storage = self.instance_types.storage(props.instance_type, wanted_by)
        return devices.layout(props, image, self.properties, storage)

    def _run_instance(self, params: dict[str, Any], props: VMCloudProperties) -> dict[str, Any]:
        """RunInstances: each attempt with its own ClientToken, so a throttled or timed-out
        request is resent safely (EC2 answers a repeated token with the same instance);
        a fixed IP still held by a dying VM is waited out; spot falls back to on-demand
        when asked to."""

        def launch(launch_params: dict[str, Any]) -> dict[str, Any]:
            attempt = {**launch_params, "ClientToken": str(uuid.uuid4())}
            return self.aws.ec2("RunInstances", **attempt)["Instances"][0]

        def launch_waiting_for_ip(launch_params: dict[str, Any]) -> dict[str, Any]:
            return retry.call(
                lambda: launch(launch_params),
                classify=nics.ip_in_use,
                what="RunInstances (fixed IP still in use)",
                budget=nics.IP_IN_USE_BUDGET,
            )

        try:
            try:
                return launch_waiting_for_ip(params)
            except Exception as exc:
                if not (props.spot_ondemand_fallback and errors.code(exc) in SPOT_UNAVAILABLE_CODES):
                    raise
                log.warning("spot launch failed (%s); falling back to on-demand", errors.summary(exc))
                on_demand = {k: v for k, v in params.items() if k != "InstanceMarketOptions"}
                return launch_waiting_for_ip(on_demand)
        except BoshError:
            raise
        except Exception as exc:
            error_code = errors.code(exc)
            if error_code is None and not _is_botocore(exc):
                raise
            cause = errors.to_cloud_error(exc, "RunInstances", self.aws.describe_credentials())
            retryable = error_code in RETRYABLE_LAUNCH_CODES or errors.classifier()(exc).retryable
            raise VMCreationFailed(cause.message, ok_to_retry=retryable) from None

    def _wait_running(self, vm_cid: VmCid, launched: dict[str, Any], instance_type: str) -> None:
        if launched.get("State", {}).get("Name") == "running":
            return  # some EC2-compatible clouds answer RunInstances with a running VM

        def check() -> waits.Check:
            try:
                response = self.aws.ec2("DescribeInstances", InstanceIds=[vm_cid])
            except Exception as exc:
                if errors.code(exc) == "InvalidInstanceID.NotFound":
                    return waits.Check(False, "not visible yet")  # EC2 is eventually consistent
                raise
            instance = response["Reservations"][0]["Instances"][0]
            state = instance["State"]["Name"]
            if state == "running":
                return waits.Check(True, state)
            if state == "pending":
                return waits.Check(False, state)
            reason = instance.get("StateReason") or {}
            raise VMCreationFailed(
                f"instance {vm_cid} went {state} while starting: "
                f"{reason.get('Code', 'no reason given')}: {reason.get('Message', '')}".rstrip(": "),
                ok_to_retry=str(reason.get("Code", "")).startswith("Server."),
            )

        self.aws.channel.until(check, what=f"instance {vm_cid} to be running", timeout=self.properties.vm_wait_timeout,
                               setting="vm_wait_timeout", schedule=INSTANCE_WAIT,
                               history=self.properties.history(f"instance running {instance_type}"))

    def _clean_up_failed(self, vm_cid: VmCid, exc: BaseException) -> VMCreationFailed | None:
        """Terminate the half-made VM and wait until it is gone; returns the error to raise
        (None: re-raise `exc` as it is, e.g. KeyboardInterrupt)."""
        log.warning("create_vm failed after launching %s (%s); terminating it", vm_cid, errors.summary(exc))
        cleanup_problem = ""
        try:
            self.delete(vm_cid)
        except Exception as cleanup_exc:  # noqa: BLE001 - reported in the error below, never hidden
            cleanup_problem = f"; terminating {vm_cid} failed too ({errors.summary(cleanup_exc)}): delete it by hand"
            log.error("could not terminate %s: %s", vm_cid, errors.summary(cleanup_exc))
        if not isinstance(exc, Exception):
            return None
        if isinstance(exc, BoshError):
            message, ok_to_retry = exc.message, exc.ok_to_retry or isinstance(exc, waits.WaitTimeout)
        else:
            cause = errors.to_cloud_error(exc, "create_vm", self.aws.describe_credentials())
            message, ok_to_retry = cause.message, errors.classifier()(exc).retryable or cause.ok_to_retry
        return VMCreationFailed(f"{message} (instance {vm_cid} terminated{cleanup_problem})", ok_to_retry=ok_to_retry)

    # ------------------------------------------------------------ the rest

    def delete(self, vm_cid: VmCid) -> None:
        """Terminate and wait until terminated: the persistent disks it held are then
        detached and its IP is free for the next VM."""
        if not ids.is_instance(vm_cid):
            log.info("VM %s not found (not an instance ID): nothing to delete", vm_cid)
            return
        try:
            response = self.aws.ec2("TerminateInstances", InstanceIds=[vm_cid])
        except Exception as exc:
            if errors.is_not_found(exc):
                log.info("VM %s not found: nothing to delete", vm_cid)
                return
            raise
        changes = response.get("TerminatingInstances") or [{}]
        if changes[0].get("CurrentState", {}).get("Name") == "terminated":
            return
        if self.properties.fast_path_delete:
            self.aws.ec2("CreateTags", Resources=[vm_cid], Tags=[{"Key": "Name", "Value": "to be deleted"}])
            log.info("VM %s is terminating; not waiting (fast_path_delete)", vm_cid)
            return

        def check() -> waits.Check:
            found = lookups.instance(self.aws, vm_cid, missing_ok=True)
            if found is None:
                return waits.Check(True, "terminated")
            return waits.Check(False, found["State"]["Name"])

        self.aws.channel.until(check, what=f"instance {vm_cid} to terminate", timeout=self.properties.vm_wait_timeout,
                               setting="vm_wait_timeout", schedule=INSTANCE_WAIT,
                               history=self.properties.history("instance terminated"))

    def exists(self, vm_cid: VmCid) -> bool:
        return ids.is_instance(vm_cid) and lookups.instance(self.aws, vm_cid, missing_ok=True) is not None

    def reboot(self, vm_cid: VmCid) -> None:
        ids.instance(vm_cid)
        try:
            self.aws.ec2("RebootInstances", InstanceIds=[vm_cid])
        except Exception as exc:
            if errors.is_not_found(exc):
                from cpi.errors import VMNotFound

                raise VMNotFound(f"VM '{vm_cid}' not found") from None
            raise
        log.info("rebooting %s", vm_cid)

    def set_metadata(self, vm_cid: VmCid, metadata: dict[str, str]) -> None:
        """Tags on the instance and on the volumes it was created with (root, ephemeral: the
        ones deleted with it); persistent disks carry their own set_disk_metadata tags."""
        instance = lookups.instance(self.aws, ids.instance(vm_cid))
        wanted = tags.clean(metadata)
        name = tags.vm_name(metadata)
        if name:
            wanted["Name"] = tags.clean({"Name": name})["Name"]
        if not wanted:
            return
        volumes = [
            m["Ebs"]["VolumeId"]
            for m in instance.get("BlockDeviceMappings", [])
            if m.get("Ebs", {}).get("DeleteOnTermination") and m["Ebs"].get("VolumeId")
        ]
        self.aws.ec2("CreateTags", Resources=[vm_cid, *volumes], Tags=tags.api(wanted))
        log.info("tagged %s and %d volume(s) with %d tags", vm_cid, len(volumes), len(wanted))

    def disks(self, vm_cid: VmCid) -> list[DiskCid]:
        """Volumes attached as persistent disks: those not deleted with the VM."""
        instance = lookups.instance(self.aws, ids.instance(vm_cid))
        root = instance.get("RootDeviceName") or ""
        return [
            DiskCid(m["Ebs"]["VolumeId"])
            for m in instance.get("BlockDeviceMappings", [])
            if m.get("Ebs", {}).get("VolumeId")
            and not m["Ebs"].get("DeleteOnTermination")
            and not (m.get("DeviceName") == root or root.startswith(m.get("DeviceName") or "\0"))
        ]

    def calculate_cloud_properties(self, resources: VMResources) -> dict[str, Any]:
        """The smallest instance type (memory, then vCPUs, then family preference) among
        `instance_type_families` that has the cpus and memory asked for."""
        families = self.properties.instance_type_families
        candidates = []
        params: dict[str, Any] = {"Filters": [{"Name": "instance-type", "Values": [f"{f}.*" for f in families]}]}
        while True:
            response = self.aws.ec2("DescribeInstanceTypes", **params)
            for item in response.get("InstanceTypes", []):
                vcpus = item.get("VCpuInfo", {}).get("DefaultVCpus", 0)
                memory = item.get("MemoryInfo", {}).get("SizeInMiB", 0)
                family = item["InstanceType"].split(".")[0]
                if vcpus >= resources.cpu and memory >= resources.ram and family in families:
                    candidates.append((memory, vcpus, families.index(family), item["InstanceType"]))
            token = response.get("NextToken")
            if not token:
                break
            params["NextToken"] = token
        if not candidates:
            raise CloudError(
                f"no instance type in families {', '.join(families)} has {resources.cpu} vCPUs and "
                f"{resources.ram} MiB; set instance_type_families or ask for less"
            )
        instance_type = min(candidates)[3]
        result: dict[str, Any] = {"instance_type": instance_type}
        if resources.ephemeral_disk_size > 0:
            result["ephemeral_disk"] = {"size": resources.ephemeral_disk_size}
        return result


def _env_tags(env: dict) -> dict[str, Any]:
    """env.bosh.tags (the director's deployment and manifest tags), if well formed."""
    bosh = env.get("bosh")  # env itself is a dict (api.Props)
    found = bosh.get("tags") if isinstance(bosh, dict) else None
    return found if isinstance(found, dict) else {}


def _is_botocore(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("botocore")


def _with_dhcp(network: Network) -> Network:
    """The agent configures AWS interfaces by DHCP, manual networks included (EC2 hands out
    the fixed address itself)."""
    return Network.model_validate({**network.wire(), "use_dhcp": True})


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
