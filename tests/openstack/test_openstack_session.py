"""The OpenStack session's request loop, in process with a scripted adapter: a POST whose
outcome is unknown is retried only when the caller can look for what it made, and then
never twice for one resource; every request shares its service's backoff key."""

from __future__ import annotations

import json

import pytest
from keystoneauth1 import exceptions as ksa

from cpi import backoff, retry
from cpi.clouds.openstack import errors
from cpi.clouds.openstack.props import OpenStackProperties
from cpi.clouds.openstack.session import OpenStack, _shared_key


class Response:
    def __init__(self, status: int, body: dict | None = None):
        self.status_code = status
        self.text = json.dumps(body) if body is not None else ""
        self.content = self.text.encode()
        self.headers: dict[str, str] = {}
        self.reason = "scripted"

    def json(self):
        return json.loads(self.text)


class Adapter:
    """Answers each request with the next scripted outcome (a Response, or an exception to raise)."""

    def __init__(self, *outcomes):
        self.outcomes = list(outcomes)
        self.sent: list[tuple[str, str]] = []

    def request(self, path, method, **kwargs):
        self.sent.append((method, path))
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


@pytest.fixture
def api(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda seconds: None)
    backoff.configure(None)
    made = OpenStack(OpenStackProperties.model_validate({
        "auth_url": "http://127.0.0.1:5000/v3", "username": "u", "api_key": "pw", "project": "p", "domain": "default",
    }))
    made.authenticate = lambda: None
    made._endpoints["compute"] = "http://127.0.0.1:8774"
    return made


def use(api, adapter):
    api.adapter = lambda service: adapter
    return adapter


DROPPED = ksa.ConnectFailure("Unable to establish connection: ('Connection aborted.', RemoteDisconnected())")


def test_a_dropped_post_without_a_lookup_is_not_repeated(api):
    adapter = use(api, Adapter(DROPPED, Response(202, {"server": {"id": "s-1"}})))
    with pytest.raises(ksa.ConnectFailure):
        api.post("compute", "/servers", {"server": {"name": "vm-1"}})
    assert adapter.sent == [("POST", "/servers")]


def test_a_dropped_create_that_did_not_land_is_sent_again(api):
    adapter = use(api, Adapter(DROPPED, Response(202, {"server": {"id": "s-1"}})))
    looks = []
    created = api.create("compute", "/servers", {"server": {"name": "vm-1"}}, key="server",
                         find=lambda: looks.append(1))
    assert created == {"id": "s-1"}
    assert adapter.sent == [("POST", "/servers")] * 2 and len(looks) == 1


def test_a_create_whose_answer_was_lost_is_found_not_repeated(api):
    adapter = use(api, Adapter(Response(502, {"error": {"message": "bad gateway"}})))
    created = api.create("compute", "/servers", {"server": {"name": "vm-1"}}, key="server",
                         find=lambda: {"id": "s-made"})
    assert created == {"id": "s-made"}
    assert adapter.sent == [("POST", "/servers")]


def test_a_refused_create_is_not_looked_for(api):
    """429 and 503 say the request was not carried out: send again without a look."""
    adapter = use(api, Adapter(Response(503), Response(202, {"server": {"id": "s-1"}})))
    created = api.create("compute", "/servers", {}, key="server",
                         find=lambda: pytest.fail("a 503 needs no look"))
    assert created == {"id": "s-1"} and len(adapter.sent) == 2


def test_unsure_means_retryable_only_when_safe_to_repeat():
    assert errors.unsure(DROPPED)
    assert errors.unsure(errors.ApiError("compute", "POST", "/servers", 500, "oops"))
    assert not errors.unsure(errors.ApiError("compute", "POST", "/servers", 503, "busy"))
    assert not errors.unsure(errors.ApiError("compute", "POST", "/servers", 400, "bad"))
    assert not errors.unsure(ksa.ConnectFailure("Failed to establish a new connection: Connection refused"))


def test_each_service_and_host_has_its_own_shared_backoff_key():
    assert _shared_key("compute", "http://nova.example:8774") == "openstack-compute-nova.example:8774"
    assert _shared_key("network", "http://nova.example:8774") != _shared_key("compute", "http://nova.example:8774")
    assert _shared_key("compute", "https://a:1") != _shared_key("compute", "https://b:1")


def test_a_delete_repeated_after_a_lost_answer_says_so(api):
    """404 on a repeated DELETE is the earlier attempt's success, not "there was nothing"."""
    use(api, Adapter(DROPPED, Response(404, {"itemNotFound": {"message": "gone"}})))
    repeated = api.request("compute", "DELETE", "/servers/s-1/os-volume_attachments/v-1", ok=(404,))
    assert repeated.status_code == 404 and repeated.after_unknown_outcome
    use(api, Adapter(Response(404, {"itemNotFound": {"message": "gone"}})))
    first = api.request("compute", "DELETE", "/servers/s-1/os-volume_attachments/v-1", ok=(404,))
    assert first.status_code == 404 and not first.after_unknown_outcome


@pytest.mark.parametrize("status, retry_after, kind", [
    (429, None, retry.Kind.THROTTLED),
    (413, "1", retry.Kind.THROTTLED),  # a rate limiter in front of Keystone, saying when to come back
    (413, None, retry.Kind.PERMANENT),
    (503, None, retry.Kind.TRANSIENT),
])
def test_keystone_refusals_on_the_token_request(status, retry_after, kind):
    response = Response(status)
    if retry_after:
        response.headers["Retry-After"] = retry_after
    exc = ksa.http.from_response(response, "POST", "http://127.0.0.1:5000/v3/auth/tokens")
    verdict = errors.classifier(idempotent=True)(exc)
    assert verdict.kind is kind
    assert verdict.retry_after == (float(retry_after) if retry_after else None)


def test_out_of_retries_a_create_still_looks_for_what_its_last_attempt_made(api):
    api.properties = api.properties.model_copy(update={"max_retries": 0})
    adapter = use(api, Adapter(DROPPED))
    created = api.create("compute", "/servers", {}, key="server", find=lambda: {"id": "s-made"})
    assert created == {"id": "s-made"} and len(adapter.sent) == 1
    use(api, Adapter(DROPPED))
    with pytest.raises(ksa.ConnectFailure):
        api.create("compute", "/servers", {}, key="server", find=lambda: None)
