"""Switching a bosh-deployment director to this CPI is one ops file (issue #22).

bosh-deployment's bosh.yml, its aws/cpi.yml or openstack/cpi.yml and the companions
operators add to them (tests/release/bosh-deployment/, copies with their commit) are
applied with the project's ops file (docs/ops/) last, by go-patch's rules
(tests/support/gopatch.py). The result must swap the CPI release and job and nothing else,
and this job's templates, rendered from the very properties the operator wrote for the
official job (as BOSH renders them: only the properties the job's spec declares reach
it), must give a cpi.json this CPI reads without a single unknown key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from cpi import config, validation
from cpi.errors import CpiError
from tests.release.support import JOB_DIR, REPO, job_spec, render
from tests.support import gopatch

DEPLOYMENT = Path(__file__).with_name("bosh-deployment")
OPS = REPO / "docs" / "ops"
CA = "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n"
VARIABLES = {
    "internal_ip": "10.0.0.6", "region": "eu-west-1", "az": "eu-west-1a", "access_key_id": "AKIATEST",
    "secret_access_key": "s3cr3t", "default_key_name": "bosh", "default_security_groups": ["bosh"],
    "auth_url": "https://keystone.example.com:5000/v3", "openstack_username": "admin", "openstack_password": "pw",
    "openstack_domain": "Default", "openstack_project": "bosh", "openstack_ca_cert": CA,
    "kms_key_arn": "arn:aws:kms:eu-west-1:123456789012:key/test", "role_arn": "arn:aws:iam::123456789012:role/bosh",
    "python_cpi_release_url": "file:///tmp/bosh-python-cpi-0.1.0.tgz", "python_cpi_release_sha1": "0" * 40,
}
COMPANIONS = {
    "aws": [[], ["iam-instance-profile.yml"], ["encrypted-disk.yml"], ["cpi-assume-role-credentials.yml"],
            ["encrypted-disk.yml", "cpi-assume-role-credentials.yml"]],
    "openstack": [[], ["custom-ca.yml"], ["boot-from-volume.yml"], ["disable-readable-vm-names.yml"],
                  ["custom-ca.yml", "boot-from-volume.yml", "trusted-certs.yml"],
                  ["nova-networking.yml"], ["auto-anti-affinity.yml"]],
}
CASES = [(cloud, companions) for cloud, sets in COMPANIONS.items() for companions in sets]


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def manifest(cloud: str, companions: list[str], ours: bool) -> dict:
    """bosh.yml with <cloud>/cpi.yml, the companions, and (when `ours`) our ops file."""
    files = [DEPLOYMENT / cloud / "cpi.yml", *(DEPLOYMENT / cloud / name for name in companions)]
    document = load(DEPLOYMENT / "bosh.yml")
    for path in [*files, *([OPS / f"{cloud}.yml"] if ours else [])]:
        document = gopatch.apply(document, load(path))
    return gopatch.interpolate(document, VARIABLES, default=lambda name: f"value-of-{name}")


def bosh_group(document: dict) -> dict:
    return next(group for group in document["instance_groups"] if group["name"] == "bosh")


def declared(properties: dict, spec: dict) -> dict:
    """What BOSH hands the job: only the properties its spec declares (nested, as set)."""
    found: dict = {}
    for name in spec["properties"]:
        node: Any = properties
        for part in name.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            continue
        target = found
        *parents, last = name.split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = node
    return found


def leaves(node: Any, prefix: str) -> set[str]:
    if isinstance(node, dict) and node:
        return set().union(*(leaves(v, f"{prefix}.{k}") for k, v in node.items()))
    return {prefix}


@pytest.mark.parametrize(("cloud", "companions"), CASES, ids=[f"{c}+{'+'.join(x) or 'cpi'}" for c, x in CASES])
def test_one_ops_file_swaps_the_cpi_and_nothing_else(cloud, companions):
    before, after = manifest(cloud, companions, ours=False), manifest(cloud, companions, ours=True)
    official = f"bosh-{cloud}-cpi"
    assert [r["name"] for r in after["releases"]] == \
        [("bosh-python-cpi" if r["name"] == official else r["name"]) for r in before["releases"]]
    ours = next(r for r in after["releases"] if r["name"] == "bosh-python-cpi")
    assert ours == {"name": "bosh-python-cpi", "url": VARIABLES["python_cpi_release_url"],
                    "sha1": VARIABLES["python_cpi_release_sha1"]}
    jobs = [(j["name"], j["release"]) for j in bosh_group(after)["jobs"]]
    assert ("cpi", "bosh-python-cpi") in jobs and f"{cloud}_cpi" not in [name for name, _ in jobs]
    assert after["cloud_provider"]["template"] == {"name": "cpi", "release": "bosh-python-cpi"}
    props_before, props_after = bosh_group(before)["properties"], bosh_group(after)["properties"]
    assert props_after["director"]["cpi_job"] == "cpi"
    # the operator's blocks stay as they were; only which cloud the job drives is added
    assert props_after[cloud] == props_before[cloud]
    assert after["cloud_provider"]["properties"][cloud] == before["cloud_provider"]["properties"][cloud]
    for document in (before, after):
        document["releases"] = [r for r in document["releases"] if r["name"] not in (official, "bosh-python-cpi")]
        group = bosh_group(document)
        group["jobs"] = [j for j in group["jobs"] if j["name"] not in (f"{cloud}_cpi", "cpi")]
        group["properties"]["director"].pop("cpi_job")
        group["properties"].pop("cloud", None)
        document["cloud_provider"].pop("template")
        document["cloud_provider"]["properties"].pop("cloud", None)
    assert after == before


@pytest.mark.parametrize(("cloud", "companions"), CASES, ids=[f"{c}+{'+'.join(x) or 'cpi'}" for c, x in CASES])
def test_the_job_reads_the_official_jobs_properties(cloud, companions, ruby, tmp_path, monkeypatch):
    """Director and create-env alike: every property the operator set for the official job
    under `<cloud>.` is one this job declares, and the cpi.json it renders is read strictly
    (no unknown key) with the operator's values where the official CPI has them."""
    document = manifest(cloud, companions, ours=True)
    spec = job_spec()
    monkeypatch.setattr(validation, "strict", True)
    for where, properties in (("instance group", bosh_group(document)["properties"]),
                              ("cloud_provider", document["cloud_provider"]["properties"])):
        unread = sorted(name for name in leaves(properties[cloud], cloud)
                        if not any(name == p or name.startswith(p + ".") for p in spec["properties"]))
        assert not unread, f"{where}: the job does not declare {unread}: BOSH would drop them"
        rendered = json.loads(render(JOB_DIR / "templates/cpi.json.erb", declared(properties, spec), tmp_path, ruby))
        raw = {**rendered, "cloud": {**rendered["cloud"], "properties": {
            **rendered["cloud"]["properties"], "validation": {"strict": True}}}}
        built = config.build(raw)
        assert built.plugin == cloud
        section = properties[cloud]
        for key, value in section.items():
            if key == "connection_options":
                assert built.properties.ca_cert == value["ca_cert"]
            elif key in ("api_key", "secret_access_key"):
                assert built.properties.model_dump()[key].get_secret_value() == value
            else:
                assert built.properties.model_dump()[key] == value, key


def test_the_local_ops_file_makes_a_director_of_bosh_yml_alone(ruby, tmp_path, monkeypatch):
    document = gopatch.interpolate(gopatch.apply(load(DEPLOYMENT / "bosh.yml"), load(OPS / "local.yml")),
                                   VARIABLES, default=lambda name: f"value-of-{name}")
    assert ("cpi", "bosh-python-cpi") in [(j["name"], j["release"]) for j in bosh_group(document)["jobs"]]
    assert bosh_group(document)["properties"]["director"]["cpi_job"] == "cpi"
    assert document["cloud_provider"]["template"] == {"name": "cpi", "release": "bosh-python-cpi"}
    monkeypatch.setattr(validation, "strict", True)
    from cpi.clouds.local.props import VMCloudProperties

    vms = next(pool for pool in document["resource_pools"] if pool["name"] == "vms")
    assert VMCloudProperties.model_validate(vms["cloud_properties"]).ram == 4096
    properties = document["cloud_provider"]["properties"]
    rendered = json.loads(render(JOB_DIR / "templates/cpi.json.erb", declared(properties, job_spec()), tmp_path, ruby))
    assert config.build(rendered).plugin == "local"


@pytest.mark.parametrize(("document", "ops", "expected"), [
    ({"a": [{"name": "x", "v": 1}]}, [{"type": "replace", "path": "/a/name=x/v", "value": 2}],
     {"a": [{"name": "x", "v": 2}]}),
    ({"a": []}, [{"type": "replace", "path": "/a/name=y?/v", "value": 3}], {"a": [{"name": "y", "v": 3}]}),
    ({}, [{"type": "replace", "path": "/b?/c/-", "value": 1}], {"b": {"c": [1]}}),
    ({"a": {"b": 1}}, [{"type": "remove", "path": "/a/b"}], {"a": {}}),
    ({"a": {}}, [{"type": "remove", "path": "/a/b?"}], {"a": {}}),
    ({"a": [1, 2, 3]}, [{"type": "replace", "path": "/a/-1", "value": 9}], {"a": [1, 2, 9]}),
    ({"a~b/c": 1}, [{"type": "replace", "path": "/a~0b~1c", "value": 2}], {"a~b/c": 2}),
])
def test_go_patch_rules(document, ops, expected):
    assert gopatch.apply(document, ops) == expected


@pytest.mark.parametrize(("document", "op", "error"), [
    ({"a": {}}, {"type": "replace", "path": "/a/b/c", "value": 1}, "no key 'b'"),
    ({"a": []}, {"type": "remove", "path": "/a/name=x"}, "no item with name=x"),
    ({"a": [{"name": "x"}, {"name": "x"}]}, {"type": "remove", "path": "/a/name=x"}, "matches 2 items"),
    ({"a": 1}, {"type": "move", "path": "/a"}, "not supported"),
    ({"a": [1]}, {"type": "replace", "path": "/a/1", "value": 2}, "out of range"),
])
def test_go_patch_refuses_what_it_cannot_apply(document, op, error):
    with pytest.raises(gopatch.PatchError, match=error):
        gopatch.apply(document, [op])


def test_keystone_v2_renders_and_is_refused_saying_why(ruby, tmp_path):
    """bosh-deployment's keystone-v2.yml: the manifest still applies and the job renders
    its tenant, but Keystone v2 is gone from OpenStack, and the config says so."""
    document = manifest("openstack", ["keystone-v2.yml"], ours=True)
    properties = bosh_group(document)["properties"]
    assert properties["openstack"]["tenant"] == "value-of-openstack_tenant"
    rendered = json.loads(render(JOB_DIR / "templates/cpi.json.erb", declared(properties, job_spec()), tmp_path, ruby))
    assert rendered["cloud"]["properties"]["openstack"]["tenant"] == "value-of-openstack_tenant"
    with pytest.raises(CpiError, match="tenant is Keystone v2's project, and Keystone v2 is gone from OpenStack"):
        config.build(rendered)


@pytest.mark.parametrize("cloud", ["aws", "openstack"])
def test_bosh_deployments_cloud_config_is_read_unchanged(cloud):
    """The cloud-config an operator already has (bosh-deployment's <cloud>/cloud-config.yml)
    passes `cpi validate`'s checks, which report any unknown key as an error."""
    from cpi.clouds import load_cloud
    from cpi.operator import cloud_config

    document = gopatch.interpolate(load(DEPLOYMENT / cloud / "cloud-config.yml"),
                                   {"az": "z1", "internal_cidr": "10.0.0.0/24", "internal_gw": "10.0.0.1",
                                    "subnet_id": "subnet-0abc", "net_id": "net-1"})
    findings, items = cloud_config.check(document, load_cloud(cloud))
    assert [f for f in findings if f.severity == "error"] == []
    assert {item.kind for item in items} >= {"vm_type", "network", "az"}
