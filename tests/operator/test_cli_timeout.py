"""`cpi` is never silent for minutes (#24): a human command against an endpoint that does
not answer ends after about --timeout seconds with one line on stderr naming the endpoint
and the time spent, and on a terminal a spinner says meanwhile what it waits on, for how
long and the cloud's latest retry; bin/cpi called as a director calls it keeps the wire's
budgets. Through the real `cpi` process, piped and in an 80-column pseudo-terminal, against
the two ways an endpoint fails: one that accepts the connection and never answers (a hung
API, a firewall that lets the SYN through), and one where nothing listens."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from tests.support import terminal
from tests.support.runner import BIN_CPI, COLD_ENV, DIRECTOR_ENV, ROOT

CPI = [str(ROOT / ".venv" / "bin" / "python"), "-m", "cpi.cli"]
TIMEOUT = 3
#: What a command may take beyond --timeout: the interpreter's start-up, the cloud's
#: imports, bin/cpi's own start-up, on a loaded 2-core machine.
MARGIN = 15
SECRET = "not-a-real-secret-value"


class Hung:
    """A TCP endpoint on 127.0.0.1 that accepts every connection and never answers."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:  # closed: the test is over
                return
            self.take(connection)

    def take(self, connection: socket.socket) -> None:
        """What becomes of an accepted connection: kept open, never read nor answered."""
        self.accepted.append(connection)

    def close(self) -> None:
        self.socket.shutdown(socket.SHUT_RDWR)  # wakes the accept() (a close alone does not)
        self.socket.close()
        self.thread.join(timeout=5)
        for connection in self.accepted:
            connection.close()


@pytest.fixture(scope="module")
def hung() -> Iterator[Hung]:
    server = Hung()
    yield server
    server.close()


@pytest.fixture(scope="module")
def refused_port() -> int:
    """A port where nothing listens (taken from the kernel, then let go)."""
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return probe.getsockname()[1]


def aws_config(tmp_path, port: int):
    path = tmp_path / f"aws-{port}.json"
    endpoint = f"http://127.0.0.1:{port}"
    path.write_text(json.dumps({"cloud": {"plugin": "aws", "properties": {"aws": {
        "access_key_id": "AKIAEXAMPLE", "secret_access_key": SECRET, "region": "us-east-1",
        "default_key_name": "k", "default_security_groups": ["s"], "ec2_endpoint": endpoint,
        "sts_endpoint": endpoint}}}}))
    return path


def openstack_config(tmp_path, port: int):
    path = tmp_path / f"openstack-{port}.json"
    path.write_text(json.dumps({"cloud": {"plugin": "openstack", "properties": {"openstack": {
        "auth_url": f"http://127.0.0.1:{port}/v3", "username": "bosh", "api_key": SECRET, "project": "bosh",
        "domain": "Default"}}}}))
    return path


def run(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    proc = subprocess.run([*CPI, *args], capture_output=True, text=True, cwd=ROOT, env=DIRECTOR_ENV,
                          timeout=120)
    return proc, time.monotonic() - started


def _port(request, which: str) -> int:
    return request.getfixturevalue("hung").port if which == "hung" else request.getfixturevalue("refused_port")


# each command with --timeout where an operator may put it: after the command, or before
# it as bosh's global options go
COMMANDS = {
    "call": lambda config: ["call", "has_vm", '"i-0123"', "--config", str(config), "--timeout", str(TIMEOUT)],
    "list": lambda config: ["--timeout", str(TIMEOUT), "list", "vms", "--config", str(config)],
}


@pytest.mark.parametrize("which", ["hung", "refused"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_aws_piped_ends_in_time_with_one_line(request, tmp_path, command, which):
    """Piped (a script): within --timeout and its start-up, exit 1, and stderr is one line
    naming the command, the endpoint, the time spent and the --timeout; nothing else on
    stderr (no spinner, no retry log); `cpi call` still prints the response."""
    port = _port(request, which)
    proc, elapsed = run(*COMMANDS[command](aws_config(tmp_path, port)))
    assert elapsed < TIMEOUT + MARGIN, (elapsed, proc.stderr)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith(f"cpi {command}: error: ") and f"127.0.0.1:{port}" in line, line
    spent = float(re.search(r"\(after (\d+\.\d) s; --timeout 3 s\)$", line).group(1))
    assert spent <= elapsed and (which == "refused" or spent >= TIMEOUT * 0.9), line
    assert "Traceback" not in proc.stderr and SECRET not in proc.stderr + proc.stdout
    if command == "call":
        response = json.loads(proc.stdout)
        assert response["result"] is None and f"127.0.0.1:{port}" in response["error"]["message"]
        assert f"of {TIMEOUT}s budget used" in response["log"] or f"budget ({TIMEOUT}s)" in response["log"]
    else:
        assert proc.stdout == ""


@pytest.mark.parametrize("which", ["hung", "refused"])
def test_openstack_listing_ends_in_time_when_keystone_does_not_answer(request, tmp_path, which):
    """The token request is the one that waits: it is bounded by --timeout too."""
    port = _port(request, which)
    proc, elapsed = run("list", "vms", "--config", str(openstack_config(tmp_path, port)), "--timeout", str(TIMEOUT))
    assert elapsed < TIMEOUT + MARGIN, (elapsed, proc.stderr)
    assert proc.returncode == 1 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cpi list: error: reading vms: "), proc.stderr
    reached = f"127.0.0.1:{port}/v3/auth/tokens" if which == "hung" else f"127.0.0.1:{port}/v3: connection refused"
    assert reached in lines[0] and lines[0].endswith("; --timeout 3 s)"), lines[0]


def test_on_a_terminal_a_spinner_says_what_it_waits_on_and_for_how_long(hung, refused_port, tmp_path):
    """In 80 columns: `cpi list` shows "reading vms: N s" counting, and the cloud's latest
    retry ("... attempt N failed, retrying in ..."); `cpi call` shows "has_vm through
    bin/cpi: N s" with bin/cpi's latest retry; each ends with its one error line."""
    listing = terminal.run([*CPI, "list", "vms", "--config", str(aws_config(tmp_path, refused_port)),
                            "--timeout", str(TIMEOUT)], env=DIRECTOR_ENV, timeout=TIMEOUT + MARGIN)
    assert listing.returncode == 1, listing.screen
    assert re.search(r"reading vms: [1-9]\d* s", listing.screen), listing.screen
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", listing.screen)  # every redraw, colours dropped
    # a retry folds in 80 columns: "... attempt N failed," then "retrying in 0.1s (...)"; which
    # attempt the first redraw catches depends on the load (attempt 1 waits only 0.1 s)
    assert re.search(r"ec2:DescribeInstances unreachable \(connection refused\); attempt [1-9]\d* failed,\s+"
                     r"retrying in [\d.]+s", drawn), listing.screen
    assert [line for line in listing.lines if line.startswith("cpi list: error: reading vms: ")]
    called = terminal.run([*CPI, "call", "has_vm", '"i-0123"', "--config", str(aws_config(tmp_path, hung.port)),
                           "--timeout", str(TIMEOUT)], env=DIRECTOR_ENV, timeout=TIMEOUT + MARGIN)
    assert called.returncode == 1, called.screen
    assert re.search(r"has_vm through bin/cpi: [1-9] s", called.screen), called.screen
    assert "ec2:DescribeInstances: giving up after" in called.screen  # bin/cpi's retry, as it logged it
    errors = [line for line in called.lines if line.startswith("cpi call: error: has_vm through bin/cpi: ")]
    assert len(errors) == 1 and f"127.0.0.1:{hung.port}" in errors[0], called.screen
    assert "Traceback" not in listing.screen + called.screen and SECRET not in listing.screen + called.screen


def test_a_bad_timeout_is_a_usage_error(tmp_path):
    for value in ("0", "-1", "soon", "nan"):
        proc, _ = run("list", "vms", "--timeout", value)
        assert proc.returncode == 2 and proc.stdout == "", (value, proc.stderr)
        assert proc.stderr.splitlines() == [proc.stderr.strip()] and \
            proc.stderr.startswith(f"cpi list: error: --timeout {value}: "), (value, proc.stderr)


def test_the_cli_lowers_the_budgets_the_wire_keeps(tmp_path, refused_port):
    """--timeout reaches a cloud as the context keys its class lets a request override,
    only lowering what the config says; without them (bin/cpi as a director calls it)
    config.build keeps the defaults; the local cloud gets none."""
    from cpi import config, retry
    from cpi.cli import timeout
    from cpi.raw_config import read_file

    aws = read_file(str(aws_config(tmp_path, refused_port)))
    openstack = read_file(str(openstack_config(tmp_path, refused_port)))
    assert config.build(aws).properties.retry_budget_seconds == retry.DEFAULT_BUDGET == 600
    assert config.build(openstack).properties.retry_budget_seconds == 300
    assert timeout.overrides(aws, 3) == {"retry_budget_seconds": 3, "read_timeout": 3, "connect_timeout": 3}
    lowered = config.build(aws, timeout.overrides(aws, 30)).properties
    assert (lowered.retry_budget_seconds, lowered.read_timeout, lowered.connect_timeout) == (30, 30, 5)
    assert timeout.overrides({}, 3) == {}  # the local cloud: nothing it waits on
    tight = json.loads(json.dumps(openstack))
    tight["cloud"]["properties"]["openstack"].update(retry_budget_seconds=2, connection_options={"read_timeout": 60})
    assert timeout.overrides(tight, 5) == {"connect_timeout": 5}  # what the config says tighter, or in its own way
    assert timeout.overrides(aws, None) == {}  # certify without --timeout: the config's budgets


def test_bin_cpi_without_the_cli_keeps_the_wire_budget(refused_port, tmp_path):
    """bin/cpi as a director runs it (no context keys): its first retry is logged against
    the 600 s budget; the call is stopped there (it would retry for 10 minutes)."""
    request = {"method": "has_vm", "arguments": ["i-0123"], "context": {"director_uuid": "d-1", "request_id": "r-1"},
               "api_version": 2}
    proc = subprocess.Popen([str(BIN_CPI), str(aws_config(tmp_path, refused_port))], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=COLD_ENV, cwd="/", text=True)
    try:
        proc.stdin.write(json.dumps(request))
        proc.stdin.close()
        seen = ""
        deadline = time.monotonic() + 60
        while "budget used" not in seen and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            seen += line
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert re.search(r"attempt 1 failed, retrying in [\d.]+s \([\d.]+s of 600s budget used\)", seen), seen
