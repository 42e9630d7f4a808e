"""What a newcomer meets first (issue 11, part 7), through the real executables: `cpi`
(the human CLI) and bin/cpi (what BOSH runs), each as a subprocess.

- relative paths given to `cpi` are the caller's (bin/cpi itself runs from "/");
- `cpi props nosuch` is one line naming the clouds, exit 2;
- the README stays a front page (at most 200 lines, the two commands first), and every
  relative link in it, in docs/ and in bench/README.md leads to a file;
- the examples the README and docs/*.md mark `<!-- pasteable: ... -->` run as they are;
- the interpreter search order docs/protocol.md states is bin/cpi's;
- `cpi release` finds the checkout's release from any directory;
- CPI_LIFECYCLE_{AWS,OPENSTACK}_CONFIG accept a plain cpi.json (plus "lifecycle") and
  their own shape, and name what is missing otherwise;
- `cpi --help` and every subcommand's --help: description, grouped commands, examples.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN_CPI = REPO / "bin" / "cpi"
README = REPO / "README.md"
DOCS = REPO / "docs"
#: The documentation: the front page, one file per subject under docs/ (the cloud
#: references among them are generated), and the benchmarks' figures.
DOCUMENTS = [README, *sorted(DOCS.glob("*.md")), REPO / "bench" / "README.md"]
README_MAX_LINES = 200
INSTALLED = REPO / ".venv" / "bin" / "cpi"
CPI = [str(INSTALLED)] if INSTALLED.exists() else [sys.executable, "-m", "cpi.cli"]
WIPED = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


def cpi(*args: str, cwd: Path, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([*CPI, *args], cwd=cwd, capture_output=True, text=True, env=environment, timeout=timeout)


def local_config(path: Path, state_dir: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {"local": {"state_dir": str(state_dir)}}}}))
    return path


def documents(text: str) -> list:
    """Every JSON document in `text`, one after the other (one-line or indented)."""
    decoder, found, index = json.JSONDecoder(), [], 0
    while True:
        while index < len(text) and text[index].isspace():
            index += 1
        if index >= len(text):
            return found
        value, index = decoder.raw_decode(text, index)
        found.append(value)


def pasteable_blocks(kind: str, documents: list[Path] = DOCUMENTS) -> list[tuple[str, str]]:
    """(file, block) for each fenced block the documents mark `<!-- pasteable: KIND -->`,
    dedented; file relative to the checkout, for messages."""
    pattern = re.compile(r"^([ \t]*)<!-- pasteable: " + re.escape(kind) + r" -->\n\1```\w*\n(.*?)^\1```",
                         re.M | re.S)
    return [(str(path.relative_to(REPO)), textwrap.dedent(m.group(2)))
            for path in documents for m in pattern.finditer(path.read_text())]


# --- 1. relative paths are the caller's ------------------------------------------------------------


def test_call_reads_a_relative_config_from_the_callers_directory(tmp_path):
    state = tmp_path / "state"
    local_config(tmp_path / "conf" / "cpi.json", state)
    for spelling in ("conf/cpi.json", "./conf/cpi.json"):
        run = cpi("call", "--config", spelling, "has_disk", '"disk-none"', cwd=tmp_path)
        assert run.returncode == 0, run.stdout + run.stderr
        response = json.loads(run.stdout)
        assert response["error"] is None and response["result"] is False
    assert state.is_dir(), "the config's state_dir was not used: the config was not read"


def test_call_create_stemcell_reads_a_relative_image_path_from_the_callers_directory(tmp_path):
    state = tmp_path / "state"
    local_config(tmp_path / "cpi.json", state)
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "image").write_bytes(b"stemcell bytes")
    run = cpi("call", "--config", "cpi.json", "create_stemcell", '"images/image"', '{"name": "s", "version": "1"}',
              cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    cid = json.loads(run.stdout)["result"]
    assert [p.read_bytes() for p in (state / "stemcells" / cid).iterdir() if p.read_bytes() == b"stemcell bytes"]
    assert cpi("call", "--config", "cpi.json", "delete_stemcell", json.dumps(cid), cwd=tmp_path).returncode == 0


def test_call_with_a_missing_config_is_a_usage_error(tmp_path):
    run = cpi("call", "--config", "nosuch.json", "info", cwd=tmp_path)
    assert run.returncode == 2
    assert "nosuch.json" in run.stderr and "Traceback" not in run.stderr


def test_lifecycle_takes_a_relative_state_dir(tmp_path):
    run = cpi("lifecycle", "--state-dir", "demo", cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert (tmp_path / "demo" / "cpi.json").is_file() and (tmp_path / "demo" / "state").is_dir()
    assert "Left in" in run.stdout and "nothing" in run.stdout


# --- 2. an unknown cloud ---------------------------------------------------------------------------


def test_props_of_an_unknown_cloud_is_one_line_naming_the_clouds(tmp_path):
    run = cpi("props", "nosuch", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert "nosuch" in lines[0] and all(name in lines[0] for name in ("aws", "local", "openstack"))


# --- 3. the front page, the links, the pasteable examples --------------------------------------------


def test_readme_is_a_front_page():
    """At most 200 lines, opening with the two commands that work on a fresh machine."""
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES, (
        f"README.md has {len(text.splitlines())} lines: move a subject to docs/ and link it")
    first_block = re.search(r"^```\w*\n(.*?)^```", text, re.M | re.S).group(1)
    commands = [line.split("#")[0].strip() for line in first_block.splitlines() if line.strip()]
    assert commands == ["bin/demo", "bin/test"]
    assert text.index("bin/demo") < text.index("\n## ")


def _relative_links(path: Path) -> list[str]:
    """The targets of the Markdown links in `path` that name a file of the checkout: not in
    fenced blocks or inline code, not URLs, not anchors of the same page."""
    text = re.sub(r"^([ \t]*)```.*?^\1```", "", path.read_text(), flags=re.M | re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    targets = re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text)
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.I) and not t.startswith("#")]


def test_every_relative_link_leads_to_a_file():
    assert (DOCS / "README.md").is_file(), "docs/README.md (the index) is missing"
    broken = []
    for path in DOCUMENTS:
        for target in _relative_links(path):
            if not (path.parent / target.split("#", 1)[0]).exists():
                broken.append(f"{path.relative_to(REPO)}: {target}")
    assert not broken, "links to no file:\n" + "\n".join(broken)
    assert "docs/README.md" in _relative_links(README), "the README does not link the docs' index"


def test_the_indexes_list_every_document_and_every_cloud(tmp_path):
    """#32: docs/cloud-vsphere.md was in neither index. docs/README.md links every file of
    docs/; the README's documentation table links each cloud's guide and reference."""
    from cpi.clouds import BUILTIN

    indexed = {link.split("#", 1)[0] for link in _relative_links(DOCS / "README.md")}
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if p.name != "README.md" and p.name not in indexed]
    assert not missing, f"docs/README.md does not list {missing}"
    table = README.read_text().split("\n## Documentation", 1)[1]
    listed = set(re.findall(r"\]\((docs/[^)#]+)", table))
    for cloud in BUILTIN:
        assert {f"docs/cloud-{cloud}.md", f"docs/{cloud}.md"} <= listed, f"the README's docs table lacks {cloud}"


def test_link_check_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[ok](page.md) [gone](nosuch.md#x) [web](https://example.org) [here](#top)\n"
                    "`[code](nosuch-code.md)`\n```\n[block](nosuch-block.md)\n```\n")
    assert _relative_links(page) == ["page.md", "nosuch.md#x"]


def test_docs_mark_their_pasteable_examples():
    assert [name for name, _ in pasteable_blocks("sh")].count("README.md") >= 1
    plugins = {json.loads(block)["cloud"]["plugin"] for _, block in pasteable_blocks("cpi.json")}
    assert plugins >= {"local", "aws", "openstack", "vsphere"}


def test_shell_examples_run_as_pasted(tmp_path):
    """Pasted in the checkout, with only PATH and a HOME (the local cloud's default state)."""
    for name, block in pasteable_blocks("sh"):
        run = subprocess.run(["bash", "-e", "-c", block], cwd=REPO, capture_output=True, text=True, timeout=120,
                             env={**WIPED, "HOME": str(tmp_path)})
        assert run.returncode == 0, name + ":\n" + block + run.stderr
        responses = documents(run.stdout)
        assert len(responses) == len([line for line in block.splitlines() if line.strip()]), (name, run.stdout)
        for response in responses:
            assert response["error"] is None, (name, response)


def test_cpi_json_examples_are_valid_configs(tmp_path):
    """Each one, as it is, is a config bin/cpi accepts (info checks the config, offline)."""
    for index, (name, block) in enumerate(pasteable_blocks("cpi.json")):
        path = tmp_path / f"cpi-{index}.json"
        path.write_text(block)
        run = subprocess.run([str(BIN_CPI), str(path)], input='{"method": "info", "arguments": []}',
                             capture_output=True, text=True, env=WIPED, cwd="/", timeout=60)
        assert run.returncode == 0
        response = json.loads(run.stdout)
        assert response["error"] is None, (name, block, response["error"])


# --- 4. the interpreter search order ----------------------------------------------------------------


def _bin_cpi_order() -> list[str]:
    text = BIN_CPI.read_text()
    loop = re.search(r"^for py in (.*?); do$", text, re.M | re.S).group(1)
    words = shlex.split(loop.replace("\\\n", " "), posix=False)
    return [w.strip('"').replace("${CPI_PYTHON:-}", "$CPI_PYTHON").replace("$root/", "") for w in words]


def _documented_order() -> list[str]:
    text = " ".join((DOCS / "protocol.md").read_text().split())
    sentence = re.search(r"`bin/cpi` finds its interpreter relative to itself, the first that exists of: (.*?)\. "
                         r"With none", text).group(1)
    return re.findall(r"`([^`]*(?:python|PYTHON)[^`]*)`", sentence)


def test_documented_interpreter_order_is_bin_cpis():
    assert _bin_cpi_order() == [
        "$CPI_PYTHON",
        ".venv/bin/python",
        "venv/bin/python",
        "${BOSH_PACKAGES_DIR:-/var/vcap/packages}/cpi/venv/bin/python",
    ]
    assert _documented_order() == _bin_cpi_order()


def test_cpi_python_comes_first(tmp_path):
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\ncat >/dev/null\necho \'{"result": "fake", "error": null, "log": ""}\'\n')
    fake.chmod(0o755)
    run = subprocess.run([str(BIN_CPI)], input="{}", capture_output=True, text=True, timeout=60,
                         env={**WIPED, "CPI_PYTHON": str(fake)})
    assert json.loads(run.stdout)["result"] == "fake"


# --- 5. the release commands from any directory ----------------------------------------------------


def test_release_commands_find_the_checkout_from_any_directory(tmp_path):
    """vendor --no-wheels only reads and checks release.yml: the cheapest command that
    proves the checkout's release was found from a directory that holds none."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = cpi("release", "vendor", "--no-wheels", cwd=elsewhere)
    assert run.returncode == 0, run.stderr
    assert not (elsewhere / "blobs").exists()
    run = cpi("release", "build", "--help", cwd=elsewhere)
    assert run.returncode == 0 and "this checkout" in run.stdout and "examples:" in run.stdout
    if not (REPO / "blobs").exists():  # a validation-only build: the checkout's blobs are named
        run = cpi("release", "build", "--tarball", str(tmp_path / "x.tgz"), cwd=elsewhere)
        assert run.returncode == 1
        assert str(REPO / "blobs") in run.stderr and str(elsewhere) not in run.stderr


def test_release_build_takes_a_relative_release_dir(tmp_path):
    from tests.release.support import minimal_release

    minimal_release(tmp_path / "work" / "rel")
    run = cpi("release", "build", "--release-dir", "rel", "--out", "out", cwd=tmp_path / "work")
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "work" / "out" / "demo-1.2.3.tgz").is_file()


# --- 6. CPI_LIFECYCLE_*_CONFIG shapes -----------------------------------------------------------


def _testing_json_after(marker: str) -> dict:
    """The JSON example that follows `marker` in docs/testing.md (the real-cloud files)."""
    text = (DOCS / "testing.md").read_text()
    block = re.search(re.escape(marker) + r".*?```json\n(.*?)^\s*```", text, re.S | re.M).group(1)
    return json.loads(block)


def _documented_cpi_json(plugin: str) -> dict:
    """The pasteable cpi.json of `plugin` (docs/cloud-<plugin>.md's, for aws and openstack)."""
    for _, block in pasteable_blocks("cpi.json"):
        doc = json.loads(block)
        if doc["cloud"]["plugin"] == plugin:
            return doc
    raise AssertionError(f"no {plugin} cpi.json in the README or docs/")


AWS_LIFECYCLE = {"subnet_id": "subnet-1", "subnet_cidr": "10.0.16.0/24", "availability_zone": "eu-west-1a",
                 "ami_id": "ami-1"}


def test_aws_lifecycle_config_accepts_both_shapes(tmp_path):
    from tests.aws.real_target import LifecycleConfigError, load

    documented_cpi = _documented_cpi_json("aws")
    shapes = {
        "plain": {**documented_cpi, "lifecycle": AWS_LIFECYCLE},
        "own": {"cpi": documented_cpi, "lifecycle": AWS_LIFECYCLE},
        "documented": _testing_json_after("CPI_LIFECYCLE_AWS_CONFIG=/path/file.json"),
    }
    for name, doc in shapes.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc))
        cpi_config, lifecycle = load(path)
        assert cpi_config["cloud"]["plugin"] == "aws" and "lifecycle" not in cpi_config, name
        assert lifecycle["subnet_id"].startswith("subnet-"), name

    path = tmp_path / "documented-as-is.json"
    path.write_text(json.dumps(documented_cpi))
    with pytest.raises(LifecycleConfigError, match=r"lifecycle\.subnet_id, .*lifecycle\.ami_id missing"):
        load(path)
    path.write_text(json.dumps({"cloud": {"plugin": "openstack"}}))
    with pytest.raises(LifecycleConfigError, match=r"cloud\.plugin must be \"aws\""):
        load(path)
    path.write_text(json.dumps({"cloud": {"plugin": "aws", "properties": {"aws": {"region": "x"}}},
                                "lifecycle": AWS_LIFECYCLE}))
    with pytest.raises(LifecycleConfigError, match=r"access_key_id .*secret_access_key missing"):
        load(path)


OPENSTACK_LIFECYCLE = {"flavor": "m1.small", "image": {"id": "img-1"}, "network": {"id": "net-1"},
                       "subnet": {"cidr": "10.0.0.0/24", "gateway_ip": "10.0.0.1"},
                       "free_ip_range": {"start": "10.0.0.100", "end": "10.0.0.150"}}


def test_openstack_lifecycle_config_accepts_both_shapes(tmp_path):
    from tests.openstack.target import LifecycleConfigError, cpi_properties, load

    documented_cpi = _documented_cpi_json("openstack")
    own = {"auth_url": "https://keystone.example:5000/v3", "username": "bosh", "password": "pw",
           "project_name": "bosh", "user_domain_name": "Default", "project_domain_name": "Default",
           "region": "RegionOne", "interface": "public", **OPENSTACK_LIFECYCLE}
    shapes = {
        "plain": {**documented_cpi, "lifecycle": OPENSTACK_LIFECYCLE},
        "own": own,
        "documented": _testing_json_after("CPI_LIFECYCLE_OPENSTACK_CONFIG=/path/file.json"),
    }
    for name, doc in shapes.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc))
        env = load(path)
        assert env["network"]["id"] and env["free_ip_range"]["start"], name
        props = cpi_properties(env)
        assert props["auth_url"].startswith("https://keystone.example") and props["api_key"], name
        assert props["user_domain_name"] == "Default", name
        # what the lifecycle then writes is a config bin/cpi accepts
        config = tmp_path / f"{name}-cpi.json"
        config.write_text(json.dumps({"cloud": {"plugin": "openstack", "properties": {"openstack": props}}}))
        run = subprocess.run([str(BIN_CPI), str(config)], input='{"method": "info", "arguments": []}',
                             capture_output=True, text=True, env=WIPED, timeout=60)
        assert json.loads(run.stdout)["error"] is None, (name, run.stdout)

    path = tmp_path / "documented-as-is.json"
    path.write_text(json.dumps(documented_cpi))
    with pytest.raises(LifecycleConfigError, match=r"lifecycle\.flavor, lifecycle\.image\.id.* missing"):
        load(path)
    path.write_text(json.dumps({key: value for key, value in own.items() if key != "password"}))
    with pytest.raises(LifecycleConfigError, match=r"^\S+: password missing"):
        load(path)


# --- 7. --help ------------------------------------------------------------------------------


def test_top_level_help_reads_like_a_well_kept_cli(tmp_path):
    run = cpi("--help", cwd=tmp_path)
    assert run.returncode == 0
    text = run.stdout
    assert text.startswith("usage: cpi ")
    assert "BOSH" in text.split("\n\n")[1]  # a description first
    assert "try the CPI:" in text and "reference and release:" in text
    for command in ("lifecycle", "call", "props", "release"):
        line = re.search(rf"^  {command} +(\S.*)$", text, re.M)
        assert line, f"{command} is not listed with a one-line help"
    assert "positional arguments" not in text and "{" not in text.split("\n")[0]
    examples = text[text.index("examples:"):]
    assert examples.count("\n  cpi ") >= 3
    bare = cpi(cwd=tmp_path)
    assert bare.returncode == 2 and "COMMAND" in bare.stderr


@pytest.mark.parametrize("command", ["lifecycle", "call", "props", "release", "release build", "release vendor"])
def test_each_subcommand_help_has_examples(command, tmp_path):
    run = cpi(*command.split(), "--help", cwd=tmp_path)
    assert run.returncode == 0
    examples = run.stdout[run.stdout.index("examples:"):]
    assert re.search(rf"^  cpi {command}\b", examples, re.M), examples


def test_every_command_is_listed_once_in_a_group(tmp_path):
    """Commands that later modules register land in a group (or "other commands"), never
    left out of `cpi --help` and never twice."""
    wrong = cpi("no-such-command", cwd=tmp_path)
    assert wrong.returncode == 2
    named = wrong.stderr.split("choose from", 1)[1].strip().rstrip(")")
    choices = [name.strip().strip("'\"") for name in named.split(",")]
    listed = re.findall(r"^  ([a-z][a-z-]*)  +\S", cpi("--help", cwd=tmp_path).stdout.split("\noptions:")[0], re.M)
    assert sorted(listed) == sorted(choices) and len(set(listed)) == len(listed)


def test_a_long_listing_says_how_far_it_is_on_a_terminal_and_nothing_to_a_script(tmp_path):
    """#23: `cpi list` on a terminal shows "reading disks: 100 disks" while the cloud reads
    its listing (cpi.clouds.inventory.progress); piped, stderr stays empty."""
    from tests.support import terminal
    from tests.support.runner import Cpi

    config = tmp_path / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {
        "local": {"state_dir": str(tmp_path / "state")}}}}))
    cpi = Cpi(config)
    for _ in range(100):
        cpi("create_disk", 1, {}, None)
    argv = [*CPI, "list", "disks", "--config", str(config), "--json"]
    seen = terminal.run(argv, columns=120, cwd=tmp_path)
    assert seen.returncode == 0 and seen.screen.count('"cid": "disk-') == 100
    assert "reading disks: 100 disks" in seen.screen, seen.screen[-500:]
    piped = subprocess.run(argv, capture_output=True, cwd=tmp_path, timeout=120)
    assert piped.returncode == 0 and piped.stderr == b"" and len(json.loads(piped.stdout)) == 100


def test_no_help_prints_a_heading_twice_and_the_top_level_names_every_cloud(tmp_path):
    """#32: `cpi orphans --help` listed "common options" twice (its cloud's options, then
    -n), and `cpi --help` named no vsphere. Every help, each heading once; the top-level
    help and `cpi props --help` name every built-in cloud."""
    from cpi.cli.commands import COMMANDS
    from cpi.clouds import BUILTIN

    helps = [[], *([c.name] for c in COMMANDS), ["release", "build"], ["release", "vendor"]]
    for words in helps:
        run = cpi(*words, "--help", cwd=tmp_path)
        assert run.returncode == 0, (words, run.stderr)
        headings = re.findall(r"^(\S[^\n]*):$", run.stdout, re.M)
        assert len(headings) == len(set(headings)), (words, headings)
        if words in ([], ["props"]):
            text = " ".join(run.stdout.split())
            assert all(re.search(rf"\b{name}\b", text) for name in BUILTIN), (words, text)
