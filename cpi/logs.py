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

import io
import sys
import time

from cpi import strict_json

TYPE_CHECKING = False  # typing itself is not imported: it costs a few ms of every call
if TYPE_CHECKING:
    from typing import IO, Any

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
#: Pieces of a key that may make it secret, lower case (a quick look before splitting it
#: into words: every secret word holds one).
_SECRET_HINTS = ("pass", "pwd", "secret", "token", "key", "cred", "auth", "cookie", "pem", "sign", "psk")
_ASCII_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_DIGITS = frozenset("0123456789")
_LOWER_OR_DIGIT = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
#: Characters that repr(), JSON and URL quoting all leave as they are (URL quoting's
#: always-safe set).
_PLAIN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.~-"
_PLAIN_BYTES = frozenset(_PLAIN_CHARS.encode())
#: The longest user and password of a URL's `user:PASSWORD@` that are looked at.
_URL_USER_LIMIT = 256
_URL_PASSWORD_LIMIT = 1024
#: The longest log record or message kept (characters); longer ones are cut, marked.
RECORD_LIMIT = 8192
#: Logging's numbers for the levels a call logs at (CPI_LOG_LEVEL names them).
DEBUG, INFO, WARNING, ERROR = 10, 20, 30, 40
LEVEL_NAMES = {DEBUG: "DEBUG", INFO: "INFO", WARNING: "WARNING", ERROR: "ERROR", 50: "CRITICAL"}

#: The keys whose value is a user name that goes with a secret of the same section (the
#: vCenter's and NSX managers' `user`, OpenStack's `username`): its Basic-auth form,
#: base64(user:secret), is masked like the secret itself.
USER_KEYS = {"user", "username", "user_name", "login"}
#: A secret is masked BY VALUE (wherever its text appears) only when it could not be a
#: piece of ordinary text: at least this many characters, ...
MASKED_LENGTH = 8
#: ... or at least this many and not only letters (`abc1`, `s3cr`): a word such as `unused`
#: or a single letter would mask `unused_ips` or every `p` of `cpi.rpc` and hide what is not
#: secret. Such a secret is still masked BY FIELD (under its key, in every structure and
#: every value a message echoes), and `cpi validate` warns of it, naming the key.
MASKED_LENGTH_MIXED = 4


def maskable(secret: str) -> bool:
    """Whether `secret` is masked wherever its value appears in text (see MASKED_LENGTH)."""
    size = len(secret)
    return size >= MASKED_LENGTH or (size >= MASKED_LENGTH_MIXED and not secret.isalpha())


#: The Redactor of the call in progress (one call per process), or of the operator
#: command (`redactor_for`), so that code far from either (validation messages) masks a
#: value before it cuts it short, with the same secrets.
active: Redactor | None = None

# Everything here is on the path of every call, `info` included, whose whole budget is a
# few milliseconds over the interpreter's start (issue #12): so no `re`, `json`, `logging`
# or `urllib` at import. The patterns are spelt out with str methods (C speed all the same),
# and the stdlib logging side of a call's log is in cpi.logbridge, attached on demand.


def _words(key: str) -> list[str]:
    """The words of a key, as the pattern `[A-Za-z][a-z0-9]*|[0-9]+` finds them: `jsonKey`
    -> json, Key; `api_key2` -> api, key2; `KEY` -> K, E, Y."""
    words, i, size = [], 0, len(key)
    while i < size:
        char = key[i]
        if char in _ASCII_LETTERS:
            follow = _LOWER_OR_DIGIT
        elif char in _DIGITS:
            follow = _DIGITS
        else:
            i += 1
            continue
        end = i + 1
        while end < size and key[end] in follow:
            end += 1
        words.append(key[i:end])
        i = end
    return words


_looks_secret_cache: dict[str, bool] = {}


def looks_secret(key: str) -> bool:
    known = _looks_secret_cache.get(key)
    if known is not None:
        return known
    lowered = key.lower()
    answer = False
    if any(hint in lowered for hint in _SECRET_HINTS):
        words = [w.lower() for w in _words(key)]
        answer = bool(words) and (words[-1] in SECRET_LAST_WORDS or any(w in SECRET_ANY_WORDS for w in words))
    if len(_looks_secret_cache) >= 4096:
        _looks_secret_cache.clear()
    _looks_secret_cache[key] = answer
    return answer


def _has_space(text: str) -> bool:
    """Whether `text` holds whitespace (what `\\s` matches: str.split's whitespace)."""
    return bool(text) and text.split() != [text]


def url_password(text: str, start: int) -> str | None:
    """The password of `user:PASSWORD@` right at `start` (just after a "://"), if any."""
    found = url_credentials(text, start)
    return found[1] if found else None


def url_credentials(text: str, start: int) -> tuple[str, str] | None:
    """The user and password of `USER:PASSWORD@` right at `start` (just after a "://"), if
    there is one: a user of up to 256 characters without "/", ":", "@" or whitespace, then
    a password of 1 to 1024 without "/", "@" or whitespace. Neither may hold a "/", so one look never
    runs past the next "://": finding them all is linear."""
    colon = text.find(":", start, start + _URL_USER_LIMIT + 1)
    if colon == -1:
        return None
    user = text[start:colon]
    if "/" in user or "@" in user or _has_space(user):
        return None
    at = text.find("@", colon + 1, colon + _URL_PASSWORD_LIMIT + 2)
    if at <= colon + 1:
        return None
    password = text[colon + 1:at]
    if "/" in password or _has_space(password):
        return None
    return user, password


def basic_forms(user: str, password: str) -> list[str]:
    """The forms base64(user:password) takes in an `Authorization: Basic` header a server or
    a proxy may echo in an error: standard and URL-safe, with and without padding (binascii:
    a builtin module, nothing imported on the path of a call)."""
    import binascii

    token = binascii.b2a_base64(f"{user}:{password}".encode(), newline=False).decode("ascii")
    urlsafe = token.replace("+", "-").replace("/", "_")
    return list(dict.fromkeys((token, token.rstrip("="), urlsafe, urlsafe.rstrip("="))))


def url_quoted(text: str) -> str:
    """urllib.parse.quote(text, safe=""): each UTF-8 byte outside the plain set as %XX."""
    return "".join(chr(b) if b in _PLAIN_BYTES else f"%{b:02X}" for b in text.encode("utf-8"))


def is_plain(text: str) -> bool:
    return not text.strip(_PLAIN_CHARS)


class Redactor:
    """Knows this call's secrets and masks them, and their escaped forms, wherever they appear."""

    def __init__(self) -> None:
        self._by_length: dict[int, set[str]] = {}
        self._longest = 0
        #: the keys of secrets too short to mask by value (`cpi validate` warns of each)
        self.too_short: list[str] = []

    def add(self, secret: Any, key: Any = None) -> None:
        """Mask `secret` by value from now on, in every form a message may show it, if it
        could not be a piece of ordinary text (`maskable`); else `key` is noted in
        `too_short`."""
        if isinstance(secret, bool) or secret is None:
            return
        if isinstance(secret, int):
            secret = str(secret) if abs(secret) >= 1000 else ""  # tiny numbers would mask every count
        if not isinstance(secret, str) or not secret:
            return
        group = self._by_length.get(len(secret))
        if group is not None and secret in group:
            return
        if not maskable(secret):
            if isinstance(key, str) and key not in self.too_short and len(self.too_short) < 100:
                self.too_short.append(key)
            return
        forms = [secret]
        if not is_plain(secret):
            # the forms a secret takes when a message shows it through repr(), JSON or a URL
            forms += [strict_json.quoted(secret)[1:-1], repr(secret)[1:-1], url_quoted(secret)]
        self._add_forms(forms)

    def add_basic(self, user: Any, password: Any) -> None:
        """Mask the Basic-auth forms of `user` and `password` (base64 of `user:password`):
        long and random-looking whatever the password, so masked however short it is."""
        if type(user) is str and type(password) is str and password:
            self._add_forms(basic_forms(user, password))

    def _add_forms(self, forms: list[str]) -> None:
        for form in forms:
            if form:
                self._by_length.setdefault(len(form), set()).add(form)
                self._longest = max(self._longest, len(form))

    def masked(self, value: Any, depth: int = 0) -> Any:
        """`value` as the operator may see it: by field, each value under a secret-looking key
        is MASK whatever it is; by value, every string masked of the known secrets (`text`).
        For printing only (a result on the wire is never altered)."""
        if isinstance(value, str):
            return self.text(value)
        if depth > 100:
            return MASK  # deeper than any JSON this process reads (64): shown as nothing
        if isinstance(value, dict):
            return {self.masked(k, depth + 1): MASK if isinstance(k, str) and looks_secret(k) and v is not None
                    else self.masked(v, depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.masked(v, depth + 1) for v in value]
        return value

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
            if kind is dict:
                self._learn_basic(value)
            for key, item, item_secret in pairs:
                if type(item) is str:
                    if item_secret:
                        self.add(item, key)
                    if "://" in item:
                        self.learn_text(item, key)
                elif type(item) is dict or type(item) is list or type(item) is tuple:
                    push((item, item_secret))
                elif item_secret:
                    self.add(item, key)

    def _learn_basic(self, section: dict) -> None:
        """A section holding a user name and secrets (`user` and `password`): the Basic-auth
        form of each secret with that user."""
        for user_key in USER_KEYS.intersection(section):
            for key, item in section.items():
                if type(key) is str and looks_secret(key):
                    self.add_basic(section[user_key], item)

    def _learn_value(self, value: Any, secret: bool) -> None:
        if secret:
            self.add(value)
        if type(value) is str and "://" in value:
            self.learn_text(value)

    def learn_text(self, text: str, key: Any = None) -> None:
        """Learn the passwords of the URLs in `text`: in the config and the request (`key`
        naming where, for `too_short`), and in text the CPI quotes without having seen it
        before (an agent's log)."""
        start = text.find("://")
        while start != -1:
            found = url_credentials(text, start + 3)
            if found:
                self.add(found[1], key)
                self.add_basic(*found)
                if not maskable(found[1]):  # too short to mask alone: masked as the URL has it
                    self._add_forms([f"{found[0]}:{found[1]}@"])
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
        size = len(text)
        found: set[str] = set()
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


def redactor_for(config: Any) -> Redactor:
    """The Redactor of an operator command (cpi/cli) that reads `config` (cpi.json) itself:
    made the active one, as a call's is (CallLog), so that everything the command prints,
    a validation error's echo included, is masked by the one path a call's log is."""
    global active
    redactor = Redactor()
    redactor.collect(config)
    active = redactor
    return redactor


def shown(value: Any, limit: int = 80) -> str:
    """How a message shows a value someone sent: strings as they are (not repr(), whose
    escaping would hide a secret from the mask), other values as JSON-ish repr, masked first
    and then cut to `limit` characters."""
    redactor = active if active is not None else Redactor()
    if isinstance(value, str):
        # control characters escaped: a cid with a newline must not forge a log line
        text = value if value.isprintable() else strict_json.dumps_text(value)[1:-1]
    else:
        value = redactor.masked(value)  # by field: a section's secrets, known or not
        try:
            text = strict_json.dumps(value)
        except (TypeError, ValueError, RecursionError):
            text = repr(value)
    text = redactor.text(text, limit=limit)
    return f"'{text}'" if isinstance(value, str) else text


def write_line(stream: IO[str], line: str) -> None:
    """One log line on a text stream; what it cannot encode written escaped (a request may
    carry lone surrogates). OSError and ValueError (a closed stream) are the caller's."""
    try:
        stream.write(line + "\n")
    except UnicodeEncodeError:
        stream.write(line.encode("utf-8", "backslashreplace").decode("utf-8") + "\n")
    stream.flush()


class CallLog:
    """The log of one CPI call: every line to stderr and to a buffer for `log`, redacted.

    Lines come from `emit` (the wire's own, with no import at all) and, once `attach`ed,
    from the stdlib `logging` tree (every module's `logging.getLogger`), formatted the same."""

    FORMAT = "%(asctime)s %(levelname)s [%(request_id)s] %(name)s: %(message)s"
    DATEFMT = "%Y-%m-%dT%H:%M:%S"
    RECORD_LIMIT = RECORD_LIMIT
    write_line = staticmethod(write_line)

    def __init__(self, stderr: IO[str] | None = None, level: int = INFO, *, attach: bool = True) -> None:
        global active
        self.redactor = Redactor()
        active = self.redactor
        self.request_id = "-"
        self.level = level
        self._buffer = io.StringIO()
        self.streams: list[IO[str]] = [self._buffer]
        stderr = stderr if stderr is not None else sys.stderr
        if stderr is not None:
            self.streams.append(stderr)
        self._handlers: list = []
        if attach:
            self.attach()

    def attach(self) -> None:
        """Route the `logging` tree into this log (third-party libraries: warnings and worse)."""
        if not self._handlers:
            from cpi import logbridge

            self._handlers = logbridge.install(self)

    def line(self, created: float, levelname: str, name: str, message: str) -> str:
        """A record as it is written: FORMAT, then masked and cut to RECORD_LIMIT."""
        asctime = time.strftime(self.DATEFMT, time.localtime(created))
        text = self.FORMAT % {"asctime": asctime, "levelname": levelname, "request_id": self.request_id,
                              "name": name, "message": message}
        return self.redactor.text(text, limit=RECORD_LIMIT)

    def emit(self, level: int, name: str, message: str) -> None:
        """Log `message` under logger `name` (a `cpi.*` one) at `level`, without `logging`."""
        if level < self.level:
            return
        text = self.line(time.time(), LEVEL_NAMES[level], name, message)
        for stream in self.streams:
            try:
                write_line(stream, text)
            except (OSError, ValueError):
                continue  # stderr closed: the response's `log` still carries the line

    def set_level(self, level: int) -> None:
        self.level = level
        if self._handlers:
            import logging

            logging.getLogger("cpi").setLevel(level)

    def text(self) -> str:
        for stream in self.streams:
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        return self.redactor.text(self._buffer.getvalue())


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """'1 argument', '3 arguments', '1 entry', '2 entries' (nouns: when not noun + s): the
    words a person reads in a log line, an error or a table's count."""
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"
