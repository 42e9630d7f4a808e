"""The aws cloud's models and error translation, in-process (no moto, no subprocess)."""

from __future__ import annotations

from pathlib import Path

import pytest
from botocore import exceptions as bexc

from cpi import retry
from cpi.clouds.aws import errors
from cpi.clouds.aws.job_config import AwsProperties, MetadataOptions
from cpi.clouds.aws.props import (
    DiskCloudProperties,
    NetworkCloudProperties,
    StemcellCloudProperties,
    VMCloudProperties,
)
from cpi.errors import CpiError
from cpi.models import gib
from cpi.validation import parse

STATIC = {"region": "eu-west-1", "access_key_id": "AKIAEXAMPLE", "secret_access_key": "s3cr3t-value"}


def client_error(code: str, status: int = 400, message: str = "boom", headers: dict | None = None):
    return bexc.ClientError(
        {"Error": {"Code": code, "Message": message},
         "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": headers or {}}},
        "DescribeInstances",
    )


# ---------------------------------------------------------------- global properties


def test_static_credentials_and_defaults():
    props = AwsProperties.model_validate(STATIC)
    assert props.credentials_source == "static"
    assert props.secret_access_key.get_secret_value() == "s3cr3t-value"
    assert "s3cr3t-value" not in repr(props) and "s3cr3t-value" not in str(props.model_dump())
    assert props.retry_budget_seconds >= 300 and props.max_retries >= 8
    assert props.signing_region == "eu-west-1"


@pytest.mark.parametrize("data, expected", [
    ({"access_key_id": "a", "secret_access_key": "b"}, "region is required"),
    ({"region": "us-east-1", "access_key_id": "a"}, "static needs secret_access_key"),
    ({"region": "us-east-1", "credentials_source": "env_or_profile", "access_key_id": "a"}, "remove access_key_id"),
    ({**STATIC, "credentials_source": "instance"}, "credentials_source"),
    ({**STATIC, "role_arn": "arn:aws:iam::12:role/x"}, "role_arn"),
    ({**STATIC, "max_retry": 3}, "max_retry: unknown property"),
    ({**STATIC, "metadata_options": {"http_tokens": "always"}}, "metadata_options.http_tokens"),
])
def test_bad_global_properties_name_the_key(data, expected):
    with pytest.raises(CpiError) as err:  # strict: an unknown key is otherwise left out, with a warning
        parse(AwsProperties, data, "aws properties", strict=True)
    assert expected in err.value.message
    assert "s3cr3t-value" not in err.value.message


def test_endpoints_get_a_scheme_and_make_region_optional():
    props = AwsProperties.model_validate({"ec2_endpoint": "ec2.example.internal:8773", "access_key_id": "a",
                                          "secret_access_key": "b"})
    assert props.ec2_endpoint == "https://ec2.example.internal:8773"
    assert props.signing_region == "us-east-1"


def test_env_or_profile_needs_no_keys_and_refuses_them():
    props = AwsProperties.model_validate({"region": "us-east-1", "credentials_source": "env_or_profile"})
    assert props.credentials_source == "env_or_profile"
    assert (props.access_key_id, props.secret_access_key, props.session_token) == (None, None, None)
    with pytest.raises(CpiError) as err:
        parse(AwsProperties, {"region": "us-east-1", "credentials_source": "env_or_profile", "access_key_id": "AKIA1",
                              "secret_access_key": "s3cr3t-value"}, "aws properties")
    assert "takes its credentials from the environment; remove access_key_id, secret_access_key" in err.value.message
    assert "s3cr3t-value" not in err.value.message
    with pytest.raises(CpiError) as err:
        parse(AwsProperties, {"region": "us-east-1", "access_key_id": "AKIA1"}, "aws properties")
    assert "credentials_source static needs secret_access_key" in err.value.message


def test_metadata_options_merge_key_by_key():
    base = MetadataOptions(http_tokens="required", http_put_response_hop_limit=2)
    merged = MetadataOptions(http_put_response_hop_limit=3).over(base)
    assert merged.to_api() == {"HttpTokens": "required", "HttpPutResponseHopLimit": 3}
    assert MetadataOptions().over(None).to_api() == {}


# ---------------------------------------------------------------- cloud_properties


def test_vm_type_defaults_and_errors():
    vm = parse(VMCloudProperties, {"instance_type": "m6i.large"}, "vm_type cloud_properties")
    assert vm.ephemeral_disk.size is None and vm.source_dest_check is True and vm.tenancy == "default"
    with pytest.raises(CpiError) as err:
        parse(VMCloudProperties, {"instance_type": "m6i.large", "ephemeral_disk": {"type": "gp9"}},
              "vm_type cloud_properties")
    assert "ephemeral_disk.type" in err.value.message and "'gp3'" in err.value.message and "gp9" in err.value.message
    with pytest.raises(CpiError) as err:
        parse(VMCloudProperties, {}, "vm_type cloud_properties")
    assert "instance_type: Field required" in err.value.message


@pytest.mark.parametrize("cloud_properties, expected", [
    ({"ephemeral_disk": {"use_instance_storage": True, "size": 1024}}, "cannot be combined with size"),
    ({"ephemeral_disk": {"type": "gp2", "iops": 3000}}, "iops applies to gp3, io1, io2"),
    ({"root_disk": {"type": "io2"}}, "type io2 needs iops"),
    ({"root_disk": {"type": "gp2", "throughput": 500}}, "throughput applies to gp3"),
    ({"spot_ondemand_fallback": True}, "needs spot_bid_price"),
    ({"tenancy": "shared"}, "tenancy"),
    ({"instance_type": "large"}, "instance_type"),
    ({"ephemeral_disk": {"size": 0}}, "ephemeral_disk.size"),
    ({"elb": ["x"]}, "elb: unknown property"),
    ({"raw_instance_storage": True, "ephemeral_disk": {"use_instance_storage": True}},
     "raw_instance_storage and ephemeral_disk.use_instance_storage cannot both be true"),
    ({"ephemeral_disk": {"use_root_disk": True, "use_instance_storage": True}},
     "use_root_disk and use_instance_storage cannot both be true"),
    ({"advertised_routes": [{"table_id": "rtb-1", "destination": "10.0.0.300/16"}]},
     "advertised_routes[0].destination: Value error, '10.0.0.300/16' is not a CIDR block"),
    ({"advertised_routes": [{"table_id": "rtb-1", "destination": "10.0.0.3"}]}, "give its prefix length"),
    ({"advertised_routes": [{"table_id": "igw-1", "destination": "10.0.0.0/8"}]}, "advertised_routes[0].table_id"),
])
def test_vm_type_combinations(cloud_properties, expected):
    with pytest.raises(CpiError) as err:  # strict: an unknown key is otherwise left out, with a warning
        parse(VMCloudProperties, {"instance_type": "m6i.large", **cloud_properties}, "vm_type cloud_properties",
              strict=True)
    assert expected in err.value.message


def test_an_unknown_key_is_left_out_with_a_warning_by_default(caplog):
    """A vm_extension written for another IaaS merges into an AWS vm_type (a director with
    several CPIs): the official CPI ignores what it does not know, and so does this one."""
    with caplog.at_level("WARNING", logger="cpi.validation"):
        props = parse(VMCloudProperties, {"instance_type": "m6i.large", "instance_tpye": "x", "flavor": "m1.small"},
                      "vm_type cloud_properties")
    assert props.instance_type == "m6i.large"
    assert ("vm_type cloud_properties.instance_tpye: unknown property ignored, did you mean instance_type?"
            in caplog.text)
    assert "vm_type cloud_properties.flavor: unknown property ignored (" in caplog.text
    with pytest.raises(CpiError, match="iops applies to gp3, io1, io2"):  # any other mistake still fails
        parse(VMCloudProperties, {"instance_type": "m6i.large", "flavor": "x",
                                  "ephemeral_disk": {"type": "gp2", "iops": 3000}}, "vm_type cloud_properties")


def test_disk_type_defaults_to_gp3_and_checks_iops():
    assert parse(DiskCloudProperties, {}, "disk_type").type == "gp3"
    assert parse(DiskCloudProperties, {"type": "io1", "iops": 4000}, "disk_type").iops == 4000
    with pytest.raises(CpiError) as err:
        parse(DiskCloudProperties, {"type": "st1", "throughput": 200}, "disk_type cloud_properties")
    assert "throughput applies to gp3 volumes only, not st1" in err.value.message


def test_network_needs_a_subnet():
    with pytest.raises(CpiError) as err:
        parse(NetworkCloudProperties, {"security_groups": ["a"]}, "network cloud_properties")
    assert "subnet: Field required" in err.value.message
    with pytest.raises(CpiError):
        parse(NetworkCloudProperties, {"subnet": "net-1"}, "network cloud_properties")


def test_stemcell_properties_keep_unknown_keys_but_check_known_ones():
    props = parse(StemcellCloudProperties, {"name": "s", "version": "1", "new_builder_key": 1}, "stemcell")
    assert props.unknown_keys == ["new_builder_key"] and not props.is_light
    assert parse(StemcellCloudProperties, {"ami": {"us-east-1": "ami-0abc"}}, "stemcell").is_light
    with pytest.raises(CpiError) as err:
        parse(StemcellCloudProperties, {"ami": {"us-east-1": "image-1"}}, "stemcell cloud_properties")
    assert "not an AMI ID" in err.value.message


def test_sizes_round_up_to_gib():
    assert [gib(1), gib(1024), gib(1025), gib(2048), gib(10_000)] == [1, 1, 2, 2, 10]


# ---------------------------------------------------------------- error classification


@pytest.mark.parametrize("code, status, kind", [
    ("RequestLimitExceeded", 503, retry.Kind.THROTTLED),
    ("Throttling", 400, retry.Kind.THROTTLED),
    ("SomethingNew", 429, retry.Kind.THROTTLED),
    ("InternalError", 500, retry.Kind.TRANSIENT),
    ("Unavailable", 503, retry.Kind.TRANSIENT),
    ("InvalidInstanceID.NotFound", 400, retry.Kind.PERMANENT),
    ("AuthFailure", 401, retry.Kind.PERMANENT),
])
def test_aws_codes_are_classified(code, status, kind):
    assert errors.classifier()(client_error(code, status)).kind is kind


def test_retry_after_header_is_passed_on():
    verdict = errors.classifier()(client_error("Throttling", 400, headers={"retry-after": "4"}))
    assert verdict.retry_after == 4.0


def test_timeouts_are_retried_only_for_idempotent_requests():
    timeout = bexc.ReadTimeoutError(endpoint_url="https://ec2.example")
    assert errors.classifier(idempotent=True)(timeout).retryable
    assert not errors.classifier(idempotent=False)(timeout).retryable
    # could not connect at all: nothing reached AWS, always safe to retry
    assert errors.classifier(idempotent=False)(bexc.EndpointConnectionError(endpoint_url="https://x")).retryable


def test_extra_transient_codes_per_call():
    classify = errors.classifier(also=lambda c: c == "VolumeInUse")
    assert classify(client_error("VolumeInUse")).kind is retry.Kind.TRANSIENT
    assert not errors.classifier()(client_error("VolumeInUse")).retryable


def test_auth_failures_name_the_credentials_but_never_the_secret():
    err = errors.to_cloud_error(client_error("AuthFailure", 401, "AWS was not able to validate the credentials"),
                                "DescribeInstances", "static access_key_id AKIAEXAMPLE")
    assert err.wire_type == "Bosh::Clouds::CloudError"
    assert "AKIAEXAMPLE" in err.message and "AuthFailure" in err.message and "secret_access_key" in err.message
    denied = errors.to_cloud_error(client_error("UnauthorizedOperation", 403, "not authorized"), "RunInstances",
                                   "static access_key_id AKIAEXAMPLE")
    assert "not allowed" in denied.message and "AKIAEXAMPLE" in denied.message


def test_exhausted_throttling_says_so():
    err = errors.to_cloud_error(client_error("RequestLimitExceeded", 503), "DescribeInstances")
    assert "throttling" in err.message and "retry_budget_seconds" in err.message


def test_no_credentials_and_unreachable_endpoints():
    assert "no AWS credentials found" in errors.to_cloud_error(bexc.NoCredentialsError(), "has_vm").message
    unreachable = errors.to_cloud_error(bexc.EndpointConnectionError(endpoint_url="https://ec2.nowhere"), "has_vm")
    assert "cannot reach https://ec2.nowhere" in unreachable.message


def make_ca_and_server_cert(directory) -> tuple[str, tuple[str, str]]:
    """A throwaway CA (its PEM text) and a certificate it signed for 127.0.0.1, by openssl."""
    import subprocess

    def run(*argv):
        subprocess.run(["openssl", *argv], cwd=directory, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
        "-subj", "/CN=cpi-test-ca")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out",
        "server.pem", "-days", "1", "-extfile", "san.ext")
    return (directory / "ca.pem").read_text(), (str(directory / "server.pem"), str(directory / "server.key"))


def test_connection_options_ca_cert_is_the_ca_the_endpoints_are_verified_with(tmp_path):
    """The official CPI's aws.connection_options.ca_cert (PEM text): with it, the TLS
    handshake with an endpoint whose certificate that CA signed succeeds and the request
    arrives; without it, the same endpoint is refused before any request is sent."""
    import json
    import stat

    from tests.support.listener import Listener
    from tests.support.runner import DIRECTOR_ENV, Cpi

    pem, server = make_ca_and_server_cert(tmp_path)
    listener = Listener(tls=server)
    try:
        def config(name: str, **extra) -> Cpi:
            path = tmp_path / name
            path.write_text(json.dumps({"cloud": {"plugin": "aws", "properties": {"aws": {
                "region": "us-east-1", "ec2_endpoint": listener.url, "access_key_id": "AKIATEST",
                "secret_access_key": "s3cr3t", "max_retries": 0, "retry_budget_seconds": 1, **extra}}}}))
            return Cpi(path)

        refused = config("plain.json").call("has_vm", "i-0123456789abcdef0")
        assert refused.error is not None and listener.seen == []
        assert "certificate" in (refused.error["message"] + refused.log).lower()
        trusted = config("ca.json", connection_options={"ca_cert": pem}).call("has_vm", "i-0123456789abcdef0")
        assert trusted.error is not None  # the listener answers 500: what matters is that the request got there
        assert len(listener.seen) >= 1 and "DescribeInstances" in listener.seen[0]["body"]
        # kept where the call's HOME is (the suite's, as bin/cpi gets it), private
        (kept,) = [p for p in (Path(DIRECTOR_ENV["HOME"]) / ".cache/bosh-cpi/ca").glob("aws-*.pem")
                   if p.read_text() == pem]
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    finally:
        listener.close()
