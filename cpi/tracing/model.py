"""`cloud.properties.tracing` of cpi.json, as the config's models check it when a cloud
opens and as `cpi validate` and docs/reference.md show it. The call itself reads the same
keys earlier, without pydantic (cpi.tracing.settings), to trace from its first moment."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cpi.tracing.settings import DEFAULT_TIMEOUT, MOST_TIMEOUT


class TracingConfig(BaseModel):
    """OpenTelemetry traces of every call, sent by OTLP/HTTP (protobuf): off unless an
    endpoint is given."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="Send traces when `endpoint` is set; false turns them off, "
                                            "OTEL_EXPORTER_OTLP_* variables included.")
    endpoint: str | None = Field(None, description="The collector's OTLP/HTTP traces URL, e.g. "
                                                   "`http://otel-collector:4318/v1/traces`.")
    headers: dict[str, str] = Field(default_factory=dict, description="Headers of each export (a vendor's API "
                                                                      "key, say). Never logged.")
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, le=MOST_TIMEOUT,
                           description="The longest one call's export may take (seconds); a collector that "
                                       "does not answer within it is left alone for 30 s, its spans dropped "
                                       "and counted in the call's log.")
    ca_cert_file: str | None = Field(None, description="PEM bundle that verifies an https collector.")

    @field_validator("endpoint")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL (OTLP/HTTP)")
        return value
