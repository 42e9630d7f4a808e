"""A real redis-server on 127.0.0.1 for the tests: Debian's package, installed here when
it is missing and we are root (as these machines allow), started on a free port with no
persistence, stopped after. Never a fake: the Lua script the CPI sends must run on the
server it will meet in production.

`server()` skips the test (with the reason) when redis-server cannot be had."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

#: Seconds the package installation may take (apt-get update included, when needed).
INSTALL_BUDGET = float(os.environ.get("CPI_REDIS_SETUP_TIMEOUT", "300"))
_install_failure: list[str] = []


def _say(message: str) -> None:
    print(f"[redis set-up {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def executable() -> str | None:
    """redis-server's path, installing Debian's package first if needed (once per session)."""
    found = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None)
    if found or _install_failure:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        _install_failure.append("redis-server is not installed and this is not root on a Debian machine")
        return None
    from tests.support import suite

    env = suite.outside_env(DEBIAN_FRONTEND="noninteractive")  # apt may start a service: not in the run's dirs
    deadline = time.monotonic() + INSTALL_BUDGET
    install = ["apt-get", "install", "-y", "--no-install-recommends", "redis-server"]
    for attempt in (install, ["apt-get", "update"], install):  # the package lists may be stale: update once
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        _say(f"running {' '.join(attempt)} (budget {remaining:.0f}s left, CPI_REDIS_SETUP_TIMEOUT)")
        try:
            done = subprocess.run(attempt, env=env, capture_output=True, text=True, timeout=remaining)
        except subprocess.TimeoutExpired:
            break
        if attempt is install and done.returncode == 0:
            _say("redis-server installed")
            return shutil.which("redis-server") or "/usr/bin/redis-server"
    _install_failure.append("could not install Debian's redis-server package (see the set-up lines above)")
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    def __init__(self, binary: str, password: str | None = None):
        self.port = free_port()
        self.password = password
        self.directory = Path(tempfile.mkdtemp(prefix="cpi-test-redis-"))
        argv = [binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
                "--dir", str(self.directory), "--daemonize", "no", "--logfile", str(self.directory / "redis.log")]
        if password:
            argv += ["--requirepass", password]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_ready()

    @property
    def url(self) -> str:
        credentials = f":{self.password}@" if self.password else ""
        return f"redis://{credentials}127.0.0.1:{self.port}/0"

    def _wait_ready(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}: "
                                   f"{(self.directory / 'redis.log').read_text(errors='replace')[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    answer = sock.recv(64)
                if answer.startswith((b"+PONG", b"-NOAUTH")):
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"redis-server did not answer on port {self.port} within {timeout:.0f}s")

    def client(self):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, socket_timeout=5)

    def kill(self) -> None:
        """SIGKILL, as a crash: the CPI must carry on without it."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        shutil.rmtree(self.directory, ignore_errors=True)


def server(password: str | None = None) -> RedisServer:
    binary = executable()
    if binary is None:
        pytest.skip(_install_failure[0] if _install_failure else "no redis-server")
    return RedisServer(binary, password)
