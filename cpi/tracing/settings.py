"""Where a call's spans go, read before anything else of the call is: from
`cloud.properties.tracing` of cpi.json (the job's `tracing.*` properties), else from the
standard OpenTelemetry variables a checkout's operator sets (`OTEL_EXPORTER_OTLP_*`; a
director runs bin/cpi with PATH alone, so there only the job's properties count).

Standard library only: this runs on every call. The config's model
(cpi.config.TracingConfig) refuses a bad `tracing` section when the cloud opens; here a
section that does not read as settings only leaves tracing off.
"""

from __future__ import annotations

import os

#: The longest an export may take (seconds), whatever the settings say: the director waits
#: for the process to end, and a collector is never worth more of a call's time than this.
MOST_TIMEOUT = 10.0

#: The default bound of one call's export (seconds). A collector on the operator's network
#: answers in milliseconds; one that does not within this is treated as down (cpi.tracing.otel).
DEFAULT_TIMEOUT = 1.0

#: Traces of this CPI carry this service.name unless OTEL_SERVICE_NAME says otherwise.
SERVICE_NAME = "bosh-cpi"


class Settings:
    """Where to send spans: `endpoint` is the full URL of the traces resource (…/v1/traces).
    (A plain class: `dataclasses` would cost every traced call its import of `inspect`.)"""

    __slots__ = ("ca_cert_file", "endpoint", "headers", "resource", "service_name", "timeout")

    def __init__(self, endpoint: str, headers: dict[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT,
                 ca_cert_file: str | None = None, service_name: str = SERVICE_NAME,
                 resource: dict[str, str] | None = None):
        self.endpoint, self.headers, self.timeout = endpoint, headers or {}, timeout
        self.ca_cert_file, self.service_name, self.resource = ca_cert_file, service_name, resource or {}


def _timeout(value: object, scale: float) -> float | None:
    """A positive number of seconds (`scale` turns the variables' milliseconds into them),
    at most MOST_TIMEOUT; None for anything else."""
    try:
        seconds = float(value) * scale  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return min(seconds, MOST_TIMEOUT) if seconds > 0 else None


def _pairs(text: str) -> dict[str, str]:
    """`k1=v1,k2=v2` as the OTEL_* variables spell headers and resource attributes
    (percent-encoded values); entries without `=` are skipped, as the SDK skips them."""
    from urllib.parse import unquote  # ~10 ms: only a checkout's variables need it
    pairs = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            pairs[unquote(key.strip())] = unquote(value.strip())
    return pairs


def _from_environment(environ: dict[str, str]) -> Settings | None:
    def get(name: str) -> str:
        return environ.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}") or environ.get(f"OTEL_EXPORTER_OTLP_{name}") or ""

    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
    if not endpoint and environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        endpoint = environ["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/") + "/v1/traces"
    if not endpoint or get("PROTOCOL") not in ("", "http/protobuf"):
        return None
    return Settings(endpoint=endpoint, headers=_pairs(get("HEADERS")),
                    timeout=_timeout(get("TIMEOUT"), 0.001) or DEFAULT_TIMEOUT,
                    ca_cert_file=get("CERTIFICATE") or None,
                    service_name=environ.get("OTEL_SERVICE_NAME") or SERVICE_NAME,
                    resource=_pairs(environ.get("OTEL_RESOURCE_ATTRIBUTES", "")))


def _from_config(section: dict) -> Settings | None:
    endpoint, headers = section.get("endpoint"), section.get("headers") or {}
    if section.get("enabled") is False or not isinstance(endpoint, str) or not endpoint:
        return None
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        return None
    ca_cert_file = section.get("ca_cert_file")
    return Settings(endpoint=endpoint, headers={str(k): v for k, v in headers.items()},
                    timeout=_timeout(section.get("timeout", DEFAULT_TIMEOUT), 1.0) or DEFAULT_TIMEOUT,
                    ca_cert_file=ca_cert_file if isinstance(ca_cert_file, str) and ca_cert_file else None)


def read(raw_config: dict, environ: dict[str, str] | None = None) -> Settings | None:
    """The call's tracing settings, or None: tracing off. cpi.json's section decides when it
    is there (`enabled: false` turns off what the variables would turn on); OTEL_SDK_DISABLED
    and OTEL_TRACES_EXPORTER=none turn everything off, as they do for any OpenTelemetry SDK."""
    environ = dict(os.environ) if environ is None else environ
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    cloud = raw_config.get("cloud")
    properties = cloud.get("properties") if isinstance(cloud, dict) else None
    section = properties.get("tracing") if isinstance(properties, dict) else None
    if isinstance(section, dict):
        return _from_config(section)
    return _from_environment(environ)
