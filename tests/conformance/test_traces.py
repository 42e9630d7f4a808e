"""OpenTelemetry traces on the local cloud, received by a real OTLP/HTTP endpoint on
127.0.0.1 (tests/support/otlp.py decodes the protobuf): one trace per call, what its span
says, that secrets in the collector's headers stay out of every byte the CPI writes, and
that a collector which refuses, fails or hangs changes nothing for the caller but a line in
the log and, once, at most the export's bound. Off, not one OpenTelemetry module loads.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.support.otlp import Collector, refused_url
from tests.support.runner import (
    COLD_ENV,
    DIRECTOR_ENV,
    WARM_ENV,
    Cpi,
    bin_cpi_argv,
    helper_pid,
    imported_modules,
    start_helper,
    stop_helper,
)

API_KEY = "otel-api-key-5c1d9e"


@pytest.fixture
def collector():
    made = Collector()
    yield made
    made.close()


def _config(tmp_path, endpoint: str | None, name: str = "cpi.json", **tracing) -> object:
    properties: dict = {"local": {"state_dir": str(tmp_path / "state")}}
    if endpoint is not None:
        properties["tracing"] = {"endpoint": endpoint, "headers": {"x-api-key": API_KEY}, **tracing}
    path = tmp_path / name
    path.write_text(json.dumps({"cloud": {"plugin": "local", "properties": properties}}))
    return path


def _roots(collector: Collector) -> list[dict]:
    return [s for s in collector.spans if s["parent_id"] is None]


@pytest.mark.parametrize("env", [COLD_ENV, DIRECTOR_ENV], ids=["cold", "as-configured"])
def test_each_call_is_one_trace_with_what_it_did(tmp_path, collector, env):
    cpi = Cpi(_config(tmp_path, collector.url), env=env)
    disk_cid = cpi("create_disk", 64, {}, None)
    assert cpi("has_disk", disk_cid) is True
    missing = cpi.call("attach_disk", "vm-missing", disk_cid)
    assert missing.error["type"] == "Bosh::Clouds::VMNotFound"
    traces = collector.traces()
    assert len(traces) == 3 and len(_roots(collector)) == 3
    by_method = {s["attributes"]["bosh.method"]: s for s in _roots(collector)}
    made = by_method["create_disk"]
    assert made["name"] == "cpi create_disk"
    assert made["attributes"]["bosh.result.cid"] == disk_cid
    assert made["attributes"]["bosh.request_id"] == "cpi-424242"
    assert made["attributes"]["bosh.director_uuid"] == "director-uuid-1"
    assert made["attributes"]["bosh.api_version"] == 2
    assert made["attributes"]["cloud.provider"] == "local"
    assert made["resource"]["service.name"] == "bosh-cpi"
    assert made["status"] == 0 and made["end_ns"] > made["start_ns"]
    assert by_method["has_disk"]["attributes"]["bosh.disk_cid"] == disk_cid
    failed = by_method["attach_disk"]
    assert failed["attributes"]["error.type"] == "Bosh::Clouds::VMNotFound"
    assert failed["attributes"]["bosh.ok_to_retry"] is False
    assert failed["status"] == 2  # STATUS_CODE_ERROR
    assert failed["attributes"]["bosh.vm_cid"] == "vm-missing"
    assert {r["path"] for r in collector.requests} == {"/v1/traces"}
    assert {r["headers"]["x-api-key"] for r in collector.requests} == {API_KEY}


def test_the_collectors_headers_never_reach_the_output(tmp_path, collector):
    """At debug level, on success and on error, with the collector up and down, and a key
    in the endpoint's URL (user info and query) as well as in a header."""
    env = {**COLD_ENV, "CPI_LOG_LEVEL": "debug"}
    refused = refused_url().replace("http://", "http://otel:url-pw-4d2c@") + "?key=url-key-8b1e"
    for endpoint in (collector.url, refused):
        cpi = Cpi(_config(tmp_path, endpoint), env=env)
        for response in (cpi.call("create_disk", 64, {}, None), cpi.call("delete_vm", "vm-missing"),
                         cpi.call("create_disk", "not-a-size", {}, None)):
            for secret in (API_KEY, "url-pw-4d2c", "url-key-8b1e"):
                assert secret not in response.raw + response.stderr


@pytest.mark.parametrize("mode", ["refused", "fail", "hang"])
def test_a_collector_down_changes_nothing_but_a_line_of_the_log(tmp_path, mode):
    broken = Collector("fail" if mode == "fail" else "hang")
    try:
        endpoint = refused_url() if mode == "refused" else broken.url
        cpi = Cpi(_config(tmp_path, endpoint, timeout=0.5), env=COLD_ENV)
        started = time.monotonic()
        first = cpi.call("create_disk", 64, {}, None)
        took = time.monotonic() - started
        assert first.error is None and first.result.startswith("disk-")
        assert "spans dropped: the collector at http://127.0.0.1:" in first.log
        assert {"refused": "connection refused", "fail": "HTTP 503", "hang": "no answer in time"}[mode] in first.log
        assert took < 0.5 + 5  # the export's bound, and a loaded machine's start-up
        started = time.monotonic()
        second = cpi.call("has_disk", first.result)
        assert second.result is True
        assert "failed an export" in second.log and "next try in" in second.log
        if mode == "hang":
            assert len(broken.requests) == 1  # the second call did not wait for it again
    finally:
        broken.close()


def test_off_no_opentelemetry_module_is_imported(tmp_path, collector):
    """No `tracing` section and no OTEL_ variable: not one module of the SDK, and `info`
    not even cpi.tracing's settings reader."""
    for config, reads_settings in ((_config(tmp_path, None), False),
                                   (_config(tmp_path, collector.url, "off.json", enabled=False), True)):
        for method, arguments in (("info", []), ("has_vm", ["vm-1"])):
            request = json.dumps({"method": method, "arguments": arguments}).encode()
            proc = subprocess.run(bin_cpi_argv(config, "-X", "importtime"), input=request, capture_output=True,
                                  env=COLD_ENV, cwd="/", timeout=120)
            assert json.loads(proc.stdout)["error"] is None
            modules = imported_modules(proc.stderr.decode())
            assert not {m for m in modules if m.startswith("opentelemetry") or m == "cpi.tracing.otel"}, method
            if method == "info":  # (the config's models know the section, so has_vm loads them anyway)
                assert ("cpi.tracing.settings" in modules) is reads_settings
    assert collector.requests == []


def test_the_standard_variables_turn_it_on_for_a_checkout(tmp_path, collector):
    base = collector.url.removesuffix("/v1/traces")
    env = {**COLD_ENV, "OTEL_EXPORTER_OTLP_ENDPOINT": base, "OTEL_EXPORTER_OTLP_HEADERS": f"x-api-key={API_KEY}",
           "OTEL_SERVICE_NAME": "cpi-dev", "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=lab"}
    cpi = Cpi(_config(tmp_path, None), env=env)
    assert cpi("has_vm", "vm-1") is False
    (root,) = _roots(collector)
    assert root["attributes"]["bosh.method"] == "has_vm"
    assert root["resource"]["service.name"] == "cpi-dev"
    assert root["resource"]["deployment.environment"] == "lab"
    assert collector.requests[0]["headers"]["x-api-key"] == API_KEY
    off = Cpi(_config(tmp_path, None), env={**env, "OTEL_SDK_DISABLED": "true"})
    assert off("has_vm", "vm-1") is False
    assert len(collector.requests) == 1


def _helper_maps() -> str:
    pid = helper_pid()
    assert pid is not None, "no warm helper listens"
    with open(f"/proc/{pid}/maps") as maps:
        return maps.read()


def test_the_warm_helper_loads_opentelemetry_only_after_a_traced_call_started_it(tmp_path, collector):
    """protobuf's C extension (which the OTLP encoder loads) in the helper's memory map
    tells whether it loaded OpenTelemetry: not when an untraced call started it, so that a
    warm call without tracing has none of it; yes when a traced one did, so that a traced
    warm call imports nothing."""
    stop_helper()
    try:
        start_helper(_config(tmp_path, None, "plain.json"))
        assert "_upb" not in _helper_maps()
        stop_helper()
        traced = _config(tmp_path, collector.url, "traced.json")
        start_helper(traced)
        assert "_upb" in _helper_maps()
        assert Cpi(traced, env=WARM_ENV)("has_vm", "vm-1") is False
    finally:
        stop_helper()
