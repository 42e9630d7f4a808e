"""Redaction and strict JSON: what is masked, in which forms, and at what cost."""

from __future__ import annotations

import json
import re
import time
import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpi import errors, logs, strict_json
from cpi.logs import MASK, Redactor, looks_secret, shown


@pytest.mark.parametrize("key", [
    "password", "api_key", "secret_access_key", "session_token", "json_key", "encryption_key", "auth",
    "private_key", "application_credential_secret", "Authorization", "jsonKey", "password_hash", "psk",
])
def test_secret_keys(key):
    assert looks_secret(key)


@pytest.mark.parametrize("key", [
    "access_key_id", "application_credential_id", "credentials_source", "token_url", "auth_url", "key_name",
    "default_key_name", "token_cache", "token_cache_dir", "kms_key_arn", "http_tokens", "name", "",
])
def test_public_keys(key):
    assert not looks_secret(key)


def test_values_under_secret_keys_of_every_shape_are_learnt():
    r = Redactor()
    r.collect({"blobstore": {"options": {"json_key": '{"k": "gcs-key-value"}', "encryption_key": "enc-5f2"}},
               "auth": ["in", "a-list-9c"], "nested": {"password": {"deeper": "deep-pw-1"}},
               "pin": {"password": 987654}})
    text = r.text('{"k": "gcs-key-value"} enc-5f2 a-list-9c deep-pw-1 987654')
    assert "gcs-key-value" not in text and "enc-5f2" not in text and "a-list-9c" not in text
    assert "deep-pw-1" not in text and "987654" not in text


def test_escaped_forms_of_a_secret_are_masked():
    secret = 'pa"ss\\word\n\'x'
    r = Redactor()
    r.collect({"password": secret})
    for form in (secret, json.dumps(secret)[1:-1], repr(secret)[1:-1]):
        assert r.text(f"before {form} after") == f"before {MASK} after"


def test_url_passwords_in_text_the_cpi_never_saw_are_masked():
    """An agent's log quoted in an error message may carry a URL with a password."""
    r = Redactor()
    assert r.text("agent said: cannot reach nats://nats:np-4411@10.0.0.6:4222") == \
        f"agent said: cannot reach nats://nats:{MASK}@10.0.0.6:4222"


def test_a_cut_never_leaves_the_head_of_a_secret():
    secret = "S" * 60 + "-tail"
    r = Redactor()
    r.add(secret)
    for offset in range(0, 100, 7):
        text = "x" * offset + secret + "y" * 200
        cut = r.text(text, limit=80)
        assert "SSSSSSSSSS" not in cut, (offset, cut)


def test_shown_masks_before_it_cuts():
    r = Redactor()
    r.add("0123456789abcdefghij-long-secret")
    import cpi.logs
    cpi.logs.active = r
    try:
        assert "0123456789" not in shown("x" * 70 + "0123456789abcdefghij-long-secret", 80)
        assert shown("line\nforged") == "'line\\nforged'"
    finally:
        cpi.logs.active = None


def test_short_secret_never_matches_inside_a_mask():
    r = Redactor()
    r.add("re1")
    r.add("re1-dacted")
    assert r.text("xre1-dactedx re1") == f"x{MASK}x re1"  # re1: too short to mask by value
    r.add("dac7")
    assert r.text("xre1-dactedx dac7") == f"x{MASK}x {MASK}"


def test_only_a_secret_that_cannot_be_ordinary_text_is_masked_by_value():
    """A letter, or a word of letters under 8 characters (`unused`), would mask `cpi.rpc` or
    `vm-unused-1`: such a secret is noted by its key (`cpi validate` warns) and masked by
    field only; 4 characters that are not all letters, or 8 of any kind, are masked."""
    r = Redactor()
    r.collect({"password": "unused", "api_key": "p", "token": "ab1!", "secret": "longword", "mbus": "nats://n:x@h"})
    assert r.text("cpi.rpc vm-unused-1 ab1! longword") == f"cpi.rpc vm-unused-1 {MASK} {MASK}"
    assert r.too_short == ["password", "api_key", "mbus"]
    assert r.masked({"password": "unused", "name": "unused"}) == {"password": MASK, "name": "unused"}


def test_learning_is_linear_on_long_runs_of_letters():
    """The URL pattern once took seconds on 80 KB of letters and never ended on 2 MB."""
    r = Redactor()
    started = time.monotonic()
    r.collect(["a" * 2_000_000, "https://" + "a" * 2_000_000, "x://" * 200_000])
    r.text("a" * 2_000_000 + "://")
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("raw, words", [
    (b'{"a": NaN}', "NaN is not a JSON number"),
    (b'{"a": -Infinity}', "-Infinity is not a JSON number"),
    (b'{"a": 1e400}', "too large for a 64-bit float"),
    (b'{"a": ' + b"9" * 5000 + b"}", "5000 digits is too large"),
    (b'{"a": "\xff"}', "not UTF-8"),
    (b'{"a": "\\ud800"}', "lone UTF-16 surrogate"),
    (b"[" * 100 + b"]" * 100, "nested deeper than 64"),
    (b"[" * 100000 + b"]" * 100000, "nested deeper than 64"),
])
def test_strict_json_refuses(raw, words):
    with pytest.raises(errors.CpiError) as err:
        strict_json.loads(raw, "the thing")
    assert words in err.value.message


def test_strict_json_accepts_what_the_director_sends():
    assert strict_json.loads(b'{"a": [1, 2.5, "\\ud83d\\ude00", null, true]}', "x") == \
        {"a": [1, 2.5, "\U0001F600", None, True]}
    with pytest.raises(ValueError):
        strict_json.dumps({"a": float("nan")})


# ---------------------------------------------------------------- the patterns, spelt out
#
# cpi.logs is on `info`'s path and must not import `re` (issue #12): its patterns are spelt
# out with str methods. These are the patterns they stand for, checked against them.

WORDS = re.compile(r"[A-Za-z][a-z0-9]*|[0-9]+")
SECRET_HINT = re.compile(r"pass|pwd|secret|token|key|cred|auth|cookie|pem|sign|psk", re.IGNORECASE)
URL_USERINFO = re.compile(r"[^/\s:@]{0,256}:([^/\s@]{1,1024})@")
PLAIN = re.compile(r"[A-Za-z0-9_.~-]*")
KEY_CHARS = st.sampled_from(list("aAbKkeyYpPwdsSTtoknr_-.0129 :/@\t\u212a\u017f\u0130\xa0\u2028é"))


def looks_secret_by_pattern(key: str) -> bool:
    if not SECRET_HINT.search(key):
        return False
    words = [w.lower() for w in WORDS.findall(key)]
    return bool(words) and (words[-1] in logs.SECRET_LAST_WORDS or any(w in logs.SECRET_ANY_WORDS for w in words))


@settings(max_examples=3000, derandomize=True, database=None, deadline=None)
@given(st.lists(st.one_of(KEY_CHARS, st.sampled_from(["pass", "Word", "token", "KEY", "Secret", "auth", "Id", "api"])),
                max_size=8).map("".join))
def test_looks_secret_is_its_pattern(key):
    assert logs._words(key) == WORDS.findall(key)
    assert looks_secret(key) == looks_secret_by_pattern(key)


@settings(max_examples=3000, derandomize=True, database=None, deadline=None)
@given(st.lists(st.one_of(KEY_CHARS, st.sampled_from(["://", "x" * 250, "y" * 1020, "@", ":"])), max_size=12)
       .map("".join))
def test_url_passwords_are_their_pattern(text):
    start = text.find("://")
    while start != -1:
        match = URL_USERINFO.match(text, start + 3)
        assert logs.url_password(text, start + 3) == (match.group(1) if match else None)
        start = text.find("://", start + 3)


@settings(max_examples=2000, derandomize=True, database=None, deadline=None)
@given(st.text(max_size=20))
def test_plain_and_url_quoted_are_what_urllib_and_the_pattern_say(text):
    assert logs.is_plain(text) == bool(PLAIN.fullmatch(text))
    try:
        expected = urllib.parse.quote(text, safe="")
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            logs.url_quoted(text)
    else:
        assert logs.url_quoted(text) == expected


def test_a_line_the_call_log_emits_is_the_line_logging_writes():
    """The wire's own lines (CallLog.emit, no `logging`) and every module's (`logging`,
    once attached) are formatted, masked and cut alike."""
    import io
    import logging

    stream = io.StringIO()
    call_log = logs.CallLog(stream)
    call_log.redactor.add("pw-77")
    call_log.request_id = "cpi-pw-77"
    message = "said pw-77 and " + "x" * 9000  # cut to RECORD_LIMIT
    call_log.emit(logs.INFO, "cpi.rpc", message)
    logging.getLogger("cpi.rpc").info("%s", message)
    call_log.emit(logs.DEBUG, "cpi.rpc", "below the level")
    first, second = call_log.text().splitlines()
    assert first[19:] == second[19:] and "pw-77" not in first  # past the timestamps
    assert first.endswith("characters in all)") and stream.getvalue() == call_log._buffer.getvalue()
