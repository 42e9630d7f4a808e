"""The vCenter session (cpi/clouds/vsphere/vcenter/session.py) against the simulator, through real
pyVmomi: built from the config model, reused within the process, logged in again once when
the vCenter drops it, and bounded in time when the endpoint hangs, with no password in what
it says."""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time

import pytest

from cpi.clouds.vsphere import errors, lookups
from cpi.clouds.vsphere.vcenter import session
from cpi.errors import CloudError
from tests.support.runner import Cpi
from tests.vsphere import target as vsphere_target
from tests.vsphere.conftest import vsphere_properties


def properties_server(properties):
    """What vsphere_properties needs of a server, read back from `properties`."""
    host, port = session.endpoint(properties)
    return type("Server", (), {"host": host, "port": port, "username": properties.user,
                               "password": properties.password.get_secret_value()})


def test_it_connects_with_the_config_model_and_reuses_the_session(properties):
    first = session.get(properties)
    assert first.content.about.apiType == "VirtualCenter"
    assert first.content.sessionManager.currentSession.userName == properties.user
    assert first.logins == 1
    assert session.get(properties) is first  # a warm call: the same login
    assert first.logins == 1
    # another password is another login, never the cached session: here a refused one
    with pytest.raises(CloudError, match="refused the login"):
        session.get(vsphere_properties(properties_server(properties), password="not-the-password"))
    assert session.get(properties) is first


def test_its_sockets_carry_keepalive_and_the_read_timeout(properties):
    current = session.get(properties)
    assert current.content.about.name
    conns = [conn for conn, _ in current.stub.pool]
    assert conns, "a finished request leaves its connection in the pool"
    sock = conns[0].sock
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == session.KEEPALIVE_IDLE
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == session.KEEPALIVE_COUNT
    # what is left of the request's read_timeout, which bounds the whole request (bounded.py)
    assert properties.read_timeout - 5 < sock.gettimeout() <= properties.read_timeout


def test_a_session_the_vcenter_dropped_is_logged_in_again_once(properties, si, caplog):
    current = session.get(properties)
    key = current.content.sessionManager.currentSession.key
    si.content.sessionManager.TerminateSession(sessionId=[key])  # another session ends ours, as an admin would
    with caplog.at_level(logging.INFO, logger="cpi"):
        assert lookups.datacenter(current, "DC0").name == "DC0"
    assert current.logins == 2
    assert current.content.sessionManager.currentSession.key != key
    dropped = [r.getMessage() for r in caplog.records if "dropped the session" in r.getMessage()]
    assert len(dropped) == 1, caplog.text
    assert properties.password.get_secret_value() not in caplog.text


def test_a_connection_closed_under_the_session_is_replaced(properties):
    current = session.get(properties)
    assert current.content.about.name
    for conn, _ in current.stub.pool:  # as a proxy dropping idle connections would
        conn.sock.shutdown(socket.SHUT_RDWR)
    before = current.requests
    found = lookups.datastore(current, "DC0", "LocalDS_0")
    assert current.requests - before == 2  # the stale connection's attempt, then a fresh connection's
    assert found.name == "LocalDS_0"
    assert current.logins == 1


def test_a_wrong_password_is_a_clear_error_without_the_password(vcsim, caplog):
    wrong = vcsim.password + "-wrong"
    with caplog.at_level(logging.DEBUG, logger="cpi"), pytest.raises(CloudError) as failed:
        session.get(vsphere_properties(vcsim, password=wrong))
    message = str(failed.value)
    assert "refused the login of user 'cpi-test'" in message and "InvalidLogin" in message, message
    assert wrong not in message and wrong not in caplog.text
    session.forget()


@pytest.fixture
def hung_endpoint():
    """A TCP endpoint that accepts connections and never says a word."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(5)
    for conn in held:
        conn.close()
    listener.close()


def test_a_hung_endpoint_fails_within_the_configured_bounds_without_the_password(vcsim, hung_endpoint, caplog):
    props = vsphere_properties(vcsim, host=f"127.0.0.1:{hung_endpoint}", connect_timeout=0.4, read_timeout=0.4,
                               retry_budget_seconds=1.5)
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG, logger="cpi"), pytest.raises(CloudError) as failed:
        session.get(props)
    took = time.monotonic() - started
    # the budget, plus at most one attempt's connect_timeout and the last backoff's rounding
    assert 0.4 <= took < 1.5 + 0.4 + 1.0, took
    message = str(failed.value)
    assert message == (f"GET /sdk/vimServiceVersions.xml: cannot open a connection to the vCenter at "
                       f"127.0.0.1:{hung_endpoint}: no connection (TCP and TLS) within connect_timeout (0.4s); "
                       "check vsphere.host (the job's vcenter.host), and that it is up and reachable from this "
                       "machine"), message
    assert not failed.value.ok_to_retry  # the director asking again would only wait as long again
    assert vcsim.password not in message and vcsim.password not in caplog.text
    assert "retrying" in caplog.text  # the waits are logged


class FreezingProxy:
    """A TCP proxy to the simulator that can go silent: once `freeze()`d, it keeps every
    connection open and swallows what it is sent, answering nothing, as a vCenter behind a
    dead link (or a hung vCenter) does."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.frozen = threading.Event()
        self.closing = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def freeze(self) -> None:
        self.frozen.set()

    def _accept(self) -> None:
        while not self.closing.is_set():
            try:
                client = self.listener.accept()[0]
            except TimeoutError:
                continue
            server = socket.create_connection(self.upstream)
            self.sockets += [client, server]
            for source, target in ((client, server), (server, client)):
                thread = threading.Thread(target=self._pump, args=(source, target), daemon=True)
                self.threads.append(thread)
                thread.start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        source.settimeout(0.1)
        while not self.closing.is_set():
            try:
                data = source.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            if not self.frozen.is_set():
                target.sendall(data)

    def close(self) -> None:
        self.closing.set()
        for thread in self.threads:
            thread.join(5)
        for sock in [*self.sockets, self.listener]:
            sock.close()


@pytest.fixture
def proxy(vcsim):
    running = FreezingProxy((vcsim.host, vcsim.port))
    yield running
    running.close()
    session.forget()


def test_a_vcenter_gone_silent_mid_session_fails_each_call_within_its_bounds(vcsim, proxy, caplog):
    props = vsphere_properties(vcsim, host=f"127.0.0.1:{proxy.port}", connect_timeout=0.3, read_timeout=0.5,
                               retry_budget_seconds=1.0)
    current = session.get(props)
    folder = lookups.datacenter(current, "DC0").vmFolder
    proxy.freeze()

    # a request that is not safe to repeat: one read timeout, then the error
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG, logger="cpi"), pytest.raises(CloudError) as failed:
        folder.Rename_Task(newName="cpi-test-silent")
    took = time.monotonic() - started
    assert 0.5 <= took < 0.5 + 1.0, took  # one read_timeout, no retry
    assert f"Folder.Rename_Task: the vCenter at 127.0.0.1:{proxy.port} did not answer within read_timeout (0.5s)" \
        == str(failed.value)
    assert failed.value.ok_to_retry and isinstance(failed.value, errors.Unsure)  # its callers look whether it ran

    # a read: retried (a fresh connection, which the silent vCenter does not complete) until the budget
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG, logger="cpi"), pytest.raises(CloudError) as failed:
        lookups.network(current, "DC0", "VM Network")
    took = time.monotonic() - started
    assert 0.5 <= took < 1.0 + 0.5 + 1.0, took
    assert "SearchIndex.FindByInventoryPath" in str(failed.value), failed.value
    assert "retrying" in caplog.text
    assert vcsim.password not in caplog.text and vcsim.password not in str(failed.value)


@pytest.mark.parametrize("tls", [{"ssl_verify": True}, {"connection_options": {"ca_cert": "pem"}}],
                         ids=["ssl_verify", "ca_cert"])
def test_a_certificate_that_is_not_trusted_fails_at_once_saying_so(vcsim, tls):
    """ssl_verify true, or a ca_cert (here the simulator's own certificate, which OpenSSL
    refuses anyway: its key is too weak), turn verification on; a refusal is permanent."""
    if "connection_options" in tls:
        tls = {"connection_options": {"ca_cert": ssl.get_server_certificate((vcsim.host, vcsim.port))}}
    started = time.monotonic()
    with pytest.raises(CloudError) as failed:
        session.get(vsphere_properties(vcsim, **tls))
    assert time.monotonic() - started < 1.0  # not retried
    message = str(failed.value)
    assert f"TLS with the vCenter at {vcsim.host}:{vcsim.port} failed" in message, message
    assert "CERTIFICATE_VERIFY_FAILED" in message and "connection_options.ca_cert" in message
    assert not failed.value.ok_to_retry
    session.forget()


@pytest.mark.parametrize("options", [{"ca_cert": "not a certificate"}, {"ca_cert_file": "/nonexistent/ca.pem"}],
                         ids=["ca_cert", "ca_cert_file"])
def test_a_ca_that_is_not_a_certificate_is_named_as_the_setting_to_fix(vcsim, options):
    with pytest.raises(CloudError) as failed:
        session.get(vsphere_properties(vcsim, connection_options=options))
    key = next(iter(options))
    assert str(failed.value).startswith(f"connection_options.{key} holds no CA certificate"), failed.value


UNCHECKED = "the vCenter's TLS certificate is not checked"


@pytest.mark.parametrize("tls, warnings", [({}, 1), ({"ssl_verify": False}, 1), ({"ssl_verify": True}, 0),
                                           ({"connection_options": {"ca_cert": "vcsim"}}, 0)],
                         ids=["defaults", "false", "true", "ca_cert"])
def test_an_unchecked_vcenter_certificate_is_said_once_in_each_call_s_log(vcsim, tmp_path, tls, warnings):
    """With the official CPI's defaults (no CA, ssl_verify unset), or ssl_verify false, every
    call's response says once that the vCenter's certificate is not checked: the second call,
    the warm helper's with its session reused, as the first. Not when a CA or ssl_verify true
    asks for the check (the simulator's weak key then fails the call: what matters is its log)."""
    if "connection_options" in tls:
        tls = {"connection_options": {"ca_cert": ssl.get_server_certificate((vcsim.host, vcsim.port))}}
    cpi = Cpi(vsphere_target.write_config(tmp_path / "cpi.json", vcsim, **tls))
    for _ in range(2):
        answer = cpi.call("has_vm", "vm-00000000-0000-0000-0000-000000000000")
        assert (answer.error is None) == (warnings == 1), answer.error
        assert answer.log.count(UNCHECKED) == warnings, answer.log
