"""NSX-T for a vm_type's `nsxt`, through the API cpi.json's `nsxt` chooses, as the official
CPI does:

- the Manager API (the default): the VM's logical ports join the NSGroups, the VM the
  pools, the ports get the VIF type (`vif_type`, else `default_vif_type`) and the instance
  id tag;
- the Policy API (`use_policy_api`): the VM joins the groups and pools, its segment ports
  get the director's metadata as tags;
- `policy_api_migration_mode`: both, the Manager API's objects required, the Policy API's
  taken where they are (a migration script moves them meanwhile).

With `tag_nsx_vm_objects`, the VM's own record in NSX's inventory gets the metadata too.
What can be looked up is looked up before anything is made: a group or pool that is not
there refuses create_vm with nothing to clean up."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cpi import waits
from cpi.cids import VmCid
from cpi.errors import CloudError, VMCreationFailed

from .client import Client, client_for
from .manager_api import ManagerApi
from .policy import Policy
from .vnics import address, addresses, on_nsx

if TYPE_CHECKING:
    from cpi.channel import Channel

    from ...props import NsxtVmProperties
    from ...vcenter.session import Session

log = logging.getLogger("cpi.clouds.vsphere")

Join = Callable[[Any, VmCid, dict[str, Any]], None]


class Nsxt:
    """The NSX-T manager of cpi.json's `nsxt`, through the API(s) its settings choose."""

    def __init__(self, session: Session, client: Client):
        config = client.config
        self.session = session
        self.client = client
        self.config = config
        self.migrating = config.policy_api_migration_mode
        self.policy = Policy(client) if config.use_policy_api or self.migrating else None
        self.manager = ManagerApi(client) if not config.use_policy_api or self.migrating else None

    # ------------------------------------------------------------ create_vm

    def prepare(self, asked: NsxtVmProperties) -> Join:
        """Look up what `asked` names (VMCreationFailed for what is missing) and return what
        makes it so once the VM is on: join(vm, vm_cid, networks)."""
        names = list(asked.ns_groups or [])
        pools = [(pool.name, pool.port) for pool in (asked.lb.server_pools if asked.lb else None) or []]
        static: set[str] = set()  # the pools named whose members are addresses (not a group's)
        try:
            manager_groups = self._manager_lookups(names, pools, static) if self.manager else {}
            policy_groups, policy_pools = self._policy_lookups(names, pools, static) if self.policy else ({}, [])
        except CloudError as exc:
            if exc.ok_to_retry or isinstance(exc, VMCreationFailed):
                raise
            raise VMCreationFailed(exc.message, ok_to_retry=False) from None
        vif_type = asked.vif_type if "vif_type" in asked.model_fields_set else self.config.default_vif_type
        if vif_type and self.manager is None:
            log.info("create_vm: nsxt vif_type %s is set through the Manager API only (as by the official CPI): "
                     "not set under use_policy_api", vif_type)

        def join(vm: Any, vm_cid: VmCid, networks: dict[str, Any]) -> None:
            # an address is needed (and, on dynamic networks, waited for) only by a static pool
            ip = address(self.session, vm, vm_cid, networks) if static else None
            if self.manager is not None:
                self._manager_join(vm, vm_cid, manager_groups, pools, ip, vif_type)
            if self.policy is not None:
                if policy_groups:
                    self.policy.join_groups(vm_cid, list(policy_groups.values()))
                if policy_pools:
                    self.policy.join_pools(vm_cid, ip, policy_pools)

        return join

    def _there(self, listed: list[dict[str, Any]], pools: list[tuple[str, int | None]], static: set[str],
               api: str, lenient: bool = False) -> list[tuple[str, int | None]]:
        """The pools of `pools` that `listed` (an API's pools) has, the static ones noted in
        `static`; CloudError naming those missing (`lenient`: logged and left out)."""
        by_name = {pool.get("display_name"): pool for pool in listed}
        static.update(name for name, _ in pools if name in by_name and not by_name[name].get("member_group"))
        missing = [name for name, _ in pools if name not in by_name]
        said = f"NSX-T at {self.config.host} has no server pool {', '.join(repr(m) for m in missing)}"
        if missing and not lenient:
            raise CloudError(f"vm_type nsxt.lb.server_pools: {said}")
        if missing:
            log.info("create_vm: %s in its %s: the VM joins those there", said, api)
        return [(name, port) for name, port in pools if name in by_name]

    def _manager_lookups(self, names: list[str], pools: list[tuple[str, int | None]],
                         static: set[str]) -> dict[str, str]:
        assert self.manager is not None
        listed = self.manager.pools() if pools else []
        self._there(listed, pools, static, "Manager API")
        wanted = names + [name for name in self.manager.pool_groups(listed, pools) if name not in names]
        return self.manager.ns_groups(wanted) if wanted else {}

    def _policy_lookups(self, names: list[str], pools: list[tuple[str, int | None]], static: set[str]
                        ) -> tuple[dict[str, str], list[tuple[str, int | None]]]:
        assert self.policy is not None
        groups = self.policy.groups(names, missing_ok=self.migrating) if names else {}
        if not pools:
            return groups, []
        return groups, self._there(self.policy.pools(), pools, static, "Policy API", lenient=self.migrating)

    def _manager_join(self, vm: Any, vm_cid: VmCid, groups: dict[str, str], pools: list[tuple[str, int | None]],
                      ip: str | None, vif_type: str | None) -> None:
        assert self.manager is not None
        if pools and ip:
            self.manager.join_pools(vm_cid, ip, pools)
        if not (groups or vif_type):
            return
        if not on_nsx(self.session, vm):
            log.info("create_vm: %s has no NIC on an NSX network: no logical port to put in NSGroups %s or to "
                     "give a VIF type (as with the official CPI)", vm_cid, ", ".join(groups) or "-")
            return
        ports = self.manager.logical_ports(vm_cid)
        if groups:
            self.manager.join_groups(vm_cid, ports, groups)
        if vif_type:
            self.manager.set_vif_type(ports, vif_type)

    # ------------------------------------------------------------ delete_vm

    def leave(self, vm: Any, vm_cid: VmCid, required: bool = True) -> None:
        """Take the VM out of its groups and pools while NSX still knows it. The Policy API's
        groups must let it go (`required`: a failure fails delete_vm, which the director
        retries); the rest is logged when it fails, as by the official CPI, since NSX drops
        the ports of a deleted VM itself. A pool member is the VM's when it is named after
        it, or, unnamed (as older official CPIs added them), at one of its addresses."""
        mine = functools.cache(lambda: addresses(self.session, vm))  # a request, when an unnamed member asks
        steps: list[tuple[str, Callable[[], None], bool]] = []
        if self.manager is not None:
            manager = self.manager
            steps += [("NSGroups", lambda: manager.leave_groups(vm_cid), False),
                      ("server pools", lambda: manager.leave_pools(vm_cid, mine), False)]
        if self.policy is not None:
            policy = self.policy
            steps += [("groups", lambda: policy.leave_groups(vm_cid), required and not self.migrating),
                      ("server pools", lambda: policy.leave_pools(vm_cid, mine), False)]
        for what, step, must in steps:
            try:
                step()
            except CloudError as exc:
                if must:
                    raise
                log.warning("delete_vm: %s could not be taken out of its NSX-T %s (%s); going on, as the official "
                            "CPI does", vm_cid, what, exc.message)

    # ------------------------------------------------------------ set_vm_metadata

    def tag(self, vm: Any, vm_cid: VmCid, metadata: dict[str, str]) -> None:
        """The director's metadata on the VM's NSX ports (and, with `tag_nsx_vm_objects`, its
        NSX record); nothing for a VM with no NIC on NSX."""
        if not metadata:
            return
        attachments = on_nsx(self.session, vm)
        if not attachments:
            return
        if self.manager is not None:
            self.manager.tag_ports(vm_cid, metadata)
        if self.policy is not None:
            known = [attachment for attachment in attachments if attachment]
            if len(known) < len(attachments):
                log.info("set_vm_metadata: %d of %s's NSX NICs have no attachment id in the vCenter yet",
                         len(attachments) - len(known), vm_cid)
            try:
                self.policy.tag_ports(vm_cid, known, metadata)
            except waits.WaitTimeout as exc:
                if not self.migrating:
                    raise
                log.info("set_vm_metadata: %s (migration mode: the Manager API's ports are tagged)", exc.message)
        if self.config.tag_nsx_vm_objects:
            (self.manager or ManagerApi(self.client)).tag_vm(vm_cid, metadata)


def for_vms(session: Session, properties: Any, channel: Channel) -> Nsxt | None:
    """The NSX-T manager cpi.json names, asked through `channel` (the call's: cpi.channel);
    None without one."""
    made = client_for(properties, channel)
    return Nsxt(session, made) if made is not None else None
