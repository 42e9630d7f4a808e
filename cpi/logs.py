"""Per-call logging: every line goes to stderr and into the response's `log`, redacted.

The director stores `log` and stderr unredacted in its task logs, and bosh-cli prints them
at debug level, so redaction happens here, once, on every line and on the response itself.
"""

from __future__ import annotations

import io
import logging
import re
import sys
from typing import Any
from urllib.parse import urlsplit

SECRET_KEY = re.compile(
    r"(password|passwd|secret|private_key|token|api_key|credential|access_key)", re.IGNORECASE
)
# Keys that match SECRET_KEY but name something public.
NOT_SECRET_KEYS = {"access_key_id", "application_credential_id", "credentials_source", "token_url"}
URL_WITH_PASSWORD = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:([^/\s@]+)@")
MASK = "<redacted>"


def looks_secret(key: str) -> bool:
    return key.lower() not in NOT_SECRET_KEYS and bool(SECRET_KEY.search(key))


class Redactor:
    """Knows this call's secrets and masks them wherever they appear."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()

    def add(self, secret: Any) -> None:
        if isinstance(secret, str) and secret:
            self._secrets.add(secret)

    def collect(self, data: Any, secret_parent: bool = False) -> None:
        """Learn the secrets inside a config or request structure: values under secret-looking
        keys (at any depth) and passwords embedded in URLs such as `https://mbus:PW@host`."""
        if isinstance(data, dict):
            for key, value in data.items():
                self.collect(value, secret_parent or (isinstance(key, str) and looks_secret(key)))
        elif isinstance(data, (list, tuple)):
            for value in data:
                self.collect(value, secret_parent)
        elif isinstance(data, str):
            if secret_parent:
                self.add(data)
            for match in URL_WITH_PASSWORD.finditer(data):
                self.add(match.group(1))
            if "://" in data:
                try:
                    self.add(urlsplit(data).password)
                except ValueError:
                    pass  # not a URL after all; nothing to learn from it

    def text(self, text: str) -> str:
        for secret in sorted(self._secrets, key=len, reverse=True):
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def value(self, data: Any) -> Any:
        """Redact every string inside a JSON-able value (structure kept intact)."""
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, dict):
            return {self.value(k): self.value(v) for k, v in data.items()}
        if isinstance(data, list):
            return [self.value(v) for v in data]
        return data


class _RedactingFormatter(logging.Formatter):
    def __init__(self, redactor: Redactor, fmt: str):
        super().__init__(fmt, datefmt="%Y-%m-%dT%H:%M:%S")
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        return self.redactor.text(super().format(record))


class CallLog:
    """The log of one CPI call: a `cpi` logger writing to stderr and to a buffer for `log`."""

    FORMAT = "%(asctime)s %(levelname)s [%(request_id)s] %(name)s: %(message)s"

    def __init__(self, stderr: Any = None, level: int = logging.INFO):
        self.redactor = Redactor()
        self.request_id = "-"
        self._buffer = io.StringIO()
        self._handlers = []
        fmt = _RedactingFormatter(self.redactor, self.FORMAT)
        for stream in (self._buffer, stderr if stderr is not None else sys.stderr):
            handler = logging.StreamHandler(stream)
            handler.setFormatter(fmt)
            handler.addFilter(self._stamp)
            self._handlers.append(handler)
        root = logging.getLogger()
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in self._handlers:
            root.addHandler(handler)
        root.setLevel(logging.WARNING)  # third-party libraries: warnings and worse only
        logging.getLogger("cpi").setLevel(level)
        logging.captureWarnings(True)

    def _stamp(self, record: logging.LogRecord) -> bool:
        record.request_id = self.request_id
        return True

    def set_level(self, level: int) -> None:
        logging.getLogger("cpi").setLevel(level)

    def text(self) -> str:
        for handler in self._handlers:
            handler.flush()
        return self.redactor.text(self._buffer.getvalue())
