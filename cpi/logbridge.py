"""The stdlib `logging` side of a call's log (cpi.logs.CallLog.attach): every module's
`logging.getLogger(...)` lines go to the same stderr and `log` buffer, formatted and masked
as the call's own lines. Kept apart from cpi.logs because `logging` costs more to import
than the whole of `info` may take."""

from __future__ import annotations

import logging

TYPE_CHECKING = False
if TYPE_CHECKING:  # named here, not imported: cpi.logs imports this module (on attach)
    from collections.abc import Callable, Sequence
    from typing import IO, Protocol

    class Redactor(Protocol):
        def text(self, text: str, limit: int | None = None) -> str: ...

    class CallLog(Protocol):
        """What install takes of cpi.logs.CallLog."""

        FORMAT: str
        DATEFMT: str
        RECORD_LIMIT: int
        request_id: str
        level: int

        @property
        def redactor(self) -> Redactor: ...

        @property
        def streams(self) -> Sequence[IO[str]]: ...

        def write_line(self, stream: IO[str], line: str) -> None: ...


class _RedactingFormatter(logging.Formatter):
    def __init__(self, redactor: Redactor, fmt: str, datefmt: str, limit: int):
        super().__init__(fmt, datefmt=datefmt)
        self.redactor = redactor
        self.limit = limit

    def format(self, record: logging.LogRecord) -> str:
        return self.redactor.text(super().format(record), limit=self.limit)


class _SafeStream(logging.StreamHandler):
    """Writes as CallLog.emit does, and never reports its own failures on top of the call's."""

    def __init__(self, stream: IO[str], write_line: Callable[[IO[str], str], None]) -> None:
        super().__init__(stream)
        self.write_line = write_line

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.write_line(self.stream, self.format(record))
        except (OSError, ValueError):
            return  # stderr closed: the response's `log` still carries the line
        except Exception:  # noqa: BLE001 - a bad log call must not fail the CPI call
            self.handleError(record)


def install(call_log: CallLog) -> list[logging.Handler]:
    """Make `call_log`'s streams the root logger's only handlers; the `cpi` loggers log at
    the call's level, third-party libraries warnings and worse only."""
    formatter = _RedactingFormatter(call_log.redactor, call_log.FORMAT, call_log.DATEFMT, call_log.RECORD_LIMIT)

    def stamp(record: logging.LogRecord) -> bool:
        record.request_id = call_log.request_id
        return True

    handlers: list[logging.Handler] = []
    for stream in call_log.streams:
        handler = _SafeStream(stream, call_log.write_line)
        handler.setFormatter(formatter)
        handler.addFilter(stamp)
        handlers.append(handler)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    for new in handlers:
        root.addHandler(new)
    root.setLevel(logging.WARNING)
    logging.getLogger("cpi").setLevel(call_log.level)
    logging.captureWarnings(True)
    return handlers
