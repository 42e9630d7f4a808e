"""Same name, same default (#32): every property of the official `aws_cpi`, `openstack_cpi`
and `vsphere_cpi` jobs means, when a manifest leaves it unset, what it means there — or
docs/migrating.md lists it as a deliberate difference, with its reason.

The official defaults are facts read from each job's spec at a named commit
(official_jobs.yaml beside this file). Two layers are held to them:

- the job: the spec BOSH renders the release's job of that name with (job `cpi` under the
  alias, with the alias's defaults, exactly as `cpi release build` writes its job.MF);
- the CPI: for a property the job passes to a cloud's config (`aws.*`, `openstack.*`,
  `vcenter.*`), the default the cloud's model applies when cpi.json leaves the key out, so
  a cpi.json written by hand means the same too (aws.max_retries unset is 8 retries).

"Unset", an empty list and an empty map all mean "none" here: the official job that leaves
`ntp` out of cpi.json gives the agents no NTP server, as an empty list does."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from cpi.release.definition import load_definition
from cpi.release.reader import alias_job, read_job

ROOT = Path(__file__).resolve().parents[2]
OFFICIAL = yaml.safe_load((Path(__file__).with_name("official_jobs.yaml")).read_text())
GUIDE = ROOT / "docs" / "migrating.md"
DIFFERENCES = "### Defaults that differ from the official jobs'"
#: The cloud whose config model a job property's prefix feeds (vSphere's keep `vcenter.`).
CLOUDS = {"aws.": "aws", "openstack.": "openstack", "vcenter.": "vsphere"}


def official(job: str) -> dict[str, Any]:
    """Every property of the official job, with its default (None: it has none)."""
    facts = OFFICIAL[job]
    return {**dict.fromkeys(facts["without_default"]), **facts["defaults"]}


def shipped_spec(job: str) -> dict[str, Any]:
    """The properties of this release's job `job`, as its job.MF declares them."""
    alias = load_definition(ROOT).job_aliases[job]
    return alias_job(read_job(ROOT, alias.job), job, alias).spec.model_dump()["properties"]


def model_field(name: str):
    """The cloud config field a job property is rendered into, or None (agent, NATS, env...)."""
    from cpi.clouds import load_cloud

    for prefix, cloud in CLOUDS.items():
        if name.startswith(prefix):
            model: type[BaseModel] | None = load_cloud(cloud).Properties
            *parents, last = name.removeprefix(prefix).split(".")
            for part in parents:
                annotation = model.model_fields[part].annotation if model else None
                model = next((a for a in (annotation, *getattr(annotation, "__args__", ()))
                              if isinstance(a, type) and issubclass(a, BaseModel)), None)
            return model.model_fields[last] if model is not None else None
    return None


def meaning(value: Any) -> Any:
    """A default as the comparison sees it: none for unset or empty, numbers by value, a
    bool kept apart from the numbers 0 and 1."""
    if value in (None, [], {}):
        return None
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", float(value))
    return value


def deliberate(guide: str | None = None) -> dict[str, tuple[set[str], str]]:
    """docs/migrating.md's table of deliberate differences: property -> (jobs, reason)."""
    rows: dict[str, tuple[set[str], str]] = {}
    inside = False
    for line in (GUIDE.read_text() if guide is None else guide).splitlines():
        if line.startswith("#"):
            inside = line.startswith(DIFFERENCES)
        elif inside and (row := re.match(r"\| `([^`]+)` \|(.*)\|\s*$", line)):
            cells = [cell.strip() for cell in row.group(2).split("|")]
            rows[row.group(1)] = (set(re.findall(r"`(\w+_cpi)`", cells[0])), cells[-1])
    return rows


def differences(job: str) -> list[str]:
    """What differs from the official job's defaults, one line each."""
    spec = shipped_spec(job)
    found = []
    for name, theirs in official(job).items():
        ours = (spec.get(name) or {}).get("default")
        field = model_field(name)
        cpi = None if field is None or field.is_required() else field.get_default(call_default_factory=True)
        when_unset = ours if ours is not None else cpi
        if meaning(when_unset) != meaning(theirs):
            found.append(f"{name}: official {theirs!r}, {job} here {when_unset!r}")
        elif field is not None and theirs is not None and meaning(cpi) != meaning(theirs):
            found.append(f"{name}: official {theirs!r}, the CPI's own default (cpi.json without it) {cpi!r}")
    return found


@pytest.mark.parametrize("job", sorted(OFFICIAL))
def test_every_official_default_is_ours_or_a_listed_difference(job):
    listed = deliberate()
    unlisted = [line for line in differences(job)
                if job not in listed.get(line.split(":", 1)[0], (set(), ""))[0]]
    assert unlisted == [], (
        f"{job}: defaults that differ from the official job's and are not in docs/migrating.md's "
        f"table of deliberate differences: {unlisted}")


def test_every_listed_difference_is_real_and_has_a_reason():
    """A row stays only while the difference does: a default put back to the official one
    takes its row out of the guide."""
    for name, (jobs, reason) in deliberate().items():
        assert jobs, f"{name}: the row names no official job"
        assert len(reason) > 20, f"{name}: the row gives no reason"
        for job in jobs:
            assert name in official(job), f"{name} is no property of the official {job}"
            assert any(line.startswith(f"{name}:") for line in differences(job)), (
                f"{name} is listed as differing in {job}, but its default is the official one")


def test_a_row_exempts_its_property_in_the_jobs_it_names():
    guide = (f"{DIFFERENCES} (1 property)\n\n| property | jobs | official default | here | why |\n"
             "|---|---|---|---|---|\n"
             "| `aws.max_retries` | `aws_cpi` | 8 | 50 | a reason long enough to be one |\n\n## Next\n"
             "| `ntp` | `vsphere_cpi` | | | outside the table |\n")
    assert deliberate(guide) == {"aws.max_retries": ({"aws_cpi"}, "a reason long enough to be one")}


def test_the_facts_name_their_source():
    for job, facts in OFFICIAL.items():
        assert re.fullmatch(r"[0-9a-f]{40}", facts["commit"]), job
        assert facts["path"] == f"jobs/{job}/spec"
        assert not set(facts["defaults"]) & set(facts["without_default"]), job
