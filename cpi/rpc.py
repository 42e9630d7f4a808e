"""The wire: one JSON request on stdin, exactly one JSON response on stdout, exit 0.

Whatever happens (empty stdin, bad JSON, a bad config, a bug), the caller gets one valid
`{"result", "error", "log"}` document: the director parses all of stdout as one JSON
value and bosh-cli treats a non-zero exit as a failed CPI, so neither can be allowed to see
anything else. Tracebacks go to `log` and stderr only.
"""

from __future__ import annotations

import os
import sys
import time

from cpi import errors, strict_json, tracing
from cpi.logs import DEBUG, ERROR, INFO, WARNING, CallLog, plural, shown

TYPE_CHECKING = False  # not `typing`: it costs a few ms of every call
if TYPE_CHECKING:
    from typing import Any

    from cpi.plan import Plan

# Start-up is on every call's path, and `info` runs before every director operation (issue
# #12: `info` within 2x the bare interpreter's start). So this module imports nothing at
# module level beyond the envelope's own light modules: `info` for a built-in cloud is
# answered from the raw config without `logging`, pydantic or the cloud; every other call
# attaches `logging` and imports the models and its cloud once it knows it needs them.


class Request:
    """The request envelope. `api_version` is top level; absent means 1 (the director omits
    it for `info`). `arguments` may be omitted for methods that take none; other keys are
    allowed (and ignored)."""

    __slots__ = ("api_version", "arguments", "context", "method")

    def __init__(self, method: str, arguments: list, context: dict, api_version: int | None):
        self.method, self.arguments, self.context, self.api_version = method, arguments, context, api_version


#: The largest request read (bytes). A director's or bosh-cli's request is a few KiB (a
#: create_vm with a big env: tens of KiB); 10 MB ones are answered (tests/conformance), and
#: a writer that never stops (`< /dev/zero`) gets an answer instead of a MemoryError.
REQUEST_LIMIT = 32 << 20


def parse_request(raw: bytes) -> Request:
    if len(raw) > REQUEST_LIMIT:
        raise errors.CpiError(f"Must provide a request of at most {REQUEST_LIMIT >> 20} MiB: "
                              "stdin held more, and the rest was not read")
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
    context = data.get("context")
    api_version = data.get("api_version")
    problems = _type_problems([("method", data["method"], str, "string", False),
                               ("api_version", api_version, int, "integer", True)])
    if problems:
        raise errors.CpiError(f"invalid request: {problems}")
    return Request(data["method"], data.get("arguments", []), {} if context is None else context, api_version)


#: The context's fields the CPI reads: name -> (JSON type, its name in messages).
CONTEXT_FIELDS = {"director_uuid": (str, "string"), "request_id": (str, "string"), "vm": (dict, "dictionary")}


def check_context(context: dict) -> None:
    """The context's known fields are null or of their type (unknown keys are kept: they
    may override config)."""
    problems = _type_problems([(f"context.{name}", context.get(name), kind, kind_name, True)
                               for name, (kind, kind_name) in CONTEXT_FIELDS.items()])
    if problems:
        raise errors.CpiError(f"invalid context: {problems}")


def _type_problems(fields: list) -> str:
    """`a: Input should be a valid string (got 5); b: ...` for each (name, value, type,
    type's name, may be null) whose value is not of that type (a bool is not an integer),
    in pydantic's words, as every other invalid field is reported."""
    problems = []
    for name, value, kind, kind_name, nullable in fields:
        if type(value) is not kind and not (nullable and value is None):
            problems.append(f"{name}: Input should be a valid {kind_name} (got {shown(value)})")
    return "; ".join(problems)


def _json_kind(value: Any) -> str:
    for kind, name in ((bool, "boolean"), (dict, "object"), (list, "array"), (str, "string"), ((int, float), "number")):
        if isinstance(value, kind):
            return name
    return "null"


def handle(raw: bytes, config_path: str | None, call_log: CallLog, started_ns: int = 0,
           plan: Plan | None = None) -> Any:
    """Everything between the bytes read and the result; raises the cpi.errors types. A
    call served to its caller (`started_ns` given: when it started) is traced if tracing is
    on (cpi.tracing); `cpi plan`'s, made in the operator's process with its `plan`
    (cpi.plan), is not."""
    from cpi import raw_config

    config_data = raw_config.read_file(config_path)
    call_log.redactor.collect(config_data)
    request = parse_request(raw)
    call_log.redactor.collect(request.arguments)
    call_log.redactor.collect(request.context)
    check_context(request.context)
    request_id = request.context.get("request_id")
    call_log.request_id = shown(request_id, 64)[1:-1] if request_id else "-"
    api_version = request.api_version if request.api_version is not None else 1
    call_log.emit(INFO, "cpi.rpc", f"{shown(request.method, 64)} (api_version {api_version}, "
                                   f"{plural(len(request.arguments), 'argument')})")
    if started_ns:
        tracing.begin(config_data, request.method, api_version, request.context, started_ns, call_log)
    # `info` of a built-in cloud, from the raw config and the standard library alone: what
    # cpi.api.handle answers through the models, without importing them (issue #12).
    if request.method == "info" and not request.arguments:
        answer = raw_config.info(config_data)
        if answer is not None:
            return answer
    call_log.attach()
    from cpi import site_packages

    site_packages.enable()
    from cpi import api

    return api.handle(config_data, request.method, api_version, request.context, request.arguments, plan)


LOG_LEVELS = {"debug": DEBUG, "info": INFO, "warning": WARNING, "error": ERROR}

#: The longest error message put on the wire (characters); the log has the rest.
MESSAGE_LIMIT = 4096


def _log_level() -> int:
    name = os.environ.get("CPI_LOG_LEVEL", "info").strip().lower()
    if name not in LOG_LEVELS:
        raise errors.CpiError(f"CPI_LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}, got {shown(name, 40)}")
    return LOG_LEVELS[name]


def read_all(fd: int) -> tuple[bytes, str | None]:
    """All of stdin up to one byte over REQUEST_LIMIT (which parse_request then refuses), and
    why reading stopped before its end if it did. A closed or unreadable stdin reads as empty
    (and gets the empty-stdin error), never a traceback."""
    chunks: list[bytes] = []
    left = REQUEST_LIMIT + 1
    while left > 0:
        try:
            chunk = os.read(fd, min(1 << 20, left))
        except InterruptedError:
            continue
        except OSError as exc:
            return b"".join(chunks), exc.strerror
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks), None


def serve_once(stdin_fd: int, stdout_fd: int, config_path: str | None,
               stdin: tuple[bytes, str | None] | None = None) -> int:
    """Answer one request (read from `stdin_fd`, or `stdin` as read_all read it before).
    Whatever is raised, at whatever point (a bug, a RecursionError, an interrupt), the
    caller gets one response; and once the cloud has acted, its result is in that response."""
    call_log = CallLog(sys.stderr, attach=False)
    started, started_ns = time.monotonic(), time.time_ns()
    result, error = None, None
    try:
        call_log.set_level(_log_level())
        raw, problem = read_all(stdin_fd) if stdin is None else stdin
        if problem is not None:
            call_log.emit(WARNING, "cpi.rpc", f"cannot read stdin: {problem}")
        result = handle(raw, config_path, call_log, started_ns)
    except errors.BoshError as exc:
        error = exc
    except BaseException as exc:  # noqa: BLE001 - the wire must get a response whatever happened
        error = _unexpected(exc, call_log)
    if error is not None:
        call_log.emit(ERROR, "cpi.rpc", f"{error.wire_type}: {error.message}")
    tracing.finish(result, error, call_log)
    call_log.emit(INFO, "cpi.rpc", f"done in {time.monotonic() - started:.3f}s")
    _write(stdout_fd, result, error, call_log)
    return 0


def _unexpected(exc: BaseException, call_log: CallLog | None = None) -> errors.BoshError:
    """The error for an exception no one expected; its traceback goes to the call's log (or,
    for a caller that has none, to the `cpi.rpc` logger)."""
    import traceback

    message = f"unexpected error:\n{traceback.format_exc()}"
    if call_log is not None:
        call_log.emit(ERROR, "cpi.rpc", message)
    else:
        import logging

        logging.getLogger("cpi.rpc").error("%s", message)
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
        import reprlib

        message = redactor.text(f"the CPI produced a result that is not JSON ({exc}): {reprlib.repr(result)}",
                                limit=MESSAGE_LIMIT)
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


def standard_fds() -> None:
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


def serve(argv: list[str], stdin: tuple[bytes, str | None] | None = None) -> int:
    """One call made in this process (a cold bin/cpi, or a warm helper's worker); `stdin`
    as read_all read it, if it was read already.

    File descriptor 1 is kept for the response only: fd 1 is pointed at stderr for the
    duration of the call, so nothing a library prints can corrupt the JSON document."""
    standard_fds()
    response_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if len(argv) > 1:
        call_log = CallLog(sys.stderr, attach=False)
        error = errors.CpiError(f"usage: cpi [CONFIG_PATH] (got {plural(len(argv), 'argument')})")
        _write(response_fd, None, error, call_log)
        return 0
    return serve_once(0, response_fd, argv[0] if argv else None, stdin)
