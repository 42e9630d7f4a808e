"""The CPI as the director runs it, for the human commands: one bin/cpi process per call,
the environment wiped to PATH (and the operator's HOME, see `_env`), one JSON request on
stdin."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

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
                 director_uuid: str = "cpi-cli"):
        # bin/cpi runs from "/" (as a director runs it): a relative path is the caller's,
        # so it is made absolute here, against the caller's working directory.
        self.config = Path(config).absolute() if config else None
        self.api_version = api_version
        self.echo = echo
        self.director_uuid = director_uuid  # in every request's context: whose the resources are

    def raw(self, method: str, *arguments: Any) -> dict:
        request = {
            "method": method,
            "arguments": list(arguments),
            "context": {"director_uuid": self.director_uuid, "request_id": f"cpi-{os.getpid() % 1000000:06d}",
                        "vm": {"stemcell": {"api_version": 2}}},
            "api_version": self.api_version,
        }
        argv = [str(BIN_CPI)] + ([str(self.config)] if self.config else [])
        started = time.monotonic()
        proc = subprocess.run(argv, input=json.dumps(request).encode(), capture_output=True, env=_env(), cwd="/")
        elapsed = time.monotonic() - started
        response = json.loads(proc.stdout)
        if self.echo:
            shown = json.dumps(arguments)
            print(f"\n→ {method} {shown if len(shown) < 160 else shown[:157] + '...'}")
            if response["error"]:
                err = response["error"]
                print(f"← ERROR {err['type']}: {err['message']} (ok_to_retry={err['ok_to_retry']})  [{elapsed:.2f}s]")
            else:
                print(f"← {json.dumps(response['result'])}  [{elapsed:.2f}s, exit {proc.returncode}]")
        return response

    def __call__(self, method: str, *arguments: Any) -> Any:
        response = self.raw(method, *arguments)
        if response["error"]:
            raise SystemExit(f"{method} failed: {response['error']['message']}\n{response['log']}")
        return response["result"]
