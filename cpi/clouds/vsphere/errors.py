"""vCenter failures → retry verdicts and cpi.errors, at the vsphere cloud's boundary.

Two kinds of failure reach a CPI through pyvmomi: the wire's (socket errors, timeouts, TLS,
http.client's HTTPException for a dropped connection or a proxy's 5xx) and the vCenter's own
faults (vmodl.MethodFault subclasses). The wire's are retried by cpi.retry when repeating is
safe; of the vCenter's, only those that say the request was not carried out (a host it could
not reach) are. What a caller expects (ManagedObjectNotFound, DuplicateName) it translates
itself; what no caller expects becomes a CloudError here, never with the password in it.

pyVmomi is imported inside functions only: the cloud's `info` must not import it.
"""

from __future__ import annotations

import http.client
import ssl
from collections.abc import Iterable

from cpi import bounded, retry
from cpi.errors import BoshError, CloudError


class ConnectFailed(OSError):
    """Opening a connection (TCP, then TLS) to the vCenter failed or timed out: no request
    left, so retrying is always safe. Raised by vcenter/session.py's connection class around the
    socket's own error, which it chains."""

    def __init__(self, endpoint: str, timeout: float, cause: BaseException):
        self.endpoint = endpoint
        self.timeout = timeout
        self.cause = cause
        self.timed_out = isinstance(cause, TimeoutError)
        self.tls = isinstance(cause, ssl.SSLError) and not self.timed_out
        what = f"no TLS handshake within {timeout:g}s" if self.timed_out else f"{type(cause).__name__}: {cause}"
        super().__init__(f"cannot connect to {endpoint} ({what})")


class Unsure(CloudError):
    """A request that changes something failed on the wire after it was sent (its answer
    lost, a read timeout): the vCenter may have carried it out. Not retried blindly; the
    caller looks whether it happened (cpi/clouds/vsphere/vcenter/tasks.py `run`)."""

    def __init__(self, message: str):
        super().__init__(message, ok_to_retry=True)


#: vCenter faults that say the vCenter did not carry the request out and may later.
_TRANSIENT_FAULTS = ("HostCommunication", "HostNotConnected", "HostNotReachable", "RequestCanceled")


def classifier(*, idempotent: bool) -> retry.Classifier:
    """How cpi.retry treats one request's failure. A connection that could not be opened:
    transient (nothing was sent). A read timeout, a reset or a closed connection: transient
    only for a request that is safe to repeat, since the vCenter may have carried it out.
    A proxy's 503: transient; other 5xx only for safe requests. TLS verification and every
    other vCenter fault: permanent."""

    def classify(exc: BaseException) -> retry.Verdict:
        if isinstance(exc, BoshError):
            return retry.PERMANENT  # already translated (a failed re-login): its own budget is spent
        if isinstance(exc, (bounded.Overdue, bounded.TooLarge)):
            return retry.PERMANENT  # a trickle or a flood: asking again costs as much again
        if isinstance(exc, ConnectFailed):
            return unreached(exc)
        if isinstance(exc, ssl.SSLCertVerificationError):
            return retry.PERMANENT
        if isinstance(exc, TimeoutError):
            return retry.Verdict(retry.Kind.TRANSIENT, "read timeout") if idempotent else retry.PERMANENT
        if isinstance(exc, http.client.HTTPException):
            status = str(exc).split(" ", 1)[0]
            if status == "503":
                return retry.Verdict(retry.Kind.TRANSIENT, "503 Service Unavailable")
            if status == "429":  # a rate limit (NSX's API): refused before it was carried out
                return retry.Verdict(retry.Kind.THROTTLED, "429 Too Many Requests")
            return retry.Verdict(retry.Kind.TRANSIENT, f"HTTP: {str(exc) or type(exc).__name__}") if idempotent \
                else retry.PERMANENT
        if isinstance(exc, OSError):  # reset, broken pipe, refused on a re-connect
            never_sent = isinstance(exc, ConnectionRefusedError)
            if never_sent or idempotent:
                return retry.Verdict(retry.Kind.TRANSIENT, type(exc).__name__)
            return retry.PERMANENT
        name = fault_name(exc)
        if name in _TRANSIENT_FAULTS:
            return retry.Verdict(retry.Kind.TRANSIENT, name)
        return retry.PERMANENT

    return classify


def unreached(exc: ConnectFailed) -> retry.Verdict:
    """The verdict on a connection that could not be opened: a TLS failure is permanent;
    a refusal, an unknown host, no route or no handshake within connect_timeout get
    retry.py's short budget for unreachable endpoints, not the busy vCenter's."""
    if exc.tls:
        return retry.PERMANENT
    if exc.timed_out:
        return retry.Verdict(retry.Kind.UNREACHABLE,
                             f"no connection (TCP and TLS) within connect_timeout ({exc.timeout:g}s)", unopened=True)
    return retry.unreached(exc.cause) or retry.Verdict(retry.Kind.UNREACHABLE, f"cannot connect ({exc.cause})",
                                                       unopened=True)


def fault_name(exc: BaseException) -> str | None:
    """`NotAuthenticated` for a vim.fault.NotAuthenticated, None for what is not a vCenter fault."""
    module = type(exc).__module__
    if not (module.startswith(("pyVmomi", "vim", "vmodl")) or hasattr(exc, "faultMessage")):
        return None
    return type(exc).__name__.rsplit(".", 1)[-1]


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with each secret replaced by ***: whatever a library put in a message."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def describe(exc: BaseException) -> str:
    """One line for a log or an error: a fault's `msg` when it has one."""
    message = getattr(exc, "msg", None) or str(exc) or ""
    name = fault_name(exc) or type(exc).__name__
    first = message.strip().splitlines()[0] if message.strip() else ""
    return f"{name}: {first}" if first else name


def to_cloud_error(exc: BaseException, *, what: str, endpoint: str, user: str, secrets: Iterable[str],
                   connect_timeout: float, read_timeout: float, peer: str = "the vCenter",
                   ca_key: str = "connection_options.ca_cert", address_key: str = "vsphere.host") -> BoshError:
    """The CloudError for a failure of the wire or of the login, after the retries: names the
    request, the vCenter, the user and the setting that bounds the wait or names the address
    (`address_key`); never a secret. `peer`, `ca_key` and `address_key` name another server on
    the same wire (an NSX manager: "the NSX-V manager", "nsx.ca_cert", "nsx.address"), so that
    its failures do not send the operator to the vCenter's settings."""
    if isinstance(exc, BoshError):
        return exc
    secrets = list(secrets)
    # ssl_verify (the job's vcenter.ssl_verify) turns verification on for the vCenter and
    # every NSX manager alike (session.verified): each failure of TLS points to it
    tls_hint = f"set {ca_key} to the CA of its certificate, or check ssl_verify"
    untrusted_hint = f"set {ca_key}" if peer == "the vCenter" else tls_hint
    name = fault_name(exc)
    if isinstance(exc, ConnectFailed):
        if exc.tls:
            return CloudError(scrub(f"{what}: TLS with {peer} at {endpoint} failed ({exc.__cause__}); {tls_hint}, "
                                    f"and that {address_key} names its HTTPS port",
                                    secrets))
        return retry.unreached_error(unreached(exc), what=what, endpoint=f"{peer} at {endpoint}", setting=address_key,
                                     tls_setting=ca_key)
    if isinstance(exc, ssl.SSLCertVerificationError):
        return CloudError(scrub(f"{what}: {peer} at {endpoint} has a certificate that is not trusted "
                                f"({exc.verify_message}); {untrusted_hint}", secrets))
    if isinstance(exc, (bounded.Overdue, bounded.TooLarge)):
        return CloudError(f"{what}: {bounded.message(exc, f'{peer} at {endpoint}')}")
    if isinstance(exc, TimeoutError):
        return CloudError(f"{what}: {peer} at {endpoint} did not answer within read_timeout "
                          f"({read_timeout:g}s)", ok_to_retry=True)
    if isinstance(exc, (http.client.HTTPException, OSError)):
        return CloudError(scrub(f"{what}: the connection to {peer} at {endpoint} failed: "
                                f"{type(exc).__name__}: {exc}", secrets), ok_to_retry=True)
    if name in ("InvalidLogin", "InvalidLocale", "NoPermission") and what.endswith("Login"):
        return CloudError(scrub(f"{what}: the vCenter at {endpoint} refused the login of user '{user}' "
                                f"({describe(exc)}); check user and password", secrets))
    if name == "NotAuthenticated":
        return CloudError(scrub(f"{what}: the vCenter at {endpoint} dropped the session of user '{user}' again "
                                "right after a new login", secrets), ok_to_retry=True)
    return CloudError(scrub(f"{what} failed at the vCenter at {endpoint}: {describe(exc)}", secrets))
