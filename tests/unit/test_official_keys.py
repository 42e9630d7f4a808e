"""docs/migrating.md's tables of the official CPIs' keys hold (#22, #25): every job property
of `aws_cpi`, `openstack_cpi` and `vsphere_cpi` is a property of this CPI's job under the same
name (and each `vcenter.*` one a key of the vsphere config model without `vcenter.`), every
cloud_properties key of bosh-aws-cpi, bosh-openstack-cpi and bosh-vsphere-cpi is a key of this
CPI's model for the same place, and the counts in the headings are the rows' — so the
key-by-key count the guide gives is what the code accepts."""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from cpi.clouds.aws import props as aws
from cpi.clouds.openstack import props as openstack
from cpi.clouds.vsphere import job_config
from cpi.clouds.vsphere import props as vsphere
from cpi.models import Network

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "migrating.md"

MODELS: dict[tuple[str, str], type[BaseModel]] = {
    ("bosh-aws-cpi", "vm_type"): aws.VMCloudProperties,
    ("bosh-aws-cpi", "disk_type"): aws.DiskCloudProperties,
    ("bosh-aws-cpi", "network"): aws.NetworkCloudProperties,
    ("bosh-aws-cpi", "stemcell"): aws.StemcellCloudProperties,
    ("bosh-openstack-cpi", "vm_type"): openstack.VMCloudProperties,
    ("bosh-openstack-cpi", "disk_type"): openstack.DiskCloudProperties,
    ("bosh-openstack-cpi", "network"): openstack.NetworkCloudProperties,
    ("bosh-openstack-cpi", "stemcell"): openstack.StemcellCloudProperties,
    ("bosh-vsphere-cpi", "vm_type"): vsphere.VMCloudProperties,
    ("bosh-vsphere-cpi", "disk_type"): vsphere.DiskCloudProperties,
    ("bosh-vsphere-cpi", "network"): vsphere.NetworkCloudProperties,
    ("bosh-vsphere-cpi", "managed network"): vsphere.ManagedNetworkCloudProperties,
}


def tables() -> dict[str, tuple[int, list[str]]]:
    """Each `###` heading of the guide: the count it states and the keys of its rows."""
    found: dict[str, tuple[int, list[str]]] = {}
    heading = None
    for line in GUIDE.read_text().splitlines():
        if line.startswith("### "):
            heading = line[4:]
            count = re.search(r"\((\d+) (?:properties|keys?)\b", heading)
            found[heading] = (int(count.group(1)) if count else -1, [])
        elif heading and (row := re.match(r"\| `([^`]+)`( \(manifest\))? \|", line)):
            found[heading][1].append(row.group(1) + (" (manifest)" if row.group(2) else ""))
    return found


def model_of(annotation) -> type[BaseModel] | None:
    """The model a field holds, through Optional and list."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) in (typing.Union, list):
        for arg in typing.get_args(annotation):
            if (found := model_of(arg)) is not None:
                return found
    return None


def accepts(model: type[BaseModel], dotted: str) -> bool:
    current: type[BaseModel] | None = model
    for part in dotted.split("."):
        if current is None or part not in current.model_fields:
            return False
        current = model_of(current.model_fields[part].annotation)
    return True


def test_the_counts_in_the_headings_are_the_rows():
    for heading, (count, keys) in tables().items():
        assert count == len(keys), f"{heading}: says {count}, has {len(keys)} rows"
        assert len(set(keys)) == len(keys), f"{heading}: a key twice"


def test_every_official_job_property_is_a_property_of_this_job():
    spec = yaml.safe_load((ROOT / "jobs" / "cpi" / "spec").read_text())["properties"]
    found = tables()
    for job in ("`aws_cpi` (34 properties)", "`openstack_cpi` (41 properties)", "`vsphere_cpi` (45 properties)"):
        missing = [key for key in found[job][1] if key not in spec]
        assert missing == [], f"{job}: not in jobs/cpi/spec: {missing}"


def test_every_official_vsphere_job_property_is_a_key_of_the_config():
    """The job renders `vcenter.<key>` as cloud.properties.vsphere.<key> (and the official
    job's top-level `plugins` as cloud.properties.vsphere.plugins); the agent, NATS and proxy
    properties every official job has go where they go for every cloud."""
    rows = tables()["`vsphere_cpi` (45 properties)"][1]
    vcenter = [key for key in rows if key.startswith("vcenter.")]
    assert len(vcenter) == 34
    assert [key for key in [*vcenter, "plugins"]
            if not accepts(job_config.VsphereProperties, key.removeprefix("vcenter."))] == []


@pytest.mark.parametrize(("cpi", "place"), sorted(MODELS))
def test_every_official_cloud_properties_key_is_a_key_of_the_model(cpi, place):
    model = MODELS[(cpi, place)]
    (rows,) = [keys for heading, (_, keys) in tables().items() if heading.startswith(f"{cpi}: {place} ")]
    assert rows
    for key in rows:
        if key.endswith(" (manifest)"):
            assert key.removesuffix(" (manifest)") in Network.model_fields, key
        else:
            assert accepts(model, key), f"{cpi} {place} key {key} is not a key of {model.__name__}"


def test_the_key_by_key_count():
    """The figures the closing notes of #22 and #25 give, from the tables (vsphere: the job,
    vm_type, disk_type, network and managed network's create_network keys)."""
    counts = {heading: count for heading, (count, _) in tables().items()}
    aws_total = sum(c for h, c in counts.items() if h.startswith(("`aws_cpi`", "bosh-aws-cpi")))
    openstack_total = sum(c for h, c in counts.items() if h.startswith(("`openstack_cpi`", "bosh-openstack-cpi")))
    vsphere_total = sum(c for h, c in counts.items() if h.startswith(("`vsphere_cpi`", "bosh-vsphere-cpi")))
    assert (aws_total, openstack_total) == (34 + 29 + 6 + 4 + 12, 41 + 10 + 1 + 3 + 19)
    assert vsphere_total == 45 + 23 + 3 + 1 + 5
