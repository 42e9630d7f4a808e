"""The span handed to code that annotates one: a do-nothing one when tracing is off
(cpi.tracing.otel's when on). Its own module, so that the SDK's side and the light side
both build on it without importing each other."""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`: this module is on every call's path
if TYPE_CHECKING:
    from types import TracebackType


class Span:
    """A span to annotate; the do-nothing one when tracing is off. `set` takes what
    OpenTelemetry takes as an attribute value (None is dropped)."""

    __slots__ = ()

    def set(self, key: str, value: object) -> None:
        """Nothing, when off."""

    def fail(self, error: BaseException) -> None:
        """Nothing, when off."""

    def __enter__(self) -> Span:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        return None


NOTHING = Span()
