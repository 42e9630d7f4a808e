"""The job templates, rendered with Ruby's ERB as bosh-cli renders them: cpi.json in the
shape cpi/config.py reads, unset properties left out, and a bin/cpi that finds its
packages in the director's wiped environment and under create-env alike.

The job spec (jobs/cpi/spec) is the one list of job properties. These tests hold the
template and the CPI's config models to it: every rendered key must be one the models
accept, every model field should have a spec property, and spec defaults must equal the
models' defaults (those tests skip, saying why, while a cloud's model is not available)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import typing
from pathlib import Path

import pytest

from cpi.warm import where
from tests.release.support import JOB_DIR, REPO, RenderError, alias_spec, job_spec, render, render_job, write

CPI_JSON = JOB_DIR / "templates/cpi.json.erb"
CPI_ERB = JOB_DIR / "templates/cpi.erb"
BUILTIN_CLOUDS = ("aws", "local", "openstack", "vsphere")
#: The job properties of a cloud are `<prefix>.<key>`: the cloud's name, but `vcenter` for
#: vsphere, the official vsphere_cpi job's name.
PREFIX = {"vsphere": "vcenter"}
DIRECTOR_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"

# A value for every property, valid for the models, for the "everything set" renders.
SAMPLES = {
    "aws.region": "eu-west-1",
    "aws.ec2_endpoint": "https://ec2.example.test",
    "aws.elb_endpoint": "https://elb.example.test",
    "aws.sts_endpoint": "https://sts.example.test",
    "aws.ebs_endpoint": "https://ebs.example.test",
    "aws.dualstack": True,
    "aws.ca_cert_file": "/etc/ssl/certs/ca-certificates.crt",
    "aws.credentials_source": "static",
    "aws.default_security_groups": ["sg-0123", "bosh"],
    "aws.encrypted": True,
    "aws.metadata_options": {"http_tokens": "required", "http_put_response_hop_limit": 2},
    "aws.instance_type_families": ["m6i", "c6i"],
    "aws.max_retries": 3,
    "aws.retry_budget_seconds": 30.0,
    "aws.connect_timeout": 5.0,
    "aws.read_timeout": 20.0,
    "aws.vm_wait_timeout": 100.0,
    "aws.volume_wait_timeout": 100.0,
    "aws.volume_in_use_timeout": 100.0,
    "aws.image_wait_timeout": 100.0,
    "aws.slim_models": False,
    "aws.lock_dir": "/var/vcap/data/cpi/locks",
    "aws.stemcell.tags": {"owner": "ops", "cost-center": 42},
    "openstack.auth_url": "https://keystone.example.test/v3",
    "openstack.endpoint_type": "internalURL",
    "openstack.endpoint_overrides": {"compute": "https://nova.example.test:8774/v2.1"},
    "openstack.connect_timeout": 5.0,
    "openstack.read_timeout": 30.0,
    "openstack.stemcell_public_visibility": True,
    "openstack.max_retries": 3,
    "openstack.ssl_verify": False,
    "openstack.default_security_groups": ["default", "bosh"],
    "openstack.boot_from_volume": True,
    "openstack.config_drive": "cdrom",
    "openstack.use_dhcp": False,
    "openstack.human_readable_vm_names": True,
    "openstack.ignore_server_availability_zone": True,
    "openstack.state_timeout": 60.0,
    "openstack.wait_resource_poll_interval": 1.0,
    "openstack.retry_budget_seconds": 30.0,
    "local.state_dir": "/var/vcap/store/local-cloud",
    "local.agent_command": ["/usr/local/bin/bosh-agent"],
    "local.agent_boot_timeout": 2.5,
    "local.lock_timeout": 30.0,
    "local.current_vm_cid": "vm-self",
    "local.faults": [{"method": "create_vm", "times": 1, "error": "Bosh::Clouds::VMCreationFailed"}],
    "agent.mbus": "https://mbus:secret@0.0.0.0:6868",
    "agent.blobstore.provider": "local",
    "agent.blobstore.options": {"blobstore_path": "/var/vcap/micro_bosh/data/cache"},
    "ntp": ["0.pool.ntp.org", "1.pool.ntp.org"],
}


def nest(flat: dict) -> dict:
    """{"a.b": 1} -> {"a": {"b": 1}}: manifest properties as an operator writes them."""
    nested: dict = {}
    for dotted, value in flat.items():
        *parents, last = dotted.split(".")
        node = nested
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return nested


def sample(name: str):
    return SAMPLES.get(name, f"sample-{name.rsplit('.', 1)[1].replace('_', '-')}")


def prefix(cloud: str) -> str:
    return PREFIX.get(cloud, cloud)


def keys_of(cloud: str) -> list[str]:
    start = prefix(cloud) + "."
    return sorted(name[len(start) :] for name in job_spec()["properties"] if name.startswith(start))


def everything_set(cloud: str) -> dict:
    flat = {f"{prefix(cloud)}.{key}": sample(f"{prefix(cloud)}.{key}") for key in keys_of(cloud)}
    flat.update({k: SAMPLES[k] for k in ("agent.mbus", "agent.blobstore.provider", "agent.blobstore.options", "ntp")})
    flat["cloud.plugin"] = cloud
    return nest(flat)


@pytest.fixture
def cpi_json(ruby, tmp_path):
    def rendered(properties: dict) -> dict:
        return json.loads(render(CPI_JSON, properties, tmp_path, ruby))

    return rendered


def test_every_property_is_described():
    for name, definition in job_spec()["properties"].items():
        assert (definition or {}).get("description"), f"property {name} has no description"


def test_minimal_local_config(cpi_json):
    config = cpi_json({"cloud": {"plugin": "local"}, "agent": {"mbus": "https://mbus:pw@0.0.0.0:6868"}})
    assert config == {
        "cloud": {
            "plugin": "local",
            "properties": {
                "local": {"agent_boot_timeout": 10.0, "lock_timeout": 300.0},
                "agent": {"ntp": [], "mbus": "https://mbus:pw@0.0.0.0:6868"},
            },
        }
    }


def test_unset_properties_are_left_out_never_null(cpi_json):
    config = cpi_json({"cloud": {"plugin": "aws"}, "aws": {"region": "us-east-1"}})
    aws = config["cloud"]["properties"]["aws"]
    defaults = {
        name.split(".", 1)[1]
        for name, d in job_spec()["properties"].items()
        if name.startswith("aws.") and "default" in d
    }
    assert set(aws) == {"region"} | defaults
    assert "access_key_id" not in aws and "mbus" not in config["cloud"]["properties"]["agent"]

    def no_nulls(value):
        if isinstance(value, dict):
            return all(no_nulls(v) for v in value.values())
        if isinstance(value, list):
            return all(no_nulls(v) for v in value)
        return value is not None

    assert no_nulls(config)


@pytest.mark.parametrize("cloud", BUILTIN_CLOUDS)
def test_every_spec_property_of_a_cloud_is_rendered_with_its_type(cpi_json, cloud):
    """jobs/cpi/spec and the key lists in cpi.json.erb agree: all set -> all rendered."""
    config = cpi_json(everything_set(cloud))
    section = config["cloud"]["properties"][cloud]
    assert set(section) == {key.split(".")[0] for key in keys_of(cloud)}  # a.b nests, as the official jobs do
    for key in keys_of(cloud):
        value = section
        for part in key.split("."):
            value = value[part]
        assert value == sample(f"{prefix(cloud)}.{key}")
    assert set(config["cloud"]["properties"]) == {cloud, "agent"}  # only the chosen cloud
    assert config["cloud"]["properties"]["agent"] == {
        "ntp": SAMPLES["ntp"],
        "mbus": SAMPLES["agent.mbus"],
        "blobstore": {"provider": "local", "options": SAMPLES["agent.blobstore.options"]},
    }


def test_plugin_is_required_with_a_clear_message(cpi_json):
    with pytest.raises(RenderError, match=r"property cloud\.plugin is required: one of aws, openstack, local"):
        cpi_json({"aws": {"region": "us-east-1"}})


def test_third_party_plugin_gets_cloud_properties_verbatim(cpi_json):
    config = cpi_json({"cloud": {"plugin": "acme", "properties": {"zone": "z1", "quota": {"vms": 3}}}})
    assert config["cloud"]["properties"]["acme"] == {"zone": "z1", "quota": {"vms": 3}}


def test_mbus_from_director_nats_when_agent_mbus_is_unset(cpi_json):
    nats = {"address": "10.0.0.6", "user": "nats", "password": "pw"}
    config = cpi_json({"cloud": {"plugin": "local"}, "nats": nats})
    assert config["cloud"]["properties"]["agent"]["mbus"] == "nats://nats:pw@10.0.0.6:4222"
    config = cpi_json({"cloud": {"plugin": "local"}, "nats": {"address": "10.0.0.6", "port": 4223}})
    assert config["cloud"]["properties"]["agent"]["mbus"] == "nats://10.0.0.6:4223"
    config = cpi_json({"cloud": {"plugin": "local"}, "nats": nats, "agent": {"mbus": "nats://explicit:4222"}})
    assert config["cloud"]["properties"]["agent"]["mbus"] == "nats://explicit:4222"
    # the official CPIs' agent.nats.address: where the agents reach NATS, before nats.address
    config = cpi_json({"cloud": {"plugin": "local"}, "nats": nats, "agent": {"nats": {"address": "10.0.0.7"}}})
    assert config["cloud"]["properties"]["agent"]["mbus"] == "nats://nats:pw@10.0.0.7:4222"
    config = cpi_json({"cloud": {"plugin": "local"}, "agent": {"nats": {"address": "10.0.0.7"}}})
    assert config["cloud"]["properties"]["agent"]["mbus"] == "nats://10.0.0.7:4222"


@pytest.mark.parametrize(("job", "ntp"), [("aws_cpi", ["0.pool.ntp.org", "1.pool.ntp.org"]), ("openstack_cpi", []),
                                          ("vsphere_cpi", ["0.pool.ntp.org", "1.pool.ntp.org"])])
def test_each_alias_renders_its_official_jobs_agent_defaults(ruby, tmp_path, job, ntp):
    """The official jobs differ on ntp and nats.user (aws_cpi and vsphere_cpi default them,
    openstack_cpi does not): each alias renders its own, as the official job of its name."""
    spec = alias_spec(job)
    nats = {"address": "10.0.0.6", "password": "pw"}
    agent = json.loads(render(CPI_JSON, {"nats": nats}, tmp_path, ruby, spec))["cloud"]["properties"]["agent"]
    assert agent["ntp"] == ntp
    assert agent["mbus"] == ("nats://10.0.0.6:4222" if job == "openstack_cpi" else "nats://nats:pw@10.0.0.6:4222")


def test_debug_api_version(cpi_json):
    config = cpi_json({"cloud": {"plugin": "local"}, "debug": {"cpi": {"api_version": 1}}})
    assert config["cloud"]["properties"]["debug"] == {"cpi": {"api_version": 1}}


# --- agreement with the CPI's config models ---------------------------------------------------------


MODEL_CLASSES = {"aws": "AwsProperties", "openstack": "OpenStackProperties", "local": "LocalProperties",
                 "vsphere": "VsphereProperties"}


def properties_model(cloud: str):
    """The cloud's config model: `Properties` of its registered Cloud class, or, while the
    cloud class is still being written, the model in cpi/clouds/<cloud>/props.py."""
    try:
        from cpi.clouds import load_cloud

        return load_cloud(cloud).Properties
    except Exception as exc:  # noqa: BLE001 - ImportError, a CpiError "not available", a half-written module...
        reason = f"{type(exc).__name__}: {exc}"
    try:
        import importlib

        return getattr(importlib.import_module(f"cpi.clouds.{cloud}.props"), MODEL_CLASSES[cloud])
    except Exception:  # noqa: BLE001 - whatever failed, the model is not there: skip, saying why
        pytest.skip(f"the {cloud} cloud's Properties model is not available yet ({reason})")


def submodel(model, key: str):
    """The model field `key` of `model` holds (through Optional), or None."""
    from pydantic import BaseModel

    if key not in model.model_fields:
        return None
    annotation = model.model_fields[key].annotation
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def field_at(model, dotted: str):
    """The field a dotted key (`nsxt.host`) names in `model`, or None."""
    *parents, last = dotted.split(".")
    for part in parents:
        model = submodel(model, part)
        if model is None:
            return None
    return model.model_fields.get(last)


#: Fields of a cloud's config whose job property is not `<prefix>.<field>`: the official
#: vsphere_cpi job's top-level `plugins`.
TOP_LEVEL = {"vsphere": {"plugins"}}


@pytest.mark.parametrize("cloud", BUILTIN_CLOUDS)
def test_every_rendered_key_is_accepted_by_the_model(cpi_json, cloud):
    model = properties_model(cloud)
    section = cpi_json(everything_set(cloud))["cloud"]["properties"][cloud]
    unknown = sorted(set(section) - set(model.model_fields))
    unknown += sorted(f"{key}.{sub}" for key, value in section.items() if isinstance(value, dict)
                      and (inner := submodel(model, key)) is not None for sub in set(value) - set(inner.model_fields))
    assert not unknown, (
        f"cpi.json.erb renders {cloud} keys the model rejects: {unknown} (rename or drop them in jobs/cpi)"
    )


@pytest.mark.parametrize("cloud", BUILTIN_CLOUDS)
def test_every_model_field_is_a_job_property(cloud):
    model = properties_model(cloud)
    spec = job_spec()["properties"]
    keys = keys_of(cloud)
    missing = sorted(set(model.model_fields) - {key.split(".")[0] for key in keys}
                     - {key for key in TOP_LEVEL.get(cloud, ()) if key in spec})
    # a section the job declares key by key (connection_options.ca_cert): every key of its model
    for section in sorted({key.split(".")[0] for key in keys if "." in key}):
        inner = submodel(model, section)
        assert inner is not None, f"{prefix(cloud)}.{section}.* is declared, but {section} is not a section"
        missing += sorted(f"{section}.{sub}" for sub in inner.model_fields if f"{section}.{sub}" not in keys)
    assert not missing, (
        f"{cloud} config fields without a job property {prefix(cloud)}.<field> in jobs/cpi/spec: {missing}")


@pytest.mark.parametrize("cloud", BUILTIN_CLOUDS)
def test_spec_defaults_equal_the_model_defaults(cloud):
    model = properties_model(cloud)
    spec = job_spec()["properties"]
    for key in keys_of(cloud):
        definition = spec[f"{prefix(cloud)}.{key}"] or {}
        if "default" not in definition:
            continue
        field = field_at(model, key)
        assert field is not None, f"{prefix(cloud)}.{key} has a spec default but is no key of the model"
        assert not field.is_required(), f"{prefix(cloud)}.{key} has a spec default but no model default"
        default = field.get_default(call_default_factory=True)
        assert definition["default"] == default, (
            f"{prefix(cloud)}.{key}: spec default {definition['default']!r}, model {default!r}"
        )


REALISTIC = {
    "local": lambda tmp: {"local": {"state_dir": str(tmp / "state"), "faults": SAMPLES["local.faults"]}},
    "aws": lambda tmp: {
        "aws": {
            "region": "eu-west-1",
            "access_key_id": "AKIAEXAMPLE",
            "secret_access_key": "secret",
            "default_key_name": "bosh",
            "default_security_groups": ["bosh"],
            "metadata_options": {"http_tokens": "required"},
        }
    },
    "openstack": lambda tmp: {
        "openstack": {
            "auth_url": "https://keystone.example.test/v3",
            "username": "admin",
            "api_key": "pw",
            "domain": "Default",
            "project": "bosh",
            "default_key_name": "bosh",
            "default_security_groups": ["bosh"],
            "config_drive": "cdrom",
        }
    },
    "vsphere": lambda tmp: {"vcenter": VCENTER},
}


@pytest.mark.parametrize("cloud", BUILTIN_CLOUDS)
def test_rendered_config_passes_the_cpi_config_validation(cpi_json, cloud, tmp_path):
    from cpi import config
    from cpi.clouds import load_cloud

    try:
        load_cloud(cloud)
    except Exception as exc:  # noqa: BLE001 - whatever failed is named in the skip
        pytest.skip(f"the {cloud} cloud is not registered yet ({type(exc).__name__}: {exc})")

    properties = {
        "cloud": {"plugin": cloud},
        **REALISTIC[cloud](tmp_path),
        **nest({k: SAMPLES[k] for k in ("agent.mbus", "ntp")}),
    }
    built = config.build(cpi_json(properties))
    assert built.plugin == cloud
    assert built.agent.mbus == SAMPLES["agent.mbus"]
    assert built.agent.ntp == SAMPLES["ntp"]


# --- vSphere: the official vsphere_cpi job's properties ----------------------------------------

PEM = "-----BEGIN CERTIFICATE-----\nMIIBvsphere\n-----END CERTIFICATE-----\n"
#: What an operator of the official vsphere_cpi job writes under `vcenter` (bosh-deployment's
#: vsphere/cpi.yml, resource-pool.yml and custom-ca.yml, and the NSX and vmx settings),
#: with a secret of its own for each secret.
VCENTER = {
    "address": "10.0.0.5",
    "user": "administrator@vsphere.local",
    "password": "vc-Secret-1",
    "datacenters": [{
        "name": "dc1", "vm_folder": "prod/vms", "template_folder": "prod/templates", "disk_path": "prod-disks",
        "datastore_pattern": r"\Aprod-ds\d+\z", "persistent_datastore_pattern": "^prod-pers",
        "clusters": [{"cl1": {"resource_pool": "bosh-rp"}}, "cl2",
                     {"cl3": {"host_group": {"name": "hg", "drs_rule": "MUST"}}, "cl4": {"resource_pool": "a/b"}}]}],
    "connection_options": {"ca_cert": PEM},
    "enable_human_readable_name": True,
    "vmx_options": {"disk.enableUUID": "1", "sched.mem.maxmemctl": 1330, "isolation.tools.copy.disable": True},
    "nsx": {"address": "nsx.example.test", "user": "nsx-admin", "password": "nsx-Secret-2"},
    "nsxt": {"host": "nsxt.example.test", "username": "nsxt-admin", "password": "nsxt-Secret-3", "ca_cert": PEM,
             "use_policy_api": True, "default_vif_type": "PARENT",
             "auth_certificate": PEM, "auth_private_key": "-----BEGIN PRIVATE KEY-----\nnsxt-Key-4\n-----END "
             "PRIVATE KEY-----\n"},
}


def vsphere_config(cpi_json, vcenter: dict, **more) -> dict:
    return cpi_json({"cloud": {"plugin": "vsphere"}, "vcenter": vcenter,
                     "agent": {"mbus": "nats://nats:nats-pw@10.0.0.6:4222"}, **more})


def test_the_official_vsphere_properties_build_the_vsphere_config(cpi_json):
    """Rendered from the official job's names, cpi.json's vsphere section is the flat shape
    the config reads strictly (no key it does not know), with every value where it belongs."""
    from cpi import config

    rendered = vsphere_config(cpi_json, VCENTER, ntp=["time.example.test"])
    rendered["cloud"]["properties"]["validation"] = {"strict": True}
    built = config.build(rendered)
    assert built.plugin == "vsphere"
    props = built.properties
    assert (props.vcenter_host, props.host, props.user) == ("10.0.0.5", None, "administrator@vsphere.local")
    assert props.password.get_secret_value() == "vc-Secret-1"
    assert props.connection_options is not None and props.connection_options.ca_cert == PEM
    dc = props.datacenter
    assert (dc.name, dc.vm_folder, dc.template_folder, dc.disk_path) == ("dc1", "prod/vms", "prod/templates",
                                                                        "prod-disks")
    assert (dc.datastore_pattern, dc.persistent_datastore_pattern) == (r"\Aprod-ds\d+\z", "^prod-pers")
    clusters = dc.cluster_settings
    assert list(clusters) == ["cl1", "cl2", "cl3", "cl4"]  # a map of two clusters is two, as upstream splits it
    assert clusters["cl1"].resource_pool == "bosh-rp" and clusters["cl4"].resource_pool == "a/b"
    assert clusters["cl2"].resource_pool is None and clusters["cl2"].host_group is None
    assert (clusters["cl3"].host_group_name, clusters["cl3"].host_group_rule) == ("hg", "MUST")
    assert props.vmx_options == VCENTER["vmx_options"]
    assert [type(v) for v in props.vmx_options.values()] == [str, int, bool]  # each keeps its type
    assert props.enable_human_readable_name is True
    assert props.nsx is not None and (props.nsx.address, props.nsx.user) == ("nsx.example.test", "nsx-admin")
    assert props.nsx.password.get_secret_value() == "nsx-Secret-2"
    nsxt = props.nsxt
    assert nsxt is not None and (nsxt.host, nsxt.username, nsxt.ca_cert) == ("nsxt.example.test", "nsxt-admin", PEM)
    assert nsxt.password is not None and nsxt.password.get_secret_value() == "nsxt-Secret-3"
    assert nsxt.auth_private_key is not None and "nsxt-Key-4" in nsxt.auth_private_key.get_secret_value()
    assert (nsxt.use_policy_api, nsxt.default_vif_type) == (True, "PARENT")
    # the job spec's defaults, the official job's, reach the config as they are
    assert (nsxt.allow_overwrite, nsxt.remote_auth, nsxt.policy_api_migration_mode) == (True, False, False)
    assert (props.default_disk_type, props.default_scsi_controller_type, props.default_hw_version) == (
        "preallocated", "paravirtual", 17)
    assert props.ensure_no_ip_conflicts is True and props.http_logging is False
    assert built.agent.mbus == "nats://nats:nats-pw@10.0.0.6:4222" and built.agent.ntp == ["time.example.test"]


def test_nsx_and_nsxt_are_rendered_only_with_their_manager(cpi_json):
    """As the official job renders them: nsx only with vcenter.nsx.address, nsxt only with
    vcenter.nsxt.host; what else is set under them is left out, never a section without its
    manager that the config would refuse."""
    from cpi import config

    vcenter = {key: value for key, value in VCENTER.items() if key not in ("nsx", "nsxt")}
    rendered = vsphere_config(cpi_json, {**vcenter, "nsx": {"user": "u"}, "nsxt": {"use_policy_api": True}})
    section = rendered["cloud"]["properties"]["vsphere"]
    assert "nsx" not in section and "nsxt" not in section
    assert config.build(rendered).properties.nsxt is None
    # with the manager: the spec's defaults come with it
    section = vsphere_config(cpi_json, {**vcenter, "nsxt": {"host": "nsxt", "username": "u", "password": "p"}})[
        "cloud"]["properties"]["vsphere"]
    assert section["nsxt"] == {"host": "nsxt", "username": "u", "password": "p", "remote_auth": False,
                               "use_policy_api": False, "policy_api_migration_mode": False, "allow_overwrite": True,
                               "tag_nsx_vm_objects": False}


def test_the_official_plugins_property_is_taken_empty_and_refused_naming_a_plugin(cpi_json):
    from cpi import config
    from cpi.errors import CpiError

    rendered = vsphere_config(cpi_json, VCENTER, plugins={})
    assert rendered["cloud"]["properties"]["vsphere"]["plugins"] == {}
    assert config.build(rendered).properties.plugins == {}
    rendered = vsphere_config(cpi_json, VCENTER, plugins={"vmsuperdeleter": {"speed": "fastest"}})
    with pytest.raises(CpiError, match="plugins names the official CPI's Ruby plug-ins \\(vmsuperdeleter\\)"):
        config.build(rendered)


# --- bin/cpi ------------------------------------------------------------------------------------

STUB_PYTHON = """#!/bin/sh
# Stands in for the cpi package's venv python: records how bin/cpi ran it.
here=$(cd "$(dirname "$0")" && pwd)
{ echo "ARGS"; printf '%s\\n' "$@"; echo "ENV"; env; echo "CWD"; pwd; } > "$here/../../invocation.txt"
cat > "$here/../../stdin.txt"
echo '{"result":"stub","error":null,"log":""}'
"""


def install(tmp_path: Path, ruby: str, properties: dict, *, with_package: bool = True) -> Path:
    """A create-env style installation: <root>/jobs/cpi/{bin/cpi,config/cpi.json},
    <root>/packages/cpi/venv/bin/python (a stub) and the package's copy of bin/cpi."""
    root = tmp_path / "installation"
    render_job(root / "jobs/cpi", properties, tmp_path, ruby)
    if with_package:
        write(root / "packages/cpi/venv/bin/python", STUB_PYTHON, 0o755)
        write(root / "packages/cpi/app/bin/cpi", (REPO / "bin/cpi").read_text(), 0o755)
    return root


def run_bin_cpi(root: Path, env: dict, stdin: str = '{"method":"info","arguments":[],"context":{}}'):
    return subprocess.run(
        [str(root / "jobs/cpi/bin/cpi")], input=stdin, capture_output=True, text=True, env=env, cwd="/", timeout=60
    )


def invocation(package_dir: Path) -> tuple[list[str], dict[str, str], str]:
    text = (package_dir / "invocation.txt").read_text()
    args_part, rest = text.split("ENV\n", 1)
    env_part, cwd = rest.split("CWD\n", 1)
    env = dict(line.split("=", 1) for line in env_part.splitlines() if "=" in line)
    return args_part.splitlines()[1:], env, cwd.strip()


def test_bin_cpi_is_valid_bash(ruby, tmp_path):
    properties = {"cloud": {"plugin": "local"}, "env": {"http_proxy": "http://p:3128", "no_proxy": "a,b"}}
    script = render(CPI_ERB, properties, tmp_path, ruby)
    assert script.startswith("#!/usr/bin/env bash\n")
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)


def test_bin_cpi_in_the_directors_wiped_environment(ruby, tmp_path):
    """No HOME, no BOSH_*: packages are found beside the jobs directory, HOME from the
    password database, the config next to bin/."""
    root = install(tmp_path, ruby, {"cloud": {"plugin": "local"}})
    result = run_bin_cpi(root, {"PATH": DIRECTOR_PATH})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["result"] == "stub"
    args, env, cwd = invocation(root / "packages/cpi")
    assert args[:3] == ["-I", "-S", "-c"] and "from cpi.entry import run" in args[3]  # the package's bin/cpi
    assert args[4:] == [str(root / "packages/cpi/app"), str(root / "jobs/cpi/config/cpi.json")]
    assert env["CPI_PYTHON"] == str(root / "packages/cpi/venv/bin/python")
    assert env["BOSH_PACKAGES_DIR"] == str(root / "packages")
    assert env["BOSH_JOBS_DIR"] == str(root / "jobs")
    assert env["HOME"] == pwd.getpwuid(os.getuid()).pw_dir
    assert cwd == "/"
    assert "http_proxy" not in env and "CPI_LOG_LEVEL" not in env
    assert "CPI_JOB_STORE" not in env  # no persistent disk's store/ beside jobs/: the CPI's defaults
    assert env["CPI_HELPER_IDLE_TIMEOUT"] == "600" and float(env["CPI_HELPER_IDLE_TIMEOUT"]) == where.DEFAULT_IDLE
    assert (root / "packages/cpi/stdin.txt").read_text().startswith('{"method":"info"')


def test_bin_cpi_under_create_env_uses_its_variables(ruby, tmp_path):
    root = install(tmp_path, ruby, {"cloud": {"plugin": "local"}})
    elsewhere = tmp_path / "elsewhere/packages"
    write(elsewhere / "cpi/venv/bin/python", STUB_PYTHON, 0o755)
    write(elsewhere / "cpi/app/bin/cpi", (REPO / "bin/cpi").read_text(), 0o755)
    env = {
        "PATH": DIRECTOR_PATH,
        "HOME": str(tmp_path),
        "BOSH_PACKAGES_DIR": str(elsewhere),
        "BOSH_JOBS_DIR": str(root / "jobs"),
    }
    result = run_bin_cpi(root, env)
    assert result.returncode == 0, result.stderr
    args, seen, _ = invocation(elsewhere / "cpi")
    assert seen["BOSH_PACKAGES_DIR"] == str(elsewhere)
    assert seen["HOME"] == str(tmp_path)
    assert args[-1] == str(root / "jobs/cpi/config/cpi.json")
    assert "CPI_JOB_STORE" not in seen  # an installation has no store/: the audit trail stays under HOME


def test_bin_cpi_exports_proxies_and_log_level_exactly(ruby, tmp_path):
    proxy = "http://user:p'a$s w@proxy.example:3128"
    properties = {
        "cloud": {"plugin": "local"},
        "env": {"http_proxy": proxy, "https_proxy": "http://secure:3129", "no_proxy": "localhost,127.0.0.1,.internal"},
        "debug": {"log_level": "debug"},
        "helper": {"idle_timeout": 0},
    }
    root = install(tmp_path, ruby, properties)
    result = run_bin_cpi(root, {"PATH": DIRECTOR_PATH})
    assert result.returncode == 0, result.stderr
    _, env, _ = invocation(root / "packages/cpi")
    assert env["http_proxy"] == env["HTTP_PROXY"] == proxy
    assert env["https_proxy"] == env["HTTPS_PROXY"] == "http://secure:3129"
    assert env["no_proxy"] == env["NO_PROXY"] == "localhost,127.0.0.1,.internal"
    assert env["CPI_LOG_LEVEL"] == "debug"
    assert env["CPI_HELPER_IDLE_TIMEOUT"] == "0"


def test_bin_cpi_without_the_package_answers_in_json(ruby, tmp_path):
    root = install(tmp_path, ruby, {"cloud": {"plugin": "local"}}, with_package=False)
    result = run_bin_cpi(root, {"PATH": DIRECTOR_PATH, "BOSH_PACKAGES_DIR": str(tmp_path / 'no "such" dir')})
    assert result.returncode == 0
    response = json.loads(result.stdout)
    assert response["result"] is None
    assert response["error"]["type"] == "Bosh::Clouds::CloudError"
    assert 'no "such" dir/cpi/venv/bin/python is missing' in response["error"]["message"]
    assert response["error"]["ok_to_retry"] is False


def test_rendered_files_modes_follow_create_env(ruby, tmp_path):
    # create-env chmods bin/* executable; nothing else in the job needs a mode.
    root = install(tmp_path, ruby, {"cloud": {"plugin": "local"}})
    assert (root / "jobs/cpi/bin/cpi").stat().st_mode & stat.S_IXUSR


# --- day two on a director: the persistent disk, bin/cpi-operator --------------------------------

#: What config/env.sh sets for both bin/cpi and bin/cpi-operator (PATH and the callers' own aside).
JOB_ENVIRONMENT = ("BOSH_JOBS_DIR", "BOSH_PACKAGES_DIR", "HOME", "CPI_JOB_STORE", "CPI_HELPER_IDLE_TIMEOUT",
                   "CPI_LOG_LEVEL", "http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY")


def run_job_script(root: Path, script: str, *args: str, env: dict | None = None):
    return subprocess.run([str(root / "jobs/cpi/bin" / script), *args], capture_output=True, text=True,
                          env=env or {"PATH": DIRECTOR_PATH}, cwd="/", timeout=60)


def test_pre_start_makes_the_jobs_private_directory_on_the_persistent_disk(ruby, tmp_path):
    """The agent runs bin/pre-start as root once the persistent disk is mounted: it makes
    <store>/<job> (a VM's /var/vcap/store/<job>), 0700, for the director's user (vcap) when
    there is one, and is run again on every deploy without harm."""
    root = install(tmp_path, ruby, {"cloud": {"plugin": "aws"}})
    for _ in range(2):
        result = run_job_script(root, "pre-start")
        assert result.returncode == 0, result.stderr
    store = root / "store/cpi"
    assert stat.S_IMODE(store.stat().st_mode) == 0o700
    vcap = next((entry for entry in pwd.getpwall() if entry.pw_name == "vcap"), None)
    assert store.stat().st_uid == (vcap.pw_uid if vcap else os.getuid())


def test_bin_cpi_on_a_vm_keeps_the_audit_trail_on_the_persistent_disk(ruby, tmp_path):
    """Beside jobs/ and packages/, a VM has store/ (the persistent disk): once pre-start has
    made the job's directory there, bin/cpi names it to the CPI, whose audit trail goes there."""
    root = install(tmp_path, ruby, {"cloud": {"plugin": "aws"}})
    assert run_job_script(root, "pre-start").returncode == 0
    result = run_bin_cpi(root, {"PATH": DIRECTOR_PATH})
    assert result.returncode == 0, result.stderr
    _, env, _ = invocation(root / "packages/cpi")
    assert env["CPI_JOB_STORE"] == str(root / "store/cpi")


def test_cpi_operator_runs_the_cli_with_the_jobs_config_in_bin_cpis_environment(ruby, tmp_path):
    properties = {"cloud": {"plugin": "aws"}, "env": {"http_proxy": "http://proxy:3128", "no_proxy": "a,b"},
                  "debug": {"log_level": "debug"}}
    root = install(tmp_path, ruby, properties)
    assert run_job_script(root, "pre-start").returncode == 0
    assert run_bin_cpi(root, {"PATH": DIRECTOR_PATH}).returncode == 0
    _, called, _ = invocation(root / "packages/cpi")
    # what `sudo` leaves: a HOME and a few variables of its own, which change nothing here
    result = run_job_script(root, "cpi-operator", "list", "vms", "--json",
                            env={"PATH": DIRECTOR_PATH, "HOME": pwd.getpwuid(os.getuid()).pw_dir, "SUDO_USER": "op"})
    assert result.returncode == 0, result.stderr
    args, env, cwd = invocation(root / "packages/cpi")
    assert args == ["-I", "-m", "cpi.cli", "list", "vms", "--json"]
    assert env["CPI_CONFIG"] == str(root / "jobs/cpi/config/cpi.json")
    assert {k: env.get(k) for k in JOB_ENVIRONMENT} == {k: called.get(k) for k in JOB_ENVIRONMENT}
    assert env["CPI_JOB_STORE"] == str(root / "store/cpi") and env["http_proxy"] == "http://proxy:3128"
    assert cwd == "/"


def test_cpi_operator_without_the_package_says_so(ruby, tmp_path):
    root = install(tmp_path, ruby, {"cloud": {"plugin": "aws"}}, with_package=False)
    result = run_job_script(root, "cpi-operator", "list", "vms")
    assert result.returncode == 1
    assert "package cpi is not installed" in result.stderr and result.stdout == ""


@pytest.mark.skipif(os.geteuid() != 0, reason="becoming another user needs root")
def test_cpi_operator_run_as_root_becomes_the_user_that_owns_the_jobs_store(ruby, tmp_path):
    """`sudo bin/cpi-operator ...` on a director: the command runs as the user whose calls
    the director makes (the owner of /var/vcap/store/<job>), with that user's home, so that
    what it writes (audit lines, caches, locks) is theirs and the director's calls can use
    it. The layout is in a directory that user can reach (the run's own is root's alone)."""
    nobody = pwd.getpwnam("nobody")
    base = Path(tempfile.mkdtemp(prefix="cpi-operator-", dir="/var/tmp"))
    try:
        base.chmod(0o755)
        root = install(base, ruby, {"cloud": {"plugin": "aws"}})
        assert run_job_script(root, "pre-start").returncode == 0
        os.chown(root / "store/cpi", nobody.pw_uid, nobody.pw_gid)
        (root / "packages/cpi").chmod(0o777)  # where the stub python records how it ran
        write(root / "packages/cpi/venv/bin/python", STUB_PYTHON.replace("env;", "env; echo UID=$(id -u);"), 0o755)
        result = run_job_script(root, "cpi-operator", "list", "vms", env={"PATH": DIRECTOR_PATH, "HOME": "/root"})
        assert result.returncode == 0, result.stderr
        args, env, _ = invocation(root / "packages/cpi")
        assert args[-2:] == ["list", "vms"]
        assert env["UID"] == str(nobody.pw_uid) and env["HOME"] == nobody.pw_dir
        assert env["CPI_JOB_STORE"] == str(root / "store/cpi")
    finally:
        shutil.rmtree(base)


THROTTLE_SAMPLES = {"enabled": False, "state_dir": "/var/vcap/data/cpi/throttle", "max_rate": 8.0, "min_rate": 0.5,
                    "burst": 4.0, "decrease": 0.5, "increase": 0.1, "forget_after": 60.0, "max_retry_after": 30.0,
                    "redis_url": "rediss://redis.internal:6380/2", "redis_username": "cpi",
                    "redis_password": "redis-secret", "redis_ca_cert": "/var/vcap/jobs/cpi/config/redis-ca.pem",
                    "redis_key_prefix": "prod-account:", "redis_timeout": 0.5}


AUDIT_SAMPLES = {"enabled": False, "path": "/var/vcap/sys/log/cpi/audit.log", "max_bytes": 1048576, "keep": 3}

TRACING_SAMPLES = {"enabled": False, "endpoint": "https://otel.internal:4318/v1/traces",
                   "headers": {"x-api-key": "tracing-secret"}, "timeout": 0.5,
                   "ca_cert_file": "/var/vcap/jobs/cpi/config/otel-ca.pem"}

#: The sections of cloud.properties every cloud shares: their model, every key set, one key set.
SHARED_SECTIONS = {"throttle": ("cpi.backoff:ThrottleConfig", THROTTLE_SAMPLES, {"max_rate": 5}),
                   "audit": ("cpi.audit:AuditConfig", AUDIT_SAMPLES, {"keep": 2}),
                   "tracing": ("cpi.tracing.model:TracingConfig", TRACING_SAMPLES,
                               {"endpoint": "http://127.0.0.1:4318/v1/traces"})}


def _model(path: str):
    import importlib

    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("section", sorted(SHARED_SECTIONS))
def test_shared_section_properties_match_their_model(section):
    model, samples, _ = SHARED_SECTIONS[section]
    fields = _model(model).model_fields
    spec = job_spec()["properties"]
    keys = {name.split(".", 1)[1] for name in spec if name.startswith(f"{section}.")}
    assert keys == set(fields) == set(samples)
    for key, field in fields.items():
        # no spec defaults (the model applies them), but the description says what they are
        assert "default" not in spec[f"{section}.{key}"]
        if isinstance(field.default, (int, float)) and not isinstance(field.default, bool):
            shown = field.default if isinstance(field.default, int) else f"{field.default:g}"
            assert f"Unset - {shown}." in spec[f"{section}.{key}"]["description"], key


@pytest.mark.parametrize("section", sorted(SHARED_SECTIONS))
def test_shared_section_is_rendered_only_when_set_and_the_cpi_accepts_it(cpi_json, tmp_path, section):
    from cpi import config

    _, samples, one = SHARED_SECTIONS[section]
    local = {"cloud": {"plugin": "local"}, "local": {"state_dir": str(tmp_path)}}
    assert section not in cpi_json(local)["cloud"]["properties"]
    rendered = cpi_json({**local, section: samples})
    assert rendered["cloud"]["properties"][section] == samples
    assert getattr(config.build(rendered), section).model_dump(mode="json") == samples
    assert cpi_json({**local, section: one})["cloud"]["properties"][section] == one
