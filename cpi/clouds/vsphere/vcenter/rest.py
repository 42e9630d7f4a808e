"""One HTTPS request to a REST server beside the vCenter (an NSX manager), whatever its
documents are (XML, JSON): the wire's rules of the vsphere cloud in one place, so that each
manager's module only says what it asks and how it reads the answers.

- The connection is session.py's: opened within `connect_timeout`, each read bounded by
  `read_timeout`, with TCP keepalive; TLS from session.tls_context.
- Failures of the wire are retried within the retry budget as errors.classifier rules (a
  request sent but unanswered only when it is safe to repeat); 429 and 503 always, other
  5xx only for safe requests. When the retries run out on a status, the last answer is
  returned, so the caller can read the server's own error document; a failure of the wire
  becomes a CloudError naming the request and the server, never the password.
- Under `cpi plan` (cpi.plan: the `channel` the client is made with) a read goes out, a
  write does not: planned.http lists it, and the answer says it was `planned`. A write the server accepted is audited
  (audited.http_after), as every change of this cloud is.
"""

from __future__ import annotations

import base64
import http.client
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cpi import retry
from cpi.channel import Channel, Request

from .. import errors
from . import audited
from .session import _Connection, split_address

if TYPE_CHECKING:
    from cpi.plan import Plan

READS = ("GET", "HEAD")


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    #: a write withheld by `cpi plan`: the server never saw it
    planned: bool = False

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class _Status(http.client.HTTPException):
    """An answer worth asking again for (a 429, a 503, a 5xx of a safe request); carries it,
    so that the caller gets it when the retries run out."""

    def __init__(self, status: int, reason: str, body: bytes):
        super().__init__(f"{status} {reason}")
        self.response = Response(status, body)


class Client:
    """A server at `address` (`host`, `host:port`, `[v6]:port`), named `peer` in messages
    ("the NSX-V manager"), whose address and TLS settings are cpi.json's `address_key` and
    `ca_key`."""

    def __init__(self, address: str, *, peer: str, address_key: str, ca_key: str, context: ssl.SSLContext,
                 headers: dict[str, str], user: str, secrets: list[str], budget: float, connect_timeout: float,
                 read_timeout: float, channel: Channel):
        self.address, self.peer, self.address_key, self.ca_key = address, peer, address_key, ca_key
        self.channel = channel  # the call's stages (cpi.channel): a planned call's writes are withheld
        self.host, self.port = split_address(address)
        self.context, self.headers, self.user = context, headers, user
        self.secrets = [secret for secret in secrets if secret]
        self.budget, self.connect_timeout, self.read_timeout = budget, connect_timeout, read_timeout

    def request(self, method: str, path: str, body: bytes | None = None, *, headers: dict[str, str] | None = None,
                idempotent: bool | None = None, what: str | None = None, resend: bool = True) -> Response:
        """The answer to `method path`, whatever its status. `idempotent` (default: a read,
        PUT or DELETE) says whether the request may be sent again when its answer was lost.
        Without `resend`, a refusal worth asking again for (429, 503) is handed back at once
        rather than sent again as it is: for a document read just before, which must be
        read again first."""
        what = what or f"{method} {path.split('?', 1)[0]}"
        safe = idempotent if idempotent is not None else method in (*READS, "PUT", "DELETE")

        def send() -> Response:
            connection = _Connection(self.host, self.port, context=self.context,
                                     connect_timeout=self.connect_timeout, read_timeout=self.read_timeout)
            try:
                connection.request(method, path, body=body, headers={**self.headers, **(headers or {})})
                answer = connection.getresponse()
                data = answer.read()
            finally:
                connection.close()
            if resend and (answer.status in (429, 503) or (answer.status >= 500 and safe)):
                raise _Status(answer.status, answer.reason, data)
            return Response(answer.status, data)

        def retrying(sending: Callable[[], Response]) -> Response:
            try:
                return retry.call(sending, classify=errors.classifier(idempotent=safe), what=what, budget=self.budget,
                                  service=self.peer)
            except _Status as exc:  # asked again as often as the budget allows: the server's last word
                return exc.response
            except Exception as exc:  # noqa: BLE001 - the wire's failures leave as a CloudError, scrubbed
                raise errors.to_cloud_error(exc, what=what, endpoint=self.address, user=self.user,
                                            secrets=self.secrets, connect_timeout=self.connect_timeout,
                                            read_timeout=self.read_timeout, peer=self.peer, ca_key=self.ca_key,
                                            address_key=self.address_key) from None

        def withhold(plan: Plan) -> Response:
            from . import planned

            status, data = planned.http(plan, method, path, body)
            return Response(status, data, planned=True)

        def audit(response: Response) -> None:
            if response.ok:
                audited.http_after(method, path, body, plan=None)

        return self.channel.send(Request(what, method not in READS, path), send, retrying=retrying,
                                 withhold=withhold, audit=audit)

    def scrub(self, text: str) -> str:
        """`text` (a server's error document, for a message) without a secret in it."""
        return errors.scrub(text, self.secrets)


def basic(user: str, password: str) -> dict[str, str]:
    """The Authorization header of HTTP Basic authentication, sent with every request (NSX
    answers 403, not 401 with a challenge, to a request without it)."""
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
