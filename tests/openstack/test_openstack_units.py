"""The openstack cloud's pure parts, in process and without OpenStack: config and
cloud_properties validation, error parsing and retry verdicts, flavor choice, device
letters, metadata limits, adaptive waits, stemcell image reading."""

from __future__ import annotations

import io
import itertools
import tarfile
import types

import pytest
from pydantic import ValidationError

from cpi import retry, waits
from cpi.clouds.openstack import errors, flavors, networks, tags
from cpi.clouds.openstack.disks import Disks, _hint
from cpi.clouds.openstack.props import OpenStackProperties, VMCloudProperties
from cpi.clouds.openstack.stemcells import Stemcells, _RootImage
from cpi.clouds.openstack.waits import poll_schedule
from cpi.errors import CloudError, CpiError, VMCreationFailed
from cpi.models import Network, VMResources, gib

MINIMAL = {"auth_url": "http://127.0.0.1:5000/v3", "username": "u", "api_key": "pw-Sekr1t", "project": "p",
           "domain": "default"}


def props(**kw) -> OpenStackProperties:
    return OpenStackProperties.model_validate({**MINIMAL, **kw})


# ---------------------------------------------------------------- config


def test_minimal_password_config_is_valid():
    p = props()
    assert p.interface == "public" and p.endpoint_type == "publicURL"
    assert p.api_key.get_secret_value() == "pw-Sekr1t"
    assert "pw-Sekr1t" not in repr(p) and "pw-Sekr1t" not in p.describe_identity()


def test_auth_url_gets_v3_and_v2_is_refused():
    assert props(auth_url="https://keystone.example.com:5000").auth_url == "https://keystone.example.com:5000/v3"
    assert props(auth_url="https://keystone.example.com/identity/v3/").auth_url == "https://keystone.example.com/identity/v3"
    with pytest.raises(ValidationError, match="Keystone v2"):
        props(auth_url="https://keystone.example.com:5000/v2.0")
    with pytest.raises(ValidationError, match="http"):
        props(auth_url="keystone.example.com")


@pytest.mark.parametrize("change, message", [
    ({"domain": None}, "user_domain_name or domain"),
    ({"project": None}, "project or project_id"),
    ({"api_key": None}, "api_key"),
    ({"application_credential_id": "id", "application_credential_secret": "s"}, "not both"),
    ({"endpoint_type": "privateURL"}, "publicURL"),
    ({"config_drive": "usb"}, "cdrom"),
    ({"state_timeout": 0}, "greater than 0"),
    ({"tenant": "t", "project": None}, "Keystone v2 is gone from OpenStack"),
    ({"endpoint_overrides": {"dns": "http://x"}}, "unknown service type"),
])
def test_bad_configs_name_the_problem(change, message):
    with pytest.raises(ValidationError, match=message):
        props(**change)


PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_connection_options_of_the_official_cpi_set_the_same_settings():
    """bosh-deployment's openstack/custom-ca.yml gives the CA as connection_options.ca_cert;
    the official CPI's other HTTP options with a meaning here map the same way."""
    p = props(connection_options={"ca_cert": PEM, "ssl_verify_peer": False, "connect_timeout": 5, "read_timeout": 60})
    assert (p.ca_cert, p.ssl_verify, p.connect_timeout, p.read_timeout) == (PEM, False, 5, 60)
    assert props(connection_options={"ssl_ca_file": "/etc/ssl/ca.pem"}).ca_cert == "/etc/ssl/ca.pem"
    assert props(ca_cert=PEM, connection_options={"ca_cert": PEM}).ca_cert == PEM  # both ways, agreeing
    with pytest.raises(ValidationError, match="ssl_verify and connection_options say different things"):
        props(ssl_verify=True, connection_options={"ssl_verify_peer": False})
    with pytest.raises(ValidationError, match="ca_cert or ssl_ca_file, not both"):
        props(connection_options={"ca_cert": PEM, "ssl_ca_file": "/x"})


def test_application_credential_and_project_id_configs():
    p = OpenStackProperties.model_validate({"auth_url": "http://k:5000/v3", "application_credential_id": "abc",
                                            "application_credential_secret": "shh"})
    assert p.describe_identity() == "application credential abc"
    p = props(project=None, domain=None, user_domain_name="d", project_id="pid", endpoint_type="internalURL",
              endpoint_overrides={"volumev3": "http://127.0.0.1:1/v3/pid/"})
    assert p.interface == "internal"
    assert p.endpoint_overrides == {"block-storage": "http://127.0.0.1:1/v3/pid"}
    assert "project id pid" in p.describe_identity()


def test_secrets_do_not_show_in_validation_errors():
    from cpi.config import build

    with pytest.raises(CpiError) as caught:
        build({"cloud": {"plugin": "openstack", "properties": {"openstack": {
            **MINIMAL, "api_key": {"not": "a string"}, "application_credential_secret": 5}}}})
    assert "not" not in caught.value.message.split("api_key", 1)[1][:60]


def test_context_overrides_properties():
    from cpi.config import build

    cfg = build({"cloud": {"plugin": "openstack", "properties": {"openstack": MINIMAL}}},
                {"region": "RegionTwo", "director_uuid": "x"})
    assert cfg.properties.region == "RegionTwo"


def test_vm_cloud_properties():
    vm = VMCloudProperties.model_validate({"instance_type": "m1.small", "allowed_address_pairs": "10.0.0.9",
                                           "root_disk": {"size": 20}})
    assert vm.address_pairs == ["10.0.0.9"] and vm.root_disk.size == 20
    with pytest.raises(ValidationError, match="not both"):
        VMCloudProperties.model_validate({"instance_type": "x", "availability_zone": "a", "availability_zones": ["b"]})
    with pytest.raises(ValidationError, match="instance_type"):
        VMCloudProperties.model_validate({})


def test_sizes_round_up_to_whole_gib():
    assert [gib(1), gib(1024), gib(1025), gib(2048)] == [1, 1, 2, 2]


# ---------------------------------------------------------------- errors and retry verdicts


def response(status: int, body: str = "", headers: dict | None = None):
    return types.SimpleNamespace(status_code=status, text=body, reason="Reason", headers=headers or {})


@pytest.mark.parametrize("body, message, kind", [
    ('{"itemNotFound": {"code": 404, "message": "Instance x could not be found."}}', "Instance x could not be found.",
     "itemNotFound"),
    (('{"NeutronError": {"type": "IpAddressAlreadyAllocated", "message": "IP 10.0.0.5 already allocated", '
      '"detail": ""}}'),
     "IP 10.0.0.5 already allocated", "IpAddressAlreadyAllocated"),
    (('{"error": {"code": 401, "message": "The request you have made requires authentication.", '
      '"title": "Unauthorized"}}'),
     "The request you have made requires authentication.", "Unauthorized"),
    (('{"code": "404 Not Found", "title": "Not Found", "message": "The resource could not be found.<br /><br />\\nNo '
      'image found with ID x\\n\\n"}'), "The resource could not be found. No image found with ID x", "Not Found"),
    ('{"faultcode": "Client", "faultstring": "Pool busy", "debuginfo": null}', "Pool busy", "Client"),
    ("<html><body><h1>503 Service Unavailable</h1></body></html>", "503 Service Unavailable", None),
])
def test_error_bodies_of_every_service(body, message, kind):
    err = errors.from_response("compute", "GET", "/x", response(400, body))
    assert err.message == message and err.error_type == kind


def test_retry_after_from_header_body_or_date():
    assert errors.from_response("c", "GET", "/", response(429, "", {"Retry-After": "7"})).retry_after == 7
    over = '{"overLimit": {"code": 413, "message": "This request was rate-limited.", "retryAfter": "2"}}'
    assert errors.from_response("c", "GET", "/", response(413, over)).retry_after == 2
    later = errors.parse_retry_after("Wed, 21 Oct 2099 07:28:00 GMT")
    assert later is not None and later > 1000
    assert errors.parse_retry_after("soon") is None


def verdict(status: int, method_idempotent: bool, body: str = "", headers: dict | None = None) -> retry.Verdict:
    exc = errors.from_response("compute", "POST", "/servers", response(status, body, headers))
    return errors.classifier(idempotent=method_idempotent)(exc)


def test_classifier():
    assert verdict(429, False, headers={"Retry-After": "3"}) == \
        retry.Verdict(retry.Kind.THROTTLED, "429 Too Many Requests", 3.0)
    assert verdict(413, False, headers={"Retry-After": "1"}).kind is retry.Kind.THROTTLED
    assert verdict(413, False, '{"overLimit": {"message": "slow down", "retryAfter": "2"}}').retry_after == 2
    assert verdict(413, False, '{"overLimit": {"message": "VolumeSizeExceedsAvailableQuota"}}') == retry.PERMANENT
    assert verdict(413, False, '{"badRequest": {"message": "VolumeSizeExceedsAvailableQuota"}}') == retry.PERMANENT
    assert verdict(503, False).kind is retry.Kind.TRANSIENT
    assert verdict(500, False) == retry.PERMANENT  # a POST may have been carried out
    assert verdict(500, True).kind is retry.Kind.TRANSIENT
    assert verdict(404, True) == retry.PERMANENT


def test_connection_errors():
    from keystoneauth1 import exceptions as ksa

    refused = ksa.ConnectFailure("Unable to establish connection to http://x: Failed to establish a new connection")
    reset = ksa.ConnectFailure("Unable to establish connection to http://x: "
                               "('Connection aborted.', ConnectionResetError)")
    assert errors.classifier(idempotent=False)(refused).kind is retry.Kind.TRANSIENT
    assert errors.classifier(idempotent=False)(reset) == retry.PERMANENT  # a POST may have arrived
    assert errors.classifier(idempotent=True)(reset).kind is retry.Kind.TRANSIENT
    assert errors.classifier(idempotent=False)(ksa.ConnectTimeout("timeout")) == retry.PERMANENT
    assert errors.classifier(idempotent=True)(ksa.ConnectTimeout("timeout")).kind is retry.Kind.TRANSIENT
    assert errors.classifier(idempotent=True)(ksa.SSLError("bad cert")) == retry.PERMANENT


def raised(wrapper, cause):
    """`wrapper` raised while handling `cause`, as keystoneauth raises its exceptions."""
    try:
        try:
            raise cause
        except OSError:  # every cause here is one
            raise wrapper  # noqa: B904 - implicitly chained, as keystoneauth does
    except Exception as exc:  # noqa: BLE001 - the test's own
        return exc


def test_a_connection_that_could_not_be_opened_is_unreachable_not_transient():
    """What keystoneauth wraps tells a refusal or a connect timeout (nothing sent: short
    retries, for any method) from a read timeout (the request may have arrived)."""
    import socket

    import requests
    from keystoneauth1 import exceptions as ksa

    for cause in (ConnectionRefusedError(111, "Connection refused"), socket.gaierror(-2, "Name or service not known"),
                  requests.exceptions.ConnectTimeout("connect timeout")):
        exc = raised(ksa.ConnectFailure("Unable to establish connection"), cause)
        assert errors.classifier(idempotent=False)(exc).kind is retry.Kind.UNREACHABLE, cause
    read = raised(ksa.ConnectTimeout("Request to http://x timed out"), requests.exceptions.ReadTimeout("read"))
    assert errors.classifier(idempotent=False)(read) == retry.PERMANENT
    assert errors.classifier(idempotent=True)(read).kind is retry.Kind.TRANSIENT


def test_auth_failure_is_a_clear_cloud_error_without_secrets():
    from keystoneauth1 import exceptions as ksa

    p = props(api_key="hunter2-secret")
    exc = ksa.Unauthorized("The request you have made requires authentication.")
    err = errors.to_cloud_error(exc, "has_vm", p.describe_identity(), p.auth_url)
    assert isinstance(err, CloudError)
    assert "refused the credentials of user 'u' (domain 'default')" in err.message
    assert "hunter2" not in err.message
    throttled = errors.to_cloud_error(errors.ApiError("compute", "GET", "/s", 429, "slow"), "has_vm", "x", "y")
    assert throttled.ok_to_retry and "retry_budget_seconds" in throttled.message


# ---------------------------------------------------------------- flavors


class FakeApi:
    """Answers GETs from a dict of path → body (no HTTP)."""

    def __init__(self, answers: dict[str, object]):
        self.answers = answers
        self.paths: list[str] = []

    def get(self, service, path, **kwargs):
        self.paths.append(path)
        return self.answers[path]


FLAVORS = {"/flavors/detail?is_public=None": {"flavors": [
    {"id": "1", "name": "m1.tiny", "vcpus": 1, "ram": 512, "disk": 1, "OS-FLV-EXT-DATA:ephemeral": 0},
    {"id": "2", "name": "m1.small", "vcpus": 1, "ram": 2048, "disk": 20, "OS-FLV-EXT-DATA:ephemeral": 0},
    {"id": "3", "name": "m1.eph", "vcpus": 2, "ram": 4096, "disk": 5, "OS-FLV-EXT-DATA:ephemeral": 16},
    {"id": "4", "name": "m1.big", "vcpus": 4, "ram": 8192, "disk": 80, "OS-FLV-EXT-DATA:ephemeral": 0},
    {"id": "5", "name": "m1.small-eph", "vcpus": 1, "ram": 4096, "disk": 5, "OS-FLV-EXT-DATA:ephemeral": 2},
    {"id": "6", "name": "m1.off", "vcpus": 8, "ram": 8192, "disk": 80, "OS-FLV-DISABLED:disabled": True},
]}}


def test_flavor_lookup_names_the_missing_flavor():
    api = FakeApi(FLAVORS)
    assert flavors.find(api, "m1.small")["id"] == "2"
    assert flavors.find(api, "4")["name"] == "m1.big"
    with pytest.raises(VMCreationFailed, match=r"flavor 'm9\.huge' not found.*m1\.small") as caught:
        flavors.find(api, "m9.huge")
    assert caught.value.ok_to_retry is False
    with pytest.raises(VMCreationFailed, match="at least 8 GiB"):
        flavors.find(api, "m1.small-eph")
    assert api.paths == ["/flavors/detail?is_public=None"] * 4  # one request per lookup


def test_calculate_picks_the_smallest_fitting_flavor():
    api = FakeApi(FLAVORS)
    assert flavors.calculate(api, VMResources(cpu=1, ram=1024, ephemeral_disk_size=10240), False) == \
        {"instance_type": "m1.small"}
    assert flavors.calculate(api, VMResources(cpu=2, ram=4096, ephemeral_disk_size=10240), False) == \
        {"instance_type": "m1.eph"}
    assert flavors.calculate(api, VMResources(cpu=1, ram=256, ephemeral_disk_size=1024), True) == \
        {"instance_type": "m1.tiny", "root_disk": {"size": 4}}
    assert flavors.calculate(api, VMResources(cpu=1, ram=256, ephemeral_disk_size=1024), False) == \
        {"instance_type": "m1.small"}
    with pytest.raises(CloudError, match="no flavor has 16 CPU"):
        flavors.calculate(api, VMResources(cpu=16, ram=1024, ephemeral_disk_size=0), False)


# ---------------------------------------------------------------- disks


def disks(**kw) -> Disks:
    return Disks(api=None, properties=props(**kw), vms=None)


def test_device_letters_skip_taken_ones_and_a_config_drive_disk():
    assert disks()._free_device("s", set()) == "/dev/sdb"
    assert disks()._free_device("s", {"b", "c"}) == "/dev/sdd"
    assert disks(config_drive="disk")._free_device("s", set()) == "/dev/sdc"
    assert disks(config_drive="cdrom")._free_device("s", set()) == "/dev/sdb"
    with pytest.raises(CloudError, match="no free device"):
        disks()._free_device("s", set("bcdefghijklmnopqrstuvwxyz"))


def test_hint_is_the_recorded_letter_as_sd():
    assert _hint("/dev/vdc") == "/dev/sdc"
    assert _hint("/dev/xvdd") == "/dev/sdd"
    assert _hint("/dev/sdb") == "/dev/sdb"
    with pytest.raises(CloudError):
        _hint(None)


# ---------------------------------------------------------------- networks


def nets(**entries) -> dict[str, Network]:
    return {name: Network.model_validate(value) for name, value in entries.items()}


def test_network_plan():
    plan = networks.plan(nets(a={"type": "manual", "ip": "10.0.0.5", "cloud_properties": {"net_id": "n1"}},
                              v={"type": "vip", "ip": "172.24.4.9"}), props())
    assert [n.name for n in plan.networks] == ["a"] and plan.vip_name == "v" and plan.gateway.name == "a"
    bad = [
        (nets(a={"type": "manual", "ip": "10.0.0.5", "cloud_properties": {}}), "needs cloud_properties.net_id"),
        (nets(v={"type": "vip", "ip": "1.2.3.4"}), "needs a manual or dynamic network"),
        (nets(a={"type": "dynamic"}, b={"type": "dynamic"}), "at most one dynamic"),
        (nets(a={"type": "manual", "ip": "10.0.0.5", "cloud_properties": {"net_id": "n"}},
              b={"type": "manual", "ip": "10.1.0.5", "cloud_properties": {"net_id": "m"}}), "use_dhcp: false"),
        (nets(a={"type": "manual", "ip": "10.0.0.5", "cloud_properties": {"net_id": "n", "subnet": "x"}}),
         "unknown property"),
    ]
    for networks_in, message in bad:
        with pytest.raises((VMCreationFailed, CpiError), match=message):
            networks.plan(networks_in, props(), strict=True)  # the unknown `subnet` is otherwise left out
    two = nets(a={"type": "manual", "ip": "10.0.0.5", "default": ["gateway"], "cloud_properties": {"net_id": "n"}},
               b={"type": "manual", "ip": "10.1.0.5", "cloud_properties": {"net_id": "m"}})
    assert networks.plan(two, props(use_dhcp=False, config_drive="cdrom")).gateway.name == "a"


# ---------------------------------------------------------------- metadata


def test_metadata_is_stringified_and_truncated_to_255():
    cleaned = tags.clean({"k" * 300: "v" * 300, "index": 0, "flag": True, "": "dropped", "none": None})
    assert cleaned == {"k" * 255: "v" * 255, "index": "0", "flag": "true", "none": ""}
    assert tags.vm_name({"name": "ig/uuid"}) == "ig/uuid"
    assert tags.vm_name({"job": "j", "index": "3"}) == "j/3"
    assert tags.vm_name({"compiling": "pkg"}) == "compiling/pkg"
    assert tags.vm_name({"director": "d"}) is None


# ---------------------------------------------------------------- waits


def test_waits_poll_adaptively_up_to_the_poll_interval_and_name_state_timeout():
    schedule = poll_schedule(props(wait_resource_poll_interval=2.0))
    assert list(itertools.islice(schedule.delays(), 7)) == [0.25, 0.375, 0.5625, 0.84375, 1.265625, 1.8984375, 2.0]
    assert next(poll_schedule(props(wait_resource_poll_interval=0.1)).delays()) == 0.1  # never above the cap
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    states = iter(["BUILD"] * 5 + ["ACTIVE"])
    result = waits.until(lambda: waits.Check((s := next(states)) == "ACTIVE", s, s), what="server x", timeout=60,
                         schedule=schedule, setting="state_timeout", sleep=sleep, clock=lambda: now[0])
    assert result == "ACTIVE"
    assert slept[0] == 0.25 and slept == sorted(slept) and max(slept) <= 2.0
    with pytest.raises(waits.WaitTimeout, match=r"\(state_timeout 5s\) waiting for server y \(still BUILD") as caught:
        waits.until(lambda: waits.Check(False, "BUILD"), what="server y", timeout=5, setting="state_timeout",
                    schedule=poll_schedule(props(wait_resource_poll_interval=1.0)), sleep=sleep, clock=lambda: now[0])
    assert caught.value.ok_to_retry


# ---------------------------------------------------------------- stemcell images


def test_root_image_is_streamed_from_the_stemcell_tarball(tmp_path):
    payload = bytes(range(256)) * 4096
    archive = tmp_path / "image"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("./root.img")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    root = _RootImage(archive)
    assert root.size() == len(payload)
    stream = root.open()
    assert len(stream) == len(payload)
    chunks = []
    while chunk := stream.read(65536):
        chunks.append(chunk)
    stream.close()
    assert b"".join(chunks) == payload

    plain = tmp_path / "disk.qcow2"
    plain.write_bytes(b"QFI\xfb" + b"\0" * 100)
    assert _RootImage(plain).size() == 104
    with pytest.raises(CloudError, match="does not exist"):
        _RootImage(tmp_path / "missing").size()
    empty = tmp_path / "empty.tgz"
    with tarfile.open(empty, "w:gz") as tar:
        info = tarfile.TarInfo("other")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(CloudError, match=r"without root\.img"):
        _RootImage(empty).size()


def test_heavy_stemcell_image_properties():
    stemcells = Stemcells(api=None, properties=props())
    from cpi.clouds.openstack.props import StemcellCloudProperties

    body = stemcells._image_body(StemcellCloudProperties.model_validate({
        "name": "bosh-openstack-kvm-ubuntu", "version": "1.5", "disk_format": "raw", "os_distro": "ubuntu",
        "auto_disk_config": True, "hw_vif_model": "virtio", "status": "evil", "nested": {"a": 1}}), {"team": "cpi"})
    assert body["name"] == "bosh-openstack-kvm-ubuntu/1.5" and body["visibility"] == "private"
    assert body["disk_format"] == "raw" and body["container_format"] == "bare"
    assert body["auto_disk_config"] == "true" and body["hw_vif_model"] == "virtio" and body["team"] == "cpi"
    assert "status" not in body and "nested" not in body and body["version"] == "1.5"


# ---------------------------------------------------------------- kept tokens


class FakePlugin:
    def __init__(self, state=None):
        self.state = state

    def get_auth_state(self):
        return self.state

    def set_auth_state(self, data):
        self.state = data


def test_token_cache_is_private_and_keyed_by_the_secret(tmp_path):
    from cpi.clouds.openstack.tokens import TokenCache

    directory = tmp_path / "tokens"
    cache = TokenCache(directory, props())
    cache.save(FakePlugin('{"auth_token": "tok-1"}'))
    (path,) = [p for p in directory.iterdir() if p.name != "salt"]
    assert oct(directory.stat().st_mode & 0o777) == "0o700" and oct(path.stat().st_mode & 0o777) == "0o600"
    assert "pw-Sekr1t" not in path.name and "pw-Sekr1t" not in path.read_text()

    again = FakePlugin()
    assert TokenCache(directory, props()).load(again) and again.state == '{"auth_token": "tok-1"}'
    other = FakePlugin()
    assert not TokenCache(directory, props(api_key="another-password")).load(other) and other.state is None
    assert not TokenCache(directory, props(username="someone-else")).load(FakePlugin())

    directory.chmod(0o755)
    assert TokenCache(directory, props()).load(FakePlugin()), "a directory others could only read is tightened"
    assert directory.stat().st_mode & 0o777 == 0o700

    directory.chmod(0o777)
    with pytest.raises(CpiError, match="token_cache_dir"):
        TokenCache(directory, props()).load(FakePlugin())
    directory.chmod(0o700)


def test_links_in_the_token_cache_are_never_followed(tmp_path):
    from cpi.clouds.openstack.tokens import TokenCache

    directory, victim = tmp_path / "tokens", tmp_path / "victim"
    victim.write_text("untouched")
    cache = TokenCache(directory, props())
    path = cache.path()
    path.symlink_to(victim)
    plugin = FakePlugin()
    assert not cache.load(plugin) and plugin.state is None, "a link is not a kept token"
    cache.save(FakePlugin('{"auth_token": "tok-2"}'))
    assert victim.read_text() == "untouched" and not path.is_symlink()
    assert TokenCache(directory, props()).load(plugin) and plugin.state == '{"auth_token": "tok-2"}'


def test_default_token_cache_is_in_the_users_home(monkeypatch, tmp_path):
    from cpi.clouds.openstack.tokens import default_directory

    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_directory() == tmp_path / ".cache" / "bosh-cpi" / "openstack-tokens"


def test_shared_keys_and_errors_carry_no_user_info():
    from cpi.clouds.openstack.errors import to_cloud_error
    from cpi.clouds.openstack.session import _shared_key

    assert _shared_key("compute", "https://bosh:hunter2@nova.example:8774/v2.1") == \
        "openstack-compute-nova.example:8774"
    message = str(to_cloud_error(ConnectionRefusedError("refused"), "create_vm", "bosh", "https://bosh:hunter2@ks:5000/v3"))
    assert "hunter2" not in message


# ---------------------------------------------------------------- load balancer pools


class FakeOctavia:
    """Octavia's answers for one pool on one load balancer that is PENDING_UPDATE once."""

    def __init__(self):
        from cpi.channel import Channel

        self.channel = Channel()  # a real call's stages, which the session's waits go through
        self.calls: list[tuple[str, str]] = []
        self.lb_states = iter(["PENDING_UPDATE", "ACTIVE"])

    def get(self, service, path, **kwargs):
        assert service == "load-balancer"
        self.calls.append(("GET", path))
        if path.startswith("/lbaas/pools?"):
            return {"pools": [{"id": "pool-1", "name": "web", "loadbalancers": [{"id": "lb-1"}]}]} \
                if "name=web" in path else {"pools": []}
        if path == "/lbaas/loadbalancers/lb-1":
            return {"loadbalancer": {"id": "lb-1", "provisioning_status": next(self.lb_states)}}
        raise AssertionError(path)

    def post(self, service, path, body, **kwargs):
        self.calls.append(("POST", path))
        assert kwargs["also"](errors.ApiError("load-balancer", "POST", path, 409, "immutable"))
        return {"member": {"id": "member-1", **body["member"]}}

    def delete(self, service, path, **kwargs):
        self.calls.append(("DELETE", path))
        return types.SimpleNamespace(status_code=404 if "gone" in path else 204)


def test_load_balancer_membership_round_trip():
    from cpi.clouds.openstack import lbaas
    from cpi.clouds.openstack.props import LoadBalancerPool

    api, p = FakeOctavia(), props(wait_resource_poll_interval=0.01)
    member = lbaas.add_member(api, p, LoadBalancerPool(name="web", port=8080, monitoring_port=8081),
                              "10.0.0.5", "sub-1")
    assert member == ("pool-1", "member-1")
    assert ("POST", "/lbaas/pools/pool-1/members") in api.calls
    assert api.calls.count(("GET", "/lbaas/loadbalancers/lb-1")) == 2  # waited until ACTIVE
    metadata = lbaas.metadata_for([member, ("pool-2", "gone-member")])
    assert metadata == {"lbaas_pool_1": "pool-1/member-1", "lbaas_pool_2": "pool-2/gone-member"}
    assert lbaas.memberships({**metadata, "director": "d"}) == [("pool-1", "member-1"), ("pool-2", "gone-member")]
    for pool_id, member_id in lbaas.memberships(metadata):
        lbaas.remove_member(api, p, pool_id, member_id)
    assert ("DELETE", "/lbaas/pools/pool-2/members/gone-member") in api.calls
    with pytest.raises(VMCreationFailed, match="pool 'nope' not found"):
        lbaas.add_member(api, p, LoadBalancerPool(name="nope", port=80), "10.0.0.5", None)


def test_a_context_auth_url_never_receives_the_config_files_password(tmp_path):
    """A cpi-config that set only auth_url collected the OpenStack password: through bin/cpi,
    the listener it names gets nothing (the file's identity service is asked, and is down
    here); a context with its own api_key may send that anywhere."""
    import json

    from tests.support.listener import Listener
    from tests.support.runner import Cpi

    listener = Listener()
    try:
        config = tmp_path / "cpi.json"
        config.write_text(json.dumps({"cloud": {"plugin": "openstack", "properties": {"openstack": {
            "auth_url": "http://127.0.0.1:9/v3", "username": "admin", "api_key": "file-password-Zq81",
            "project": "cpi", "domain": "Default", "default_key_name": "bosh", "retry_budget_seconds": 1,
            "connect_timeout": 1}}}}))
        cpi = Cpi(config)
        response = cpi.call("has_vm", "vm-1", context={"auth_url": listener.url + "/v3"})
        assert response.error is not None and listener.seen == []
        assert "context key 'auth_url' is ignored" in response.log
        cpi.call("has_vm", "vm-1", context={"auth_url": listener.url + "/v3", "api_key": "context-password-7"})
        bodies = " ".join(seen["body"] for seen in listener.seen)
        assert "context-password-7" in bodies and "file-password-Zq81" not in bodies
    finally:
        listener.close()


def test_what_openstack_no_longer_has_is_accepted_and_refused_where_needed(tmp_path):
    """bosh-deployment's keystone-v2.yml, nova-networking.yml and auto-anti-affinity.yml keys
    are accepted (a manifest using them still renders and the config is read), and only
    what would need the removed feature fails, saying why: here create_vm, before anything
    is asked of OpenStack (its identity service is down)."""
    import json

    from tests.support.runner import Cpi

    assert props(tenant="t").project == MINIMAL["project"]  # beside project: unused
    assert props(enable_auto_anti_affinity=True).enable_auto_anti_affinity is True
    config = tmp_path / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "openstack", "properties": {"openstack": {
        **MINIMAL, "auth_url": "http://127.0.0.1:9/v3", "use_nova_networking": True, "retry_budget_seconds": 1,
        "connect_timeout": 1}}}}))
    response = Cpi(config).call("create_vm", "agent-1", "image-1", {"instance_type": "m1.small"},
                                {"default": {"type": "dynamic", "cloud_properties": {"net_id": "n"}}}, [], {})
    assert response.error["type"] == "Bosh::Clouds::VMCreationFailed"
    assert "use_nova_networking: Nova networking is gone from OpenStack" in response.error["message"]
    assert response.error["ok_to_retry"] is False
