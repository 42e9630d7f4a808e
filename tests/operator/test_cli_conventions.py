"""`cpi` keeps the conventions of bosh and salt-cloud (#24), through the real `cpi`
process, piped and in an 80-column pseudo-terminal:

- tables: whole cells, never squeezed; piped, rows only and tab-separated (as `bosh vms |
  cat`); on a terminal, the title, headers and a count; `--column` picks; `--json` and
  `--yaml` before or after the command; values as JSON, times RFC 3339 with "Z";
- `avail --filter`;
- every bad input is one line on stderr and the right exit status, never a traceback; a
  read-only command never creates a mistyped state dir; a closed pipe exits 141 quietly;
- `CPI_CONFIG`, `cpi --version`, confirmations as bosh asks them (`Continue? [yN]`, `-n`).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support import suite, terminal
from tests.support.runner import DIRECTOR_ENV, ROOT, Cpi

CPI = [str(ROOT / ".venv" / "bin" / "python"), "-m", "cpi.cli"]
DIRECTOR = "director-conventions-1"
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    """A local cloud with a stemcell and two disks of DIRECTOR's, one with a long cid."""
    work = tmp_path_factory.mktemp("conventions")
    config = work / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {
        "local": {"state_dir": str(work / "state")}}}}))
    (work / "image").write_bytes(b"stemcell")
    cpi = Cpi(config, director_uuid=DIRECTOR)
    stemcell = cpi("create_stemcell", str(work / "image"), {"name": "s", "version": "1"})
    disks = [cpi("create_disk", 1, {}, None) for _ in range(2)]
    yield {"config": config, "work": work, "cpi": cpi, "stemcell": stemcell, "disks": disks}
    for disk_cid in disks:
        cpi("delete_disk", disk_cid)
    cpi("delete_stemcell", stemcell)
    suite.stop_vms(work / "state")


def run(*args: str, cwd: Path | None = None, env: dict | None = None, stdin: str | None = None):
    return subprocess.run([*CPI, *args], capture_output=True, text=True, cwd=cwd or ROOT, input=stdin,
                          env={**DIRECTOR_ENV, **(env or {})}, timeout=120)


def test_piped_a_table_is_its_rows_whole_and_tab_separated(cloud):
    piped = run("list", "disks", "--config", str(cloud["config"]))
    assert piped.returncode == 0 and piped.stderr == ""
    rows = piped.stdout.splitlines()
    assert len(rows) == 2  # no title, no header, no count: what cut and awk expect
    assert sorted(row.split("\t")[0].strip() for row in rows) == sorted(cloud["disks"])
    assert all(row.split("\t")[2].strip() == "persistent" for row in rows)  # the disk's role
    assert all(RFC3339.match(row.split("\t")[3].strip()) for row in rows)
    assert all(row.split("\t")[5].strip() == DIRECTOR for row in rows)


def test_in_80_columns_no_cell_is_squeezed(cloud):
    seen = terminal.run([*CPI, "list", "disks", "--config", str(cloud["config"])], columns=80, env=DIRECTOR_ENV)
    assert seen.returncode == 0, seen.screen
    lines = seen.lines
    lines = lines[lines.index("disks on the local cloud"):]
    assert re.match(r"^cid +state +role +created_at +age +director_uuid", lines[2])
    for disk_cid in cloud["disks"]:  # each cid whole, on one line, with its state beside it
        assert any(line.startswith(f"{disk_cid}  ") and "available" in line for line in lines), seen.screen
    assert [line for line in lines if line][-1] == "2 disks"


def test_columns_are_picked_in_the_order_given(cloud):
    piped = run("list", "disks", "--config", str(cloud["config"]), "--column", "director_uuid", "--column", "CID")
    assert piped.returncode == 0
    assert sorted(line.split("\t")[:2] for line in piped.stdout.splitlines()) == \
        sorted([[DIRECTOR.ljust(len(DIRECTOR)), d] for d in cloud["disks"]])
    bad = run("list", "disks", "--config", str(cloud["config"]), "--column", "size")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip() == ("cpi list: error: no column 'size'; the columns are: cid, state, role, created_at, "
                                  "age, director_uuid, agent_id, deployment, job, index")


@pytest.mark.parametrize("flag", ["--json", "--yaml"])
def test_data_holds_only_the_columns_asked(cloud, flag):
    """#32: `--json` printed every key whatever `--column` said. A column is a key, a key of
    the tags or details (as the table shows it), or a dotted path; null where a row lacks
    it, as the table's cell is empty."""
    config = str(cloud["config"])
    printed = run("list", "disks", "--config", config, flag, "--column", "cid", "--column", "director_uuid",
                  "--column", "deployment", "--column", "details.size_mib")
    assert printed.returncode == 0, printed.stderr
    assert sorted(yaml.safe_load(printed.stdout), key=lambda row: row["cid"]) == [
        {"cid": d, "director_uuid": DIRECTOR, "deployment": None, "details.size_mib": 1}
        for d in sorted(cloud["disks"])]
    shown = run(flag, "--column", "state", "show", "disk", cloud["disks"][0], "--config", config)
    assert shown.returncode == 0 and yaml.safe_load(shown.stdout) == {"state": "available"}


@pytest.mark.parametrize("where", ["before", "after"])
def test_json_and_yaml_are_global_options(cloud, where):
    def data(flag: str) -> subprocess.CompletedProcess:
        args = ["list", "stemcells", "--config", str(cloud["config"])]
        return run(*([flag, *args] if where == "before" else [*args, flag]))

    as_json, as_yaml = data("--json"), data("--yaml")
    assert as_json.returncode == 0 and as_yaml.returncode == 0
    assert json.loads(as_json.stdout) == yaml.safe_load(as_yaml.stdout)
    [stemcell] = json.loads(as_json.stdout)
    assert stemcell["cid"] == cloud["stemcell"] and RFC3339.match(stemcell["created_at"])


def test_show_prints_values_as_json_never_as_python(cloud):
    shown = run("show", "stemcell", cloud["stemcell"], "--config", str(cloud["config"]), "--tty")
    assert shown.returncode == 0
    rows = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in shown.stdout.splitlines()[3:] if "  " in line)
    assert rows["light"] == "false" and rows["cloud_properties"] == '{"name":"s","version":"1"}'
    assert RFC3339.match(rows["created_at"]) and "None" not in shown.stdout and "True" not in shown.stdout


def test_avail_filters_by_a_pattern(tmp_path):
    config = tmp_path / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {
        "local": {"state_dir": str(tmp_path / "state")}}}}))
    (tmp_path / "state").mkdir(mode=0o700)
    every = json.loads(run("avail", "zones", "--config", str(config), "--json").stdout)
    assert every
    name = every[0]["name"]
    picked = json.loads(run("avail", "zones", "--config", str(config), "--json", "--filter", name[:2] + "*").stdout)
    assert name in [z["name"] for z in picked]
    assert json.loads(run("avail", "zones", "--config", str(config), "--json", "--filter", "no-such-*").stdout) == []


def test_cpi_config_names_the_config_of_every_command(cloud):
    listed = run("list", "disks", "--json", env={"CPI_CONFIG": str(cloud["config"])})
    assert listed.returncode == 0 and {d["cid"] for d in json.loads(listed.stdout)} == set(cloud["disks"])
    called = run("call", "has_disk", json.dumps(cloud["disks"][0]), env={"CPI_CONFIG": str(cloud["config"])})
    assert called.returncode == 0 and json.loads(called.stdout)["result"] is True


def test_version_names_the_cpi_and_its_release():
    from cpi import __version__

    shown = run("--version")
    release = yaml.safe_load((ROOT / "release.yml").read_text())
    assert shown.returncode == 0
    assert shown.stdout.splitlines()[0] == f"cpi {__version__}"
    assert shown.stdout.splitlines()[1].startswith(f"release {release['name']} {release['version']} ")
    assert f"cpi release sbom [--table] dev_releases/{release['name']}-{release['version']}.tgz" in shown.stdout


@pytest.mark.parametrize("reader", ["true", "head -c 0"])
def test_a_closed_pipe_ends_quietly(cloud, reader):
    """The reader is gone before a byte is written (`| true`, `| head -c 0`): exit 141, as
    a Unix tool killed by SIGPIPE, and nothing on stderr."""
    pipeline = f"{' '.join(CPI)} list disks --yaml --config {cloud['config']} | {reader}; exit ${{PIPESTATUS[0]}}"
    proc = subprocess.run(pipeline, shell=True, executable="/bin/bash",  # noqa: S602 - the pipe is the point
                          capture_output=True, text=True, cwd=ROOT, env=DIRECTOR_ENV, timeout=120)
    assert proc.returncode == 141 and proc.stderr == ""


def _bad_inputs(cloud) -> list[tuple[list[str], int, str]]:
    work, config = cloud["work"], str(cloud["config"])
    (work / "a-file").write_text("")
    aws = work / "aws.json"
    aws.write_text(json.dumps({"cloud": {"plugin": "aws", "properties": {"aws": {
        "access_key_id": "a", "secret_access_key": "b", "region": "us-east-1", "default_key_name": "k",
        "default_security_groups": ["s"]}}}}))
    typo = work / "typo.json"
    typo.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {
        "local": {"state_dir": str(work / "stat")}}}}))
    cloud_config = work / "cloud-config.yml"
    cloud_config.write_text("vm_types:\n- name: small\n  cloud_properties: {}\n")
    return [
        (["list", "vms", "--config", str(work / "nope.json")], 1, "nope.json"),
        (["list", "vms", "--config", str(typo)], 1, "does not exist"),
        (["orphans", "--director-uuid", "d", "--known", str(work / "missing.json"), "--config", config], 1,
         "--known"),
        (["orphans", "--director-uuid", DIRECTOR, "--known", "-", "--config", config, "--delete"], 1,
         "without -n"),
        (["audit", "--file", "/nonexistent/audit.log"], 1, "no such file"),
        (["audit", "--config", config, "--since", "yesterday"], 2, "--since"),
        (["list", "disks", "--config", config, "--column", "nope"], 2, "no column"),
        (["list", "disks", "--config", config, "--json", "--yaml"], 2, "choose one"),
        (["show", "disk", "disk-nope", "--config", config], 1, "no disk disk-nope"),
        (["lifecycle", "--state-dir", str(work / "a-file")], 2, "not a directory"),
        (["certify", "--config", str(aws)], 2, "needs a stemcell"),
        (["call", "has_vm", "vm-1", "--config", config], 2, "not JSON"),
        (["plan", "has_vm", '"vm-1"', "--config", str(work / "nope.json")], 2, "no such file"),
        (["validate", str(work / "nope.yml"), "--config", config], 2, "cannot read"),
        (["props", "nosuch"], 2, "nosuch"),
    ]


def test_every_bad_input_is_one_line_and_an_exit_status(cloud):
    """Each bad input of each kind, through the real process: exactly one line on stderr,
    naming the command, the exit status that says which kind, nothing on stdout, and a
    mistyped state dir not created by a command that only reads."""
    for argv, status, words in _bad_inputs(cloud):
        proc = run(*argv, stdin="vm-1\n")
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == status, (argv, proc.returncode, proc.stderr)
        assert len(lines) == 1 and lines[0].startswith(f"cpi {argv[0]}: ") and words in lines[0], (argv, proc.stderr)
        assert proc.stdout == "" or argv[0] == "orphans", (argv, proc.stdout)
    online = run("validate", str(cloud["work"] / "cloud-config.yml"), "--online", "--json", "--config",
                 str(cloud["work"] / "typo.json"))
    assert online.returncode == 0 and "does not exist" in online.stdout and "nothing checked online" in online.stdout
    assert not (cloud["work"] / "stat").exists()


def test_a_deletion_is_confirmed_as_bosh_confirms_it(cloud, tmp_path):
    """`cpi orphans --delete` asks `Continue? [yN]:` on the terminal: n (or anything but
    y) deletes nothing and exits 1; y deletes; -n never asks."""
    cpi = cloud["cpi"]
    orphan = cpi("create_disk", 1, {}, None)
    known = tmp_path / "known.txt"
    known.write_text("\n".join([*cloud["disks"], cloud["stemcell"]]) + "\n")
    argv = [*CPI, "orphans", "--director-uuid", DIRECTOR, "--known", str(known), "--config", str(cloud["config"]),
            "--delete"]
    refused = terminal.run(argv, typed="n\n", answer_after="Continue? [yN]: ", env=DIRECTOR_ENV)
    assert refused.returncode == 1 and "cpi orphans: error: stopped: did not delete 1 resource" in refused.screen
    assert cpi("has_disk", orphan) is True
    agreed = terminal.run(argv, typed="y\n", answer_after="Continue? [yN]: ", env=DIRECTOR_ENV)
    assert agreed.returncode == 0 and f"deleted disk {orphan}" in agreed.screen, agreed.screen
    assert cpi("has_disk", orphan) is False
    again = cpi("create_disk", 1, {}, None)
    script = run(*argv[len(CPI):], "-n")
    assert script.returncode == 0 and f"deleted disk {again}" in script.stderr
    assert cpi("has_disk", again) is False
    assert all(cpi("has_disk", d) for d in cloud["disks"])



def test_the_demo_removes_its_temporary_directory(tmp_path):
    """`cpi lifecycle` (bin/demo) without --state-dir works in a temporary directory and
    removes it at the end: nothing of it is left under TMPDIR."""
    shown = run("lifecycle", env={"TMPDIR": str(tmp_path), "HOME": str(tmp_path / "home")})
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "Left in " in shown.stdout and ": nothing" in shown.stdout
    assert "Removed the temporary directory" in shown.stdout
    assert not list(tmp_path.glob("cpi-demo-*"))
