"""A property-based wire fuzzer: bin/cpi as the director runs it, fed requests of every
JSON type and shape, raw bytes, hostile cids, huge and deep values.

For every input: exit 0, exactly one strictly valid JSON response (no NaN), an answer in
bounded time, nothing written outside the state dir, and nothing deleted that the request
did not name (sentinel resources of every kind stand by and are checked after each call).

CI runs a short, derandomized profile; `CPI_FUZZ=long` runs thousands of random examples
(`CPI_FUZZ_EXAMPLES=N` sets the count).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpi import strict_json
from cpi.api import METHODS
from tests.support.runner import BIN_CPI, DIRECTOR_ENV, check_envelope

_LONG = os.environ.get("CPI_FUZZ") == "long"
_EXAMPLES = int(os.environ.get("CPI_FUZZ_EXAMPLES", "2000" if _LONG else "25"))
FUZZ = settings(
    max_examples=_EXAMPLES,
    deadline=None,
    derandomize=not _LONG,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
#: Generous: a call normally answers in a fraction of a second; a hang or a quadratic
#: blow-up on a large value runs far past this.
CALL_TIMEOUT = 60


class World:
    """A local cloud with one resource of each kind standing by, in a directory of its own."""

    def __init__(self, root: Path):
        self.root = root
        self.state = root / "state"
        self.cwd = root / "cwd"
        self.cwd.mkdir()
        self.config = root / "cpi.json"
        self.config.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {
            "local": {"state_dir": str(self.state), "agent_boot_timeout": 5, "lock_timeout": 5},
            "agent": {"mbus": "nats://nats:fuzz-mbus-pw@127.0.0.1:4222"}}}}))
        self.image = root / "image"
        self.image.write_bytes(b"stemcell image")
        self.sentinels: dict[str, str] = {}
        self.ensure()

    def call(self, method: str, *arguments: Any) -> dict:
        request = {"method": method, "arguments": list(arguments), "context": {"director_uuid": "fuzz"},
                   "api_version": 2}
        return run(json.dumps(request).encode(), self)

    def ensure(self) -> None:
        """(Re)make the sentinels a previous example named and deleted."""
        if not self.exists("stemcell"):
            self.sentinels["stemcell"] = self.call("create_stemcell", str(self.image), {})["result"]
        if not self.exists("vm"):
            self.sentinels["vm"] = self.call("create_vm", "agent-sentinel", self.sentinels["stemcell"], {},
                                             {"n": {"type": "dynamic"}}, [], {})["result"][0]
        if not self.exists("disk"):
            self.sentinels["disk"] = self.call("create_disk", 16, {}, None)["result"]
        if not self.exists("snapshot"):
            self.sentinels["snapshot"] = self.call("snapshot_disk", self.sentinels["disk"], {})["result"]

    def exists(self, kind: str) -> bool:
        cid = self.sentinels.get(kind)
        if cid is None:
            return False
        directory = {"stemcell": "stemcells", "vm": "vms", "disk": "disks", "snapshot": "snapshots"}[kind]
        return (self.state / directory / cid / f"{kind}.json").exists()

    def cleanup(self) -> None:
        """Stop every VM process the fuzzer made (the sentinel and any it created)."""
        for record in (self.state / "vms").glob("vm-*/vm.json"):
            self.call("delete_vm", record.parent.name)


def run(stdin: bytes, world: World) -> dict:
    proc = subprocess.run([str(BIN_CPI), str(world.config)], input=stdin, capture_output=True, env=DIRECTOR_ENV,
                          cwd=world.cwd, timeout=CALL_TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.endswith(b"\n") and proc.stdout.count(b"\n") == 1, proc.stdout[:500]
    doc = strict_json.loads(proc.stdout, "the response")  # one document, no NaN, UTF-8
    check_envelope(doc)
    assert "Traceback" not in (doc["error"] or {}).get("message", "")
    return doc


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    made = World(tmp_path_factory.mktemp("fuzz"))
    yield made
    made.cleanup()


def check_after(world: World, stdin: bytes) -> None:
    assert not any(world.cwd.iterdir()), "the CPI wrote into its working directory"
    assert sorted(p.name for p in world.root.iterdir()) == ["cpi.json", "cwd", "image", "state"]
    for kind, cid in world.sentinels.items():
        if cid.encode() not in stdin:
            assert world.exists(kind), f"the {kind} {cid} was deleted by a request that did not name it"
    world.ensure()


# ---------------------------------------------------------------- strategies

HOSTILE = [
    "", ".", "..", "../../etc/passwd", "/etc/shadow", "vm-../../x", "disk-/../..", "disk-\x00", "sc-\n",
    "snap-*", "vm-" + "a" * 300, "\u202e", "\udc80", "%2e%2e%2f", "~root", "$(touch /tmp/pwned)", "`id`",
    "vm-00000000-0000-0000-0000-000000000000", "i-0123456789abcdef0", "https://u:p@h:1/x",
]


@st.composite
def cids(draw, world: World):
    choice = draw(st.integers(0, 9))
    if choice < 3:
        return draw(st.sampled_from(sorted(world.sentinels.values())))
    if choice < 6:
        return draw(st.sampled_from(HOSTILE))
    if choice < 8:
        return draw(st.sampled_from(["vm-", "disk-", "sc-", "snap-"])) + draw(st.text(max_size=40))
    return draw(st.text(max_size=300))


def big_strings():
    return st.builds(lambda ch, n: ch * n, st.characters(), st.sampled_from([1_000, 70_000, 300_000]))


leaves = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=50), st.sampled_from(HOSTILE),
)
json_values = st.recursive(
    leaves, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=20), kids, max_size=4),
    max_leaves=25,
)


def deep(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


@st.composite
def requests(draw, world: World) -> dict:
    method = draw(st.one_of(st.sampled_from(sorted(METHODS)), st.text(max_size=30)))
    argument = st.one_of(
        cids(world), json_values, big_strings(), st.integers(min_value=-(2**40), max_value=2**40),
        st.builds(deep, st.sampled_from([10, 63, 65, 300])),
        st.fixed_dictionaries({"n": st.fixed_dictionaries({
            "type": st.sampled_from(["manual", "dynamic", "vip"]),
            "ip": st.sampled_from(["10.0.0.9", "fd00::5", "FD00:0:0:0:0:0:0:5", "fe80::1%eth0", "300.1.1.1"]),
        })}),
    )
    request: dict[str, Any] = {"method": method, "arguments": draw(st.lists(argument, max_size=7))}
    if draw(st.booleans()):
        request["context"] = draw(st.one_of(
            st.dictionaries(st.text(max_size=15), json_values, max_size=4),
            st.fixed_dictionaries({"state_dir": st.just(str(world.root / "elsewhere")),
                                   "agent_command": st.just(["/bin/sh", "-c", f"touch {world.cwd}/pwned"]),
                                   "lock_timeout": json_values}),
        ))
    if draw(st.booleans()):
        request["api_version"] = draw(st.one_of(st.sampled_from([1, 2, 3, 0, -1, 99, 2**64]), json_values))
    return request


@st.composite
def raw_inputs(draw, world: World) -> bytes:
    """Bytes that are not (quite) a valid request."""
    valid = json.dumps(draw(requests(world))).encode()
    kind = draw(st.integers(0, 6))
    if kind == 0:
        return draw(st.binary(max_size=300))
    if kind == 1:
        return valid[: draw(st.integers(0, len(valid)))]
    if kind == 2:
        return valid + b" " + valid
    if kind == 3:
        at = draw(st.integers(0, len(valid)))
        bad = draw(st.sampled_from([b"NaN", b"-Infinity", b"1e999", b"\xff\xfe", b"\\ud800", b"\x00"]))
        return valid[:at] + bad + valid[at:]
    if kind == 4:
        return b'{"method": "has_vm", "arguments": [' + b"[" * 200_000 + b"]" * 200_000 + b"]}"
    if kind == 5:
        return valid.replace(b"}", b', "arguments": [' + b"9" * 5000 + b"]}", 1)
    return b"\xef\xbb\xbf" + valid  # a byte-order mark


# ---------------------------------------------------------------- the properties


@pytest.mark.slow
def test_every_request_gets_one_response_and_harms_nothing_unnamed(world):
    @FUZZ
    @given(request=requests(world))
    def check(request):
        stdin = json.dumps(request).encode()
        run(stdin, world)
        check_after(world, stdin)

    check()


@pytest.mark.slow
def test_every_byte_string_gets_one_response(world):
    @FUZZ
    @given(stdin=raw_inputs(world))
    def check(stdin):
        doc = run(stdin, world)
        if doc["error"] is None:
            json.loads(stdin.decode("utf-8-sig"))  # only a valid request may succeed
        check_after(world, stdin)

    check()
