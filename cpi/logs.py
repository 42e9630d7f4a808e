"""Per-call logging: every line goes to stderr and into the response's `log`, redacted.

The director stores `log` and stderr unredacted in its task logs, and bosh-cli prints them
at debug level, so redaction happens here, once, on every line and on the error message.
The response's `result` is never touched: a cid that happens to contain a secret's
characters must reach the director exactly as the cloud made it.

Everything here runs on every request, including hostile ones of many megabytes, so each
step is linear in the size of its input: the structure is walked without recursion, URLs
are looked for only around "://", and a log record is cut to a bounded length (after
masking, so that a cut never leaves the head of a secret behind).
"""

from __future__ import annotations

import functools
import io
import json
import logging
import re
import sys
from typing import Any
from urllib.parse import quote

MASK = "<redacted>"
_PLACEHOLDER = "\ue000"  # a private-use character: no secret worth masking contains it
#: A key is secret when its last word is one of these (`json_key`, `encryption_key`,
#: `auth`, `api_key`, `session_token`) — but not `access_key_id`, `key_name`, `auth_url`,
#: `token_cache`, whose last word names something public.
SECRET_LAST_WORDS = {
    "password", "passwd", "pass", "passphrase", "pwd", "secret", "token", "key", "credential",
    "credentials", "auth", "authorization", "cookie", "pem", "signature", "psk",
}
#: ... or when any of its words is one of these (`password_hash`, `secret_access_key`).
SECRET_ANY_WORDS = {"password", "passwd", "passphrase", "secret"}
_WORDS = re.compile(r"[A-Za-z][a-z0-9]*|[0-9]+")
#: What follows "://" when a URL carries a password: user:PASSWORD@. Neither part may hold
#: a "/", so one look never runs past the next "://": finding them all is linear.
URL_USERINFO = re.compile(r"[^/\s:@]{0,256}:([^/\s@]{1,1024})@")
#: Words of a key that may make it secret (a quick look before splitting it into words).
_SECRET_HINT = re.compile(r"pass|pwd|secret|token|key|cred|auth|cookie|pem|sign|psk", re.IGNORECASE)
#: Characters that repr(), JSON and URL quoting all leave as they are.
_PLAIN = re.compile(r"[A-Za-z0-9_.~-]*")
#: The longest log record or message kept (characters); longer ones are cut, marked.
RECORD_LIMIT = 8192

#: The Redactor of the call in progress (one call per process), so that code far from the
#: wire (validation messages) can mask a value before it cuts it short.
active: Redactor | None = None


@functools.lru_cache(maxsize=4096)
def looks_secret(key: str) -> bool:
    if not _SECRET_HINT.search(key):
        return False
    words = [w.lower() for w in _WORDS.findall(key)]
    return bool(words) and (words[-1] in SECRET_LAST_WORDS or any(w in SECRET_ANY_WORDS for w in words))


class Redactor:
    """Knows this call's secrets and masks them, and their escaped forms, wherever they appear."""

    def __init__(self) -> None:
        self._by_length: dict[int, set[str]] = {}
        self._longest = 0

    def add(self, secret: Any) -> None:
        if isinstance(secret, bool) or secret is None:
            return
        if isinstance(secret, int):
            secret = str(secret) if abs(secret) >= 1000 else ""  # tiny numbers would mask every count
        if not isinstance(secret, str) or not secret:
            return
        group = self._by_length.get(len(secret))
        if group is not None and secret in group:
            return
        forms = [secret]
        if not _PLAIN.fullmatch(secret):
            # the forms a secret takes when a message shows it through repr(), JSON or a URL
            forms += [json.dumps(secret)[1:-1], repr(secret)[1:-1], quote(secret, safe="")]
        for form in forms:
            if form:
                self._by_length.setdefault(len(form), set()).add(form)
                if len(form) > self._longest:
                    self._longest = len(form)

    def collect(self, data: Any, secret_parent: bool = False) -> None:
        """Learn the secrets inside a config or request structure: values under secret-looking
        keys (at any depth) and passwords embedded in URLs such as `https://mbus:PW@host`.
        Walks with an explicit stack (a request may be nested deeper than Python recurses),
        and handles strings where it meets them: a request of a million values stays cheap."""
        stack = [(data, secret_parent)]
        push, pop = stack.append, stack.pop
        while stack:
            value, secret = pop()
            kind = type(value)
            if kind is dict:
                pairs = ((key, item, secret or (type(key) is str and looks_secret(key))) for key, item in value.items())
            elif kind is list or kind is tuple:
                pairs = ((None, item, secret) for item in value)
            else:
                self._learn_value(value, secret)
                continue
            for _, item, item_secret in pairs:
                if type(item) is str:
                    if item_secret:
                        self.add(item)
                    if "://" in item:
                        self.learn_text(item)
                elif type(item) is dict or type(item) is list or type(item) is tuple:
                    push((item, item_secret))
                elif item_secret:
                    self.add(item)

    def _learn_value(self, value: Any, secret: bool) -> None:
        if secret:
            self.add(value)
        if type(value) is str and "://" in value:
            self.learn_text(value)

    def learn_text(self, text: str) -> None:
        """Learn the passwords of the URLs in `text`: in the config and the request, and in
        text the CPI quotes without having seen it before (an agent's log)."""
        start = text.find("://")
        while start != -1:
            match = URL_USERINFO.match(text, start + 3)
            if match:
                self.add(match.group(1))
            start = text.find("://", start + 3)

    def text(self, text: str, limit: int | None = None) -> str:
        """`text` with every known secret masked; cut to `limit` characters when given.

        Masking is done on the head that can matter (limit plus the longest secret), so a cut
        never leaves the start of a secret behind and a huge text costs no more than its head."""
        if limit is not None and len(text) > limit:
            total = len(text)
            # Every secret that starts within the first `limit` characters lies whole in this
            # head; what may be cut in half at its end is dropped with the last `longest`.
            head = self.text(text[: limit + self._longest])
            if self._longest and total > limit + self._longest:
                head = head[: -self._longest]
            return head[:limit] + f"... ({total} characters in all)"
        self.learn_text(text)
        found = self._find(text)
        if not found:
            return text
        for secret in sorted(found, key=len, reverse=True):
            # a placeholder first, so a short secret never matches inside an earlier mask
            text = text.replace(secret, _PLACEHOLDER)
        return text.replace(_PLACEHOLDER, MASK)

    def _find(self, text: str) -> set[str]:
        """The known secrets that occur in `text`, in time linear in its length for each
        length of secret there is: a few secrets of one length are each searched for (in C);
        many are looked up among the text's substrings of that length."""
        size, found = len(text), set()
        for length, group in self._by_length.items():
            if length > size:
                continue
            windows = size - length + 1
            # searching costs about a pass over the text per secret; slicing, a set lookup
            # per window: search while that is cheaper (a pass over 1 KiB ~ one lookup)
            if len(group) * (1 + size // 1024) <= windows:
                found.update(secret for secret in group if secret in text)
            else:
                found.update(group.intersection(text[i:i + length] for i in range(windows)))
        return found


def shown(value: Any, limit: int = 80) -> str:
    """How a message shows a value someone sent: strings as they are (not repr(), whose
    escaping would hide a secret from the mask), other values as JSON-ish repr, masked first
    and then cut to `limit` characters."""
    if isinstance(value, str):
        # control characters escaped: a cid with a newline must not forge a log line
        text = value if value.isprintable() else json.dumps(value, ensure_ascii=False)[1:-1]
    else:
        try:
            text = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            text = repr(value)
    redactor = active if active is not None else Redactor()
    text = redactor.text(text, limit=limit)
    return f"'{text}'" if isinstance(value, str) else text


class _RedactingFormatter(logging.Formatter):
    def __init__(self, redactor: Redactor, fmt: str):
        super().__init__(fmt, datefmt="%Y-%m-%dT%H:%M:%S")
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        return self.redactor.text(super().format(record), limit=RECORD_LIMIT)


class _SafeStream(logging.StreamHandler):
    """A stream handler that writes what it cannot encode escaped (a request may carry lone
    surrogates) and never reports its own failures on top of the call's."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = self.format(record)
            try:
                self.stream.write(message + self.terminator)
            except UnicodeEncodeError:
                self.stream.write(message.encode("utf-8", "backslashreplace").decode("utf-8") + self.terminator)
            self.flush()
        except (OSError, ValueError):
            return  # stderr closed: the response's `log` still carries the line
        except Exception:  # noqa: BLE001 - a bad log call must not fail the CPI call
            self.handleError(record)


class CallLog:
    """The log of one CPI call: a `cpi` logger writing to stderr and to a buffer for `log`."""

    FORMAT = "%(asctime)s %(levelname)s [%(request_id)s] %(name)s: %(message)s"

    def __init__(self, stderr: Any = None, level: int = logging.INFO):
        global active
        self.redactor = Redactor()
        active = self.redactor
        self.request_id = "-"
        self._buffer = io.StringIO()
        self._handlers = []
        fmt = _RedactingFormatter(self.redactor, self.FORMAT)
        streams = [self._buffer]
        stderr = stderr if stderr is not None else sys.stderr
        if stderr is not None:
            streams.append(stderr)
        for stream in streams:
            handler = _SafeStream(stream)
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
