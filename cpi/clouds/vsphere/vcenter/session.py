"""The vCenter session of the vsphere cloud: one login per process, no request without a bound.

Why not pyVim's SmartConnect: its version probe (`/sdk/vimServiceVersions.xml`) opens a
connection with no timeout at all, so a vCenter that accepts TCP and never answers hangs
the call for ever; and its sockets have no keepalive, so a connection silently dropped by a
firewall is noticed only by the read timeout, if there is one. Here every connection, the
probe's included, is opened within `connect_timeout` (TCP and the TLS handshake), reads
within `read_timeout` (each response), and carries TCP keepalive with a user timeout, so the
kernel gives up on a dead peer in about a minute whatever is waiting on it.

Every SOAP request (a method, or a property read, which pyVmomi sends as one) goes through
`_Stub.InvokeMethod`: the one place where a change is written to the audit trail and, under
`cpi plan`, withheld (audited.py, planned.py); counted, retried by cpi.retry within
`retry_budget_seconds` when the failure is transient and the request is safe to repeat
(errors.classifier), and, when the vCenter says the session is gone (NotAuthenticated: it
expired, was terminated, or the vCenter restarted), logged in again (at most RELOGINS
times) and sent again. What still
fails on the wire leaves as a CloudError naming the vCenter, the user and the bounding
setting, never the password.

Sessions are kept per process in a module-level cache keyed by (host, port, user): a warm
process's next call reuses the login. An entry is reused only with the same password (kept
as a digest, compared in constant time), TLS settings and timeouts; a forked child forgets
the parent's pooled sockets (they are the parent's TCP streams) but keeps its session cookie.

pyVmomi is imported inside functions: `info` of the cloud imports no SDK.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import http.client
import logging
import os
import socket
import ssl
import threading
import time
import xml.etree.ElementTree as ElementTree  # nosec B405  # the reason is where it parses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cpi import bounded, retry
from cpi.channel import Channel, Request
from cpi.errors import BoshError, CloudError

from .. import errors
from . import audited

if TYPE_CHECKING:
    from cpi.plan import Plan

    from ..job_config import VsphereProperties

log = logging.getLogger("cpi.clouds.vsphere")

SDK_PATH = "/sdk"
#: TCP keepalive: first probe after this many idle seconds, then every KEEPALIVE_INTERVAL, and
#: the connection is dead after KEEPALIVE_COUNT unanswered probes (or unacknowledged data for
#: as long: TCP_USER_TIMEOUT), about a minute in all, well under the default read_timeout.
KEEPALIVE_IDLE = 30
KEEPALIVE_INTERVAL = 10
KEEPALIVE_COUNT = 3
#: how many times in a row one attempt of a request logs in again when the vCenter says the
#: session is gone, before it fails: a vCenter that drops every new session (a session limit
#: reached) is not asked for ever
RELOGINS = 3
#: pooled idle connections older than this are closed rather than reused (vCenter's reverse
#: proxy drops idle connections after a few minutes; a stale one costs a failed attempt)
POOL_IDLE_SECONDS = 120

#: methods retried after a read timeout or a dropped connection, when the vCenter may have
#: carried out the first attempt: the reads (audited.READS, and by their names' prefixes),
#: and changes whose repetition ends where one would, or with a fault their callers take as
#: done (InvalidPowerState, ManagedObjectNotFound, FileNotFound, FileAlreadyExists,
#: DuplicateName, AlreadyUpgraded)
_SAFE_PREFIXES = ("Retrieve", "Find", "Fetch", "Query", "Current", "Browse", "Wait", "Check", "Validate", "Search")
_SAFE_METHODS = frozenset({"setCustomValue", "AddCustomFieldDef", "MakeDirectory", "CreateFolder", "CancelTask",
                           "HttpNfcLeaseProgress", "HttpNfcLeaseAbort", "PowerOnVM_Task", "PowerOffVM_Task",
                           "ResetVM_Task", "Destroy_Task", "DeleteVirtualDisk_Task", "DeleteDatastoreFile_Task",
                           "UpgradeVM_Task"})


def endpoint(properties: VsphereProperties) -> tuple[str, int]:
    """(host, port) of `host` (or `address`)."""
    return split_address(properties.vcenter_host)


def address_key(properties: VsphereProperties) -> str:
    """The setting that names the vCenter, as an error points to it."""
    return "vsphere.host (the job's vcenter.host)" if properties.host else "vsphere.address (the job's vcenter.address)"


def split_address(address: str) -> tuple[str, int]:
    """(host, port) of `vc`, `vc:8443`, `[fd00::1]:443` or a bare IPv6 (port 443 unless given)."""
    address = address.strip()
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else 443
    if address.count(":") == 1:
        host, port = address.split(":")
        if port.isdigit():
            return host, int(port)
    return address, 443


def ssl_context(properties: VsphereProperties) -> ssl.SSLContext:
    """The TLS settings props.py documents: `ssl_verify` unset verifies against `ca_cert` (or
    `ca_cert_file`) when one is given and not at all otherwise, as the official CPI; true
    always verifies (the system's CAs without a ca_cert); false never does."""
    ca_text, ca_file = _ca(properties)
    return tls_context(ca_text, ca_file, verified(properties.ssl_verify, ca_text, ca_file), "connection_options")


def _ca(properties: VsphereProperties) -> tuple[str | None, str | None]:
    """The vCenter's CA: connection_options' (`ca_cert`, `ca_cert_file`), either unset."""
    options = properties.connection_options
    return (options.ca_cert, options.ca_cert_file) if options else (None, None)


def verified(ssl_verify: bool | None, ca_text: str | None, ca_file: str | None) -> bool:
    """Whether a server with this CA (`ca_text`/`ca_file`, either may be unset) is verified
    under the job's `ssl_verify`: the one rule for the vCenter and every NSX manager, so that
    `ssl_verify: true` cannot be forgotten by one of them and send a password to a server
    nothing trusts."""
    return ssl_verify if ssl_verify is not None else bool(ca_text or ca_file)


def warn_unverified(properties: VsphereProperties) -> None:
    """Log, when the vCenter's certificate goes unchecked, that it does: by default (no CA,
    `ssl_verify` unset: the official CPI's, kept so that its configs work as they are) and
    with `ssl_verify: false`, as the OpenStack cloud says of its endpoints. Called once per
    call (cloud.Cloud.session), warm or cold, so that every response's log says it, not
    only the first call of a process."""
    ca_text, ca_file = _ca(properties)
    if verified(properties.ssl_verify, ca_text, ca_file):
        return
    if properties.ssl_verify is False:
        log.warning("ssl_verify is false: the vCenter's TLS certificate is not checked")
    else:
        log.warning("the vCenter's TLS certificate is not checked: no connection_options.ca_cert (the job's "
                    "vcenter.connection_options.ca_cert) is set; set it, or ssl_verify: true")


def tls_context(ca_text: str | None, ca_file: str | None, verify: bool, where: str) -> ssl.SSLContext:
    """A client context verifying against `ca_text` or `ca_file` (the system's CAs without
    either), or not at all; a CA that cannot be read is a CloudError naming `where`'s key."""
    if not verify:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if ca_text or ca_file:
        try:
            return ssl.create_default_context(cafile=ca_file, cadata=ca_text)
        except (ssl.SSLError, OSError) as exc:
            key = f"{where}.ca_cert_file" if ca_file else f"{where}.ca_cert"
            raise CloudError(f"{key} holds no CA certificate this CPI can read (PEM text, '-----BEGIN "
                             f"CERTIFICATE-----' ...): {exc.strerror or exc}") from None
    return ssl.create_default_context()


def keepalive(sock: socket.socket) -> None:
    """TCP keepalive (and, on Linux, a user timeout) on `sock`: a peer that vanished without
    a FIN or RST is found dead by the kernel in about a minute, even while nothing is sent."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", KEEPALIVE_IDLE), ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL),
                        ("TCP_KEEPCNT", KEEPALIVE_COUNT),
                        ("TCP_USER_TIMEOUT", 1000 * (KEEPALIVE_IDLE + KEEPALIVE_INTERVAL * KEEPALIVE_COUNT))):
        option = getattr(socket, name, None)
        if option is not None:  # Linux has them all; elsewhere keepalive's system defaults
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


class _Connection(http.client.HTTPSConnection):
    """An HTTPS connection opened within `connect_timeout` (TCP and TLS handshake), each of
    whose requests ends within `read_timeout`, connecting, sending and the whole answer
    (bounded.py), with TCP keepalive and an answer read up to bounded.ANSWER_CAP bytes. A
    `streaming` connection (an upload) bounds only stalls while it sends, and its answer by
    its own deadline. A failure to open it is a ConnectFailed: nothing was sent, so it is
    always safe to retry."""

    def __init__(self, host: str, port: int | None = None, *, connect_timeout: float, read_timeout: float,
                 streaming: bool = False, **kwargs: Any):
        kwargs.pop("timeout", None)
        super().__init__(host, port, timeout=connect_timeout, **kwargs)
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._streaming = streaming
        self._budget = bounded.Budget(read_timeout)

    def connect(self) -> None:
        self.timeout = min(self._connect_timeout, self._remaining())
        try:
            super().connect()
        except OSError as exc:
            raise errors.ConnectFailed(f"{self.host}:{self.port}", self._connect_timeout, exc) from exc
        assert self.sock is not None
        keepalive(self.sock)
        self.sock.settimeout(self._read_timeout)
        self.timeout = self._read_timeout

    def putrequest(self, method: str, url: str, *args: Any, **kwargs: Any) -> None:
        """Each request starts its own deadline (a pooled connection serves many)."""
        self._budget = bounded.Budget(self._read_timeout)
        self.response_class = functools.partial(bounded.Response, budget=self._budget,  # type: ignore[assignment]
                                                read_timeout=self._read_timeout)
        super().putrequest(method, url, *args, **kwargs)

    def send(self, data: Any) -> None:
        if self.sock is None and self.auto_open:
            self.connect()
        if self.sock is not None:
            self.sock.settimeout(min(self._read_timeout, self._remaining()))
        super().send(data)

    def getresponse(self) -> http.client.HTTPResponse:
        if self._streaming:
            self._budget.restart()  # the upload is sent: its answer has read_timeout
        return super().getresponse()

    def _remaining(self) -> float:
        return float("inf") if self._streaming else self._budget.remaining()


def _idempotent(method: str) -> bool:
    return audited.read_only(method) or method.startswith(_SAFE_PREFIXES) or method in _SAFE_METHODS


def _make_stub_class() -> type:
    """The SoapStubAdapter subclass (built on first use: pyVmomi is imported here)."""
    from pyVmomi.SoapAdapter import SoapStubAdapter

    class _Stub(SoapStubAdapter):
        """pyVmomi's SOAP stub, every request of which is counted, bounded, retried and, when
        the vCenter dropped its session, re-authenticated (see the module's docstring)."""

        session: Session

        def InvokeMethod(self, mo: Any, info: Any, args: Any, outerStub: Any = None) -> Any:  # pyVmomi's name
            method = info.wsdlName
            what = f"{type(mo).__name__.rsplit('.', 1)[-1]}.{method}"
            session = self.session
            relogins = 0
            changes = not audited.read_only(method)
            params = {p.name: a for p, a in zip(info.params, args, strict=False)} if changes else {}

            def send() -> Any:
                session.requests += 1
                if not session.properties.http_logging:
                    return SoapStubAdapter.InvokeMethod(self, mo, info, args, outerStub)
                started = time.monotonic()
                try:
                    answer = SoapStubAdapter.InvokeMethod(self, mo, info, args, outerStub)
                except Exception as exc:
                    log.info("http_logging: POST %s%s %s: %s after %.3fs", session.address, SDK_PATH, what,
                             errors.describe(exc), time.monotonic() - started)
                    raise
                log.info("http_logging: POST %s%s %s: answered in %.3fs", session.address, SDK_PATH, what,
                         time.monotonic() - started)
                return answer

            def attempt() -> Any:
                nonlocal relogins
                relogins = 0  # counted per attempt: a retry after a wire failure starts afresh
                while True:
                    try:
                        return send()
                    except Exception as exc:
                        if (errors.fault_name(exc) != "NotAuthenticated" or relogins >= RELOGINS
                                or method in ("Login", "Logout")):
                            raise
                        relogins += 1
                        log.warning("%s: the vCenter at %s dropped the session of '%s' (%s); logging in again", what,
                                    session.address, session.user, errors.describe(exc))
                    session.stub.cookie = ""  # the vCenter said the session is gone: a new login starts without it
                    session.login()
                    self.cookie = session.cookie  # the storage policy stub (placement/pbm.py) shares the vim25 login

            def retrying(sending: Callable[[], Any]) -> Any:
                try:
                    return retry.call(sending, classify=errors.classifier(idempotent=_idempotent(method)), what=what,
                                      budget=session.budget, service="vim25")
                except Exception as exc:
                    if errors.fault_name(exc) not in (None, "NotAuthenticated") and method != "Login":
                        raise  # the vCenter's answer: the caller knows what it means
                    translated = session.translate(exc, what)
                    if errors.fault_name(exc) is None and retry.unsure(errors.classifier, exc):
                        raise errors.Unsure(translated.message) from None
                    raise translated from None

            def withhold(plan: Plan) -> Any:  # `cpi plan`: reads go out, every other method is withheld
                from . import planned

                return planned.withhold(plan, session, self, mo, method, params, bool(getattr(info, "isTask", False)))

            def before_read(plan: Plan) -> None:
                from . import planned

                planned.before_read(plan, mo, method, args)

            return session.channel.send(Request(what, changes), attempt, retrying=retrying, withhold=withhold,
                                        audit=lambda answer: audited.after(mo, method, params, answer, plan=None),
                                        before_read=before_read)

    return _Stub


@functools.cache
def _stub_class() -> type:
    return _make_stub_class()


def _supported_versions(document: bytes) -> set[str]:
    """The vim25 API versions a vimServiceVersions.xml lists (the current and prior ones)."""
    # bandit B405/B314 waived (here, in audited.py and nsx/nsxv.py): the answers of the operator's vCenter and NSX
    # Manager, bounded at 64 MiB (cpi.bounded), parsed by CPython 3.11's expat, which limits entity
    # amplification (expat >= 2.4) and which ElementTree never lets fetch an external entity;
    # pyVmomi parses the same vCenter's SOAP with the same expat.
    root = ElementTree.fromstring(document)  # nosec B314
    found: set[str] = set()
    for namespace in root.findall("namespace"):
        if (namespace.findtext("name") or "").strip() != "urn:vim25":
            continue
        found.update(v.strip() for v in [namespace.findtext("version") or ""] if v.strip())
        found.update((v.text or "").strip() for v in namespace.findall("priorVersions/version"))
    return found


class Session:
    """One login to one vCenter, as one user. `content` is the ServiceInstanceContent (the
    root of every lookup), `requests` the SOAP requests sent so far (every attempt)."""

    def __init__(self, properties: VsphereProperties):
        self.properties = properties
        #: the stages of each request (cpi.channel), with the plan of the call using the session
        self.channel = Channel()
        self.host, self.port = endpoint(properties)
        self.address = f"{self.host}:{self.port}"
        self.user = properties.user
        self.budget = properties.retry_budget_seconds
        self.requests = 0
        self.logins = 0
        self.pid = os.getpid()
        self._password = properties.password.get_secret_value()
        self._lock = threading.Lock()
        self._context = ssl_context(properties)
        self._connection = functools.partial(_Connection, connect_timeout=properties.connect_timeout,
                                             read_timeout=properties.read_timeout)
        self.version = self._negotiate()
        self.stub = self.service_stub(SDK_PATH, self.version)
        from pyVmomi import vim

        self.si = vim.ServiceInstance("ServiceInstance", self.stub)
        #: the ServiceInstanceContent (Any: pyVmomi's stubs make each of its managers Optional)
        self.content: Any = self.si.RetrieveContent()
        self.login()

    # ------------------------------------------------------------ connection

    def _negotiate(self) -> str:
        """The newest vim25 API version both pyVmomi and the vCenter speak, from the vCenter's
        vimServiceVersions.xml: one GET, bounded and retried like every request."""
        from pyVmomi.VmomiSupport import GetServiceVersions, versionIdMap

        what = f"GET {SDK_PATH}/vimServiceVersions.xml"

        def fetch() -> bytes:
            self.requests += 1
            connection = self._connection(self.host, self.port, context=self._context)
            try:
                connection.request("GET", f"{SDK_PATH}/vimServiceVersions.xml")
                response = connection.getresponse()
                body = response.read()
            finally:
                connection.close()
            if response.status != 200:
                raise http.client.HTTPException(f"{response.status} {response.reason}")
            return body

        try:
            document = retry.call(fetch, classify=errors.classifier(idempotent=True), what=what, budget=self.budget,
                                  service="vim25")
        except Exception as exc:  # noqa: BLE001 - whatever failed leaves as a CloudError, scrubbed
            raise self.translate(exc, what) from None
        try:
            supported = _supported_versions(document)
        except ElementTree.ParseError as exc:
            raise CloudError(f"{what}: the answer of {self.address} is not a vSphere API's ({exc})") from None
        for version in GetServiceVersions("vim25"):
            if versionIdMap.get(version) in supported:
                return version
        raise CloudError(f"the vCenter at {self.address} speaks none of the API versions this CPI's pyVmomi knows "
                         f"(it lists {', '.join(sorted(supported)) or 'none'})")

    def service_stub(self, path: str, version: str) -> Any:
        """A SOAP stub for one of the vCenter's services (vim25 at /sdk, the storage policy
        service at /pbm): bounded, with keepalive, retried and re-authenticated like every
        request; a stub made after the login carries its cookie."""
        stub = _stub_class()(host=self.host, port=self.port, path=path, version=version, sslContext=self._context,
                             connectionPoolTimeout=POOL_IDLE_SECONDS)
        stub.scheme = self._connection  # every connection of the stub: bounded, with keepalive
        stub.session = self
        if hasattr(self, "stub"):
            stub.cookie = self.cookie
        return stub

    def open_connection(self, host: str | None = None, port: int | None = None, *,
                        streaming: bool = False) -> http.client.HTTPSConnection:
        """A new connection to the vCenter (or to `host`:`port`, an ESXi host an NFC lease
        names) with this session's TLS settings, timeouts and keepalive: for what is not
        SOAP (datastore files; disk uploads, `streaming`: no deadline while they send)."""
        return self._connection(host or self.host, port or self.port, context=self._context, streaming=streaming)

    @property
    def cookie(self) -> str:
        """The session's cookie, for the vCenter's HTTP file service (never logged)."""
        return self.stub.cookie

    def login(self) -> None:
        """Log in (again): the stub keeps the new session's cookie."""
        with self._lock:
            started = time.monotonic()
            self.content.sessionManager.Login(userName=self.user, password=self._password, locale=None)
            self.logins += 1
            log.info("vCenter %s: logged in as '%s' (API %s) in %.2fs", self.address, self.user,
                     self.version.rsplit(".", 1)[-1], time.monotonic() - started)

    def logout(self) -> None:
        """End the session at the vCenter and close the pooled connections."""
        try:
            self.content.sessionManager.Logout()
        finally:
            self.stub.DropConnections()

    def translate(self, exc: BaseException, what: str) -> BoshError:
        return errors.to_cloud_error(exc, what=what, endpoint=self.address, user=self.user, secrets=[self._password],
                                     connect_timeout=self.properties.connect_timeout,
                                     read_timeout=self.properties.read_timeout,
                                     address_key=address_key(self.properties))

    def matches(self, properties: VsphereProperties) -> bool:
        """Whether this session serves `properties` as a new one would: same password (in
        constant time), TLS settings, timeouts and budget."""
        mine, theirs = self.properties, properties
        same_password = hmac.compare_digest(_digest(self._password), _digest(theirs.password.get_secret_value()))
        return same_password and all(getattr(mine, key) == getattr(theirs, key) for key in (
            "connection_options", "ssl_verify", "connect_timeout", "read_timeout", "retry_budget_seconds"))

    def after_fork(self) -> None:
        """In a forked child: forget (not close) the pooled connections, which are the
        parent's TCP streams; the session cookie stays good."""
        if self.pid != os.getpid():
            self.stub.pool = []
            self.pid = os.getpid()


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


_sessions: dict[tuple[str, int, str], Session] = {}
_sessions_lock = threading.Lock()


def get(properties: VsphereProperties, plan: Plan | None = None) -> Session:
    """The session of this process for `properties`' vCenter and user, made (and logged in)
    on first use, reused after, its requests under `plan`, the plan of the call that asks
    (cpi.plan; None for a real call). The login is the process's, the plan the call's: a
    plan made on a login a real call made does not make the next real call planned."""
    host, port = endpoint(properties)
    key = (host, port, properties.user)
    with _sessions_lock:
        session = _sessions.get(key)
        if session is not None and session.matches(properties):
            session.after_fork()
            log.debug("vCenter %s: reusing the session of '%s'", session.address, session.user)
        else:
            session = Session(properties)
            _sessions[key] = session
        session.channel = Channel(plan)
        return session


def forget(properties: VsphereProperties | None = None) -> None:
    """Drop the cached session of `properties` (all, without), logging out of none: a test's
    or an operator command's way to start afresh."""
    with _sessions_lock:
        if properties is None:
            _sessions.clear()
        else:
            host, port = endpoint(properties)
            _sessions.pop((host, port, properties.user), None)
