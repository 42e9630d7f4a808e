"""Where a call's spans go (cpi.tracing.settings): cpi.json's `tracing` section first, else
the standard OTEL_* variables, read as OpenTelemetry's own SDKs read them."""

from __future__ import annotations

from cpi.tracing import settings

CONFIG = {"cloud": {"properties": {"tracing": {"endpoint": "https://c:4318/v1/traces", "timeout": 0.25,
                                               "headers": {"x-api-key": "k"}}}}}


def test_the_config_section_decides_over_the_variables():
    found = settings.read(CONFIG, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://elsewhere:4318"})
    assert found is not None
    assert (found.endpoint, found.headers, found.timeout) == ("https://c:4318/v1/traces", {"x-api-key": "k"}, 0.25)
    off = {"cloud": {"properties": {"tracing": {"endpoint": "https://c/v1/traces", "enabled": False}}}}
    assert settings.read(off, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://elsewhere:4318"}) is None


def test_the_variables_as_the_sdks_read_them():
    found = settings.read({}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/",
                               "OTEL_EXPORTER_OTLP_HEADERS": "a=1,b=x%20y,broken",
                               "OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_SERVICE_NAME": "svc",
                               "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=lab"})
    assert found is not None
    assert found.endpoint == "http://c:4318/v1/traces"
    assert found.headers == {"a": "1", "b": "x y"} and found.timeout == 2.5
    assert (found.service_name, found.resource) == ("svc", {"deployment.environment": "lab"})
    traces_only = settings.read({}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                                     "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318/custom"})
    assert traces_only is not None and traces_only.endpoint == "http://t:4318/custom"


def test_what_turns_it_off():
    on = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}
    assert settings.read({}, {}) is None
    assert settings.read({}, {**on, "OTEL_SDK_DISABLED": "true"}) is None
    assert settings.read(CONFIG, {"OTEL_TRACES_EXPORTER": "none"}) is None
    assert settings.read({}, {**on, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) is None


def test_a_timeout_is_bounded():
    assert settings.read({}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_TIMEOUT": "60000"}
                         ).timeout == settings.MOST_TIMEOUT
    assert settings.read({}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_TIMEOUT": "-1"}
                         ).timeout == settings.DEFAULT_TIMEOUT
