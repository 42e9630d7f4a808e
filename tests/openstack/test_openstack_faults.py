"""Throttling and outages through a fault proxy in front of Nova and Cinder
(tests/faults/proxy.py), and auth failures: the CPI waits as long as Retry-After says,
logs each wait, gives up with a clear error when the budget is spent, and never shows a
secret."""

from __future__ import annotations

import concurrent.futures
import re
import time
import urllib.parse

import pytest

from tests.faults.proxy import FaultProxy

CINDER_REFUSES_DELETE = ("Invalid volume: Volume status must be available or error or error_restoring or "
                         "error_extending or error_managing and must not be migrating, attached, belong to a group, "
                         "have snapshots, awaiting a transfer, or be disassociated from snapshots after volume "
                         "transfer.")
NOVA_REFUSES_DETACH = ("Invalid volume: Unable to detach volume. Volume status must be 'in-use' and "
                       "attach_status must be 'attached' to detach.")


def _until(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def error_of(response):
    assert response.error is not None, f"expected an error, got result {response.doc['result']!r}"
    return response.error


def _split(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}", parts.path


@pytest.fixture(scope="module")
def endpoints(env):
    if env.get("real"):
        pytest.skip("fault injection runs against the loopback services only")
    return {service: _split(url) for service, url in env["endpoints"].items()}


@pytest.fixture
def nova_proxy(endpoints):
    upstream, _ = endpoints["compute"]
    with FaultProxy(upstream, flavor="openstack") as proxy:
        yield proxy


@pytest.fixture
def cinder_proxy(endpoints):
    upstream, _ = endpoints["volumev3"]
    with FaultProxy(upstream, flavor="openstack") as proxy:
        yield proxy


def through(proxy, endpoints, service: str) -> str:
    _, path = endpoints[service]
    return proxy.url + path


def test_429_with_retry_after_on_server_create_is_waited_out(cloud, cpi_with, stemcell, nova_proxy, endpoints):
    cpi = cpi_with(endpoint_overrides={"compute": through(nova_proxy, endpoints, "compute")})
    nova_proxy.inject(r"/servers$", "error", method="POST", status=429, headers={"Retry-After": "1"},
                      body={"overLimit": {"code": 429, "message": "Too many requests"}}, times=2)
    started = time.monotonic()
    response = cpi.call("create_vm", "agent-429", stemcell, cloud.vm_cloud_properties(),
                        cloud.manual_network(80), [], {})
    vm_cid = response.result[0]
    try:
        assert time.monotonic() - started >= 2.0, "each Retry-After: 1 must be honoured"
        assert nova_proxy.count(r"/servers$", method="POST", status=429) == 2
        assert nova_proxy.count(r"/servers$", method="POST", status=202) == 1
        waits = re.findall(r"compute POST /servers throttled \(429 overLimit\); "
                           r"attempt \d failed, retrying in ([\d.]+)s", response.log)
        assert len(waits) == 2 and all(float(w) >= 1.0 for w in waits), response.log
        name = cloud.client.server(vm_cid)["name"]
        assert len(cloud.client.get("compute", f"/servers?name=^{name}$")["servers"]) == 1
    finally:
        cpi("delete_vm", vm_cid)


def test_413_over_limit_with_retry_after_and_503_on_volume_create(cloud, cpi_with, cinder_proxy, endpoints):
    cpi = cpi_with(endpoint_overrides={"block-storage": through(cinder_proxy, endpoints, "volumev3")})
    cinder_proxy.inject(r"/volumes$", "error", method="POST", status=413, headers={"Retry-After": "1"},
                        body={"overLimit": {"code": 413, "message": "This request was rate-limited.",
                                            "retryAfter": "1"}})
    cinder_proxy.inject(r"/volumes$", "error", method="POST", status=503, times=1)
    cinder_proxy.inject(r"/volumes/[^/]+$", "error", method="GET", status=503, times=2)
    response = cpi.call("create_disk", 1024, {}, None)
    disk_cid = response.result
    try:
        assert cinder_proxy.count(r"/volumes$", method="POST") == 3
        assert "block-storage POST /volumes throttled (413 overLimit)" in response.log
        assert "block-storage POST /volumes transient (503 Service Unavailable)" in response.log
        assert f"block-storage GET /volumes/{disk_cid}" in response.log
        assert cloud.client.volume(disk_cid)["status"] == "available"
    finally:
        cpi("delete_disk", disk_cid)


def test_requests_whose_answer_was_lost_are_neither_failed_nor_repeated(cloud, cpi_with, stemcell, nova_proxy,
                                                                        cinder_proxy, endpoints):
    """The service carried the request out but the connection dropped before its answer:
    for a create, the CPI looks for what it made (by the unique name it gave it) and uses
    it, rather than failing the call or making a twin; a POST whose connection dropped
    before it reached the service is looked for, not found, and sent again; a detach sent
    again after a lost answer takes Nova's 404 as the earlier attempt's success."""
    cpi = cpi_with(endpoint_overrides={"compute": through(nova_proxy, endpoints, "compute"),
                                       "block-storage": through(cinder_proxy, endpoints, "volumev3")})
    client = cloud.client
    before = client.inventory()
    nova_proxy.inject(r"^POST /v2.1/servers$", "lost")
    nova_proxy.inject(r"/os-volume_attachments$", "lost", method="POST")
    cinder_proxy.inject(r"/volumes$", "drop", method="POST")
    cinder_proxy.inject(r"/volumes$", "lost", method="POST")
    response = cpi.call("create_vm", "agent-lost", stemcell, cloud.vm_cloud_properties(),
                        cloud.dynamic_network(), [], {})
    vm_cid = response.result[0]
    disk_cid = None
    try:
        assert "the outcome of the last attempt was unknown, and it had been carried out" in response.log
        assert nova_proxy.count(r"^POST /v2.1/servers$") == 1  # found, not sent again
        assert client.inventory()["servers"] - before["servers"] == {vm_cid}
        disk_cid = cpi("create_disk", 1024, {}, vm_cid)
        assert cinder_proxy.count(r"/volumes$", method="POST") == 2  # dropped, sent again and lost, then found
        assert client.inventory()["volumes"] - before["volumes"] == {disk_cid}
        cpi("attach_disk", vm_cid, disk_cid)
        assert nova_proxy.count(r"/os-volume_attachments$", method="POST") == 1
        assert cloud.disk_attached_to(disk_cid) == vm_cid
        # Nova, asked again while it is still letting go, refuses (400) rather than answering
        # 404: through `detaching` and on after Cinder says `available` (CI once saw this).
        # The proxy keeps refusing until the CPI has been refused with the volume available.
        detach = r"/os-volume_attachments/"
        nova_proxy.inject(detach, "lost", method="DELETE")
        nova_proxy.inject(detach, "error", method="DELETE", status=400, times=None, code=NOVA_REFUSES_DETACH)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pending = pool.submit(cpi.call, "detach_disk", vm_cid, disk_cid)
            _until(lambda: pending.done() or client.volume(disk_cid)["status"] == "available")
            refused = nova_proxy.count(detach, method="DELETE", status=400)
            _until(lambda: pending.done() or nova_proxy.count(detach, method="DELETE", status=400) > refused)
            nova_proxy.clear()
            response = pending.result(timeout=120)
        assert response.error is None, response.error
        assert "an earlier attempt, whose answer was lost, was carried out" in response.log
        assert nova_proxy.count(detach, method="DELETE", status=404) == 1
        assert cloud.disk_attached_to(disk_cid) is None and client.volume(disk_cid)["status"] == "available"

        # Nova lists an attachment a moment longer than Cinder does (its block device mapping
        # goes last; CI once saw a re-attach made in that moment take the disk for attached,
        # and lose it with the record). So a detach ends only once Nova's record is gone:
        # here the proxy has Nova list it for three more looks.
        cpi("attach_disk", vm_cid, disk_cid)
        listed = {"volumeAttachment": {"id": disk_cid, "volumeId": disk_cid, "serverId": vm_cid, "device": "/dev/sdb"}}
        looks = rf"/os-volume_attachments/{disk_cid}$"
        released = nova_proxy.count(looks, method="GET", status=404)  # the detach above looked once
        nova_proxy.inject(looks, "error", method="GET", status=200, times=3, body=listed)
        cpi("detach_disk", vm_cid, disk_cid)
        assert nova_proxy.count(looks, method="GET", status=200) == 3
        assert nova_proxy.count(looks, method="GET", status=404) == released + 1
        assert cpi("attach_disk", vm_cid, disk_cid) and cloud.disk_attached_to(disk_cid) == vm_cid
        cpi("detach_disk", vm_cid, disk_cid)
        # and an attach that finds such a record (another call's detach finishing) waits for
        # it to go and attaches, rather than take the disk for attached
        nova_proxy.inject(rf"/servers/{vm_cid}/os-volume_attachments$", "error", method="GET", status=200,
                          body={"volumeAttachments": [listed["volumeAttachment"]]})
        response = cpi.call("attach_disk", vm_cid, disk_cid)
        assert response.error is None and "waiting for that detach to finish" in response.log, response.log
        assert cloud.disk_attached_to(disk_cid) == vm_cid
        cpi("detach_disk", vm_cid, disk_cid)

        # a delete whose answer was lost, sent again while Cinder is still deleting: Cinder's
        # refusal names every reason it may have (snapshots among them), so the volume's own
        # state says whether it is the earlier attempt's doing (a storm in CI once failed here)
        deletes = rf"/volumes/{disk_cid}$"
        cinder_proxy.inject(deletes, "lost", method="DELETE")
        cinder_proxy.inject(deletes, "error", method="DELETE", status=400, code=CINDER_REFUSES_DELETE)
        response = cpi.call("delete_disk", disk_cid)
        assert response.error is None, response.error
        assert cinder_proxy.count(deletes, method="DELETE", status=400) >= 1 and client.volume(disk_cid) is None
        disk_cid = None
    finally:
        cpi("delete_vm", vm_cid)
        if disk_cid:
            cpi("delete_disk", disk_cid)


def test_413_without_retry_after_is_a_limit_not_throttling(cloud, cpi_with, cinder_proxy, endpoints):
    cpi = cpi_with(endpoint_overrides={"block-storage": through(cinder_proxy, endpoints, "volumev3")})
    cinder_proxy.inject(r"/volumes$", "error", method="POST", status=413, times=None,
                        body={"overLimit": {"code": 413, "message": "VolumeSizeExceedsAvailableQuota: requested 2G"}})
    before = cloud.leftovers()
    err = error_of(cpi.call("create_disk", 2048, {}, None))
    assert err["type"] == "Bosh::Clouds::CloudError" and "VolumeSizeExceedsAvailableQuota" in err["message"]
    assert cinder_proxy.count(r"/volumes$", method="POST") == 1  # a quota, not throttling: no retry
    assert cloud.leftovers() == before


def test_persistent_503_gives_up_within_the_budget_with_a_clear_error(cpi_with, nova_proxy, endpoints):
    cpi = cpi_with(endpoint_overrides={"compute": through(nova_proxy, endpoints, "compute")})
    nova_proxy.inject(r"/servers/", "error", method="GET", status=503, times=None)
    started = time.monotonic()
    response = cpi.call("has_vm", "00000000-0000-0000-0000-000000000001", context={"retry_budget_seconds": 3})
    elapsed = time.monotonic() - started
    err = error_of(response)
    assert err["type"] == "Bosh::Clouds::CloudError" and err["ok_to_retry"] is True
    assert "503" in err["message"] and "retry_budget_seconds" in err["message"]
    assert nova_proxy.count(r"/servers/", method="GET") >= 2
    assert elapsed < 15, "the context's retry_budget_seconds must bound the retries"
    assert "giving up" in response.log


def test_wrong_password_is_a_clear_error_without_the_secret(cloud, cpi_with):
    wrong = "Wr0ng-pa55word-for-test"
    cpi = cpi_with(api_key=wrong)
    response = cpi.call("has_vm", "00000000-0000-0000-0000-000000000001")
    err = error_of(response)
    assert err["type"] == "Bosh::Clouds::CloudError"
    assert f"refused the credentials of user '{cloud.env['username']}'" in err["message"]
    assert wrong not in response.raw and wrong not in response.stderr


def test_secrets_never_reach_log_or_result(cloud, cpi, stemcell):
    response = cpi.call("has_vm", "00000000-0000-0000-0000-000000000002")
    assert response.result is False
    assert "OpenStack request" in response.log
    assert cloud.env["password"] not in response.raw and cloud.env["password"] not in response.stderr
    assert "X-Auth-Token" not in response.stderr and "gAAAA" not in response.stderr  # fernet tokens


def test_unreachable_keystone_fails_fast_with_a_clear_error(cpi_with):
    cpi = cpi_with(auth_url="http://127.0.0.1:9/v3", retry_budget_seconds=2)
    started = time.monotonic()
    err = error_of(cpi.call("has_vm", "x"))
    assert time.monotonic() - started < 20
    assert err["type"] == "Bosh::Clouds::CloudError" and err["ok_to_retry"] is False
    assert "cannot open a connection to http://127.0.0.1:9/v3: connection refused; check openstack.auth_url" \
        in err["message"], err


def test_application_credential_and_project_id_auth(cloud, cpi_with):
    """Both other ways to authenticate: an application credential (it carries its project),
    and a password scoped by project ID instead of names."""
    user_id = cloud.client.session.get_user_id()
    name = f"cpi-test-{time.monotonic_ns()}"
    created = cloud.client.request("identity", "POST", f"/users/{user_id}/application_credentials",
                                   json={"application_credential": {"name": name}})["application_credential"]
    try:
        cpi = cpi_with(username=None, api_key=None, project=None, user_domain_name=None, project_domain_name=None,
                       application_credential_id=created["id"], application_credential_secret=created["secret"])
        response = cpi.call("has_vm", "00000000-0000-0000-0000-000000000003")
        assert response.result is False
        assert created["secret"] not in response.raw and created["secret"] not in response.stderr
        wrong = cpi_with(username=None, api_key=None, project=None, user_domain_name=None, project_domain_name=None,
                         application_credential_id=created["id"], application_credential_secret="not-the-secret")
        err = error_of(wrong.call("has_vm", "x"))
        assert f"refused the credentials of application credential {created['id']}" in err["message"]
    finally:
        cloud.client.request("identity", "DELETE", f"/users/{user_id}/application_credentials/{created['id']}",
                             ok=(204, 404))
    by_id = cpi_with(project=None, project_domain_name=None, project_id=cloud.client.session.get_project_id())
    assert by_id("has_vm", "00000000-0000-0000-0000-000000000004") is False
