"""The CPI as the director runs it, for the human commands: one bin/cpi process per call,
the environment wiped to PATH (and the operator's HOME, see `_env`), one JSON request on
stdin."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from .output import Status, escaped, spinner

#: How bin/cpi's log lines (on its stderr, as they happen) name a retry of the cloud's.
RETRY_MARK = b" cpi.retry: "

ROOT = Path(__file__).resolve().parents[2]
BIN_CPI = ROOT / "bin" / "cpi"


def _env() -> dict[str, str]:
    """The director's wiped environment, with the operator's HOME kept: what the calls keep
    under the home by default (the audit trail, throttle state, tokens) then lands where
    this command's own readers (`cpi audit`, `cpi list`) look, even when HOME is not the
    password database's home (sudo -E, a test run's own HOME)."""
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    if os.environ.get("HOME"):
        env["HOME"] = os.environ["HOME"]
    return env


class Client:
    """Spawns bin/cpi once per call with the director's wiped environment."""

    def __init__(self, config: Path | str | None, api_version: int = 2, echo: bool = True,
                 director_uuid: str = "cpi-cli", context: dict[str, Any] | None = None, spinner: bool = False):
        """context: more keys for every request's context, as a director's cpi-config adds
        them (the overrides of --timeout, cpi.cli.timeout). spinner: while bin/cpi runs,
        say on the terminal which call it is, for how long, and its latest retry."""
        # bin/cpi runs from "/" (as a director runs it): a relative path is the caller's,
        # so it is made absolute here, against the caller's working directory.
        self.config = Path(config).absolute() if config else None
        self.api_version = api_version
        self.echo = echo
        self.director_uuid = director_uuid  # in every request's context: whose the resources are
        self.context = dict(context or {})
        self.spinner = spinner
        #: what the last call waited on and for how long (its error line says so)
        self.status: Status | None = None

    def raw(self, method: str, *arguments: Any) -> dict:
        request = {
            "method": method,
            "arguments": list(arguments),
            "context": {"director_uuid": self.director_uuid, "request_id": f"cpi-{os.getpid() % 1000000:06d}",
                        "vm": {"stemcell": {"api_version": 2}}, **self.context},
            "api_version": self.api_version,
        }
        argv = [str(BIN_CPI)] + ([str(self.config)] if self.config else [])
        started = time.monotonic()
        self.status = Status(f"{method} through bin/cpi")
        with spinner(self.status) if self.spinner else contextlib.nullcontext(self.status):
            returncode, stdout = _run(argv, json.dumps(request).encode(), self.status)
        elapsed = time.monotonic() - started
        response = json.loads(stdout)
        if self.echo:
            shown = json.dumps(arguments)
            print(f"\n→ {method} {shown if len(shown) < 160 else shown[:157] + '...'}")
            if response["error"]:
                err = response["error"]
                print(escaped(f"← ERROR {err['type']}: {err['message']} (ok_to_retry={err['ok_to_retry']})")
                      + f"  [{elapsed:.2f}s]")
            else:
                print(f"← {json.dumps(response['result'])}  [{elapsed:.2f}s, exit {returncode}]")
        return response

    def __call__(self, method: str, *arguments: Any) -> Any:
        response = self.raw(method, *arguments)
        if response["error"]:
            raise SystemExit(f"{method} failed: {response['error']['message']}\n{response['log']}")
        return response["result"]


def _run(argv: list[str], request: bytes, status: Status) -> tuple[int, bytes]:
    """bin/cpi with `request` on its stdin: its exit status and stdout. Its stderr (the
    call's log, line by line as it happens, secrets masked by bin/cpi) is read as it comes,
    each retry of the cloud's becoming `status`'s latest; nothing of it is printed."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_env(), cwd="/")
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stdin, stdout = proc.stdin, proc.stdout
    out: list[bytes] = []

    def talk() -> None:  # a thread, so that neither pipe fills while the other is read
        # bin/cpi may end before it reads the request (a broken install): its stdout says why
        with contextlib.suppress(BrokenPipeError):
            stdin.write(request)
            stdin.flush()
        with contextlib.suppress(BrokenPipeError):
            stdin.close()
        out.append(stdout.read())

    talker = threading.Thread(target=talk, daemon=True)
    talker.start()
    try:
        for line in proc.stderr:
            if RETRY_MARK in line:
                status.retry = line.split(RETRY_MARK, 1)[1].decode(errors="replace").strip()
    except BaseException:
        # Ctrl-C, SIGTERM or SIGHUP while bin/cpi works: the call goes on to its answer, as
        # a director's call would (a CPI is never cut off mid-call), so that what it makes
        # exists before a cleanup looks for it instead of appearing after the cleanup looked.
        # Its log is drained meanwhile: a full pipe would hold it up for ever.
        collections.deque(proc.stderr, maxlen=0)
        proc.wait()
        raise
    talker.join()
    return proc.wait(), out[0] if out else b""
