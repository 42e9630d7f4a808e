"""Pure functions and models: redaction, agent settings, error shapes, validation messages."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, SecretStr

from cpi import errors
from cpi.agent_env import settings, user_data
from cpi.logs import Redactor
from cpi.models import AgentConfig, CallContext, Network
from cpi.validation import parse


def test_redactor_learns_nested_secrets_and_url_passwords():
    r = Redactor()
    r.collect({
        "aws": {"secret_access_key": "SECRETKEY123", "access_key_id": "AKIAPUBLIC"},
        "agent": {"mbus": "https://mbus:mbuspass@10.0.0.6:6868"},
        "blobstore": {"options": {"password": ["in-a-list"]}},
        "env": {"bosh": {"password": "$6$crypted"}},
    })
    text = "key SECRETKEY123 id AKIAPUBLIC url https://mbus:mbuspass@x pw in-a-list $6$crypted"
    assert r.text(text) == "key <redacted> id AKIAPUBLIC url https://mbus:<redacted>@x pw <redacted> <redacted>"


def test_redactor_prefers_longest_secret():
    r = Redactor()
    r.add("s3cr")  # both long enough to be masked by value (docs/protocol.md)
    r.add("s3cr3t-long")
    assert r.text("xs3cr3t-longx") == "x<redacted>x"


def test_error_tree_wire_types_and_retry_defaults():
    assert errors.VMCreationFailed("x").to_wire() == {
        "type": "Bosh::Clouds::VMCreationFailed", "message": "x", "ok_to_retry": True}
    assert errors.DiskNotFound("x").ok_to_retry is True
    assert errors.VMNotFound("x").ok_to_retry is False
    assert errors.VMCreationFailed("x", ok_to_retry=False).ok_to_retry is False
    assert issubclass(errors.NotImplemented, errors.CpiError)
    assert issubclass(errors.DiskNotAttached, errors.CloudError)
    protocol_types = {"CpiError", "NotImplemented", "NotSupported", "CloudError", "VMNotFound", "NetworkNotFound",
                      "NoDiskSpace", "DiskNotAttached", "DiskNotFound", "VMCreationFailed"}
    assert {f"Bosh::Clouds::{t}" for t in protocol_types} <= set(errors.BY_WIRE_TYPE)


def test_agent_settings_shape():
    nets = {"default": Network.model_validate({"type": "manual", "ip": "10.0.0.5", "dns": ["8.8.8.8"],
                                                "default": ["dns", "gateway"], "custom": 1})}
    doc = settings(agent_id="a1", vm_name="vm-1", agent=AgentConfig(mbus="nats://n:4222", ntp=["ntp1"]),
                   networks=nets, env={"bosh": {"x": 1}}, persistent_disks={"d1": {"path": "/dev/sdc"}})
    assert doc["networks"] == {"default": {"type": "manual", "ip": "10.0.0.5", "dns": ["8.8.8.8"],
                                           "default": ["dns", "gateway"], "custom": 1}}
    assert doc["disks"] == {"system": "/dev/sda", "ephemeral": "/dev/sdb", "persistent": {"d1": {"path": "/dev/sdc"}}}
    assert doc["mbus"] == "nats://n:4222" and doc["ntp"] == ["ntp1"] and doc["env"] == {"bosh": {"x": 1}}
    ud = user_data(doc, nets, server_name="vm-1")
    assert ud["dns"] == {"nameserver": ["8.8.8.8"]} and ud["server"] == {"name": "vm-1"}
    no_mbus = settings(agent_id="a", vm_name="v", agent=AgentConfig(), networks={}, env=None)
    assert "mbus" not in no_mbus and no_mbus["env"] == {}


def test_stemcell_api_version_defaults_to_1():
    assert CallContext().stemcell_api_version == 1
    assert CallContext(vm={"stemcell": {}}).stemcell_api_version == 1
    assert CallContext(vm={"stemcell": {"api_version": 3}}).stemcell_api_version == 3
    assert CallContext.model_validate({"director_uuid": "u", "other": 1}).model_extra == {"other": 1}


class _Model(BaseModel):
    password: SecretStr
    size: int


def test_validation_messages_never_show_secret_values():
    with pytest.raises(errors.CpiError) as err:
        parse(_Model, {"password": 12345678, "size": "huge"}, "thing")
    message = err.value.message
    assert "password" in message and "12345678" not in message
    assert "size" in message and "'huge'" in message


def test_context_overrides_credentials_and_region_but_never_paths():
    """What a request's context (a director's cpi-config) may change, per cloud
    (docs/protocol.md, `context`)."""
    from cpi import config

    raw = {"cloud": {"plugin": "aws", "properties": {"aws": {
        "region": "us-east-1", "access_key_id": "AKIAFILE", "secret_access_key": "file-secret",
        "lock_dir": "/var/vcap/sys/run/cpi-locks"}}}}
    cfg = config.build(raw, {"region": "eu-west-1", "access_key_id": "AKIACONTEXT", "secret_access_key": "ctx",
                             "lock_dir": "/tmp/elsewhere", "ca_cert_file": "/etc/shadow", "unrelated": 1})
    assert cfg.properties.region == "eu-west-1" and cfg.properties.access_key_id == "AKIACONTEXT"
    assert str(cfg.properties.lock_dir) == "/var/vcap/sys/run/cpi-locks" and cfg.properties.ca_cert_file is None
    raw = {"cloud": {"plugin": "openstack", "properties": {"openstack": {
        "auth_url": "http://127.0.0.1:5000/v3", "username": "u", "api_key": "k", "project": "p", "domain": "d"}}}}
    cfg = config.build(raw,
                       {"api_key": "other", "ssl_verify": False, "ca_cert": "/etc/shadow", "token_cache_dir": "/x"})
    assert cfg.properties.api_key.get_secret_value() == "other"
    assert cfg.properties.ssl_verify is True and cfg.properties.ca_cert is None
    assert str(cfg.properties.token_cache_dir) != "/x"
    cfg = config.build({}, {"state_dir": "/tmp/elsewhere", "agent_command": ["/bin/sh"], "faults": []})
    assert str(cfg.properties.state_dir) != "/tmp/elsewhere" and cfg.properties.agent_command is None


def test_known_cids_from_every_shape_bosh_cli_prints():
    from cpi.operator.known import read

    def parse(text: str) -> set[str]:
        return read(text).cids

    vms = ('{"Tables": [{"Content": "vms", "Rows": [{"instance": "web/0", "vm_cid": "i-1", '
           '"disk_cids": "vol-1, vol-2"}, {"instance": "web/1", "vm_cid": "-"}], "Notes": ["i-9"]}], '
           '"Blocks": null, "Lines": ["i-8"]}')
    disks = '{"Tables": [{"Content": "disks", "Rows": [{"disk_cid": "vol-9", "size": "10 GiB"}]}]}'
    assert parse(vms + "\n" + disks) == {"i-1", "vol-1", "vol-2", "vol-9"}
    assert parse('["vm-a", "disk-b"]') == {"vm-a", "disk-b"}
    assert parse("vm-a\n# a comment\n\ndisk-b\n") == {"vm-a", "disk-b"}
    assert parse("ami-0123456789abcdef0 light\n") == {"ami-0123456789abcdef0 light"}
