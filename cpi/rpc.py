"""The wire: one JSON request on stdin, exactly one JSON response on stdout, exit 0.

Whatever happens (empty stdin, bad JSON, a bad config, a bug), the caller gets one valid
`{"result", "error", "log"}` document: the director parses all of stdout as one JSON
value and bosh-cli treats a non-zero exit as a failed CPI, so neither can be allowed to see
anything else. Tracebacks go to `log` and stderr only.
"""

from __future__ import annotations

import logging
import os
import reprlib
import sys
import time
import traceback
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from cpi import errors, strict_json
from cpi.logs import CallLog, shown
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
        data = strict_json.loads(raw, "the request")
    except strict_json.InvalidJSON as exc:
        raise errors.CpiError(f"Must provide valid JSON payload: {exc.reason}") from None
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
    call_log.request_id = shown(context.request_id, 64)[1:-1] if context.request_id else "-"
    api_version = request.api_version if request.api_version is not None else 1
    log.info("%s (api_version %d, %d arguments)", shown(request.method, 64), api_version, len(request.arguments))
    # `info` answers the same whatever the context says: the director asks it before it
    # knows which cpi-config applies, and a context must not be able to make it fail.
    overrides = None if request.method == "info" else request.context
    cfg = config.build(raw_config, overrides)
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

#: The longest error message put on the wire (characters); the log has the rest.
MESSAGE_LIMIT = 4096


def _log_level() -> int:
    name = os.environ.get("CPI_LOG_LEVEL", "info").strip().lower()
    if name not in LOG_LEVELS:
        raise errors.CpiError(f"CPI_LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}, got {shown(name, 40)}")
    return LOG_LEVELS[name]


def _read_all(fd: int) -> bytes:
    """All of stdin. A closed or unreadable stdin reads as empty (and gets the empty-stdin
    error), never a traceback."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 1 << 20)
        except InterruptedError:
            continue
        except OSError as exc:
            log.warning("cannot read stdin: %s", exc.strerror)
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def serve_once(stdin_fd: int, stdout_fd: int, config_path: str | None) -> int:
    """Answer one request. Whatever is raised, at whatever point (a bug, a RecursionError,
    an interrupt), the caller gets one response; and once the cloud has acted, its result
    is in that response."""
    call_log = CallLog(sys.stderr)
    started = time.monotonic()
    result, error = None, None
    try:
        call_log.set_level(_log_level())
        result = handle(_read_all(stdin_fd), config_path, call_log)
    except errors.BoshError as exc:
        error = exc
    except BaseException as exc:  # noqa: BLE001 - the wire must get a response whatever happened
        error = _unexpected(exc)
    if error is not None:
        log.error("%s: %s", error.wire_type, error.message)
    log.info("done in %.3fs", time.monotonic() - started)
    _write(stdout_fd, result, error, call_log)
    return 0


def _unexpected(exc: BaseException) -> errors.BoshError:
    log.error("unexpected error:\n%s", traceback.format_exc())
    return errors.CloudError(f"unexpected {type(exc).__name__}: {exc} (traceback in the CPI log)")


def _write(fd: int, result: Any, error: errors.BoshError | None, call_log: CallLog) -> None:
    """One response on `fd`: `result` exact (never redacted: a cid must reach the director as
    the cloud made it), the error message and the log masked of every known secret."""
    redactor = call_log.redactor
    wire_error = None
    if error is not None:
        wire_error = error.to_wire()
        wire_error["message"] = redactor.text(str(wire_error["message"]), limit=MESSAGE_LIMIT) or error.wire_type
    log_text = call_log.text()
    try:
        data = strict_json.dumps({"result": result, "error": wire_error, "log": log_text})
    except (TypeError, ValueError, RecursionError) as exc:  # a cloud returned something JSON cannot hold
        message = redactor.text(f"the CPI produced a result that is not JSON ({exc}): {reprlib.repr(result)}", limit=MESSAGE_LIMIT)
        wire_error = errors.CloudError(message).to_wire()
        data = strict_json.dumps({"result": None, "error": wire_error, "log": log_text})
    view = memoryview((data + "\n").encode())
    while view:
        try:
            written = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError:
            return  # the caller is gone (EPIPE): nobody is left to answer
        view = view[written:]


def _standard_fds() -> None:
    """Make sure fds 0, 1 and 2 exist: a caller that closed one would otherwise have the
    next file the CPI opens take its number (and, for 1, receive the response)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)
    if sys.stderr is None:
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115 - lives as long as the process


def main(argv: list[str] | None = None) -> int:
    """Entry point of `bin/cpi` and `python -m cpi [CONFIG_PATH]`.

    File descriptor 1 is kept for the response only: fd 1 is pointed at stderr for the
    duration of the call, so nothing a library prints can corrupt the JSON document."""
    argv = sys.argv[1:] if argv is None else argv
    _standard_fds()
    response_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if len(argv) > 1:
        call_log = CallLog(sys.stderr)
        error = errors.CpiError(f"usage: cpi [CONFIG_PATH] (got {len(argv)} arguments)")
        _write(response_fd, None, error, call_log)
        return 0
    return serve_once(0, response_fd, argv[0] if argv else None)
