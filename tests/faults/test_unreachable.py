"""An endpoint that cannot be reached fails the call fast, naming the endpoint and the
cpi.json setting that names it, on every cloud (#32): a closed port, a host name that does
not resolve (`.invalid`: offline, at once) and a server that speaks no TLS, through real
bin/cpi processes. has_vm on a closed AWS port used to answer after 203 s (51 attempts,
ok_to_retry true), on a closed vCenter or NSX manager after 300 s.

The cases set retry_budget_seconds to 2, which bounds the short budget of unreachable
endpoints too, so each takes a few seconds; the default bound (under 30 s, while the
throttling budget stays 600 s) is shown once, on AWS. That throttling and 5xx keep their
budgets is tests/unit/test_retry_budget.py's (and tests/aws/test_aws_cases.py's, live)."""

from __future__ import annotations

import json
import socket
import time
import types
from pathlib import Path

import pytest

from tests.openstack import target as os_target
from tests.openstack.fixtures import openstack_cloud  # noqa: F401 - a fixture
from tests.operator.test_cli_timeout import Hung
from tests.support.listener import Listener
from tests.support.runner import Cpi
from tests.vsphere import target as vsphere_target

SECRET = "unreachable-s3cret-pw"
#: the budget of the quick cases, and what one bin/cpi process may take besides
BUDGET = 2
SLACK = 6
MISSING = "nonexistent.invalid"


@pytest.fixture(scope="module")
def closed():
    """`127.0.0.1:PORT` that refuses connections: bound, never listening, so nothing else takes it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    yield f"127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


@pytest.fixture(scope="module")
def plain():
    """`127.0.0.1:PORT` of a server that answers in plain HTTP: a TLS handshake fails there."""
    listener = Listener()
    yield listener.url.split("://", 1)[1]
    listener.close()


@pytest.fixture(scope="module")
def silent():
    """`127.0.0.1:PORT` that never completes a connection, as a host behind a firewall that
    drops packets: a listener whose backlog of one is taken and never accepted."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    taken = socket.create_connection(listener.getsockname())
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    taken.close()
    listener.close()


@pytest.fixture(scope="module")
def mute():
    """`127.0.0.1:PORT` that takes every connection and never says a word: a TLS client's
    hello goes unanswered (to urllib3, a read timeout; but nothing was sent)."""
    server = Hung()
    yield f"127.0.0.1:{server.port}"
    server.close()


@pytest.fixture(scope="module")
def at(closed, plain, silent, mute):
    return types.SimpleNamespace(closed=closed, plain=plain, silent=silent, mute=mute)


def aws(path: Path, endpoint: str, **properties) -> Path:
    config = {"cloud": {"plugin": "aws", "properties": {
        "aws": {"ec2_endpoint": endpoint, "region": "us-east-1", "credentials_source": "static",
                "access_key_id": "AKIAUNREACHABLE", "secret_access_key": SECRET, **properties},
        "agent": {"mbus": f"nats://nats:{SECRET}@127.0.0.1:4222"}}}}
    path.write_text(json.dumps(config))
    return path


#: what os_target.cpi_properties reads: Keystone is never reached, so no real account
NO_OPENSTACK = {"username": "cpi", "password": SECRET, "project_name": "cpi", "domain": "Default",
                "region": "RegionOne"}


def openstack(path: Path, auth_url: str, **properties) -> Path:
    return os_target.write_config(path, {**NO_OPENSTACK, "auth_url": auth_url}, retry_budget_seconds=BUDGET,
                                  token_cache=False, **properties)


def vsphere(path: Path, vcenter: str, **properties) -> Path:
    host, _, port = vcenter.rpartition(":") if vcenter.count(":") == 1 else (vcenter, "", "443")
    server = types.SimpleNamespace(host=host, port=int(port), username="administrator@vsphere.local", password=SECRET)
    return vsphere_target.write_config(path, server, retry_budget_seconds=BUDGET, **properties)


HAS_VM = ("has_vm", "i-0123456789abcdef0")
#: a managed network: create_network asks NSX-T only, never the vCenter
CREATE_NETWORK = ("create_network", {"type": "manual", "range": "192.168.5.0/24", "gateway": "192.168.5.1",
                                     "cloud_properties": {"t0_router_id": "t0-1", "transport_zone_id": "tz-1"}})

#: (config(path, at), request, what the message must say: the endpoint, why, the setting)
CASES = {
    "aws-refused": (lambda p, at: aws(p, f"http://{at.closed}", retry_budget_seconds=BUDGET), HAS_VM,
                    ["cannot open a connection to http://{closed}: connection refused", "check aws.ec2_endpoint"]),
    "aws-unknown-host": (lambda p, at: aws(p, f"https://ec2.{MISSING}", retry_budget_seconds=BUDGET),
                         HAS_VM, [f"https://ec2.{MISSING}: the host name does not resolve", "aws.ec2_endpoint"]),
    "aws-no-tls": (lambda p, at: aws(p, f"https://{at.plain}", retry_budget_seconds=BUDGET), HAS_VM,
                   ["cannot open a connection to https://{plain}: TLS handshake failed",
                    "check aws.ca_cert_file (or aws.connection_options.ca_cert) and aws.ec2_endpoint"]),
    "aws-silent": (lambda p, at: aws(p, f"http://{at.silent}", connect_timeout=0.5, retry_budget_seconds=BUDGET),
                   HAS_VM, ["http://{silent}: no connection within connect_timeout", "check aws.ec2_endpoint"]),
    "aws-mute": (lambda p, at: aws(p, f"https://{at.mute}", connect_timeout=0.5, retry_budget_seconds=BUDGET),
                 HAS_VM, [("https://{mute}: the server accepted the connection but answered no TLS handshake within "
                          "connect_timeout"), "check aws.ec2_endpoint"]),
    "openstack-auth-mute": (lambda p, at: openstack(p, f"https://{at.mute}/v3", connect_timeout=0.5), HAS_VM,
                            ["https://{mute}/v3: the server accepted the connection but answered no TLS handshake"]),
    # the token request once waited read_timeout (120 s) to connect
    "openstack-auth-silent": (lambda p, at: openstack(p, f"http://{at.silent}/v3", connect_timeout=0.5), HAS_VM,
                              ["http://{silent}/v3: no connection within connect_timeout", "openstack.auth_url"]),
    "openstack-auth-refused": (lambda p, at: openstack(p, f"http://{at.closed}/v3"), HAS_VM,
                               ["keystone token: cannot open a connection to http://{closed}/v3: connection refused",
                                "check openstack.auth_url"]),
    "openstack-auth-unknown-host": (lambda p, at: openstack(p, f"https://keystone.{MISSING}:5000/v3"),
                                    HAS_VM, ["the host name does not resolve", "check openstack.auth_url"]),
    "openstack-auth-no-tls": (lambda p, at: openstack(p, f"https://{at.plain}/v3"), HAS_VM,
                              ["https://{plain}/v3: TLS handshake failed",
                               "check openstack.ca_cert (or connection_options.ca_cert) and openstack.auth_url"]),
    "vsphere-refused": (lambda p, at: vsphere(p, at.closed), HAS_VM,
                        ["cannot open a connection to the vCenter at {closed}: connection refused",
                         "check vsphere.host (the job's vcenter.host)"]),
    "vsphere-unknown-host": (lambda p, at: vsphere(p, f"vcenter.{MISSING}"), HAS_VM,
                             [f"the vCenter at vcenter.{MISSING}:443: the host name does not resolve",
                              "check vsphere.host"]),
    "vsphere-no-tls": (lambda p, at: vsphere(p, at.plain), HAS_VM,
                       ["TLS with the vCenter at {plain} failed", "WRONG_VERSION_NUMBER",
                        "that vsphere.host (the job's vcenter.host) names its HTTPS port"]),
    "nsxt-refused": (lambda p, at: vsphere(p, at.closed, nsxt={"host": at.closed, "username": "admin",
                                                                       "password": SECRET}), CREATE_NETWORK,
                     ["cannot open a connection to the NSX-T manager at {closed}: connection refused",
                      "check nsxt.host (the job's vcenter.nsxt.host)"]),
}


def unreachable(cpi: Cpi, request: tuple, bound: float) -> tuple[dict, str, float]:
    """The call's error (a CloudError, not ok_to_retry), its log, and how long it took,
    checked to be within `bound` and to leak no secret."""
    started = time.monotonic()
    response = cpi.call(*request)
    took = time.monotonic() - started
    assert took < bound, (took, response.log)
    error = response.error
    assert error is not None, response.log
    assert error["type"] == "Bosh::Clouds::CloudError" and error["ok_to_retry"] is False, error
    assert SECRET not in response.raw and SECRET not in response.stderr
    return error, response.log, took


@pytest.mark.parametrize("case", CASES)
def test_an_unreachable_endpoint_fails_fast_naming_it_and_its_setting(case, at, tmp_path):
    config, request, said = CASES[case]
    error, log, _ = unreachable(Cpi(config(tmp_path / "cpi.json", at)), request, BUDGET + SLACK)
    for text in said:
        assert text.format(**vars(at)) in error["message"], error["message"]
    if "TLS" not in said[0]:
        assert "unreachable (" in log  # retried as a connection never opened, not as a busy service


def test_by_default_a_closed_port_fails_within_30_s_while_throttling_keeps_600(closed, tmp_path):
    from cpi.clouds.aws.job_config import AwsProperties

    assert AwsProperties.model_fields["retry_budget_seconds"].default == 600  # throttling's budget is unchanged
    error, log, took = unreachable(Cpi(aws(tmp_path / "cpi.json", f"http://{closed}")), HAS_VM, 30)
    assert took > 5, took  # retried meanwhile: a refusal while a load balancer restarts is not fatal
    assert "of 600s budget used), connections unopened for" in log
    # whichever ends first: the connections' 10 s, or aws.max_retries' 8 retries (the official
    # default), which the jittered waits of a refusal use up in about as long
    assert "would pass their budget (10s)" in log or "after 9 attempts" in log, log
    assert f"http://{closed}" in error["message"] and "aws.ec2_endpoint" in error["message"]


def test_a_closed_service_endpoint_behind_a_working_keystone_is_named(openstack_cloud, closed, tmp_path):  # noqa: F811
    path = os_target.write_config(tmp_path / "cpi.json", openstack_cloud.env, retry_budget_seconds=BUDGET,
                                  endpoint_overrides={"compute": f"http://{closed}/v2.1"})
    error, _, _ = unreachable(Cpi(path), HAS_VM, BUDGET + SLACK)
    assert error["message"].startswith(f"compute GET /servers/{HAS_VM[1]}: cannot open a connection to "
                                       f"http://{closed}: connection refused; check "
                                       "openstack.endpoint_overrides.compute"), error["message"]


def test_a_closed_redis_store_costs_the_call_nothing_and_warns_once_naming_it(openstack_cloud, closed,  # noqa: F811
                                                                               tmp_path):
    """Redis only shares the pace: the call goes on with this machine's file, after one
    warning for all its endpoints (Keystone's and Nova's here), with the password masked."""
    path = os_target.write_config(tmp_path / "cpi.json", openstack_cloud.env)
    config = json.loads(path.read_text())
    config["cloud"]["properties"]["throttle"] = {"redis_url": f"redis://:{SECRET}@{closed}/0",
                                                 "state_dir": str(tmp_path / "throttle")}
    path.write_text(json.dumps(config))
    started = time.monotonic()
    response = Cpi(path).call(*HAS_VM)
    assert response.result is False
    assert time.monotonic() - started < SLACK
    warnings = [line for line in response.log.splitlines() if "Redis" in line]
    assert len(warnings) == 1, warnings
    assert f"the Redis at {closed} (throttle.redis_url) cannot be reached: connection refused" in warnings[0]
    assert SECRET not in response.raw and SECRET not in response.stderr



def test_an_endpoint_derived_from_the_region_names_the_region():
    from cpi.clouds.aws.job_config import AwsProperties
    from cpi.clouds.aws.session import Aws

    keys = {"credentials_source": "static", "access_key_id": "AKIAUNREACHABLE", "secret_access_key": SECRET}
    derived = Aws(AwsProperties.model_validate({"region": "eu-west-1", "dualstack": True, **keys}))
    assert derived.endpoint_setting("ec2") == ("aws.region with aws.dualstack (the endpoint is derived from it; "
                                               "aws.ec2_endpoint names one)")
    assert Aws(AwsProperties.model_validate({"region": "eu-west-1", "elb_endpoint": "https://elb.x", **keys})
               ).endpoint_setting("elbv2") == "aws.elb_endpoint"


def test_a_catalog_endpoint_names_what_chose_it():
    """A service endpoint from Keystone's catalog (not an override) is named by what picks
    it there; an override by its key."""
    from cpi.clouds.openstack.props import OpenStackProperties
    from cpi.clouds.openstack.session import OpenStack

    base = {"auth_url": "https://keystone:5000/v3", "username": "u", "api_key": SECRET, "project": "p",
            "domain": "default"}
    catalog = OpenStack(OpenStackProperties.model_validate(base))
    assert catalog._setting_of("compute") == ("the service catalog's compute endpoint for openstack.region and "
                                              "openstack.endpoint_type (openstack.endpoint_overrides.compute "
                                              "replaces it)")
    assert catalog._setting_of("identity") == "openstack.auth_url"
    overridden = OpenStack(OpenStackProperties.model_validate(
        {**base, "endpoint_overrides": {"volumev3": "https://cinder:8776/v3"}}))
    assert overridden._setting_of("block-storage") == "openstack.endpoint_overrides.block-storage"
