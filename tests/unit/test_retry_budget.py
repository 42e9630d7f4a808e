"""cpi/retry.py counts the first attempt against the budget: a request that hangs until its
read timeout has spent that time already (tenacity's clock starts after it, since the first
attempt runs bare). Without this, a hung endpoint took two read timeouts, not one: `cpi
--timeout 5` ended after 10 s, and the director's 600 s budget was 600 s plus a read."""

from __future__ import annotations

import logging
import re
import time

import pytest

from cpi import retry


def test_a_first_attempt_that_outlasts_the_budget_is_not_repeated(caplog):
    attempts = []

    def hangs_then_times_out():
        attempts.append(time.monotonic())
        time.sleep(0.6)  # a read timeout longer than the whole budget
        raise TimeoutError("read timed out")

    with caplog.at_level(logging.INFO, logger="cpi.retry"), pytest.raises(TimeoutError):
        retry.call(hangs_then_times_out, classify=lambda exc: retry.Verdict(retry.Kind.TRANSIENT, "ReadTimeout"),
                   what="ec2:DescribeInstances", budget=0.5, sleep=lambda seconds: None)
    assert len(attempts) == 1
    gave_up = [r.getMessage() for r in caplog.records if "giving up" in r.getMessage()]
    assert len(gave_up) == 1, gave_up
    assert float(re.search(r"giving up after ([\d.]+)s", gave_up[0]).group(1)) >= 0.6, gave_up  # as it was spent


class Clock:
    """Fake monotonic time (tenacity and cpi.retry both read time.monotonic): each attempt
    takes `attempt_takes` seconds, each sleep as long as asked."""

    def __init__(self, monkeypatch, attempt_takes: float = 0.0):
        self.now = 1000.0
        self.attempt_takes = attempt_takes
        monkeypatch.setattr("time.monotonic", lambda: self.now)

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def failing(clock: Clock, *outcomes: BaseException):
    """Raises each of `outcomes` in turn, then the last for ever; records when each attempt began."""
    started: list[float] = []

    def fn():
        started.append(clock.now)
        clock.now += clock.attempt_takes
        raise outcomes[min(len(started), len(outcomes)) - 1]

    fn.started = started
    return fn


class Throttled(Exception):
    pass


class ServerError(Exception):
    pass


def classify(exc):
    if isinstance(exc, Throttled):
        return retry.Verdict(retry.Kind.THROTTLED, "RequestLimitExceeded")
    if isinstance(exc, ServerError):
        return retry.Verdict(retry.Kind.TRANSIENT, "503")
    return retry.unreached(exc) or retry.PERMANENT


def refused():
    return ConnectionRefusedError(111, "Connection refused")


def test_a_refused_connection_is_given_up_within_the_unreachable_budget_not_the_throttling_one(monkeypatch, caplog):
    clock = Clock(monkeypatch)
    fn = failing(clock, refused())
    with caplog.at_level(logging.INFO, logger="cpi.retry"), pytest.raises(ConnectionRefusedError):
        retry.call(fn, classify=classify, what="ec2:DescribeInstances", budget=600, sleep=clock.sleep)
    assert len(fn.started) > 1 and fn.started[-1] - fn.started[0] <= retry.UNREACHABLE_BUDGET
    assert "giving up after" in caplog.text and "unreachable (connection refused)" in caplog.text
    assert "budget used), connections unopened for" in caplog.text and "s of 10s" in caplog.text


def test_a_silent_host_costs_one_connect_timeout_when_that_fills_the_budget(monkeypatch):
    clock = Clock(monkeypatch, attempt_takes=retry.UNREACHABLE_BUDGET)  # connect_timeout 10 s, the default
    fn = failing(clock, TimeoutError("timed out"))
    with pytest.raises(TimeoutError):
        retry.call(fn, classify=classify, what="x", budget=600, sleep=clock.sleep)
    assert len(fn.started) == 1


@pytest.mark.parametrize("busy", [Throttled, ServerError], ids=["throttled", "5xx"])
def test_throttling_and_5xx_keep_the_whole_budget(monkeypatch, busy):
    clock = Clock(monkeypatch)
    fn = failing(clock, busy())
    with pytest.raises(busy):
        retry.call(fn, classify=classify, what="x", budget=600, max_attempts=1000, sleep=clock.sleep)
    assert fn.started[-1] - fn.started[0] > 500  # far beyond the unreachable budget, up to the call's


def test_a_refusal_after_minutes_of_throttling_still_gets_its_own_short_budget(monkeypatch):
    clock = Clock(monkeypatch)
    fn = failing(clock, *[Throttled()] * 12, refused())
    with pytest.raises(ConnectionRefusedError):
        retry.call(fn, classify=classify, what="x", budget=600, sleep=clock.sleep)
    first_refused = fn.started[12]
    assert first_refused - fn.started[0] > retry.UNREACHABLE_BUDGET
    assert len(fn.started) > 13 and fn.started[-1] - first_refused <= retry.UNREACHABLE_BUDGET


def test_the_call_budget_bounds_the_unreachable_one_and_a_tls_failure_is_not_retried(monkeypatch):
    import ssl

    clock = Clock(monkeypatch)
    fn = failing(clock, refused())
    with pytest.raises(ConnectionRefusedError):
        retry.call(fn, classify=classify, what="x", budget=2, sleep=clock.sleep)
    assert fn.started[-1] - fn.started[0] <= 2
    tls = failing(clock, ssl.SSLCertVerificationError(1, "certificate verify failed"))
    with pytest.raises(ssl.SSLError):
        retry.call(tls, classify=classify, what="x", budget=600, sleep=clock.sleep)
    assert len(tls.started) == 1


def test_unreachable_says_why_through_what_the_sdks_wrap_and_keeps_read_timeouts_out():
    import socket

    import requests
    from botocore import exceptions as bexc
    from urllib3.exceptions import NewConnectionError

    def wrapped(outer, inner):
        try:
            try:
                raise inner
            except OSError as exc:
                raise outer from exc
        except Exception as exc:  # noqa: BLE001 - the test's own
            return exc

    botocore_dns = bexc.EndpointConnectionError(endpoint_url="https://ec2.x.invalid",
                                                error=wrapped(NewConnectionError(None, "x"), socket.gaierror(-2, "N")))
    assert retry.unreached(botocore_dns).reason.startswith("the host name does not resolve")
    assert retry.unreached(botocore_dns).unopened
    assert retry.unreached(requests.ConnectionError(wrapped(NewConnectionError(None, "x"), refused()))).reason \
        == "connection refused"
    assert retry.unreached(requests.exceptions.ReadTimeout("read timed out")) is None
    assert retry.unreached(ValueError("not a connection")) is None


def test_the_error_names_the_endpoint_and_setting_never_a_password():
    verdict = retry.Verdict(retry.Kind.UNREACHABLE, "connection refused", unopened=True)
    error = retry.unreached_error(verdict, what="keystone token", endpoint="https://cpi:s3cret@keystone:5000/v3",
                                  setting="openstack.auth_url", tls_setting="openstack.ca_cert")
    assert error.message == ("keystone token: cannot open a connection to https://keystone:5000/v3: connection "
                             "refused; check openstack.auth_url, and that it is up and reachable from this machine")
    assert not error.ok_to_retry
