"""Switching a bosh-deployment director to this CPI is one ops file (issues #22, #25).

bosh-deployment's bosh.yml, its aws/cpi.yml, openstack/cpi.yml or vsphere/cpi.yml and each of
the companions operators add to them (tests/release/bosh-deployment/, copies with their
commit) are applied with the project's ops file (docs/ops/) last, by go-patch's rules
(tests/support/gopatch.py; with a bosh CLI at hand, the real `bosh int` is checked to give the
same manifests). The result must swap the release the official job name comes from and
nothing else (the release has jobs named aws_cpi, openstack_cpi and vsphere_cpi, so job
names, director.cpi_job and a cpi-config's types stay), and that job's templates, rendered
from the very properties the operator wrote for the official job (as BOSH renders them: only
the properties the job's spec declares reach it, with its defaults), must give a cpi.json
this CPI reads without a single unknown key.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import SecretStr

from cpi import config
from cpi.errors import CpiError
from tests.release.support import JOB_DIR, REPO, alias_spec, job_spec, render
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
    "vcenter_ip": "10.0.0.5", "vcenter_user": "administrator@vsphere.local", "vcenter_password": "vc-pw",
    "vcenter_dc": "dc1", "vcenter_cluster": "cluster1", "vcenter_ds": "^shared-ds-\\d+$", "vcenter_disks": "bosh-disks",
    "vcenter_templates": "bosh-templates", "vcenter_vms": "bosh-vms", "vcenter_rp": "bosh-rp",
    "vcenter_ca_cert": CA, "network_name": "VM Network", "second_network_name": "Second Network",
}
#: Every aws/, openstack/ and vsphere/ ops file of bosh-deployment but cpi.yml (the base),
#: openstack/cpi-secondary.yml (a second CPI: test_a_secondary_openstack_cpi_switches_alone)
#: and vsphere/cpi-secondary.yml (which adds bosh-vsphere-cpi and properties.vcenter but no
#: vsphere_cpi job, so there is no job to swap). A name with a directory is bosh-deployment's
#: (vsphere/second-network.yml names the network misc/second-network.yml adds).
COMPANIONS = {
    "aws": [[], ["iam-instance-profile.yml"], ["encrypted-disk.yml"], ["cpi-assume-role-credentials.yml"],
            ["encrypted-disk.yml", "cpi-assume-role-credentials.yml"],
            ["iam-instance-profile.yml", "cli-iam-instance-profile.yml", "s3-blobstore-instance-profile.yml",
             "use-jammy.yml"],
            ["cpi-assume-role-credentials.yml", "cli-assume-role-credentials.yml", "s3-blobstore.yml", "s3-bbr.yml",
             "use-resolute.yml"]],
    "openstack": [[], ["custom-ca.yml"], ["boot-from-volume.yml"], ["disable-readable-vm-names.yml"],
                  ["custom-ca.yml", "boot-from-volume.yml", "trusted-certs.yml", "use-jammy.yml"],
                  ["nova-networking.yml", "use-jammy-raw.yml"], ["auto-anti-affinity.yml", "use-noble-raw.yml"],
                  ["use-resolute.yml"], ["use-resolute-raw.yml"]],
    "vsphere": [[], ["resource-pool.yml"], ["custom-ca.yml"], ["misc/second-network.yml", "second-network.yml"],
                ["resource-pool.yml", "custom-ca.yml", "use-jammy.yml"],
                ["custom-ca.yml", "misc/second-network.yml", "second-network.yml", "use-resolute.yml"]],
}
#: The official job's properties of a cloud are under `<prefix>.`: the cloud's name, but
#: `vcenter` for vsphere.
PREFIX = {"vsphere": "vcenter"}
CASES = [(cloud, companions) for cloud, sets in COMPANIONS.items() for companions in sets]


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def ops_files(cloud: str, companions: list[str], ours: bool) -> list[Path]:
    """<cloud>/cpi.yml, the companions, and (when `ours`) our ops file, in order."""
    return [DEPLOYMENT / cloud / "cpi.yml",
            *(DEPLOYMENT / name if "/" in name else DEPLOYMENT / cloud / name for name in companions),
            *([OPS / f"{cloud}.yml"] if ours else [])]


def manifest(cloud: str, companions: list[str], ours: bool) -> dict:
    """bosh.yml with <cloud>/cpi.yml, the companions, and (when `ours`) our ops file."""
    document = load(DEPLOYMENT / "bosh.yml")
    for path in ops_files(cloud, companions, ours):
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


def holds(built: Any, given: Any) -> bool:
    """Whether the config as built (a model's dump, defaults filled in) holds every value the
    operator gave, where they gave it."""
    if isinstance(built, SecretStr):
        built = built.get_secret_value()
    if isinstance(given, dict):
        return isinstance(built, dict) and all(key in built and holds(built[key], value)
                                               for key, value in given.items())
    if isinstance(given, list):
        return isinstance(built, list) and len(built) == len(given) and all(map(holds, built, given))
    return built == given


@pytest.mark.parametrize(("cloud", "companions"), CASES, ids=[f"{c}+{'+'.join(x) or 'cpi'}" for c, x in CASES])
def test_one_ops_file_swaps_the_cpi_release_and_nothing_else(cloud, companions):
    before, after = manifest(cloud, companions, ours=False), manifest(cloud, companions, ours=True)
    official, job = f"bosh-{cloud}-cpi", f"{cloud}_cpi"
    names = [r["name"] for r in after["releases"]]
    assert official not in names and names.count("bosh-python-cpi") == 1
    ours = next(r for r in after["releases"] if r["name"] == "bosh-python-cpi")
    assert ours == {"name": "bosh-python-cpi", "url": VARIABLES["python_cpi_release_url"],
                    "sha1": VARIABLES["python_cpi_release_sha1"]}
    assert (job, "bosh-python-cpi") in [(j["name"], j["release"]) for j in bosh_group(after)["jobs"]]
    assert after["cloud_provider"]["template"] == {"name": job, "release": "bosh-python-cpi"}
    # the rest is as it was: job names, director.cpi_job, the operator's properties
    for document in (before, after):
        document["releases"] = [r for r in document["releases"] if r["name"] not in (official, "bosh-python-cpi")]
        for item in [*bosh_group(document)["jobs"], document["cloud_provider"]["template"]]:
            if item["release"] in (official, "bosh-python-cpi"):
                item["release"] = "the CPI's"
    assert after == before
    assert bosh_group(after)["properties"]["director"]["cpi_job"] == job


def bosh_cli() -> str | None:
    """A bosh CLI to cross-check gopatch with: $CPI_TEST_BOSH_CLI, else `bosh` on PATH."""
    return os.environ.get("CPI_TEST_BOSH_CLI") or shutil.which("bosh")


def bosh_vars(document: Any) -> dict:
    """A vars file for `bosh int` giving each ((variable)) of `document` the value
    gopatch.interpolate gives it here; `((a.b))` is key b of variable a to bosh."""
    found: dict = {}
    for name in set(re.findall(r"\(\( ?!?([-/.\w]+) ?\)\)", yaml.safe_dump(document))):
        value = VARIABLES.get(name, f"value-of-{name}")
        top, _, key = name.partition(".")
        if key:
            found.setdefault(top, {})[key] = value
        else:
            found[top] = value
    return found


@pytest.mark.parametrize(("cloud", "companions"), CASES, ids=[f"{c}+{'+'.join(x) or 'cpi'}" for c, x in CASES])
def test_the_real_bosh_int_gives_the_same_manifests(cloud, companions, tmp_path):
    """What tests/support/gopatch.py makes of bosh.yml and the ops files is what `bosh int`
    makes of them, with and without this project's ops file."""
    cli = bosh_cli()
    if cli is None:
        pytest.skip("no bosh CLI (CPI_TEST_BOSH_CLI, or bosh on PATH): the ops files are applied by "
                    "tests/support/gopatch.py alone")
    for ours in (False, True):
        files = ops_files(cloud, companions, ours)
        document = load(DEPLOYMENT / "bosh.yml")
        for path in files:
            document = gopatch.apply(document, load(path))
        given = bosh_vars(document)
        variables = tmp_path / f"vars-{ours}.yml"
        variables.write_text(yaml.safe_dump(given))
        argv = [cli, "int", str(DEPLOYMENT / "bosh.yml"), *(arg for path in files for arg in ("-o", str(path))),
                "-l", str(variables)]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        expected = manifest(cloud, companions, ours)
        # bosh int drops the `variables:` definitions whose value it was given
        expected["variables"] = [v for v in expected.get("variables", []) if v["name"] not in given]
        assert yaml.safe_load(result.stdout) == expected


def test_a_secondary_openstack_cpi_switches_alone():
    """bosh-deployment's openstack/cpi-secondary.yml adds bosh-openstack-cpi's job to a
    director of another cloud: docs/ops/openstack-secondary.yml swaps that job's release
    only, with or without the director's own CPI switched too, listing the release once."""
    def build(*ops: Path) -> dict:
        document = load(DEPLOYMENT / "bosh.yml")
        for path in (DEPLOYMENT / "aws" / "cpi.yml", DEPLOYMENT / "openstack" / "cpi-secondary.yml", *ops):
            document = gopatch.apply(document, load(path))
        return gopatch.interpolate(document, VARIABLES, default=lambda name: f"value-of-{name}")

    for ops, primary in (((OPS / "openstack-secondary.yml",), "bosh-aws-cpi"),
                         ((OPS / "aws.yml", OPS / "openstack-secondary.yml"), "bosh-python-cpi")):
        document = build(*ops)
        names = [r["name"] for r in document["releases"]]
        assert "bosh-openstack-cpi" not in names and names.count("bosh-python-cpi") == 1
        jobs = {j["name"]: j["release"] for j in bosh_group(document)["jobs"]}
        assert jobs["openstack_cpi"] == "bosh-python-cpi" and jobs["aws_cpi"] == primary
        assert document["cloud_provider"]["template"] == {"name": "aws_cpi", "release": primary}
        assert bosh_group(document)["properties"]["director"]["cpi_job"] == "aws_cpi"


@pytest.mark.parametrize(("cloud", "companions"), CASES, ids=[f"{c}+{'+'.join(x) or 'cpi'}" for c, x in CASES])
def test_the_job_reads_the_official_jobs_properties(cloud, companions, ruby, tmp_path):
    """Director and create-env alike: every property the operator set for the official job
    under `<cloud>.` is one this job declares, and the cpi.json it renders is read strictly
    (no unknown key) with the operator's values where the official CPI has them."""
    document = manifest(cloud, companions, ours=True)
    spec = alias_spec(f"{cloud}_cpi")
    prefix = PREFIX.get(cloud, cloud)
    for where, properties in (("instance group", bosh_group(document)["properties"]),
                              ("cloud_provider", document["cloud_provider"]["properties"])):
        unread = sorted(name for name in leaves(properties[prefix], prefix)
                        if not any(name == p or name.startswith(p + ".") for p in spec["properties"]))
        assert not unread, f"{where}: the job does not declare {unread}: BOSH would drop them"
        rendered = json.loads(render(JOB_DIR / "templates/cpi.json.erb", declared(properties, spec), tmp_path, ruby,
                                     spec=spec))
        raw = {**rendered, "cloud": {**rendered["cloud"], "properties": {
            **rendered["cloud"]["properties"], "validation": {"strict": True}}}}
        built = config.build(raw)
        assert built.plugin == cloud  # the job name's default: nothing in the manifest says it
        section = properties[prefix]
        if cloud == "vsphere":  # the official job's names are the config's, sections and all
            assert holds(built.properties.model_dump(), section), where
            continue
        for key, value in section.items():
            if key == "connection_options":
                assert built.properties.ca_cert == value["ca_cert"]
            elif key in ("api_key", "secret_access_key"):
                assert built.properties.model_dump()[key].get_secret_value() == value
            else:
                assert built.properties.model_dump()[key] == value, key


def test_the_local_ops_file_makes_a_director_of_bosh_yml_alone(ruby, tmp_path):
    document = gopatch.interpolate(gopatch.apply(load(DEPLOYMENT / "bosh.yml"), load(OPS / "local.yml")),
                                   VARIABLES, default=lambda name: f"value-of-{name}")
    assert ("cpi", "bosh-python-cpi") in [(j["name"], j["release"]) for j in bosh_group(document)["jobs"]]
    assert bosh_group(document)["properties"]["director"]["cpi_job"] == "cpi"
    assert document["cloud_provider"]["template"] == {"name": "cpi", "release": "bosh-python-cpi"}
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
    spec = alias_spec("openstack_cpi")
    rendered = json.loads(render(JOB_DIR / "templates/cpi.json.erb", declared(properties, spec), tmp_path, ruby,
                                 spec=spec))
    assert rendered["cloud"]["properties"]["openstack"]["tenant"] == "value-of-openstack_tenant"
    with pytest.raises(CpiError, match="tenant is Keystone v2's project, and Keystone v2 is gone from OpenStack"):
        config.build(rendered)


@pytest.mark.parametrize("cloud", ["aws", "openstack", "vsphere"])
def test_bosh_deployments_cloud_config_is_read_unchanged(cloud):
    """The cloud-config an operator already has (bosh-deployment's <cloud>/cloud-config.yml)
    passes `cpi validate`'s checks, which report any unknown key as an error."""
    from cpi.clouds import load_cloud
    from cpi.operator import cloud_config

    document = gopatch.interpolate(load(DEPLOYMENT / cloud / "cloud-config.yml"),
                                   {"az": "z1", "internal_cidr": "10.0.0.0/24", "internal_gw": "10.0.0.1",
                                    "subnet_id": "subnet-0abc", "net_id": "net-1", "vcenter_cluster": "cluster1",
                                    "network_name": "VM Network"})
    findings, items = cloud_config.check(document, load_cloud(cloud))
    assert [f for f in findings if f.severity == "error"] == []
    assert {item.kind for item in items} >= {"vm_type", "network", "az"}
