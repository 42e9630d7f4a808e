"""DRS settings of a VM's cluster: the anti-affinity rule a vm_type's `drs_rules` (or
`enable_auto_anti_affinity_drs_rules`, by the instance group) names, and DRS switched off
for one VM (`disable_drs`).

A cluster's rules are one list the vCenter replaces as a whole, so two processes that add
VMs to rules of the same cluster at once would each write the list they read and lose the
other's VM; the changes to one cluster are therefore made under a lock named after it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from cpi import locks
from cpi.errors import CloudError

from . import tasks

if TYPE_CHECKING:
    from .props import VsphereProperties
    from .session import Session

log = logging.getLogger("cpi.clouds.vsphere")


def _reconfigure(session: Session, cluster: Any, spec: Any, what: str, done: Any) -> None:
    tasks.run(session, lambda: cluster.ReconfigureComputeResource_Task(spec=spec, modify=True), what, done=done)


def add_to_anti_affinity_rule(session: Session, properties: VsphereProperties, cluster: Any, name: str,
                              vm: Any) -> None:
    """Put `vm` in the cluster's anti-affinity rule `name`, made when missing."""
    from pyVmomi import vim

    with locks.locked(properties.lock_directory(), f"vsphere-drs {cluster._moId}", timeout=properties.task_timeout):
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

    with locks.locked(properties.lock_directory(), f"vsphere-drs {cluster._moId}", timeout=properties.task_timeout):
        info = vim.cluster.DrsVmConfigInfo(key=vm, enabled=False)
        spec = vim.cluster.ConfigSpecEx(drsVmConfigSpec=[vim.cluster.DrsVmConfigSpec(
            operation=vim.option.ArrayUpdateSpec.Operation.add, info=info)])
        def done() -> Any:
            return True if any(c.key == vm for c in cluster.configurationEx.drsVmConfig or []) else None

        _reconfigure(session, cluster, spec, f"DRS off for {vm._moId}", done)
