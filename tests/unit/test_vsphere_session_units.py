"""The parts of the vCenter session that need no vCenter: where `host` points, and which
failures cpi.retry may repeat (cpi/clouds/vsphere/errors.py)."""

from __future__ import annotations

import http.client

import pytest

from cpi import retry
from cpi.clouds.vsphere import errors
from cpi.clouds.vsphere.vcenter.session import endpoint
from cpi.errors import CloudError
from tests.vsphere.conftest import vsphere_properties


class _Server:
    host, port, username, password = "vc.example", 443, "admin", "s3cret"


@pytest.mark.parametrize(("host", "expected"), [
    ("vc.example", ("vc.example", 443)),
    ("vc.example:8443", ("vc.example", 8443)),
    ("[fd00::1]:9443", ("fd00::1", 9443)),
    ("[fd00::1]", ("fd00::1", 443)),
    ("fd00::1", ("fd00::1", 443)),
])
def test_the_endpoint_is_read_from_host(host, expected):
    assert endpoint(vsphere_properties(_Server(), host=host)) == expected


@pytest.mark.parametrize(("exc", "safe", "unsafe"), [
    (errors.ConnectFailed("vc:443", 1, TimeoutError("timed out")), "unreachable", "unreachable"),
    (errors.ConnectFailed("vc:443", 1, ConnectionRefusedError(111, "refused")), "unreachable", "unreachable"),
    (TimeoutError("timed out"), "transient", "permanent"),
    (ConnectionResetError(104, "reset"), "transient", "permanent"),
    (http.client.RemoteDisconnected("closed"), "transient", "permanent"),
    (http.client.HTTPException("503 Service Unavailable"), "transient", "transient"),
    (http.client.HTTPException("502 Bad Gateway"), "transient", "permanent"),
    (CloudError("a failed re-login"), "permanent", "permanent"),
    (ValueError("a bug"), "permanent", "permanent"),
])
def test_what_is_retried_depends_on_whether_the_request_is_safe_to_repeat(exc, safe, unsafe):
    assert errors.classifier(idempotent=True)(exc).kind is retry.Kind(safe)
    assert errors.classifier(idempotent=False)(exc).kind is retry.Kind(unsafe)


def test_vcenter_faults_are_transient_only_when_the_vcenter_did_not_act():
    from pyVmomi import vim, vmodl

    classify = errors.classifier(idempotent=False)
    assert classify(vmodl.fault.HostCommunication()).kind is retry.Kind.TRANSIENT
    assert classify(vim.fault.InvalidLogin()).kind is retry.Kind.PERMANENT
    assert classify(vim.fault.DuplicateName()).kind is retry.Kind.PERMANENT
    assert errors.fault_name(vim.fault.NotAuthenticated()) == "NotAuthenticated"
    assert errors.fault_name(OSError()) is None


def test_a_translated_error_never_carries_a_secret():
    leaked = OSError("proxy said: user admin password s3cret rejected")
    error = errors.to_cloud_error(leaked, what="SessionManager.Login", endpoint="vc:443", user="admin",
                                  secrets=["s3cret"], connect_timeout=10, read_timeout=120)
    assert "s3cret" not in str(error) and "***" in str(error)
    assert error.ok_to_retry
