"""The files and values an operator hands the CLI and bin/cpi are bounded (issue #33, point 5):
a FIFO, a device or an oversized file named as cpi.json (`--config`, `$CPI_CONFIG`), as a
cloud-config or as `orphans --known` (a path or `-`), and JSON or YAML nested 5,000 deep in
any of them or in a call's arguments, each end promptly in one line on stderr — never a
wait for a writer that never comes, a MemoryError or a RecursionError traceback.

Every case is a real subprocess whose timeout (a few seconds) is the proof that nothing
blocked; nothing here needs a cloud (each is refused before one is opened).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cpi.inputs import CONFIG_LIMIT, KNOWN_LIMIT
from tests.support.runner import DIRECTOR_ENV, ROOT, run_raw

CPI = [str(ROOT / ".venv" / "bin" / "python"), "-m", "cpi.cli"]
#: far below the time a blocked open or a read of /dev/zero up to MemoryError would take
PROMPT = 10
DEEP = "[" * 5000 + "]" * 5000
#: the inputs (by the fixture's names) that are no regular file, and what their refusal says
NOT_REGULAR = [("fifo", ["a FIFO, not a regular file"]), ("zero", ["a character device, not a regular file"])]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """A FIFO nobody writes to, a sparse file one byte over the config cap, a config that is
    fine, and 5,000-deep JSON and YAML."""
    root = tmp_path_factory.mktemp("inputs")
    os.mkfifo(root / "fifo")
    with open(root / "big.json", "wb") as handle:
        handle.truncate(CONFIG_LIMIT + 1)
    (root / "cpi.json").write_text(json.dumps({"cloud": {"plugin": "local", "properties": {
        "local": {"state_dir": str(root / "state")}}}}))
    (root / "deep.json").write_text(DEEP)
    (root / "deep.yml").write_text(DEEP)
    return {"fifo": root / "fifo", "zero": Path("/dev/zero"), "big": root / "big.json",
            "config": root / "cpi.json", "deep": root / "deep.json", "deep_yaml": root / "deep.yml"}


def cli(*args: str, stdin=subprocess.DEVNULL, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CPI, *args], stdin=stdin, capture_output=True, text=True, timeout=PROMPT,
                          env={**DIRECTOR_ENV, **(env or {})})


def assert_one_line_error(proc: subprocess.CompletedProcess, *words: str) -> str:
    """Refused: a non-zero exit, one line on stderr naming `words`, no traceback."""
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr and "Error:" not in proc.stderr.split(":", 1)[0], proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(("name", "words"), [*NOT_REGULAR, ("big", ["larger than 4 MiB"])])
def test_a_config_that_is_no_regular_file_or_too_big_is_refused_in_one_line(inputs, name, words):
    path = str(inputs[name])
    assert_one_line_error(cli("list", "vms", "--config", path), path, *words)
    assert_one_line_error(cli("list", "vms", env={"CPI_CONFIG": path}), path, *words)
    # bin/cpi, as the director runs it: the error envelope, not a hang
    response = run_raw(b'{"method": "info", "arguments": [], "context": {"director_uuid": "d"}}', path,
                       timeout=PROMPT)
    assert response.error is not None and path in response.error["message"], response.doc
    assert words[0] in response.error["message"], response.error


@pytest.mark.parametrize("command", ["call", "plan"])
@pytest.mark.parametrize("name", ["fifo", "zero"])
def test_call_and_plan_say_a_config_that_is_no_regular_file_is_one(inputs, command, name):
    path = str(inputs[name])
    assert_one_line_error(cli(command, "has_vm", '"vm-1"', "--config", path), f"--config {path}: not a regular file")


@pytest.mark.parametrize(("name", "words"), [*NOT_REGULAR, ("deep", ["nests deeper than 64 levels"])])
def test_a_known_input_that_is_no_regular_file_or_too_deep_is_refused_in_one_line(inputs, name, words):
    path = str(inputs[name])
    args = ("orphans", "--director-uuid", "d", "--config", str(inputs["config"]), "--known")
    assert_one_line_error(cli(*args, path), f"--known {path}", *words, "nothing listed or deleted")


def test_the_known_input_on_stdin_is_size_capped_and_depth_checked(inputs):
    args = ("orphans", "--director-uuid", "d", "--config", str(inputs["config"]), "--known", "-")
    with open("/dev/zero", "rb") as zero:
        assert_one_line_error(cli(*args, stdin=zero), f"larger than {KNOWN_LIMIT // 2**20} MiB")
    with open(inputs["deep"], "rb") as deep:
        assert_one_line_error(cli(*args, stdin=deep), "nests deeper than 64 levels")


@pytest.mark.parametrize("command", [
    ("call", "create_disk", "1024", DEEP, "null"),
    ("plan", "create_disk", "1024", DEEP, "null"),
    ("certify", "--vm-type", DEEP),
    ("certify", "--network", DEEP),
])
def test_json_nested_5000_deep_in_an_argument_is_one_line(inputs, command):
    line = assert_one_line_error(cli(*command, "--config", str(inputs["config"])), "nested deeper than 64 levels")
    assert len(line) < 300, line  # the argument is cut, not echoed whole


@pytest.mark.parametrize(("name", "words"), [*NOT_REGULAR, ("deep_yaml", ["nested too deep"])])
def test_a_cloud_config_that_is_no_regular_file_or_too_deep_is_refused_in_one_line(inputs, name, words):
    path = str(inputs[name])
    assert_one_line_error(cli("validate", path, "--config", str(inputs["config"])), path, *words)


def test_a_cloud_config_on_stdin_is_depth_checked(inputs):
    with open(inputs["deep_yaml"], "rb") as deep:
        assert_one_line_error(cli("validate", "-", "--config", str(inputs["config"]), stdin=deep), "<stdin>",
                              "nested too deep")
