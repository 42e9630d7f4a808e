"""Drive bin/cpi as the director does: a fresh process per call, the environment wiped to
PATH only, an unrelated working directory, one JSON request on stdin. A director sets no
HOME (the CPI then takes the user's home from the password database); the suite sets its
own HOME and TMPDIR (tests/support/suite.py), so that the CPI's defaults under the home
never touch the real user's."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import suite

suite.install()
ROOT = Path(__file__).resolve().parents[2]
BIN_CPI = ROOT / "bin" / "cpi"
#: exactly what a director leaves: no HOME (for the few tests that check that case)
WIPED_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
DIRECTOR_ENV = {**WIPED_ENV, **suite.director_env()}
#: bin/cpi hands its calls to the warm helper (cpi.warm) by default. CPI_TEST_HELPER=0 runs
#: every bin/cpi call of the suites cold instead (bin/test runs the local suites both ways);
#: the director's environment then carries the setting, as a job's bin/cpi exports it.
if os.environ.get("CPI_TEST_HELPER") == "0":
    DIRECTOR_ENV["CPI_HELPER_IDLE_TIMEOUT"] = "0"
#: A director's environment with the helper off: for tests that look inside the process
#: that makes the call.
COLD_ENV = {**DIRECTOR_ENV, "CPI_HELPER_IDLE_TIMEOUT": "0"}


def helper_action(action: str) -> str:
    """cpi.warm.client.<action>() ("running", "stop") as bin/cpi's interpreter sees it: the
    same import path, so the same helper."""
    code = f"import sys; sys.path.insert(0, sys.argv[1]); from cpi.warm import client; print(client.{action}())"
    return subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-I", "-S", "-c", code, str(ROOT)],
                          capture_output=True, text=True, env=DIRECTOR_ENV, cwd="/", timeout=30).stdout.strip()


def helper_pid() -> int | None:
    """The pid of this checkout's warm helper (the peer of its socket), None if none listens."""
    code = ("import sys, _socket; sys.path.insert(0, sys.argv[1]); from cpi.warm import where\n"
            "s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM); s.connect(where.socket_path())\n"
            "print(int.from_bytes(s.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)[:4], sys.byteorder))")
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-I", "-S", "-c", code, str(ROOT)],
                         capture_output=True, text=True, env=COLD_ENV, cwd="/", timeout=30).stdout.strip()
    return int(out) if out else None


HELPER_ALIVE = """
import fcntl, os, sys
sys.path.insert(0, sys.argv[1])
from cpi.warm import where
try:
    fd = os.open(where.socket_path() + ".lock", os.O_RDWR | os.O_NOFOLLOW)
except FileNotFoundError:
    print(False)
else:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        print(False)
    except OSError:
        print(True)
"""


def stop_helper(timeout: float = 60) -> None:
    """Stop this checkout's helper, also one still warming up (a helper holds its lock file
    from its start, but answers `stop` only once it listens)."""
    deadline = time.monotonic() + timeout
    while True:
        helper_action("stop")
        alive = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-I", "-S", "-c", HELPER_ALIVE, str(ROOT)],
                               capture_output=True, text=True, env=DIRECTOR_ENV, cwd="/", timeout=30).stdout.strip()
        if alive != "True" or time.monotonic() > deadline:
            return
        time.sleep(0.3)


#: The warm helper on, whatever CPI_TEST_HELPER says (for tests that compare the modes).
WARM_ENV = {**DIRECTOR_ENV, "CPI_HELPER_IDLE_TIMEOUT": "120"}


def start_helper(config_path: Path | str, env: dict = WARM_ENV, timeout: float = 60) -> None:
    """Make cold calls (with the helper on, each starts one) until the helper listens: it
    warms up first."""
    deadline = time.monotonic() + timeout
    while helper_action("running") != "True":
        assert time.monotonic() < deadline, "the warm helper did not start"
        subprocess.run([str(BIN_CPI), str(config_path)], input=b'{"method": "ping", "arguments": []}',
                       capture_output=True, env=env, cwd="/", timeout=120)
        time.sleep(0.3)


@dataclass
class Response:
    raw: str
    stderr: str
    returncode: int
    doc: dict

    @property
    def result(self) -> Any:
        assert self.doc["error"] is None, f"CPI error: {self.doc['error']}\n{self.doc['log']}"
        return self.doc["result"]

    @property
    def error(self) -> dict | None:
        return self.doc["error"]

    @property
    def log(self) -> str:
        return self.doc["log"]


def run_raw(stdin: bytes, config_path: Path | str | None = None, env: dict | None = None,
            cwd: Path | str = "/", timeout: float = 120, args: list[str] | None = None,
            bin_cpi: Path = BIN_CPI) -> Response:
    argv = [str(bin_cpi)] + ([str(config_path)] if config_path else []) + list(args or [])
    proc = subprocess.run(
        argv, input=stdin, capture_output=True, env=dict(DIRECTOR_ENV if env is None else env),
        cwd=cwd, timeout=timeout,
    )
    out = proc.stdout.decode()
    doc = json.loads(out)  # the whole of stdout must be one JSON document
    check_envelope(doc)
    return Response(out, proc.stderr.decode(), proc.returncode, doc)


def check_envelope(doc: Any) -> None:
    """What the director's Membrane schema and bosh-cli demand of every response."""
    assert isinstance(doc, dict), doc
    assert {"result", "error", "log"} <= set(doc), doc
    assert isinstance(doc["log"], str)
    if doc["error"] is not None:
        assert doc["result"] is None
        err = doc["error"]
        assert set(err) == {"type", "message", "ok_to_retry"}, err
        assert isinstance(err["type"], str) and err["type"].startswith("Bosh::Clouds::")
        assert isinstance(err["message"], str) and err["message"]
        assert isinstance(err["ok_to_retry"], bool)


class Cpi:
    """A CPI client bound to one config file."""

    def __init__(self, config_path: Path | None, director_uuid: str = "director-uuid-1", env: dict | None = None,
                 bin_cpi: Path = BIN_CPI):
        self.config_path = config_path
        self.director_uuid = director_uuid
        self.env = env
        self.bin_cpi = bin_cpi

    def request(self, method: str, *arguments: Any, api_version: int | None = 2,
                context: dict | None = None, stemcell_api_version: int | None = 2) -> dict:
        ctx = {"director_uuid": self.director_uuid, "request_id": "cpi-424242"}
        if stemcell_api_version is not None:
            ctx["vm"] = {"stemcell": {"api_version": stemcell_api_version}}
        ctx.update(context or {})
        req: dict[str, Any] = {"method": method, "arguments": list(arguments), "context": ctx}
        if api_version is not None:
            req["api_version"] = api_version
        return req

    def call(self, method: str, *arguments: Any, **kw: Any) -> Response:
        timeout = kw.pop("timeout", 300)
        response = run_raw(json.dumps(self.request(method, *arguments, **kw)).encode(), self.config_path,
                           env=self.env, timeout=timeout, bin_cpi=self.bin_cpi)
        assert response.returncode == 0, response.stderr
        return response

    def __call__(self, method: str, *arguments: Any, **kw: Any) -> Any:
        """Call and return the result, failing the test on an error response."""
        return self.call(method, *arguments, **kw).result


def bin_cpi_argv(config_path: Path | str | None, *flags: str, bin_cpi: Path = BIN_CPI) -> list[str]:
    """The interpreter command line bin/cpi execs (read off its `exec "$py" ...` line, with
    the checkout's .venv), `flags` added after the interpreter: to look inside a call as
    bin/cpi makes it (`-X importtime`, say)."""
    import shlex

    line = next(line.strip() for line in bin_cpi.read_text().splitlines() if line.strip().startswith('exec "$py"'))
    root = bin_cpi.resolve().parents[1]
    python = str(root / ".venv" / "bin" / "python")
    config = [str(config_path)] if config_path else []
    argv = [python, *flags]
    for word in shlex.split(line)[2:]:
        argv += config if word == "$@" else [str(root) if word == "$root" else word]
    return argv


def imported_modules(stderr: str) -> set[str]:
    """The modules a `python -X importtime` run imported, from its stderr."""
    return {line.split("|")[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def process_state(pid: int) -> str | None:
    """A process's state letter from /proc (R, S, T for stopped, Z, ...); None when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def start_stopped(config_path: Path | str, request: dict, env: dict, cwd: Path | str = "/", preexec_fn=None,
                  timeout: float = 30) -> subprocess.Popen:
    """bin/cpi making `request` with a CPI_KILL_SIGNAL=STOP failpoint in `env`: returns the
    process once it has stopped there (stdin written and closed; communicate() reads)."""
    import time

    proc = subprocess.Popen([str(BIN_CPI), str(config_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=cwd,
                            preexec_fn=preexec_fn)  # noqa: PLW1509 - a test passes one small os call; the suite forks no threads here
    proc.stdin.write(json.dumps(request).encode())
    proc.stdin.close()
    proc.stdin = None
    deadline = time.monotonic() + timeout
    while process_state(proc.pid) != "T":
        assert proc.poll() is None and time.monotonic() < deadline, f"{request['method']} never reached its failpoint"
        time.sleep(0.02)
    return proc
