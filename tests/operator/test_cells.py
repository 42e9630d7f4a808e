"""Untrusted text never reaches a terminal raw (#33, point 3), through the real `cpi`
process on the local cloud: a VM whose tags (set_vm_metadata through bin/cpi) and an audit
trail whose request_id carry ESC, BEL, NUL, U+202E, a newline with a forged row, a TAB and
rich markup.

- piped, `cpi list vms`, `show` and `audit` print one row per resource and none of those
  characters, each written as its escape;
- on a terminal, nothing but the terminal's own styling sequences: with those taken out,
  no control or bidi character is left, and the markup shows as typed;
- `--json` still gives every value back exactly.
"""

from __future__ import annotations

import json
import re
import unicodedata

import pytest

from tests.operator.test_cli_conventions import CPI, cloud, run  # noqa: F401 - the fixture
from tests.support import terminal
from tests.support.runner import DIRECTOR_ENV, ROOT

#: ESC driving the terminal (a colour, a full reset), BEL, NUL, DEL, a C1 CSI, U+202E.
EVIL = "web\x1b[31mred\x1bc\x07\x00\x7f\x9b\u202eevil"
FORGED = "cf\nvm-00000000-forged\tstopped"
MARKUP = "[bold red]x[/] [link=https://example.invalid]y[/link]"
REQUEST = "cpi-1\nforged\t\x1b]0;title\x07\u2066"
#: The terminal's own sequences (SGR colours, cursor moves, a spinner's redraws): all an
#: escape may start on a screen.
STYLING = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
HIDDEN = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def hidden(text: str, allowed: str = "\n") -> list[str]:
    return [c for c in text if c not in allowed and unicodedata.category(c) in HIDDEN]


@pytest.fixture(scope="module")
def tagged(cloud):  # noqa: F811 - the conventions' local cloud, with its stemcell
    """A VM tagged with every hostile value, its tagging a line of the audit trail."""
    vm, _ = cloud["cpi"]("create_vm", "agent-cells", cloud["stemcell"], {}, {}, [], {})
    tags = {"deployment": FORGED, "job": EVIL, "index": MARKUP}
    cloud["cpi"]("set_vm_metadata", vm, tags, context={"request_id": REQUEST})
    yield {**cloud, "vm": vm, "tags": tags}
    cloud["cpi"]("delete_vm", vm)


COMMANDS = {
    "list": lambda c: ("list", "vms", "--config", str(c["config"])),
    "show": lambda c: ("show", "vm", c["vm"], "--config", str(c["config"])),
    "audit": lambda c: ("audit", "--config", str(c["config"]), "--action", "tag"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_piped_each_resource_is_one_row_and_no_character_is_raw(tagged, command):
    piped = run(*COMMANDS[command](tagged))
    assert piped.returncode == 0, piped.stderr
    rows = piped.stdout.splitlines()
    cells = ["\t".join(c.strip() for c in row.split("\t")).rstrip("\t") for row in rows]
    assert not hidden(piped.stdout, allowed="\n\t"), repr(piped.stdout)
    if command == "show":  # one row per field: the tags' rows as the escapes show them
        assert "tags.deployment\tcf\\nvm-00000000-forged\\tstopped" in cells
        assert "tags.job\tweb\\x1b[31mred\\x1bc\\x07\\x00\\x7f\\x9b\\u202eevil" in cells
        assert f"tags.index\t{MARKUP}" in cells
        return
    assert len(rows) == 1, rows  # one VM, one line of the trail: no forged row
    row = cells[0].split("\t")
    if command == "list":  # cid, state, created_at, age, director_uuid, agent_id, deployment, job, index
        assert row[0] == tagged["vm"] and row[5] == "agent-cells"
        assert row[6:] == ["cf\\nvm-00000000-forged\\tstopped", "web\\x1b[31mred\\x1bc\\x07\\x00\\x7f\\x9b\\u202eevil",
                           MARKUP]
    else:  # time, request, method, ...
        assert row[1:3] == ["cpi-1\\nforged\\t\\x1b]0;title\\x07\\u2066", "set_vm_metadata"]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_on_a_terminal_only_the_terminals_own_styling_is_raw(tagged, command):
    seen = terminal.run([*CPI, *COMMANDS[command](tagged)], columns=400, env=DIRECTOR_ENV, cwd=ROOT)
    assert seen.returncode == 0, seen.screen
    screen = STYLING.sub("", seen.screen)
    assert not hidden(screen, allowed="\n\r"), repr(screen)
    if command == "audit":
        assert "cpi-1\\nforged\\t\\x1b]0;title\\x07\\u2066" in screen
    else:
        assert "web\\x1b[31mred\\x1bc\\x07\\x00\\x7f\\x9b\\u202eevil" in screen
        assert MARKUP in screen  # shown as typed, never taken for markup


def test_json_gives_every_value_back_exactly(tagged):
    listed = run("list", "vms", "--config", str(tagged["config"]), "--json")
    shown = run("show", "vm", tagged["vm"], "--config", str(tagged["config"]), "--json")
    trail = run("audit", "--config", str(tagged["config"]), "--action", "tag", "--json")
    assert listed.returncode == shown.returncode == trail.returncode == 0, listed.stderr + shown.stderr
    [vm] = json.loads(listed.stdout)
    assert {k: vm["tags"][k] for k in tagged["tags"]} == tagged["tags"]
    assert {k: json.loads(shown.stdout)["tags"][k] for k in tagged["tags"]} == tagged["tags"]
    [line] = [json.loads(line) for line in trail.stdout.splitlines()]
    assert line["request_id"] == REQUEST


def test_yaml_gives_every_value_back_and_shows_no_bidi_character_raw(tagged):
    """PyYAML writes U+202E and U+2066 as they are when asked for readable Unicode: a document
    holding one is written escaped throughout, and still reads back to the same values."""
    import yaml

    listed = run("list", "vms", "--config", str(tagged["config"]), "--yaml")
    trail = run("audit", "--config", str(tagged["config"]), "--action", "tag", "--yaml")
    assert listed.returncode == trail.returncode == 0, listed.stderr + trail.stderr
    for out in (listed.stdout, trail.stdout):
        assert not hidden(out), [hex(ord(c)) for c in hidden(out)]
    [vm] = yaml.safe_load(listed.stdout)
    assert {k: vm["tags"][k] for k in tagged["tags"]} == tagged["tags"]
    [line] = yaml.safe_load(trail.stdout)
    assert line["request_id"] == REQUEST


def test_an_error_echoing_a_cid_is_one_escaped_line(tagged):
    """Piped, the error line; on a terminal, the spinner naming the cid too."""
    argv = ("show", "vm", "vm-\x1b[2J\x1bc\nforged\u202e", "--config", str(tagged["config"]))
    missing = run(*argv)
    assert missing.returncode == 1
    assert missing.stderr == "cpi show: error: no vm vm-\\x1b[2J\\x1bc\\nforged\\u202e on the local cloud\n"
    seen = terminal.run([*CPI, *argv], columns=400, env=DIRECTOR_ENV, cwd=ROOT)
    assert seen.returncode == 1 and "reading vm vm-\\x1b[2J" in seen.screen, repr(seen.screen)
    assert not hidden(STYLING.sub("", seen.screen), allowed="\n\r"), repr(seen.screen)


def test_a_plan_shows_the_tags_it_would_set_escaped(tagged):
    """`cpi plan` (rich on a terminal, plain piped) prints the values a call would set."""
    argv = ("plan", "set_vm_metadata", json.dumps(tagged["vm"]), json.dumps({"job": EVIL + "\n1. forged step"}),
            "--config", str(tagged["config"]))
    piped = run(*argv)
    assert piped.returncode == 0, piped.stderr
    assert not hidden(piped.stdout), repr(piped.stdout)
    assert "\\x1bc\\x07\\x00\\x7f\\x9b\\u202eevil\\n1. forged step" in piped.stdout
    seen = terminal.run([*CPI, *argv], columns=400, env=DIRECTOR_ENV, cwd=ROOT)
    assert seen.returncode == 0 and not hidden(STYLING.sub("", seen.screen), allowed="\n\r"), repr(seen.screen)


def test_a_cloud_error_through_call_is_one_escaped_line(tagged):
    """bin/cpi's own message names the cid (its ESC as \\u001b, its U+202E as it is)."""
    failed = run("call", "reboot_vm", json.dumps("vm-\u202e\x1b[2J"), "--config", str(tagged["config"]))
    assert failed.returncode == 1
    [line] = [line for line in failed.stderr.splitlines() if line.startswith("cpi call: error:")]
    assert "VMNotFound" in line and "\\u202e" in line and not hidden(failed.stderr), repr(failed.stderr)
