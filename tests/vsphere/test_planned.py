"""Plan mode at the vSphere stub (cpi/clouds/vsphere/vcenter/planned.py), in process against the
simulator: the fail-safe rule itself, which the planned CPI calls (tests/operator/test_plan.py)
cannot show, as the cloud sends no method the tables do not know. A method that is neither
in audited.READS nor described by audited.describe is still withheld and listed; a read goes
out; a read of what the plan only imagines ends it."""

from __future__ import annotations

import pytest

from cpi import plan
from cpi.clouds.vsphere.vcenter import audited, session


@pytest.fixture
def planning():
    return plan.Plan()


def test_a_method_not_known_to_read_is_withheld_and_listed(properties, si, planning):
    from pyVmomi import vim

    manager = si.content.customFieldsManager
    field = manager.AddCustomFieldDef(name="cpi-test-plan-failsafe", moType=vim.VirtualMachine)
    try:
        assert "RenameCustomFieldDef" not in audited.READS  # neither a read nor in describe's table
        ours = session.get(properties, planning).content.customFieldsManager
        assert ours.RenameCustomFieldDef(key=field.key, name="cpi-test-renamed") is None
        assert {f.name for f in manager.field if f.key == field.key} == {"cpi-test-plan-failsafe"}
        step = planning.mutations[-1]
        assert (step["action"], step["resource_type"]) == ("RenameCustomFieldDef", "custom_field"), step
        assert step["permission"] == "not checked: vSphere has no dry run"
        # what it would have changed is not read as if it had not: the plan ends there
        with pytest.raises(plan.Horizon):
            ours.field  # noqa: B018 - the read is the point
        assert "CustomFieldsManager" in str(planning.horizon)

        planning = plan.Plan()
        # a read goes out, and answers what is there
        vm = next(iter(si.content.viewManager.CreateContainerView(si.content.rootFolder, [vim.VirtualMachine],
                                                                  True).view))
        mine = vim.VirtualMachine(vm._moId, session.get(properties, planning).stub)
        assert mine.name == vm.name
        # a clone is made up, its task noted, not waited for; reading the clone ends the plan
        task = mine.CloneVM_Task(folder=mine.parent, name="cpi-test-never", spec=vim.vm.CloneSpec())
        assert "planned" in task._moId
        from cpi.clouds.vsphere.vcenter import tasks

        made = tasks.wait(session.get(properties, planning), task, "clone")
        assert "planned" in made._moId and planning.steps[-1]["step"] == "wait"
        assert (planning.mutations[0]["action"], planning.mutations[0]["resource_id"]) == ("create", "cpi-test-never")
        with pytest.raises(plan.Horizon):
            made.config  # noqa: B018 - the read is the point
        assert "cpi-test-never" not in {v.name for v in vm.parent.childEntity}
    finally:
        session.get(properties)  # the next test's requests: a real call's
        manager.RemoveCustomFieldDef(key=field.key)
