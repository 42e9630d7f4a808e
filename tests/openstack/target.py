"""The openstack cloud as a lifecycle target: real Keystone, Nova, Neutron, Cinder and Glance
on 127.0.0.1 (tests/openstack/setup.sh), or a real cloud.

Checks look at OpenStack itself (keystoneauth1 in the test process), never at what the CPI
says.

Which cloud:
- `CPI_LIFECYCLE_OPENSTACK_CONFIG=/path/file.json`: a real cloud, described by a file of
  either shape (load() checks it and names what is missing):
  - a plain cpi.json (docs/cloud-openstack.md's: `cloud.plugin: openstack`, password auth in
    `cloud.properties.openstack`) with a `"lifecycle": {...}` next to `"cloud"` holding
    the keys below from `flavor` on;
  - or the shape setup.sh writes to $OS_STATE_DIR/cpi-openstack.json (auth_url, username,
    password, project_name, user_domain_name, project_domain_name, region, interface,
    flavor, image.id, network.id, subnet.cidr/gateway_ip, free_ip_range.start/end,
    optionally floating_ip, volume_type, flavors, security_groups) plus an optional
    `"cpi": {...}` of further `cloud.properties.openstack` keys (ca_cert, ...).
- otherwise the loopback services: this needs root on Debian. tests/openstack/services.py
  runs setup.sh (idempotent: seconds when everything is up) once per session before the
  first test, showing its progress, under its own time budget; `make()` uses its outcome and
  skips with the reason when it failed or cannot run here.

cleanup() deletes what the tests left that was not there when the session started.
"""

from __future__ import annotations

import ipaddress
import json
import os
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from tests.lifecycle.targets import Target
from tests.openstack import services
from tests.support.config_files import read_json

ENV = "CPI_LIFECYCLE_OPENSTACK_CONFIG"
STATE_DIR = services.STATE_DIR
_token_dir: list[Path] = []


def token_dir() -> Path:
    """Kept Keystone tokens of the test configs: not the operator's ~/.cache, and not a fixed
    name in /tmp either (another user could make it first; the CPI would then refuse it). One
    private directory per test session, in the run's own directory (tests/support/suite.py),
    which a passing run removes."""
    if not _token_dir:
        from tests.support import suite

        made = suite.root() / "openstack-tokens"
        made.mkdir(mode=0o700, exist_ok=True)
        _token_dir.append(made)
    return _token_dir[0]

_prepared: dict[str, Any] = {}


class Client:
    """Plain REST calls to the cloud, for the tests' own checks and cleanup."""

    def __init__(self, env: dict[str, Any], admin: bool = False):
        from keystoneauth1 import session as ksa_session
        from keystoneauth1.identity import v3

        who = env["admin"] if admin else env
        auth = v3.Password(
            auth_url=env["auth_url"],
            username=who["username"],
            password=who["password"],
            project_name=who.get("project_name"),
            user_domain_name=who.get("user_domain_name") or env.get("domain") or "Default",
            project_domain_name=who.get("project_domain_name") or env.get("domain") or "Default",
        )
        self.session = ksa_session.Session(auth=auth, verify=env.get("verify", True))
        self.region = env.get("region")
        self.interface = env.get("interface", "public")

    def request(self, service: str, method: str, path: str, ok=(200, 201, 202, 204), **kwargs) -> Any:
        headers = kwargs.pop("headers", {})
        if service == "compute":
            headers.setdefault("OpenStack-API-Version", "compute 2.47")
            headers.setdefault("X-OpenStack-Nova-API-Version", "2.47")
        response = self.session.request(
            path, method, endpoint_filter={"service_type": service, "interface": self.interface,
                                           "region_name": self.region},
            raise_exc=False, headers=headers, **kwargs,
        )
        if response.status_code not in ok:
            raise AssertionError(f"{service} {method} {path} → {response.status_code}: {response.text[:400]}")
        if response.content and "json" in response.headers.get("Content-Type", ""):
            return response.json()
        return response

    def get(self, service: str, path: str, **kwargs) -> Any:
        return self.request(service, "GET", path, **kwargs)

    # -- lookups used by the checks
    def server(self, vm_cid: str) -> dict | None:
        body = self.request("compute", "GET", f"/servers/{vm_cid}", ok=(200, 404))
        return body["server"] if isinstance(body, dict) and "server" in body else None

    def volume(self, disk_cid: str) -> dict | None:
        body = self.request("block-storage", "GET", f"/volumes/{disk_cid}", ok=(200, 404))
        return body["volume"] if isinstance(body, dict) and "volume" in body else None

    def ports(self, **filters) -> list[dict]:
        query = urllib.parse.urlencode(filters)
        return self.get("network", f"/v2.0/ports?{query}")["ports"]

    def inventory(self) -> dict[str, set[str]]:
        project = self.session.get_project_id()
        return {
            "servers": {s["id"] for s in self.get("compute", "/servers")["servers"]},
            "volumes": {v["id"] for v in self.get("block-storage", "/volumes")["volumes"]},
            "snapshots": {s["id"] for s in self.get("block-storage", "/snapshots")["snapshots"]},
            "ports": {p["id"] for p in self.ports(project_id=project)
                      if not (p.get("device_owner") or "").startswith("network:")},
            "images": {i["id"] for i in self.get("image", f"/v2/images?owner={project}")["images"]},
        }


class OpenStackTarget(Target):
    name = "openstack"
    supports_manual_ips = True

    def __init__(self, config_path: Path, env: dict[str, Any]):
        super().__init__(config_path)
        self.env = env
        self.client = Client(env)
        self.subnet = ipaddress.ip_network(env["subnet"]["cidr"])
        self.first_ip = ipaddress.ip_address(env["free_ip_range"]["start"])
        self.last_ip = ipaddress.ip_address(env["free_ip_range"]["end"])
        self.baseline = self.client.inventory()

    # -- inputs
    @property
    def net_id(self) -> str:
        return self.env["network"]["id"]

    @property
    def image_id(self) -> str:
        return self.env["image"]["id"]

    def stemcell_args(self) -> list[Any]:
        return ["", {"name": "bosh-openstack-kvm-ubuntu-jammy-go_agent", "version": "1.0",
                     "infrastructure": "openstack", "disk_format": "qcow2", "container_format": "bare",
                     "image_id": self.image_id}]

    def vm_cloud_properties(self) -> dict[str, Any]:
        props: dict[str, Any] = {"instance_type": self.env["flavor"]}
        if self.env.get("keypair"):
            props["key_name"] = self.env["keypair"]["name"]
        return props

    def disk_cloud_properties(self) -> dict[str, Any]:
        return {}

    def ip(self, index: int) -> str:
        ip = self.first_ip + index
        assert ip <= self.last_ip, f"index {index} is beyond the free range ending {self.last_ip}"
        return str(ip)

    def manual_network(self, index: int) -> dict[str, Any]:
        return {
            "default": {
                "type": "manual",
                "ip": self.ip(index),
                "netmask": str(self.subnet.netmask),
                "gateway": self.env["subnet"]["gateway_ip"],
                "dns": ["8.8.8.8"],
                "default": ["dns", "gateway"],
                "cloud_properties": {"net_id": self.net_id},
            }
        }

    def dynamic_network(self) -> dict[str, Any]:
        return {"default": {"type": "dynamic", "dns": ["8.8.8.8"], "default": ["dns", "gateway"],
                            "cloud_properties": {"net_id": self.net_id}}}

    # -- checks
    def disk_size_mib(self, disk_cid: str) -> int:
        volume = self.client.volume(disk_cid)
        assert volume is not None, f"volume {disk_cid} does not exist"
        return int(volume["size"]) * 1024

    def vm_exists(self, vm_cid: str) -> bool:
        server = self.client.server(vm_cid)
        return server is not None and server["status"] not in ("DELETED", "SOFT_DELETED")

    def disk_attached_to(self, disk_cid: str) -> str | None:
        volume = self.client.volume(disk_cid)
        attachments = (volume or {}).get("attachments") or []
        return attachments[0]["server_id"] if attachments else None

    tags_stemcells = False  # stemcell_args() is a light stemcell: the image is not the CPI's

    def stemcell_tags(self, stemcell_cid: str) -> dict[str, str]:
        image = self.client.get("image", f"/v2/images/{stemcell_cid.removesuffix(' light')}")
        return {key: value for key, value in image.items() if isinstance(value, str)}

    def offered_resources(self, vm_cloud_properties: dict[str, Any]) -> dict[str, int]:
        flavors = self.client.get("compute", "/flavors/detail")["flavors"]
        (flavor,) = [f for f in flavors if vm_cloud_properties["instance_type"] in (f["name"], f["id"])]
        ephemeral_gib = int(flavor.get("OS-FLV-EXT-DATA:ephemeral") or 0)
        # without an ephemeral disk the agent partitions the root disk (sized by root_disk
        # when the answer says so)
        root_gib = (vm_cloud_properties.get("root_disk") or {}).get("size", flavor["disk"] * 1024) / 1024
        return {"cpu": flavor["vcpus"], "ram": flavor["ram"],
                "ephemeral_disk": int((ephemeral_gib or root_gib) * 1024)}

    def leftovers(self) -> dict[str, list[str]]:
        now = self.client.inventory()
        return {kind: sorted(ids - self.baseline[kind]) for kind, ids in now.items() if ids - self.baseline[kind]}

    def cleanup(self) -> None:
        left = self.leftovers()
        for server in left.get("servers", []):
            self.client.request("compute", "DELETE", f"/servers/{server}", ok=(204, 404))
        _wait(lambda: not (set(left.get("servers", [])) & self.client.inventory()["servers"]), 120)
        for snapshot in left.get("snapshots", []):
            self.client.request("block-storage", "DELETE", f"/snapshots/{snapshot}", ok=(202, 404))
        _wait(lambda: not (set(left.get("snapshots", [])) & self.client.inventory()["snapshots"]), 120)
        for volume in left.get("volumes", []):
            self.client.request("block-storage", "DELETE", f"/volumes/{volume}", ok=(202, 400, 404))
        for port in left.get("ports", []):
            self.client.request("network", "DELETE", f"/v2.0/ports/{port}", ok=(204, 404))
        for image in left.get("images", []):
            self.client.request("image", "DELETE", f"/v2/images/{image}", ok=(204, 404))


def _wait(condition, timeout: float) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return
        time.sleep(0.5)


# ---------------------------------------------------------------- preparing the cloud


def _loopback_env() -> dict[str, Any]:
    """The loopback services' description, set up before the first test by the
    tests.openstack.services plugin (with its progress shown and its own time budget), or
    here when the plugin did not run; skips with the reason when the set-up failed."""
    result = services.outcome() or services.ensure()
    if not result.ok:
        pytest.skip(result.reason)
    state = STATE_DIR / "cpi-openstack.json"
    if not state.exists():
        pytest.skip(f"tests/openstack/setup.sh finished but wrote no {state}")
    return json.loads(state.read_text())


IDENTITY_KEYS = ("auth_url", "username", "password", "project_name")
LIFECYCLE_KEYS = ("flavor", "image.id", "network.id", "subnet.cidr", "subnet.gateway_ip",
                  "free_ip_range.start", "free_ip_range.end")
LIFECYCLE_EXAMPLE = ('"lifecycle": {"flavor": "m1.small", "image": {"id": "..."}, "network": {"id": "..."}, '
                     '"subnet": {"cidr": "10.0.0.0/24", "gateway_ip": "10.0.0.1"}, '
                     '"free_ip_range": {"start": "10.0.0.100", "end": "10.0.0.150"}}')


class LifecycleConfigError(ValueError):
    """The file named by CPI_LIFECYCLE_OPENSTACK_CONFIG lacks something; the message names it."""


def _dig(doc: dict[str, Any], dotted: str) -> Any:
    value: Any = doc
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def load(path: Path) -> dict[str, Any]:
    """The cloud description (setup.sh's shape) from either shape of the file."""
    where = f"{ENV}={path}"
    doc = read_json(path, where, LifecycleConfigError)
    if not isinstance(doc, dict):
        raise LifecycleConfigError(f"{where}: expected a JSON object")
    if "cloud" in doc:
        cloud = doc["cloud"] if isinstance(doc["cloud"], dict) else {}
        if cloud.get("plugin") != "openstack":
            raise LifecycleConfigError(f"{where}: cloud.plugin must be \"openstack\" "
                                       "(the lifecycle runs the openstack cloud)")
        props = (cloud.get("properties") or {}).get("openstack")
        if not isinstance(props, dict):
            raise LifecycleConfigError(f"{where}: cloud.properties.openstack is missing (auth_url and credentials)")
        absent = [key for key in ("auth_url", "username", "api_key", "project") if not props.get(key)]
        if absent:
            raise LifecycleConfigError(
                f"{where}: cloud.properties.openstack.{', cloud.properties.openstack.'.join(absent)} missing "
                f"(the lifecycle checks the cloud itself with password auth)")
        lifecycle = doc.get("lifecycle") if isinstance(doc.get("lifecycle"), dict) else {}
        env = {
            **lifecycle,
            "auth_url": props["auth_url"],
            "username": props["username"],
            "password": props["api_key"],
            "project_name": props["project"],
            "user_domain_name": props.get("user_domain_name") or props.get("domain"),
            "project_domain_name": props.get("project_domain_name") or props.get("domain"),
            "region": props.get("region"),
            "interface": str(props.get("endpoint_type") or "public").removesuffix("URL"),
            "cpi": props,
        }
        if props.get("ssl_verify") is False:
            env["verify"] = False
        env = {k: v for k, v in env.items() if v is not None}
        missing = [f"lifecycle.{key}" for key in LIFECYCLE_KEYS if not _dig(env, key)]
    else:
        missing = [key for key in IDENTITY_KEYS + LIFECYCLE_KEYS if not _dig(doc, key)]
        env = doc
    if missing:
        raise LifecycleConfigError(
            f"{where}: {', '.join(missing)} missing. Give a cpi.json with {LIFECYCLE_EXAMPLE} next to "
            f"\"cloud\", or the shape tests/openstack/setup.sh writes (see tests/openstack/target.py)")
    return env


def prepare() -> dict[str, Any]:
    """The cloud description (memoized for the session)."""
    if "env" not in _prepared:
        path = os.environ.get(ENV)
        if path:
            try:
                env = load(Path(path))
            except LifecycleConfigError as exc:
                pytest.fail(str(exc), pytrace=False)
            env["real"] = True
        else:
            env = _loopback_env()
            env["real"] = False
        _prepared["env"] = env
    return _prepared["env"]


def cpi_properties(env: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "auth_url": env["auth_url"],
        "username": env["username"],
        "api_key": env["password"],
        "project": env["project_name"],
        "user_domain_name": env.get("user_domain_name") or env.get("domain"),
        "project_domain_name": env.get("project_domain_name") or env.get("domain"),
        "region": env.get("region"),
        "endpoint_type": env.get("interface", "public"),
        "state_timeout": 120,
        "wait_resource_poll_interval": 2,
        "retry_budget_seconds": 60,
        "token_cache_dir": str(token_dir()),
    }
    props.update(env.get("cpi") or {})
    props.update(overrides)
    return {k: v for k, v in props.items() if v is not None}


def write_config(path: Path, env: dict[str, Any], **overrides: Any) -> Path:
    config = {"cloud": {"plugin": "openstack", "properties": {
        "openstack": cpi_properties(env, **overrides),
        "agent": {"mbus": "nats://nats:nats-secret-pw@127.0.0.1:4222", "ntp": ["0.pool.ntp.org"]},
    }}}
    path.write_text(json.dumps(config, indent=2))
    return path


def make(tmp_path_factory) -> OpenStackTarget:
    env = prepare()
    config = write_config(tmp_path_factory.mktemp("openstack-cloud") / "cpi.json", env)
    return OpenStackTarget(config, env)
