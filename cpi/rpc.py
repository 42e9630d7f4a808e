"""The wire: one JSON request on stdin, exactly one JSON response on stdout, exit 0.

Whatever happens (empty stdin, bad JSON, a bad config, a bug), the caller gets one valid
`{"result", "error", "log"}` document: the director parses all of stdout as one JSON
value and bosh-cli treats a non-zero exit as a failed CPI, so neither can be allowed to see
anything else. Tracebacks go to `log` and stderr only.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import traceback
from typing import Any, BinaryIO

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from cpi import errors
from cpi.logs import CallLog
from cpi.validation import describe

log = logging.getLogger("cpi.rpc")


class Request(BaseModel):
    """The request envelope. `api_version` is top level; absent means 1 (the director omits
    it for `info`). `arguments` may be omitted for methods that take none."""

    model_config = ConfigDict(extra="allow")

    method: StrictStr
    arguments: list[Any] = Field(default_factory=list)
    context: dict[str, Any] = Field(default_factory=dict)
    api_version: StrictInt | None = None


def parse_request(raw: bytes) -> Request:
    if not raw.strip():
        raise errors.CpiError("Must provide valid JSON payload: stdin was empty")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise errors.CpiError(f"Must provide valid JSON payload: {exc}") from None
    if not isinstance(data, dict):
        raise errors.CpiError(f"Must provide a JSON object as the request, not a JSON {_json_kind(data)}")
    if "method" not in data:
        raise errors.CpiError("Must provide 'method' in the request")
    for key, kind in (("arguments", list), ("context", dict)):
        if key in data and not isinstance(data[key], kind):
            raise errors.CpiError(
                f"Must provide '{key}' as a JSON {_json_kind(kind())}, not a JSON {_json_kind(data[key])}"
            )
    if data.get("context") is None:
        data.pop("context", None)
    try:
        return Request.model_validate(data)
    except ValidationError as exc:
        raise errors.CpiError(f"invalid request: {describe(exc)}") from None


def _json_kind(value: Any) -> str:
    for kind, name in ((bool, "boolean"), (dict, "object"), (list, "array"), (str, "string"), ((int, float), "number")):
        if isinstance(value, kind):
            return name
    return "null"


def handle(raw: bytes, config_path: str | None, call_log: CallLog) -> Any:
    """Everything between the bytes read and the result; raises the cpi.errors types."""
    from cpi import api, backoff, config
    from cpi.models import CallContext

    raw_config = config.read_file(config_path)
    call_log.redactor.collect(raw_config)
    request = parse_request(raw)
    call_log.redactor.collect(request.arguments)
    call_log.redactor.collect(request.context)
    try:
        context = CallContext.model_validate(request.context)
    except ValidationError as exc:
        raise errors.CpiError(f"invalid context: {describe(exc, 'context')}") from None
    call_log.request_id = context.request_id or "-"
    api_version = request.api_version if request.api_version is not None else 1
    log.info("%s (api_version %d, %d arguments)", request.method, api_version, len(request.arguments))
    cfg = config.build(raw_config, request.context)
    backoff.configure(cfg.throttle)
    call = api.Call(
        method=request.method,
        api_version=api_version,
        context=context,
        config=cfg,
        cloud_class=cfg.cloud_class,
    )
    return api.dispatch(call, request.arguments)


LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def _log_level() -> int:
    name = os.environ.get("CPI_LOG_LEVEL", "info").strip().lower()
    if name not in LOG_LEVELS:
        raise errors.CpiError(f"CPI_LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}, got {name!r}")
    return LOG_LEVELS[name]


def serve_once(stdin: BinaryIO, stdout_fd: int, config_path: str | None) -> int:
    call_log = CallLog(sys.stderr)
    started = time.monotonic()
    try:
        call_log.set_level(_log_level())
        result = handle(stdin.read(), config_path, call_log)
        response = {"result": result, "error": None}
    except errors.BoshError as exc:
        log.error("%s: %s", exc.wire_type, exc.message)
        response = {"result": None, "error": exc.to_wire()}
    except Exception as exc:  # noqa: BLE001 - the wire must get a response whatever happened
        log.error("unexpected error:\n%s", traceback.format_exc())
        wrapped = errors.CloudError(f"unexpected {type(exc).__name__}: {exc} (traceback in the CPI log)")
        response = {"result": None, "error": wrapped.to_wire()}
    log.info("done in %.3fs", time.monotonic() - started)
    response["log"] = call_log.text()
    response = call_log.redactor.value(response)
    _write(stdout_fd, response)
    return 0


def _write(fd: int, response: dict) -> None:
    try:
        data = (json.dumps(response) + "\n").encode()
    except (TypeError, ValueError) as exc:  # a cloud returned something JSON cannot hold
        error = errors.CloudError(f"the CPI produced a result that is not JSON: {exc}").to_wire()
        data = (json.dumps({"result": None, "error": error, "log": response.get("log", "")}) + "\n").encode()
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def main(argv: list[str] | None = None) -> int:
    """Entry point of `bin/cpi` and `python -m cpi [CONFIG_PATH]`.

    File descriptor 1 is kept for the response only: fd 1 is pointed at stderr for the
    duration of the call, so nothing a library prints can corrupt the JSON document."""
    argv = sys.argv[1:] if argv is None else argv
    response_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if len(argv) > 1:
        call_log = CallLog(sys.stderr)
        error = errors.CpiError(f"usage: cpi [CONFIG_PATH] (got {len(argv)} arguments)").to_wire()
        _write(response_fd, {"result": None, "error": error, "log": call_log.text()})
        return 0
    return serve_once(sys.stdin.buffer, response_fd, argv[0] if argv else None)
