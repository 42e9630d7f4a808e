"""The vSphere cloud's configuration takes the official vSphere CPI's names and meanings (#25):
every property of the official `vsphere_cpi` job and every cloud_properties key the official
CPI reads validates, with upstream's types and required keys; the official cpi.json shape
(`vcenters[0]`) and the job spec's flat one are the same config; unknown keys are warned on
the wire as on the other clouds; secrets are marked so the Redactor masks them.

The lists below are read from cloudfoundry/bosh-vsphere-cpi-release (jobs/vsphere_cpi/spec,
templates/cpi.json.erb, and src/vsphere_cpi/lib/cloud/vsphere: config.rb, vm_type.rb,
vm_config.rb, cloud.rb's create_disk, the plug-in helpers), at its commit of 2026-08-21."""

from __future__ import annotations

import typing

import pytest
from pydantic import BaseModel, SecretStr, ValidationError

from cpi import config
from cpi.clouds.vsphere import job_config as job
from cpi.clouds.vsphere import patterns
from cpi.clouds.vsphere import props as vsphere
from cpi.errors import CpiError
from cpi.logs import MASK, Redactor, looks_secret
from cpi.validation import models_in, parse
from tests.support.runner import ROOT

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

#: Every property of the official job spec, with a value that is not its default (45: the
#: spec's count, as the issue says; 34 are `vcenter.*`, the rest are the agent, NATS and proxy
#: settings every official CPI job has, and `plugins`).
JOB_SPEC: dict[str, typing.Any] = {
    "vcenter.host": "vcenter.example.com",
    "vcenter.address": "10.0.0.5",
    "vcenter.default_disk_type": "thin",
    "vcenter.default_scsi_controller_type": "lsi_logic_sas",
    "vcenter.user": "administrator@vsphere.local",
    "vcenter.password": "vc-password-1",
    "vcenter.datacenters": [{
        "name": "dc1", "vm_folder": "prod/vms", "template_folder": "prod/templates", "disk_path": "prod-disks",
        "datastore_pattern": r"\Aprod-ds\z", "datastore_cluster_pattern": "^sp-", "persistent_datastore_pattern":
        "^pers", "persistent_datastore_cluster_pattern": "^psp-", "allow_mixed_datastores": False,
        "use_sub_folder": True,
        "clusters": [{"cl1": {"resource_pool": "rp1", "host_group": {"name": "hg1", "drs_rule": "MUST"}}},
                     {"cl2": {"resource_pool": None, "host_group": "hg2"}}]}],
    "vcenter.enable_auto_anti_affinity_drs_rules": True,
    "vcenter.cpu_reserve_full_mhz": True,
    "vcenter.memory_reservation_locked_to_max": True,
    "vcenter.upgrade_hw_version": True,
    "vcenter.default_hw_version": 19,
    "vcenter.vm_storage_policy_name": "gold",
    "vcenter.enable_human_readable_name": True,
    "vcenter.connection_options.ca_cert": PEM,
    "vcenter.nsx.address": "nsx.example.com",
    "vcenter.nsx.user": "nsx-admin",
    "vcenter.nsx.password": "nsx-password-2",
    "vcenter.nsx.ca_cert": PEM,
    "vcenter.nsxt.host": "nsxt.example.com",
    "vcenter.nsxt.username": "nsxt-admin",
    "vcenter.nsxt.password": "nsxt-password-3",
    "vcenter.nsxt.remote_auth": True,
    "vcenter.nsxt.auth_certificate": PEM,
    "vcenter.nsxt.auth_private_key": "-----BEGIN PRIVATE KEY-----\nnsxt-key-4\n-----END PRIVATE KEY-----\n",
    "vcenter.nsxt.ca_cert": PEM,
    "vcenter.vmx_options": {"disk.enableUUID": "1", "sched.mem.maxmemctl": 1330},
    "vcenter.nsxt.default_vif_type": "PARENT",
    "vcenter.nsxt.use_policy_api": True,
    "vcenter.nsxt.policy_api_migration_mode": True,
    "vcenter.nsxt.allow_overwrite": False,
    "vcenter.nsxt.tag_nsx_vm_objects": True,
    "vcenter.http_logging": True,
    "vcenter.ensure_no_ip_conflicts": False,
    "ntp": ["time.example.com"],
    "agent.mbus": "nats://nats.example.com:4222",
    "agent.nats.address": "10.0.0.6",
    "nats.user": "nats",
    "nats.password": "nats-password",
    "nats.address": "10.0.0.7",
    "nats.port": 4223,
    "env.http_proxy": "http://proxy:3128",
    "env.https_proxy": "http://proxy:3128",
    "env.no_proxy": "localhost",
    "plugins": {},
}

#: Every vm_type key (23): the 22 VmType reads (its 21 proxied keys and `datastores`; the
#: issue's count), and `plugins`, which the official CPI hands to its plug-ins' hooks with the
#: rest of the cloud_properties (its plug-in helpers read `plugins.<name>` there).
VM_TYPE: dict[str, typing.Any] = {
    "cpu": 2,
    "ram": 4096,
    "disk": 10240,
    "datastores": ["ds1", {"clusters": [{"sp1": {}}, {"sp2": {}}]}],
    "datacenters": [{"name": "dc1", "clusters": [{"cl1": {
        "resource_pool": "rp", "host_group": "hg", "drs_rules": [{"name": "spread", "type": "separate_vms"}]}}]}],
    "storage_policy": {"name": "gold"},
    "vmx_options": {"disk.enableUUID": "TRUE", "cpuid.coresPerSocket": 2},
    "cpu_hot_add_enabled": True,
    "memory_hot_add_enabled": True,
    "nested_hardware_virtualization": True,
    "cpu_reserve_full_mhz": True,
    "memory_reservation_locked_to_max": False,
    "upgrade_hw_version": True,
    "root_disk_size_gb": 20,
    "vm_group": "cpi-vm-group",
    "disable_drs": True,
    "tags": [{"category": "env", "tag": "prod"}, {"category": "team", "tag": "a"}],
    "vgpus": ["grid_t4-16q"],
    "pci_passthroughs": [{"vendor_id": 0x10DE, "device_id": 0x1EB8}],
    "device_groups": ["Nvidia:2@nvidia_h100l-94c%NVLink"],
    "nsx": {"security_groups": ["dmz"], "lbs": [
        {"edge_name": "edge", "pool_name": "https", "security_group": "https-sg", "port": 443, "monitor_port": 4443}]},
    "nsxt": {"ns_groups": ["web"], "vif_type": "PARENT", "lb": {"server_pools": [{"name": "pool", "port": 80}]}},
    "plugins": {"example": {"turbo_mode": "enabled"}},
}

#: Every disk_type key (3): create_disk reads `datastores`, `type` and `name`.
DISK_TYPE = {"type": "eagerZeroedThick", "datastores": ["ds1", {"clusters": [{"sp1": {}}]}], "name": "disk-named"}
#: The network key (1): a subnet's `name`.
NETWORK = {"name": "VM Network"}


def nested(flat: dict[str, typing.Any]) -> dict[str, typing.Any]:
    """{"a.b": 1} -> {"a": {"b": 1}}."""
    out: dict[str, typing.Any] = {}
    for dotted, value in flat.items():
        *parents, last = dotted.split(".")
        here = out
        for part in parents:
            here = here.setdefault(part, {})
        here[last] = value
    return out


def section(**changes: typing.Any) -> dict[str, typing.Any]:
    """cloud.properties.vsphere in the job spec's flat shape, with every vcenter.* property."""
    vcenter = nested({k.removeprefix("vcenter."): v for k, v in JOB_SPEC.items() if k.startswith("vcenter.")})
    return {**vcenter, "plugins": {}, **changes}


def official(vcenter: dict) -> dict:
    """The shape of the official cpi.json.erb's cloud.properties (less `agent`, which here is
    cloud.properties.agent, as for every cloud)."""
    return {"vcenters": [vcenter], "plugins": {}}


def minimal(**changes: typing.Any) -> dict[str, typing.Any]:
    return {"host": "vc", "user": "u", "password": "p", "datacenters": [
        {"name": "dc", "datastore_pattern": "ds", "persistent_datastore_pattern": "ds", "clusters": ["cl"]}],
        **changes}


def read(model: BaseModel, dotted: str) -> typing.Any:
    value: typing.Any = model
    for part in dotted.split("."):
        value = getattr(value, part)
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, list):
        return [v.model_dump(mode="json") if isinstance(v, BaseModel) else v for v in value]
    return value


def test_the_counts():
    assert len(JOB_SPEC) == 45
    assert len(VM_TYPE) == 23
    assert len(DISK_TYPE) == 3
    assert len(NETWORK) == 1


@pytest.mark.parametrize("prop", sorted(k for k in JOB_SPEC if k.startswith("vcenter.")))
def test_every_vcenter_property_validates_with_its_meaning(prop):
    props = job.VsphereProperties.model_validate(section())
    assert read(props, prop.removeprefix("vcenter.")) == JOB_SPEC[prop]


def test_the_other_job_properties_are_this_job_s_already():
    """ntp, agent.*, nats.* and env.* are every official CPI job's; this job has them."""
    import yaml

    spec = yaml.safe_load((ROOT / "jobs" / "cpi" / "spec").read_text())["properties"]
    others = [k for k in JOB_SPEC if not k.startswith("vcenter.") and k != "plugins"]
    assert len(others) == 10
    assert [k for k in others if k not in spec] == []


def test_the_official_cpi_json_shape_is_the_same_config():
    flat = job.VsphereProperties.model_validate(section())
    vcenter = section()
    vcenter.pop("address")  # the template writes host alone
    enveloped = job.VsphereProperties.model_validate(official(vcenter))
    assert enveloped.model_dump(exclude={"address"}) == flat.model_dump(exclude={"address"})
    assert enveloped.vcenter_host == flat.vcenter_host == "vcenter.example.com"


def test_keys_beside_vcenters_win_as_the_official_cpi_merges_its_context():
    props = job.VsphereProperties.model_validate({**official(minimal()), "host": "vc2", "user": "u2"})
    assert (props.host, props.user) == ("vc2", "u2")


@pytest.mark.parametrize("vcenters", [[], [minimal(), minimal()], {"host": "vc"}, ["vc"]])
def test_one_vcenter_only(vcenters):
    with pytest.raises(ValidationError, match="vcenters must be a list of one vCenter"):
        job.VsphereProperties.model_validate({"vcenters": vcenters})


def test_address_serves_when_host_is_not_set_and_host_wins():
    assert job.VsphereProperties.model_validate(minimal(host=None, address="10.1.1.1")).vcenter_host == "10.1.1.1"
    assert job.VsphereProperties.model_validate(minimal(address="10.1.1.1")).vcenter_host == "vc"
    with pytest.raises(ValidationError, match="host \\(or address\\) is required"):
        job.VsphereProperties.model_validate(minimal(host=None))


def test_the_job_spec_defaults():
    props = job.VsphereProperties.model_validate(minimal())
    assert props.default_disk_type == "preallocated" and props.default_scsi_controller_type == "paravirtual"
    assert props.default_hw_version == 17 and props.ensure_no_ip_conflicts is True
    assert not any([props.enable_auto_anti_affinity_drs_rules, props.cpu_reserve_full_mhz, props.upgrade_hw_version,
                    props.memory_reservation_locked_to_max, props.enable_human_readable_name, props.http_logging])
    assert props.vmx_options == {} and props.plugins == {} and props.nsx is None and props.nsxt is None
    datacenter = props.datacenter
    assert (datacenter.vm_folder, datacenter.template_folder, datacenter.disk_path) == (
        "BOSH_VMs", "BOSH_Templates", "BOSH_Disks")
    assert datacenter.allow_mixed_datastores is True and datacenter.use_sub_folder is False


@pytest.mark.parametrize(("changes", "expected"), [
    ({"user": None}, "user"),
    ({"password": None}, "password"),
    ({"datacenters": []}, "datacenters"),
    ({"datacenters": minimal()["datacenters"] * 2}, "datacenters"),
    ({"default_disk_type": "thick"}, "default_disk_type"),
    ({"default_scsi_controller_type": "buslogic"}, "default_scsi_controller_type"),
    ({"default_hw_version": "17"}, "default_hw_version"),
    ({"vmx_options": ["disk.enableUUID"]}, "vmx_options"),
    ({"ensure_no_ip_conflicts": "yes"}, "ensure_no_ip_conflicts"),
    ({"datacenters": [{"name": "dc", "persistent_datastore_pattern": "ds", "clusters": []}]},
     "set datastore_pattern or datastore_cluster_pattern"),
    ({"datacenters": [{"name": "dc", "datastore_pattern": "ds", "clusters": []}]},
     "set persistent_datastore_pattern or persistent_datastore_cluster_pattern"),
    ({"datacenters": [{"name": "dc", "datastore_pattern": "ds(", "persistent_datastore_pattern": "ds",
                       "clusters": []}]}, "datacenters[0].datastore_pattern"),
    ({"datacenters": [{"name": "dc", "datastore_pattern": "ds", "persistent_datastore_pattern": "ds"}]},
     "datacenters[0].clusters: Field required"),
    ({"nsx": {"address": "nsx"}}, "nsx.user"),
    ({"nsxt": {"host": "nsxt", "username": "u"}}, "nsxt.username needs nsxt.password"),
    ({"nsxt": {"host": "nsxt"}}, "missing auth_certificate and auth_private_key"),
    ({"nsxt": {"host": "nsxt", "username": "u", "password": "p", "default_vif_type": "VIF"}},
     "nsxt.default_vif_type"),
    ({"connection_options": {"ca_cert": PEM, "ca_cert_file": "/etc/ca.pem"}}, "give ca_cert or ca_cert_file"),
    ({"plugins": {"example": {}}}, "plugins names the official CPI's Ruby plug-ins (example)"),
])
def test_the_config_refuses_what_upstream_refuses(changes, expected):
    with pytest.raises(CpiError) as err:
        parse(job.VsphereProperties, minimal(**changes), "cloud.properties.vsphere", strict=True)
    assert expected in err.value.message


def test_nsxt_takes_a_client_certificate_instead_of_a_password():
    props = job.VsphereProperties.model_validate(minimal(nsxt={
        "host": "nsxt", "auth_certificate": PEM, "auth_private_key": "KEY"}))
    assert props.nsxt is not None and props.nsxt.username is None and props.nsxt.allow_overwrite is True


def test_clusters_as_the_job_template_lays_them_out():
    """A bare name is a cluster with no settings; a map of several clusters is several."""
    props = job.VsphereProperties.model_validate(minimal(datacenters=[{
        "name": "dc", "datastore_pattern": "ds", "persistent_datastore_pattern": "ds",
        "clusters": ["a", {"b": {"resource_pool": "rp"}, "c": {"host_group": "hg"}}, {"d": {"host_group": {
            "name": "hg2"}}}, {"e": {"host_group": {"name": "hg3", "drs_rule": " must "}}}]}]))
    settings = props.datacenter.cluster_settings
    assert list(settings) == ["a", "b", "c", "d", "e"]
    assert settings["a"].resource_pool is None and settings["b"].resource_pool == "rp"
    assert (settings["a"].host_group_name, settings["a"].host_group_rule) == (None, None)
    assert (settings["c"].host_group_name, settings["c"].host_group_rule) == ("hg", "MUST")
    assert (settings["d"].host_group_name, settings["d"].host_group_rule) == ("hg2", "SHOULD")
    assert settings["e"].host_group_rule == "MUST"


def test_a_misspelt_host_group_rule_is_should_as_upstream(caplog):
    with caplog.at_level("WARNING"):
        group = job.HostGroup.model_validate({"name": "hg", "drs_rule": "SHOUD"})
    assert group.drs_rule == "SHOULD" and "SHOUD" in caplog.text


@pytest.mark.parametrize(("pattern", "name", "selected"), [
    (r"\Aprod-ds\z", "prod-ds", True),
    (r"\Aprod-ds\z", "prod-ds-2", False),
    (r"\Aprod-ds\Z", "prod-ds", True),
    ("ds", "my-ds-1", True),  # anywhere in the name, as Ruby's =~
    ("^ds$", "my-ds-1", False),
    (r"\A\h+\z", "beef01", True),
    (r"\A[\h-]+\z", "be-ef", True),
    (r"\A(?<kind>ssd|hdd)-\k<kind>\z", "ssd-ssd", True),
    (r"\A(?<kind>ssd|hdd)-\k<kind>\z", "ssd-hdd", False),
    (r"(?<!x)ds", "ads", True),
    (r"[]z]", "a]", True),
])
def test_datastore_patterns_select_as_ruby_does(pattern, name, selected):
    assert patterns.matches(pattern, name) is selected


def test_a_pattern_python_cannot_read_is_refused_naming_it():
    with pytest.raises(ValueError, match="is not a regular expression"):
        patterns.compile_pattern("[[:alpha:]")


# ---------------------------------------------------------------- cloud_properties


@pytest.mark.parametrize("key", sorted(VM_TYPE))
def test_every_vm_type_key_validates_with_its_meaning(key):
    props = vsphere.VMCloudProperties.model_validate(VM_TYPE)
    assert props.model_dump(mode="json")[key] == VM_TYPE[key]


def test_a_vm_type_needs_cpu_ram_and_disk():
    with pytest.raises(CpiError) as err:
        parse(vsphere.VMCloudProperties, {"datastores": ["ds1"]}, "vm_type cloud_properties", strict=True)
    message = err.value.message
    assert all(f"{key}: Field required" in message for key in ("cpu", "ram", "disk")), message
    props = parse(vsphere.VMCloudProperties, {"cpu": 1, "ram": 512, "disk": 1024}, "vm_type cloud_properties")
    assert (props.cpu, props.ram, props.disk) == (1, 512, 1024)
    assert props.datastores is None and props.cpu_reserve_full_mhz is None and props.upgrade_hw_version is None
    assert not any([props.cpu_hot_add_enabled, props.memory_hot_add_enabled, props.nested_hardware_virtualization,
                    props.disable_drs])


@pytest.mark.parametrize(("changes", "expected"), [
    ({"cpu": "2"}, "cpu"),
    ({"ram": 1.5}, "ram"),
    ({"disk": 0}, "disk"),
    ({"disk": True}, "disk"),
    ({"datastores": "ds1"}, "datastores"),
    ({"datastores": [{"clusters": []}]}, "datastores"),
    ({"datastores": [{"clusters": [{"a": {}}]}, "ds", {"clusters": [{"b": {}}]}]},
     "name every datastore cluster in one {clusters: [...]} entry"),
    ({"vmx_options": "disk.enableUUID=1"}, "vmx_options"),
    ({"datacenters": [{"clusters": ["a"]}, {"clusters": ["b"]}]}, "datacenters"),
    ({"datacenters": [{"name": "dc"}]}, "datacenters[0].clusters"),
    ({"datacenters": [{"clusters": [{"a": {"drs_rules": [{"name": "r", "type": "keep_together"}]}}]}]},
     "drs_rules[0].type"),
    ({"datacenters": [{"clusters": [{"a": {"drs_rules": [{"name": "r", "type": "separate_vms"}] * 2}}]}]},
     "drs_rules"),
    ({"pci_passthroughs": [{"vendor_id": "0x10de", "device_id": 1}]}, "pci_passthroughs[0].vendor_id"),
    ({"pci_passthroughs": [{"vendor_id": 0x10000, "device_id": 1}]}, "pci_passthroughs[0].vendor_id"),
    ({"tags": [{"category": "env"}]}, "tags[0].tag"),
    ({"vgpus": "grid_t4-16q"}, "vgpus"),
    ({"root_disk_size_gb": -1}, "root_disk_size_gb"),
    ({"nsx": {"lbs": [{"edge_name": "e", "pool_name": "p", "security_group": "s"}]}}, "nsx.lbs[0].port"),
    ({"nsxt": {"vif_type": "SIBLING"}}, "nsxt.vif_type"),
    ({"nsxt": {"lb": {"server_pools": [{"port": 80}]}}}, "nsxt.lb.server_pools[0].name"),
    ({"storage_policy": "gold"}, "storage_policy"),
])
def test_vm_type_types_as_upstream(changes, expected):
    with pytest.raises(CpiError) as err:
        parse(vsphere.VMCloudProperties, {"cpu": 1, "ram": 512, "disk": 1024, **changes}, "vm_type cloud_properties",
              strict=True)
    assert expected in err.value.message


def test_vm_type_datastores_name_datastores_and_datastore_clusters():
    props = vsphere.VMCloudProperties.model_validate({"cpu": 1, "ram": 512, "disk": 1024, **VM_TYPE})
    assert props.datastores is not None
    names = [d for d in props.datastores if isinstance(d, str)]
    clusters = [d for d in props.datastores if isinstance(d, vsphere.DatastoreClusters)]
    assert names == ["ds1"] and [c.names for c in clusters] == [["sp1", "sp2"]]
    assert props.datacenters is not None
    cluster = props.datacenters[0].clusters[0]["cl1"]
    assert (cluster.resource_pool, cluster.host_group_name, cluster.host_group_rule) == ("rp", "hg", "MUST")
    assert cluster.drs_rules is not None and cluster.drs_rules[0].name == "spread"


def test_vmx_values_keep_their_type():
    """vSphere tells `true` from "true" and 1234 from "1234" (docs-bosh's vsphere-cpi note)."""
    props = vsphere.VMCloudProperties.model_validate({"cpu": 1, "ram": 512, "disk": 1024, "vmx_options": {
        "a": True, "b": "true", "c": 1234, "d": "1234", "e": 1.5}})
    assert props.vmx_options == {"a": True, "b": "true", "c": 1234, "d": "1234", "e": 1.5}
    assert [type(v) for v in props.vmx_options.values()] == [bool, str, int, str, float]


@pytest.mark.parametrize("key", sorted(DISK_TYPE))
def test_every_disk_type_key_validates_with_its_meaning(key):
    props = vsphere.DiskCloudProperties.model_validate(DISK_TYPE)
    assert props.model_dump(mode="json")[key] == DISK_TYPE[key]


@pytest.mark.parametrize("disk_type", ["thin", "preallocated", "thick", "eagerZeroedThick"])
def test_the_disk_types_the_official_cpi_makes(disk_type):
    assert vsphere.DiskCloudProperties.model_validate({"type": disk_type}).type == disk_type


def test_a_disk_type_refuses_what_vsphere_does_not_make():
    with pytest.raises(CpiError, match="type"):
        parse(vsphere.DiskCloudProperties, {"type": "sparse"}, "disk_type cloud_properties", strict=True)
    assert vsphere.DiskCloudProperties.model_validate({}).type is None  # the global default_disk_type then


def test_the_network_key():
    assert vsphere.NetworkCloudProperties.model_validate(NETWORK).name == "VM Network"
    with pytest.raises(ValidationError, match="name"):
        vsphere.NetworkCloudProperties.model_validate({})


# ---------------------------------------------------------------- unknown keys, as on the other clouds


def test_an_unknown_key_is_left_out_with_a_warning_and_refused_when_strict(caplog):
    with caplog.at_level("WARNING", logger="cpi.validation"):
        props = parse(vsphere.VMCloudProperties, {"cpu": 1, "ram": 512, "disk": 1024, "datastore": ["x"],
                                                  "instance_type": "m5.large"}, "vm_type cloud_properties")
    assert props.datastores is None
    assert "vm_type cloud_properties.datastore: unknown property ignored, did you mean datastores?" in caplog.text
    assert "vm_type cloud_properties.instance_type: unknown property ignored" in caplog.text
    with pytest.raises(CpiError, match="datastore: unknown property"):
        parse(vsphere.VMCloudProperties, {"cpu": 1, "ram": 512, "disk": 1024, "datastore": ["x"]}, "vm_type",
              strict=True)


class _StandIn:
    """The cloud's class-level declarations, as the cloud class will make them: enough for
    cpi.config.build to read a vsphere section (the cloud is not registered yet)."""

    name = "vsphere"
    Properties = job.VsphereProperties
    context_overrides = job.CONTEXT_OVERRIDES
    context_endpoints = job.CONTEXT_ENDPOINTS
    context_secrets = job.CONTEXT_SECRETS


@pytest.fixture
def stand_in(monkeypatch):
    import cpi.clouds

    monkeypatch.setattr(cpi.clouds, "load_cloud", lambda name: _StandIn)


def build(section_: dict, context: dict | None = None, **properties: typing.Any) -> config.Config:
    return config.build({"cloud": {"plugin": "vsphere", "properties": {"vsphere": section_, **properties}}}, context)


def test_unknown_keys_inside_the_official_shape_are_warned_where_they_are(stand_in, caplog):
    vcenter = minimal(hots="typo")
    vcenter["datacenters"][0]["vm_foldr"] = "x"
    with caplog.at_level("WARNING", logger="cpi.validation"):
        cfg = build(official(vcenter))
    assert cfg.properties.host == "vc" and cfg.properties.datacenter.vm_folder == "BOSH_VMs"
    assert "cloud.properties.vsphere.hots: unknown property ignored, did you mean host?" in caplog.text
    assert ("cloud.properties.vsphere.datacenters[0].vm_foldr: unknown property ignored, did you mean vm_folder?"
            in caplog.text)
    with pytest.raises(CpiError, match="vm_foldr: unknown property"):
        build(official(vcenter), validation={"strict": True})


def test_two_vcenters_are_a_config_error(stand_in):
    with pytest.raises(CpiError, match=r"invalid config: cloud\.properties\.vsphere: vcenters must be a list of one"):
        build({"vcenters": [minimal(), minimal()]})


def test_the_context_overrides_the_vcenter_as_the_official_cpi_merges_it(stand_in, caplog):
    other_dc = [{"name": "dc2", "datastore_pattern": "x", "persistent_datastore_pattern": "x", "clusters": ["c2"]}]
    with caplog.at_level("WARNING"):
        cfg = build(official(minimal(connection_options={"ca_cert": PEM})), {
            "director_uuid": "d-1", "request_id": "cpi-1", "host": "vc2", "user": "u2", "password": "p2",
            "datacenters": other_dc, "vmx_options": {"disk.enableUUID": "1"},
            "connection_options": {"ca_cert": "THEIR-CA"}, "ssl_verify": False, "nsxt": {"host": "evil"}})
    props = cfg.properties
    assert (props.host, props.user, props.password.get_secret_value()) == ("vc2", "u2", "p2")
    assert props.datacenter.name == "dc2" and props.vmx_options == {"disk.enableUUID": "1"}
    assert props.connection_options.ca_cert == PEM and props.ssl_verify is None and props.nsxt is None
    for key in ("connection_options", "ssl_verify", "nsxt"):
        assert f"context key '{key}' is ignored" in caplog.text


def test_a_context_moves_the_vcenter_only_with_its_own_password(stand_in):
    assert build(minimal(), {"host": "elsewhere"}).properties.host == "vc"
    assert build(minimal(), {"host": "elsewhere", "password": "theirs"}).properties.host == "elsewhere"


def test_tls_and_plugins_are_never_context_keys():
    assert {"connection_options", "ssl_verify", "nsx", "nsxt", "plugins"}.isdisjoint(job.CONTEXT_OVERRIDES)
    assert {"host", "address", "user", "password", "datacenters", "connect_timeout", "read_timeout",
            "retry_budget_seconds"} <= job.CONTEXT_OVERRIDES
    assert set(job.VsphereProperties.model_fields) >= job.CONTEXT_OVERRIDES


# ---------------------------------------------------------------- secrets


def _fields(model: type[BaseModel], prefix: str = "") -> typing.Iterator[tuple[str, typing.Any]]:
    for name, field in model.model_fields.items():
        yield f"{prefix}{name}", field.annotation
        for sub in models_in(field.annotation):
            yield from _fields(sub, f"{prefix}{name}.")


def _is_secret(annotation: typing.Any) -> bool:
    return annotation is SecretStr or SecretStr in typing.get_args(annotation)


@pytest.mark.parametrize("model", [job.VsphereProperties, vsphere.VMCloudProperties,
                                   vsphere.DiskCloudProperties, vsphere.NetworkCloudProperties])
def test_secrets_are_secret_strings_under_names_the_redactor_masks(model):
    """The Redactor learns a secret by its key (cpi.logs.looks_secret); the models mark the
    same keys SecretStr, so neither a log nor a repr shows them. A key is one iff the other."""
    for path, annotation in _fields(model):
        if annotation is bool:
            continue  # `remote_auth` looks secret, and the Redactor leaves booleans alone
        assert _is_secret(annotation) == looks_secret(path.rsplit(".", 1)[-1]), path
    secrets = sorted(path for path, annotation in _fields(model) if _is_secret(annotation))
    if model is job.VsphereProperties:
        assert secrets == ["nsx.password", "nsxt.auth_private_key", "nsxt.password", "password"]
    else:
        assert secrets == []


def test_the_official_cpi_json_s_secrets_are_masked():
    vcenter = section()
    redactor = Redactor()
    redactor.collect({"cloud": {"plugin": "vsphere", "properties": {"vsphere": official(vcenter)}}})
    secrets = [JOB_SPEC[f"vcenter.{key}"] for key in ("password", "nsx.password", "nsxt.password",
                                                       "nsxt.auth_private_key")]
    for secret in secrets:
        assert redactor.text(f"login failed with {secret}!") == f"login failed with {MASK}!"
    assert redactor.text("user administrator@vsphere.local") == "user administrator@vsphere.local"
    props = job.VsphereProperties.model_validate(official(vcenter))
    shown = repr(props) + str(props.model_dump())
    assert not any(s in shown for s in ("vc-password-1", "nsx-password-2", "nsxt-password-3", "nsxt-key-4"))
    assert "administrator@vsphere.local" in shown


def test_a_bad_password_s_value_is_never_in_the_error():
    with pytest.raises(CpiError) as err:
        parse(job.VsphereProperties, minimal(password=12345678), "cloud.properties.vsphere", strict=True)
    assert "password" in err.value.message and "12345678" not in err.value.message
