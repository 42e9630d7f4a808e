"""DRS settings of a VM's cluster: the anti-affinity rule a vm_type's `drs_rules` (or
`enable_auto_anti_affinity_drs_rules`, by the instance group) names, and DRS switched off
for one VM (`disable_drs`).

A cluster's rules are one list the vCenter replaces as a whole, so two processes that add
VMs to rules of the same cluster at once would each write the list they read and lose the
other's VM; the changes to one cluster are therefore made under a lock named after it.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from cpi import locks
from cpi.errors import CloudError

from ..vcenter import tasks

if TYPE_CHECKING:
    from ..job_config import VsphereProperties
    from ..vcenter.session import Session

log = logging.getLogger("cpi.clouds.vsphere")


def _locked(properties: VsphereProperties, cluster: Any) -> AbstractContextManager[None]:
    """The lock every change of one cluster's rules and groups is made under."""
    return locks.locked(properties.lock_directory(), f"vsphere-drs {cluster._moId}", timeout=properties.task_timeout)


def _reconfigure(session: Session, cluster: Any, spec: Any, what: str, done: Any) -> None:
    tasks.run(session, lambda: cluster.ReconfigureComputeResource_Task(spec=spec, modify=True), what, done=done)


def add_to_anti_affinity_rule(session: Session, properties: VsphereProperties, cluster: Any, name: str,
                              vm: Any) -> None:
    """Put `vm` in the cluster's anti-affinity rule `name`, made when missing."""
    from pyVmomi import vim

    with _locked(properties, cluster):
        rules = cluster.configurationEx.rule or []
        existing = next((r for r in rules if r.name == name), None)
        if existing is not None and not isinstance(existing, vim.cluster.AntiAffinityRuleSpec):
            raise CloudError(f"DRS rule '{name}' of cluster '{cluster.name}' is not an anti-affinity rule "
                             "(separate_vms); give the vm_type's drs_rules another name")
        if existing is None:
            rule = vim.cluster.AntiAffinityRuleSpec(name=name, enabled=True, vm=[vm])
            operation = vim.option.ArrayUpdateSpec.Operation.add
        else:
            rule = existing
            rule.vm = [*(rule.vm or []), vm]
            operation = vim.option.ArrayUpdateSpec.Operation.edit
        spec = vim.cluster.ConfigSpecEx(rulesSpec=[vim.cluster.RuleSpec(operation=operation, info=rule)])
        def done() -> Any:
            rule_now = next((r for r in cluster.configurationEx.rule or [] if r.name == name), None)
            return True if rule_now is not None and vm in (rule_now.vm or []) else None

        _reconfigure(session, cluster, spec, f"DRS rule '{name}'", done)
        log.info("DRS: VM %s is in anti-affinity rule '%s' of cluster %s (%d VMs)", vm._moId, name, cluster._moId,
                 len(rule.vm))


def disable_drs(session: Session, properties: VsphereProperties, cluster: Any, vm: Any) -> None:
    """Keep DRS from moving `vm` (the vm_type's `disable_drs`)."""
    from pyVmomi import vim

    with _locked(properties, cluster):
        info = vim.cluster.DrsVmConfigInfo(key=vm, enabled=False)
        spec = vim.cluster.ConfigSpecEx(drsVmConfigSpec=[vim.cluster.DrsVmConfigSpec(
            operation=vim.option.ArrayUpdateSpec.Operation.add, info=info)])
        def done() -> Any:
            return True if any(c.key == vm for c in cluster.configurationEx.drsVmConfig or []) else None

        _reconfigure(session, cluster, spec, f"DRS off for {vm._moId}", done)


def add_to_vm_group(session: Session, properties: VsphereProperties, cluster: Any, name: str, vm: Any) -> None:
    """Put `vm` in the cluster's DRS VM group `name`, made when missing (a vm_type's `vm_group`)."""
    from pyVmomi import vim

    with _locked(properties, cluster):
        group = next((g for g in cluster.configurationEx.group or []
                      if g.name == name and isinstance(g, vim.cluster.VmGroup)), None)
        operation = vim.option.ArrayUpdateSpec.Operation
        if group is None:
            spec = vim.cluster.GroupSpec(operation=operation.add, info=vim.cluster.VmGroup(name=name, vm=[vm]))
        else:
            group.vm = [*(group.vm or []), vm]
            spec = vim.cluster.GroupSpec(operation=operation.edit, info=group)

        def done() -> Any:
            now = next((g for g in cluster.configurationEx.group or [] if g.name == name), None)
            return True if now is not None and vm in (getattr(now, "vm", None) or []) else None

        _reconfigure(session, cluster, vim.cluster.ConfigSpecEx(groupSpec=[spec]), f"DRS VM group '{name}'", done)
        log.info("DRS: VM %s is in VM group '%s' of cluster %s", vm._moId, name, cluster._moId)


def tie_to_host_group(session: Session, properties: VsphereProperties, cluster: Any, host_group: str, rule: str,
                      vm: Any) -> None:
    """A cluster's `host_group`: `vm` joins the VM group `<host group><MUST|SHOULD>_vm_group`,
    tied to the host group by the VM-host rule `<that VM group>_rule` (the official CPI's
    names, so either CPI keeps the other's groups), each made when missing."""
    from pyVmomi import vim

    groups = cluster.configurationEx.group or []
    if not any(g.name == host_group and isinstance(g, vim.cluster.HostGroup) for g in groups):
        raise CloudError(f"host group '{host_group}' is not a DRS host group of cluster '{cluster.name}'")
    vm_group = f"{host_group}{rule}_vm_group"
    add_to_vm_group(session, properties, cluster, vm_group, vm)
    rule_name = f"{vm_group}_rule"
    with _locked(properties, cluster):
        if any(r.name == rule_name for r in cluster.configurationEx.rule or []):
            return
        info = vim.cluster.VmHostRuleInfo(name=rule_name, enabled=True, mandatory=rule == "MUST",
                                          vmGroupName=vm_group, affineHostGroupName=host_group)
        spec = vim.cluster.ConfigSpecEx(rulesSpec=[vim.cluster.RuleSpec(
            operation=vim.option.ArrayUpdateSpec.Operation.add, info=info)])
        _reconfigure(session, cluster, spec, f"DRS rule '{rule_name}'",
                     lambda: True if any(r.name == rule_name for r in cluster.configurationEx.rule or []) else None)
        log.info("DRS: VM group '%s' is tied to host group '%s' (%s)", vm_group, host_group, rule)


def leave_groups(session: Session, properties: VsphereProperties, cluster: Any, vm: Any) -> None:
    """Take `vm` out of the cluster's DRS VM groups before it is deleted; a group it was the
    last VM of goes, with the VM-host rules that name it (the official CPI deletes them too)."""
    from pyVmomi import vim

    if not any(isinstance(g, vim.cluster.VmGroup) and vm in (g.vm or []) for g in cluster.configurationEx.group or []):
        return
    with _locked(properties, cluster):
        config = cluster.configurationEx
        operation = vim.option.ArrayUpdateSpec.Operation
        groups, emptied = [], []
        for group in config.group or []:
            if not isinstance(group, vim.cluster.VmGroup) or vm not in (group.vm or []):
                continue
            group.vm = [member for member in group.vm if member != vm]
            if group.vm:
                groups.append(vim.cluster.GroupSpec(operation=operation.edit, info=group))
            else:
                emptied.append(group.name)
                groups.append(vim.cluster.GroupSpec(operation=operation.remove, removeKey=group.name))
        rules = [vim.cluster.RuleSpec(operation=operation.remove, removeKey=r.key) for r in config.rule or []
                 if isinstance(r, vim.cluster.VmHostRuleInfo) and r.vmGroupName in emptied]

        def done() -> Any:
            still = [g for g in cluster.configurationEx.group or []
                     if isinstance(g, vim.cluster.VmGroup) and vm in (g.vm or [])]
            return None if still else True

        _reconfigure(session, cluster, vim.cluster.ConfigSpecEx(rulesSpec=rules, groupSpec=groups),
                     f"taking {vm._moId} out of its DRS VM groups", done)
        if emptied:
            log.info("DRS: deleted the VM group(s) %s of cluster %s with their last VM", ", ".join(emptied),
                     cluster._moId)
