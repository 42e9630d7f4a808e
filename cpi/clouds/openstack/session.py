"""The OpenStack APIs of one CPI call: built on first use, every request retried and counted.

Start-up is on the hot path (one process per call), so keystoneauth1 and openstacksdk are
imported here, inside functions, only when a method needs OpenStack. The openstacksdk
`Connection` is built from cpi.json alone (no clouds.yaml, no OS_* variables: bosh-cli runs
the CPI with the operator's whole environment) around one keystoneauth session, so a call
authenticates once and reuses that token for every request (and, with `token_cache`, the
next calls reuse it too: tokens.py).

Requests go through the connection's per-service REST proxies (paths relative to each
service's versioned endpoint) with an explicit microversion, so each BOSH method costs a
known, small number of requests (counted and logged per call); the SDK's and keystoneauth's
own retries are off and cpi.retry does the retrying, by time budget, honouring Retry-After,
with a log line per wait. Cost of the SDK: importing it takes about 0.24 s of every call.
"""

from __future__ import annotations

import atexit
import collections
import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cpi import backoff, bounded, retry
from cpi.channel import Channel, Request

from . import audited, errors
from .props import OpenStackProperties

if TYPE_CHECKING:
    from keystoneauth1.session import Session
    from openstack.connection import Connection

    from cpi.plan import Plan

log = logging.getLogger("cpi.clouds.openstack")

APP_NAME = "bosh-python-cpi"
#: Nova microversion: `networks` explicit on create (2.37, "auto" when Nova makes the port),
#: the flavor's sizes shown in the server (2.47). Nova has served it since Pike (2017).
COMPUTE_MICROVERSION = "2.47"
#: Cinder 3.42 extends attached volumes; the rest of the calls work from 3.0.
VOLUME_EXTEND_IN_USE_MICROVERSION = "3.42"

#: the catalog service types this CPI talks to, as keystoneauth (os-service-types) knows them
SERVICES = ("compute", "network", "image", "block-storage", "load-balancer")
#: the major API version of each
API_VERSIONS = {"compute": "2", "network": "2", "image": "2", "block-storage": "3", "load-balancer": "2"}


def preload() -> None:
    """The SDK a call imports on first use (~0.25 s, mostly openstacksdk's 460 modules),
    imported ahead of calls by the warm helper (Cloud.preload). Imports only: no session,
    no socket, no token."""
    import requests  # noqa: F401 - preloaded
    from keystoneauth1 import adapter, exceptions, session  # noqa: F401 - preloaded
    from keystoneauth1.identity import v3  # noqa: F401 - preloaded
    from openstack import connection  # noqa: F401 - preloaded

    from . import tokens  # noqa: F401 - preloaded


class OpenStack:
    """`request(service, method, path, ...)` sends one API request through cpi.retry and
    returns the `requests.Response`; an error status raises errors.ApiError (callers
    translate the statuses they expect, the cloud boundary the rest). `plan`: the call's
    (cpi.plan), which its channel keeps."""

    def __init__(self, properties: OpenStackProperties, plan: Plan | None = None):
        self.properties = properties
        self.channel = Channel(plan)
        self._urls: list[str] = []
        self._lock = threading.Lock()
        self._connection: Connection | None = None
        self._session: Session | None = None
        self._adapters: dict[str, Any] = {}
        self._endpoints: dict[str, str] = {}
        self._authenticated = False
        self._tokens = None
        if properties.token_cache:
            from .tokens import TokenCache, default_directory

            directory = Path(properties.token_cache_dir) if properties.token_cache_dir else default_directory()
            self._tokens = TokenCache(directory, properties)

    # ------------------------------------------------------------ connection

    def _verify(self) -> bool | str:
        p = self.properties
        if not p.ssl_verify:
            import urllib3

            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)  # said once, here
            log.warning("ssl_verify is false: the OpenStack APIs' TLS certificates are not checked")
            return False
        if not p.ca_cert:
            return True
        if "-----BEGIN" not in p.ca_cert:
            return p.ca_cert  # a path
        fd, path = tempfile.mkstemp(prefix="cpi-openstack-ca-", suffix=".pem")
        with os.fdopen(fd, "w") as handle:
            handle.write(p.ca_cert if p.ca_cert.endswith("\n") else p.ca_cert + "\n")
        atexit.register(_remove, path)
        return path

    def _auth_plugin(self) -> Any:  # keystoneauth1's, untyped
        from keystoneauth1.identity import v3

        p = self.properties
        if p.application_credential_id:
            assert p.application_credential_secret is not None, "OpenStackProperties requires it with the id"
            return v3.ApplicationCredential(
                auth_url=p.auth_url,
                application_credential_id=p.application_credential_id,
                application_credential_secret=p.application_credential_secret.get_secret_value(),
            )
        scope: dict[str, Any] = {"project_id": p.project_id} if p.project_id else {
            "project_name": p.project, "project_domain_name": p.project_domain_name or p.domain,
        }
        assert p.api_key is not None, "OpenStackProperties requires it without an application credential"
        return v3.Password(
            auth_url=p.auth_url,
            username=p.username,
            password=p.api_key.get_secret_value(),
            user_domain_name=p.user_domain_name or p.domain,
            **scope,
        )

    def session(self) -> Session:
        """The keystoneauth session (one token for the whole call)."""
        if self._session is None:
            import requests
            from keystoneauth1 import session as ksa_session

            bounded.urllib3_answers()
            http = requests.Session()
            http.hooks["response"].append(self._count)
            self._session = ksa_session.Session(
                auth=self._auth_plugin(),
                session=http,
                verify=self._verify(),
                app_name=APP_NAME,
            )
            # What the token request (and discovery) is sent with; `request` gives its own. Set
            # here because the constructor takes one number, which requests would use for the
            # connection too: a Keystone that drops SYNs was waited on for read_timeout (120 s)
            # per attempt, not connect_timeout.
            self._session.timeout = (self.properties.connect_timeout,  # type: ignore[assignment]  # requests' pair
                                     self.properties.read_timeout)
        return self._session

    @property
    def connection(self) -> Connection:
        """The openstacksdk Connection, built from cpi.json around `session()`: no
        clouds.yaml, no OS_* variables, the SDK's own retries off (cpi.retry retries)."""
        if self._connection is None:
            from openstack import connection

            overrides: dict[str, Any] = {}
            for service, url in self.properties.endpoint_overrides.items():
                if service in ("network", "load-balancer") and not url.rstrip("/").endswith("/v2.0"):
                    url = url.rstrip("/") + "/v2.0"  # the SDK adds it to catalog URLs, not to overrides
                overrides[f"{service.replace('-', '_')}_endpoint_override"] = url
            no_retries: dict[str, Any] = {f"{service.replace('-', '_')}_status_code_retries": 0 for service in SERVICES}
            # the versions this CPI speaks: with an endpoint override, the SDK then trusts it
            # instead of probing it (one request less, and none to fail under throttling)
            versions: dict[str, Any] = {f"{service.replace('-', '_')}_api_version": version
                                        for service, version in API_VERSIONS.items()}
            self._connection = connection.Connection(
                session=self.session(),
                region_name=self.properties.region,
                interface=self.properties.interface,
                app_name=APP_NAME,
                connect_retries=0,
                status_code_retries=0,
                **no_retries,
                **versions,
                **overrides,
            )
        return self._connection

    def _count(self, response: Any, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            self._urls.append(response.request.url or "")

    @property
    def requests(self) -> collections.Counter[str]:
        """Requests sent so far, by service (labelled by endpoint, version discovery included)."""
        with self._lock:
            urls = list(self._urls)
            bases = {**self._endpoints, "identity": _origin(self.properties.auth_url)}
        counts: collections.Counter[str] = collections.Counter()
        for url in urls:
            matching = [(len(base), service) for service, base in bases.items() if url.startswith(base)]
            counts[max(matching)[1] if matching else "other"] += 1
        return counts

    def adapter(self, service: str) -> Any:
        """The Connection's REST proxy of one service (paths relative to its versioned
        endpoint): the catalog endpoint of the configured region and interface, or the
        endpoint_overrides entry."""
        with self._lock:
            adapter = self._adapters.get(service)
        if adapter is not None:
            return adapter
        conn = self.connection
        adapter = self._call_with_retry(lambda: getattr(conn, service.replace("-", "_")), f"{service} endpoint",
                                        idempotent=True, budget=min(60.0, self.properties.retry_budget_seconds))
        endpoint = getattr(adapter, "endpoint_override", None) or adapter.get_endpoint()
        if not endpoint or type(adapter).__name__ == "_ServiceDisabledProxyShim":
            from keystoneauth1 import exceptions as ksa

            raise ksa.EndpointNotFound(
                f"the service catalog has no '{service}' endpoint for interface {self.properties.interface}"
                + (f" in region {self.properties.region}" if self.properties.region else "")
            )
        with self._lock:
            self._endpoints[service] = _origin(endpoint)
            self._adapters[service] = adapter
        return adapter

    def authenticate(self) -> None:
        """Get the token (and catalog) now, so parallel requests share it; auth failures
        surface here, with a short retry budget for an unreachable or busy Keystone."""
        if self._authenticated:
            return
        session = self.session()
        if self._tokens is not None and self._tokens.load(session.auth):
            log.debug("using the kept token")
        self._call_with_retry(session.get_token, "keystone token", idempotent=True,
                              budget=min(30.0, self.properties.retry_budget_seconds))
        self._authenticated = True
        self.keep_token()

    def keep_token(self) -> None:
        """Store the current token for the next call (token_cache), if it changed."""
        if self._tokens is not None and self._session is not None:
            self._tokens.save(self._session.auth)

    @property
    def project_id(self) -> str | None:
        self.authenticate()
        return self.session().get_project_id()

    # ------------------------------------------------------------ requests

    @property
    def account(self) -> retry.Account:
        """How this account's requests are retried, from its properties as they are now."""
        return retry.Account(self.properties.retry_budget_seconds, self.properties.max_retries + 1,
                             tls_setting="openstack.ca_cert (or connection_options.ca_cert)")

    def _call_with_retry(self, fn: Callable[[], Any], what: str, *, idempotent: bool, budget: float | None = None,
                         also: Callable[[errors.ApiError], bool] | None = None, service: str = "identity",
                         endpoint: str | None = None) -> Any:
        """`fn()` under cpi.retry; an endpoint that cannot be reached leaves as one CloudError
        naming it and the setting that chose it."""
        # Keystone's token, or (endpoint unknown yet) a catalog endpoint being discovered
        reached = service if endpoint else "identity" if what == "keystone token" else what.split(" ", 1)[0]
        return self.account.call(fn, classify=errors.classifier(idempotent=idempotent, also=also), what=what,
                                 endpoint=endpoint or self._endpoint_of(reached), setting=self._setting_of(reached),
                                 shared=_shared_key(service, endpoint or self.properties.auth_url),
                                 service=service if endpoint else reached, budget=budget)

    def _endpoint_of(self, service: str) -> str:
        if service == "identity":
            return self.properties.auth_url
        return self.properties.endpoint_overrides.get(service) or f"the service catalog's {service} endpoint"

    def _setting_of(self, service: str) -> str:
        """The cpi.json setting that chose `service`'s endpoint."""
        if service == "identity":
            return "openstack.auth_url"
        if service in self.properties.endpoint_overrides:
            return f"openstack.endpoint_overrides.{service}"
        return (f"the service catalog's {service} endpoint for openstack.region and openstack.endpoint_type "
                f"(openstack.endpoint_overrides.{service} replaces it)")

    def request(self, service: str, method: str, path: str, *, json: Any = None, data: Any = None,
                headers: dict[str, str] | None = None, microversion: str | None = None,
                idempotent: bool | None = None, budget: float | None = None,
                also: Callable[[errors.ApiError], bool] | None = None, ok: tuple[int, ...] = (),
                find: Callable[[], dict[str, Any] | None] | None = None) -> Any:
        """Send one request; statuses below 400 and those in `ok` are returned, others raise
        ApiError. `data` may be a callable returning a fresh body for each attempt (uploads).
        idempotent (default: every method but POST) decides whether timeouts and 5xx other
        than 503 are retried; `also` marks further errors as transient for this request.

        `find` makes a POST safe to repeat (see `create`): after an attempt whose outcome is
        unknown, it looks for what that attempt made before sending again, and what it finds
        is returned (a dict, not a response). A response says `after_unknown_outcome` when
        an earlier attempt of it may have been carried out."""
        self.authenticate()
        what = f"{service} {method} {_path_only(path)}"
        if microversion is None and service == "compute":
            microversion = COMPUTE_MICROVERSION
        if idempotent is None:
            idempotent = method != "POST" or find is not None
        unsure = False
        was_unsure = False

        def send() -> Any:
            nonlocal unsure, was_unsure
            if unsure and find is not None:
                found = find()
                if found is not None:
                    log.warning("%s: the outcome of the last attempt was unknown, and it had been carried out: "
                                "using what it made (%s)", what, found.get("id", "?"))
                    return found
                log.info("%s: the last attempt had not been carried out; sending it again", what)
            kwargs: dict[str, Any] = {"headers": dict(headers or {}),
                                      "timeout": (self.properties.connect_timeout, self.properties.read_timeout)}
            if json is not None:
                kwargs["json"] = json
            if data is not None:
                kwargs["data"] = data() if callable(data) else data
            if microversion:
                kwargs["microversion"] = microversion
            kwargs["headers"].setdefault("Accept", "application/json")
            started = time.monotonic()
            try:
                response = self.adapter(service).request(path, method, **kwargs)
            except Exception as exc:
                unsure = errors.unsure(exc)
                was_unsure = was_unsure or unsure
                raise
            log.debug("%s %s %s → %d in %.3fs", service, method, _path_only(path), response.status_code,
                      time.monotonic() - started)
            if response.status_code >= 400 and response.status_code not in ok:
                error = errors.from_response(service, method, _path_only(path), response)
                unsure = errors.unsure(error)
                was_unsure = was_unsure or unsure
                raise error
            unsure = False
            # e.g. a DELETE answered 404 because an earlier attempt, whose answer was lost, did it
            response.after_unknown_outcome = was_unsure
            return response

        return self.channel.send(
            Request(what, not audited.read_only(method), path), send,
            retrying=lambda attempt: self._call_with_retry(attempt, what, idempotent=bool(idempotent), budget=budget,
                                                           also=also, service=service,
                                                           endpoint=self._endpoint(service)),
            withhold=lambda plan: self._planned(plan, service, method, path, json, ok, microversion),
            audit=lambda answer: audited.after(service, method, path, json, answer, plan=None))

    def _endpoint(self, service: str) -> str:
        """`service`'s endpoint, found (the catalog read) on its first request."""
        self.adapter(service)
        return self._endpoints[service]

    def _planned(self, plan: Plan, service: str, method: str, path: str, body: Any, ok: tuple[int, ...],
                 microversion: str | None) -> Any:
        """A mutation in plan mode (cpi.plan): not sent. A DELETE first looks (GET) at what
        it names: one that is not there gets the 404 the real DELETE would get."""
        from . import planned

        if method == "DELETE":
            try:
                probe = self.request(service, "GET", path, ok=(404,), microversion=microversion)
            except errors.ApiError as exc:
                log.info("plan: cannot look at %s before deleting it (%s); planning the DELETE", _path_only(path), exc)
            else:
                if probe.status_code == 404:
                    if 404 in ok:
                        return probe
                    raise errors.from_response(service, method, _path_only(path), probe)
        return planned.send(plan, service, method, path, body)

    def create(self, service: str, path: str, body: Any, *, key: str,
               find: Callable[[], dict[str, Any] | None] | None, **kwargs: Any) -> dict[str, Any]:
        """POST a new resource and return it (`response[key]`). With `find` (a lookup by the
        unique name this call gave the resource), the POST is retried like any idempotent
        request: a dropped connection or a 5xx that may have hidden a success is followed by
        a look for the resource before sending again, so a busy cloud costs neither a failed
        call nor a duplicate. (A request still in the service's hands when its connection
        dropped can escape the look; the read timeout is long enough to make that rare.)"""
        try:
            result = self.request(service, "POST", path, json=body, find=find, **kwargs)
        except Exception as exc:
            if find is None or not errors.unsure(exc):
                raise
            found = find()  # out of retries, the last attempt's outcome unknown too: a last look
            if found is None:
                raise
            log.warning("%s %s: the last attempt was carried out after all: using what it made (%s)", service,
                        _path_only(path), found.get("id", "?"))
            audited.after(service, "POST", path, body, found, plan=self.channel.plan)
            return found
        return result if isinstance(result, dict) else _json(result)[key]

    def get(self, service: str, path: str, **kwargs: Any) -> Any:
        return _json(self.request(service, "GET", path, **kwargs))

    def post(self, service: str, path: str, body: Any, **kwargs: Any) -> Any:
        return _json(self.request(service, "POST", path, json=body, **kwargs))

    def put(self, service: str, path: str, body: Any, **kwargs: Any) -> Any:
        return _json(self.request(service, "PUT", path, json=body, **kwargs))

    def delete(self, service: str, path: str, **kwargs: Any) -> Any:
        return self.request(service, "DELETE", path, **kwargs)

    def summary(self) -> str:
        total = sum(self.requests.values())
        detail = ", ".join(f"{service} {n}" for service, n in sorted(self.requests.items()))
        return f"{total} OpenStack request{'s' if total != 1 else ''}" + (f" ({detail})" if detail else "")

    def describe_identity(self) -> str:
        return self.properties.describe_identity()


def _json(response: Any) -> Any:
    if response.status_code == 204 or not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _path_only(path: str) -> str:
    return path.split("?", 1)[0]


def _origin(url: str) -> str:
    """An endpoint without its version and what follows (`http://h:8776/v3/<project>` →
    `http://h:8776`, `https://cloud/volume/v3` → `https://cloud/volume`): what the request
    counter matches, version discovery requests included."""
    head, _, path = url.partition("://")
    host, _, rest = path.partition("/")
    kept = []
    for segment in rest.split("/"):
        if not segment or re.fullmatch(r"v\d+(\.\d+)?", segment):
            break
        kept.append(segment)
    return f"{head}://{host}" + "".join(f"/{s}" for s in kept)


def _shared_key(service: str, endpoint: str) -> str:
    """The name under which every CPI process on this machine shares one backoff rate:
    OpenStack rate-limits per API service (Nova's and Neutron's limits are separate, and
    so are the load balancers in front of them), so one key per service and host."""
    return f"openstack-{service}-{backoff.endpoint_key(endpoint)}"


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
