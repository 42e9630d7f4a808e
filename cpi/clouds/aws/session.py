"""AWS clients for one CPI call: built on first use, every request retried and counted.

Start-up is on the hot path (one process per call), so:
- botocore is imported here, inside functions, and only when a method needs AWS;
- boto3 is not used at all: its resource layer is never needed and costs import time;
- EC2's API model is served from a slim copy holding only the operations this CPI calls
  (data/ec2-slim.json, ~125 KB instead of 4.3 MB; see slim.py), and botocore's 1.2 MB
  legacy endpoints table is skipped: endpoints come from each service's rule set;
- botocore's own retries are off (one attempt per request); cpi.retry does the retrying,
  by time budget, with a log line per wait.
"""

from __future__ import annotations

import collections
import datetime
import json
import logging
import os
import threading
from collections.abc import Callable
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from cpi import backoff, bounded, retry
from cpi.channel import Channel, Request
from cpi.errors import CloudError

from . import audited, errors
from .job_config import AwsProperties

if TYPE_CHECKING:
    from cpi.plan import Plan

T = TypeVar("T")

log = logging.getLogger("cpi.clouds.aws")

SLIM_MODEL = Path(__file__).with_name("data") / "ec2-slim.json"
SERVICES = ("ec2", "ebs", "sts", "elb", "elbv2")
USER_AGENT = "bosh-python-cpi"
#: the aws property that names each service's endpoint (unset: derived from the region)
ENDPOINT_SETTINGS = {"ec2": "ec2_endpoint", "ebs": "ebs_endpoint", "sts": "sts_endpoint", "elb": "elb_endpoint",
                     "elbv2": "elb_endpoint"}


@lru_cache(maxsize=1)
def _slim_ec2_model() -> dict | None:
    try:
        with open(SLIM_MODEL, "rb") as handle:
            return json.load(handle)
    except (OSError, ValueError) as exc:
        log.warning("slim EC2 model unavailable (%s); loading botocore's full model", exc)
        return None


@lru_cache(maxsize=2)
def _loader(slim: bool) -> Any:  # botocore is untyped: its objects are Any here
    """A botocore Loader that knows only the services this CPI uses (botocore otherwise
    lists ~440 data directories) and, when `slim`, serves the slim EC2 model. One per
    process, shared by its sessions: what it has read stays read (in a warm helper's
    workers too, which inherit what `preload` read)."""
    import botocore.loaders

    class CpiLoader(botocore.loaders.Loader):
        def list_available_services(self, type_name: str) -> list[str]:
            return list(SERVICES)

        def load_service_model(self, service_name: str, type_name: str, api_version: str | None = None) -> Any:
            if slim and service_name == "ec2" and type_name == "service-2":
                model = _slim_ec2_model()
                if model is not None:
                    return model
            return super().load_service_model(service_name, type_name, api_version)

        def load_data_with_path(self, name: str) -> Any:
            if slim and name == "endpoints":
                # Only botocore's legacy resolver reads this 1.2 MB table; URLs and signing
                # scopes come from each service's endpoint rule set. Answering with an empty
                # table at the built-in path keeps rule-set resolution on (a table from any
                # other path would override it); tests/aws compares both ways.
                return {"partitions": [], "version": 3}, os.path.join(self.BUILTIN_DATA_PATH, name)
            return super().load_data_with_path(name)

    return CpiLoader()


def preload() -> None:
    """What an AWS call imports and reads on first use, done ahead of calls by the warm
    helper (Cloud.preload): botocore, and an EC2 client built once on the slim model, which
    reads the model, the endpoint rule set and botocore's other data into the shared loader.
    The client gets placeholder keys so that no credential chain is consulted (no IMDS
    request, no file read); it sends nothing and is dropped."""
    import botocore.session
    from botocore.config import Config

    session = botocore.session.Session()
    session.register_component("data_loader", _loader(True))
    session.create_client("ec2", region_name="us-east-1", aws_access_key_id="preload",
                          aws_secret_access_key="preload",  # nosec B106  # a placeholder, never sent
                          config=Config(retries={"mode": "standard", "total_max_attempts": 1}))


def _fixed_provider(credentials: Any) -> Any:
    """A botocore credential provider that always answers `credentials`."""
    from botocore.credentials import CredentialProvider

    class Fixed(CredentialProvider):
        METHOD = getattr(credentials, "method", None) or "cpi"
        CANONICAL_NAME = "cpi"

        def load(self) -> Any:
            return credentials

    return Fixed()


class Aws:
    """The AWS APIs of one CPI call.

    `call(service, operation, **params)` sends one API request through cpi.retry; botocore
    exceptions come out unchanged (callers translate the codes they expect; the cloud
    boundary translates the rest). `plan`: the call's (cpi.plan), which its channel keeps."""

    def __init__(self, properties: AwsProperties, plan: Plan | None = None):
        self.properties = properties
        self.channel = Channel(plan)
        self.requests: collections.Counter[str] = collections.Counter()
        self._session: Any = None  # botocore sessions (botocore is untyped)
        self._base_session: Any = None  # the session whose credentials sign (or assume the role)
        self._clients: dict[str, Any] = {}
        self._full_model_services: set[str] = set()
        self._lock = threading.RLock()  # heavy stemcell uploads call from worker threads

    # ------------------------------------------------------------ clients

    def _botocore_session(self) -> Any:
        if self._session is None:
            self._session = self._new_session(self._credentials())
            self._base_session = self._base_session or self._session
        return self._session

    def _new_session(self, credentials: Any = None) -> Any:
        """A botocore session with this CPI's loader and request counter; `credentials`,
        when given, is the only credential source it consults."""
        import botocore.session

        bounded.urllib3_answers()
        session = botocore.session.Session()
        session.register_component("data_loader", _loader(self.properties.slim_models))
        session.register("before-send", self._count)
        if credentials is None:
            return session
        if getattr(credentials, "method", None) == "static":
            # the cheap way: no credential-provider chain is built at all
            session.set_credentials(credentials.access_key, credentials.secret_key, credentials.token)
        else:
            session.get_component("credential_provider").insert_before("env", _fixed_provider(credentials))
        return session

    def _count(self, event_name: str = "", **_: Any) -> None:
        # event_name: before-send.<service>.<Operation>
        parts = event_name.split(".")
        if len(parts) >= 3:
            with self._lock:
                self.requests[parts[2]] += 1

    def _config(self) -> Any:
        from botocore.config import Config

        return Config(
            region_name=self.properties.signing_region,
            retries={"mode": "standard", "total_max_attempts": 1},
            connect_timeout=self.properties.connect_timeout,
            read_timeout=self.properties.read_timeout,
            max_pool_connections=32,
            user_agent_extra=USER_AGENT,
            use_dualstack_endpoint=self.properties.dualstack or None,
        )

    def client(self, service: str) -> Any:
        with self._lock:
            if service not in self._clients:
                self._clients[service] = self._make_client(service)
            return self._clients[service]

    def _make_client(self, service: str, session: Any = None) -> Any:
        endpoint = getattr(self.properties, ENDPOINT_SETTINGS[service])
        return (session or self._botocore_session()).create_client(
            service,
            region_name=self.properties.signing_region,
            endpoint_url=endpoint,
            verify=self.ca_bundle,
            config=self._config(),
        )

    @cached_property
    def ca_bundle(self) -> str | None:
        """The CA file botocore verifies the endpoints with: ca_cert_file, or the PEM text of
        connection_options.ca_cert kept in a private file named by its digest (written once,
        atomically; read once per call, whatever the number of clients); None: botocore's own."""
        options = self.properties.connection_options
        if options is None or not options.ca_cert:
            return self.properties.ca_cert_file
        import hashlib

        from cpi.private import cache_dir, private_dir, replace_file

        pem = options.ca_cert.encode()
        setting = "aws.connection_options.ca_cert"
        directory = private_dir(cache_dir("ca", setting), "the CA cache (~/.cache/bosh-cpi/ca)")
        path = directory / f"aws-{hashlib.sha256(pem).hexdigest()[:32]}.pem"
        try:
            current = path.read_bytes() if not path.is_symlink() else None
        except FileNotFoundError:
            current = None
        if current != pem:
            replace_file(path, pem)
        return str(path)

    def _full_model_client(self, service: str) -> Any:
        """A client on botocore's full model, for an operation the slim one lacks (a gap in
        slim.OPERATIONS: logged so it gets fixed, but never fatal)."""
        import botocore.session

        log.warning("operation not in the slim %s model; loading botocore's full model", service)
        session = botocore.session.Session()
        session.register("before-send", self._count)
        session.get_component("credential_provider").insert_before(
            "env", _fixed_provider(self._botocore_session().get_credentials())
        )
        client = self._make_client(service, session)
        self._clients[service] = client
        self._full_model_services.add(service)
        return client

    # ------------------------------------------------------------ credentials

    def _credentials(self) -> Any:
        """The credentials object every client signs with, or None for botocore's own
        chain (env_or_profile without a role)."""
        p = self.properties
        base = None
        if p.credentials_source == "static":
            from botocore.credentials import Credentials

            base = Credentials(
                p.access_key_id,
                p.secret_access_key.get_secret_value() if p.secret_access_key else None,
                p.session_token.get_secret_value() if p.session_token else None,
                method="static",
            )
        if p.role_arn:
            return self._assumed_role(base)
        return base

    def _assumed_role(self, base: Any) -> Any:
        """Refreshable AssumeRole credentials, fetched on first use: nothing is asked of STS
        until the first request is signed (and never for `info`)."""
        from botocore.credentials import DeferredRefreshableCredentials

        self._base_session = self._new_session(base)
        sts = self._make_client("sts", self._base_session)

        def fetch() -> dict[str, str]:
            params: dict[str, Any] = {
                "RoleArn": self.properties.role_arn,
                "RoleSessionName": self.properties.role_session_name,
            }
            if self.properties.role_external_id:
                params["ExternalId"] = self.properties.role_external_id
            try:
                response = self._send(sts, "sts", "AssumeRole", params, idempotent=True, budget=None, also=None)
            except Exception as exc:  # noqa: BLE001 - re-raised as a CloudError naming the role
                raise CloudError(
                    f"assuming role {self.properties.role_arn} failed: {errors.summary(exc)} "
                    f"(base credentials: {self._describe_base()})"
                ) from None
            creds = response["Credentials"]
            expiry = creds["Expiration"]
            if isinstance(expiry, datetime.datetime):
                expiry = expiry.isoformat()
            log.info("assumed role %s as session %s", self.properties.role_arn, self.properties.role_session_name)
            return {
                "access_key": creds["AccessKeyId"],
                "secret_key": creds["SecretAccessKey"],
                "token": creds["SessionToken"],
                "expiry_time": expiry,
            }

        return DeferredRefreshableCredentials(refresh_using=fetch, method="assume-role")

    def _describe_base(self) -> str:
        p = self.properties
        if p.credentials_source == "static":
            return f"static access_key_id {p.access_key_id}" + (" with session_token" if p.session_token else "")
        try:
            import botocore.session

            # the credentials the calls were signed with (already resolved: no new lookup)
            creds = (self._base_session or botocore.session.Session()).get_credentials()
        except Exception as exc:  # noqa: BLE001 - describing only; the lookup error is the news
            return f"env_or_profile (lookup failed: {type(exc).__name__})"
        if creds is None:
            return "env_or_profile (none found in the environment, shared files or instance profile)"
        return f"env_or_profile via {creds.method}, access key id {creds.access_key}"

    def describe_credentials(self) -> str:
        """Which credentials AWS saw, for error messages: the key ID and where it came
        from, never a secret."""
        if self.properties.role_arn:
            return f"role {self.properties.role_arn} assumed with {self._describe_base()}"
        return self._describe_base()

    # ------------------------------------------------------------ requests

    def call(
        self,
        service: str,
        operation: str,
        *,
        idempotent: bool = True,
        budget: float | None = None,
        also: Callable[[str], bool] | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        """Send `operation` with `params`.

        idempotent: safe to resend after a timeout (reads, deletes, calls with a
        ClientToken); otherwise only failures that certainly did not reach AWS are retried.
        also: extra error codes to treat as transient for this call (e.g. VolumeInUse).
        budget: seconds to keep retrying (default: retry_budget_seconds)."""
        client = self.client(service)
        return self._send(client, service, operation, params, idempotent=idempotent, budget=budget, also=also)

    def _send(self, client: Any, service: str, operation: str, params: dict[str, Any], *, idempotent: bool,
              budget: float | None, also: Callable[[str], bool] | None) -> dict[str, Any]:
        method = self._method(client, service, operation)
        earlier_unsure = False

        def send() -> dict[str, Any]:
            # an error after an attempt that may have been carried out says so
            # (`after_unknown_outcome`): e.g. a DetachVolume whose answer was lost is then
            # repeated and told the volume is not attached
            nonlocal earlier_unsure
            try:
                return method(**params)
            except Exception as exc:
                exc.after_unknown_outcome = earlier_unsure  # type: ignore[attr-defined]  # ours, on any error
                earlier_unsure = earlier_unsure or retry.unsure(errors.classifier, exc)
                raise

        def withhold(plan: Plan) -> dict[str, Any]:  # `cpi plan`: a mutation is only described
            from . import planned

            return planned.send(plan, lambda dry: self.retrying(dry, client, service, operation, idempotent=True),
                                method, service, operation, params)

        return self.channel.send(
            Request(f"{service}:{operation}", not audited.read_only(operation), params), send,
            retrying=lambda attempt: self.retrying(attempt, client, service, operation, idempotent=idempotent,
                                                   budget=budget, also=also),
            withhold=withhold,
            audit=lambda response: audited.after(service, operation, params, response, plan=None))

    def _method(self, client: Any, service: str, operation: str) -> Any:
        from botocore import xform_name

        name = xform_name(operation)
        method = getattr(client, name, None)
        if method is None:
            # not in the slim model (a gap in slim.OPERATIONS); AttributeError if botocore
            # does not know it either
            full = client if service in self._full_model_services else self._full_model_client(service)
            method = getattr(full, name)
        return method

    @property
    def account(self) -> retry.Account:
        """How this account's requests are retried, from its properties as they are now."""
        return retry.Account(self.properties.retry_budget_seconds, self.properties.max_retries + 1,
                             tls_setting="aws.ca_cert_file (or aws.connection_options.ca_cert)")

    def retrying(self, send: Callable[[], T], client: Any, service: str, operation: str, *, idempotent: bool,
                 budget: float | None = None, also: Callable[[str], bool] | None = None) -> T:
        """`send()` under cpi.retry, with this account's retry settings and shared backoff; an
        endpoint that cannot be reached leaves as one CloudError naming it and its setting."""
        endpoint = client.meta.endpoint_url
        # EC2 throttles per account, region and API: so do the CPI processes on this host
        shared = f"aws-{service}-{self.properties.signing_region}-{backoff.endpoint_key(endpoint)}"
        return self.account.call(send, classify=errors.classifier(idempotent=idempotent, also=also),
                                 what=f"{service}:{operation}", endpoint=endpoint,
                                 setting=self.endpoint_setting(service), shared=shared, service=service, budget=budget)

    def endpoint_setting(self, service: str) -> str:
        """The cpi.json setting that chose `service`'s endpoint: its `*_endpoint`, or the region
        botocore derived it from."""
        key = ENDPOINT_SETTINGS[service]
        if getattr(self.properties, key):
            return f"aws.{key}"
        derived = "aws.region" + (" with aws.dualstack" if self.properties.dualstack else "")
        return f"{derived} (the endpoint is derived from it; aws.{key} names one)"

    def ec2(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        return self.call("ec2", operation, **kwargs)

    def summary(self) -> str:
        total = sum(self.requests.values())
        detail = ", ".join(f"{op} {n}" for op, n in sorted(self.requests.items()))
        return f"{total} AWS request{'s' if total != 1 else ''}" + (f" ({detail})" if detail else "")
