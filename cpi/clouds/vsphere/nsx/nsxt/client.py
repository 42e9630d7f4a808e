"""One NSX-T manager over HTTPS, as the client of both its APIs (the Manager API under
/api/v1, the Policy API under /policy/api/v1): its authentication, TLS and JSON documents;
the wire's rules (retries within the call's budget, `cpi plan`, the audit trail) are
vcenter/rest.py's.

NSX refuses a write with 409 or 412 when the object changed since it was read (another
writer came first): `Client.changed` reads, edits and writes again until it is not."""

from __future__ import annotations

import json
import logging
import os
import random
import ssl
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cpi.errors import CloudError

from ...vcenter import rest
from ...vcenter.session import tls_context, verified

if TYPE_CHECKING:
    from cpi.channel import Channel

    from ...job_config import Nsxt as NsxtConfig

log = logging.getLogger("cpi.clouds.vsphere")

#: writes refused for a newer revision are read and made again at most this often
CONFLICTS = 20
#: methods whose repetition ends the same way: a lost answer is asked again (a PUT carries
#: the revision it read, so a repeated one is refused rather than applied twice; a DELETE
#: repeated finds nothing, which is its success)
IDEMPOTENT = ("GET", "PUT", "PATCH", "DELETE")
#: methods for which NSX's 404 is an answer (not there; gone already), not a refusal
ABSENT_OK = ("GET", "DELETE")


class Conflict(CloudError):
    """NSX refused a write: the object changed since it was read (409 or 412)."""


class Client:
    """The NSX-T manager cpi.json's `nsxt` names."""

    def __init__(self, config: NsxtConfig, *, ssl_verify: bool | None, budget: float, connect_timeout: float,
                 read_timeout: float, channel: Channel):
        self.config, self.ssl_verify = config, ssl_verify
        secret = config.password.get_secret_value() if config.password else ""
        self.rest = rest.Client(config.host, peer="the NSX-T manager", ca_key="nsxt.ca_cert",
                                address_key="nsxt.host (the job's vcenter.nsxt.host)", context=self._tls(),
                                headers=self._headers(), user=config.username or "",
                                secrets=[secret, config.auth_private_key.get_secret_value()
                                         if config.auth_private_key else ""],
                                budget=budget, connect_timeout=connect_timeout, read_timeout=read_timeout,
                                channel=channel)

    def _tls(self) -> ssl.SSLContext:
        """Verified as the job's `ssl_verify` says (session.verified: unset, against `ca_cert`
        when one is given and not at all otherwise, the official CPI's rule); a client
        certificate, when given, authenticates."""
        config = self.config
        context = tls_context(config.ca_cert, config.ca_cert_file,
                              verified(self.ssl_verify, config.ca_cert, config.ca_cert_file), "nsxt")
        if config.auth_certificate and config.auth_private_key:
            # ssl loads a key pair from files only: a private directory, gone once they are read
            with tempfile.TemporaryDirectory(prefix="cpi-nsxt-") as directory:
                cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
                for path, text in ((cert, config.auth_certificate), (key, config.auth_private_key.get_secret_value())):
                    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
                        out.write(text)
                try:  # an encrypted key is refused, not asked a passphrase for on a terminal
                    context.load_cert_chain(cert, key, password=lambda: b"")
                except ssl.SSLError as exc:
                    raise CloudError(f"nsxt.auth_certificate / nsxt.auth_private_key cannot be used ({exc.reason}): "
                                     "an unencrypted PEM key that matches the certificate is needed") from None
        return context

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        if not (self.config.auth_certificate and self.config.auth_private_key) and self.config.username:
            basic = rest.basic(self.config.username,
                               self.config.password.get_secret_value() if self.config.password else "")
            if self.config.remote_auth:  # vIDM: the same credentials, another scheme
                basic["Authorization"] = basic["Authorization"].replace("Basic ", "Remote ", 1)
            headers.update(basic)
        return headers

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """The JSON answer of one request to `path` (from /api or /policy on; None for 404,
        and for a change `cpi plan` withheld); Conflict for 409/412; CloudError naming the
        request for any other refusal."""
        what = f"NSX-T {method} {path.split('?', 1)[0]}"
        payload = json.dumps(body).encode() if body is not None else None
        # the Manager API may change what the Policy API made only when asked to, as the
        # official CPI asks; the Policy API is never told to overwrite what others protect
        extra = {"X-Allow-Overwrite": "true"} if self.config.allow_overwrite and path.startswith("/api/") else {}
        response = self.rest.request(method, path, payload, headers=extra, idempotent=method in IDEMPOTENT,
                                     what=what)
        if response.planned or (response.status == 404 and method in ABSENT_OK):
            return None
        if response.status in (409, 412):
            raise Conflict(what)
        try:
            document = json.loads(response.body) if response.body else None
        except ValueError:
            document = None  # an error page of a proxy in front of NSX: its text is shown below
            if response.status < 400:
                raise CloudError(self.rest.scrub(f"{what}: {response.status} with no JSON answer: "
                                                 f"{response.body[:200]!r}")) from None
        if response.status >= 400:
            message = (document or {}).get("error_message") if isinstance(document, dict) else None
            raise CloudError(self.rest.scrub(f"{what}: {response.status} {message or response.body[:200]!r}"))
        return document

    def pages(self, path: str) -> list[dict[str, Any]]:
        """Every result of a listing NSX answers page by page (its `cursor`)."""
        found: list[dict[str, Any]] = []
        cursor = None
        while True:
            joined = "&" if "?" in path else "?"
            page = self.call("GET", path + (f"{joined}cursor={cursor}" if cursor else "")) or {}
            found += page.get("results") or []
            cursor = page.get("cursor")
            if not cursor or not page.get("results"):
                return found

    def changed(self, path: str, change: Callable[[dict[str, Any]], bool], method: str = "PUT") -> None:
        """Read `path`, let `change` edit it (False: nothing to write), write it back with
        the revision read; again when another writer came first."""
        def attempt() -> None:
            current = self.call("GET", path)
            if current is None:
                raise CloudError(f"NSX-T {path.split('?', 1)[0]}: not there")
            if change(current):
                self.call(method, path, current)

        self._again(attempt, path, "the change")

    def acted(self, path: str, body: Any, what: str) -> None:
        """POST an action (`?action=ADD_MEMBERS`...), made again when NSX answers that the
        object changed meanwhile (409/412), as the official CPI does."""
        self._again(lambda: self.call("POST", path, body), path, what)

    @staticmethod
    def _again(attempt: Callable[[], Any], path: str, what: str) -> None:
        for count in range(1, CONFLICTS + 1):
            try:
                attempt()
                return
            except Conflict:
                log.info("NSX-T %s changed meanwhile: %s is made again (attempt %d)", path.split("?", 1)[0], what,
                         count)
                time.sleep(random.uniform(0.1, 1.0))
        raise CloudError(f"NSX-T {path.split('?', 1)[0]}: {what} still met others' changes after {CONFLICTS} attempts")


def client_for(properties: Any, channel: Channel) -> Client | None:
    """The NSX-T manager cpi.json names, asked through `channel` (the call's: cpi.channel);
    None without one."""
    config = properties.nsxt
    if config is None:
        return None
    return Client(config, ssl_verify=properties.ssl_verify, budget=properties.retry_budget_seconds,
                  connect_timeout=properties.connect_timeout,
                  read_timeout=properties.read_timeout, channel=channel)
