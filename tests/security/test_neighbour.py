"""A hostile neighbour: another local user (uid `nobody`) makes the paths a root CPI would
use before it runs, and fills them with symlinks to a victim file (and to files that do not
exist yet). Then root runs bin/cpi as the director does. Nothing outside may be touched: the
victim keeps its bytes, nothing is created through a link, nothing in the neighbour's
directories changes; the call either fails with a CpiError naming the setting that points
there, or uses a private directory of its own.

The calls are the cheapest that reach each directory before any request leaves: attach_disk
on AWS takes the VM's lock, then the shared backoff's turn, before its first request (to an
endpoint nobody listens on); any OpenStack call reads the kept token before authenticating.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from cpi.backoff import endpoint_key
from tests.support.runner import DIRECTOR_ENV, Cpi

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the CPI under attack runs as root, "
                                "and the neighbour is another uid (nobody) made with setuid")

REGION = "us-east-1"
#: An endpoint nobody listens on, with a password in it (it must reach no file name).
ENDPOINT = "http://bosh:hunter2-in-url@127.0.0.1:9"
VM_CID = "i-0123456789abcdef0"
DISK_CID = "vol-0123456789abcdef0"


def neighbour() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody' to play the neighbour")


def as_neighbour(script: str, **env: str) -> None:
    """Run a shell script as the neighbour (uid and gid of nobody, no supplementary groups)."""
    who = neighbour()

    def drop() -> None:
        os.setgroups([])
        os.setgid(who.pw_gid)
        os.setuid(who.pw_uid)

    subprocess.run(["sh", "-euc", script], preexec_fn=drop, check=True, env={**DIRECTOR_ENV, **env},
                   cwd="/", timeout=30)


@pytest.fixture
def world():
    """A shared sticky dir (as /tmp) the neighbour can write in, a victim file of root's,
    and a home of root's for the CPI (the director gives it no HOME: the password database's
    home then; here a fresh one, so the test never writes into the real ~root). Made in the
    system temp dir, as the neighbour can reach neither pytest's private tmp_path nor the
    run's own TMPDIR (tests/support/suite.py); removed at the end."""
    base = Path(tempfile.mkdtemp(prefix="cpi-neighbour-", dir="/tmp"))
    base.chmod(0o755)
    shared = base / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    victim = base / "victim"
    victim.write_text("root's file\n")
    victim.chmod(0o644)
    home = base / "root-home"
    home.mkdir(mode=0o700)
    yield {"base": base, "shared": shared, "victim": victim, "home": home,
           "created": base / "created-through-a-link"}
    shutil.rmtree(base)


def plant(directory: Path, names: list[str], world: dict) -> None:
    """The neighbour makes `directory` (mode 0777) with a link for each name: half to the
    victim, half to a file that does not exist yet."""
    links = []
    for index, name in enumerate(names):
        target = world["victim"] if index % 2 == 0 else world["created"]
        links.append(f"ln -s '{target}' '{directory}/{name}'")
    as_neighbour(f"mkdir -p '{directory}'; chmod 0777 '{directory}'; " + "; ".join(links))


def snapshot(directory: Path) -> dict[str, tuple[int, str]]:
    return {entry.name: (entry.lstat().st_mode, os.readlink(entry) if entry.is_symlink() else "")
            for entry in directory.iterdir()}


def assert_untouched(world: dict, planted: dict[Path, dict]) -> None:
    assert world["victim"].read_text() == "root's file\n", "the victim file was written through a link"
    assert stat.S_IMODE(world["victim"].stat().st_mode) == 0o644 and world["victim"].stat().st_uid == 0
    assert not os.path.lexists(world["created"]), "a file was created through a link"
    for directory, before in planted.items():
        assert snapshot(directory) == before, f"the CPI changed the neighbour's {directory}"


def key_names(key: str) -> list[str]:
    """Names the throttle state of `key` had (the old scheme: the key itself) and has now."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    old = "".join(c if c.isalnum() or c in "_.-" else "_" for c in key)
    return [f"{old}.json", f"{old}.lock", f"{digest}.json", f"{digest}.lock"]


def aws_config(path: Path, **extra) -> Path:
    throttle = extra.pop("throttle", None)
    aws = {"region": REGION, "ec2_endpoint": ENDPOINT, "credentials_source": "static",
           "access_key_id": "AKIAEXAMPLEEXAMPLE", "secret_access_key": "secret-key-example",
           "default_key_name": "bosh", "default_security_groups": ["bosh"],
           "max_retries": 0, "retry_budget_seconds": 1, "volume_wait_timeout": 5, **extra}
    properties = {"aws": aws, "agent": {"mbus": "nats://nats:nats-pw@10.0.0.6:4222"}}
    if throttle:
        properties["throttle"] = throttle
    path.write_text(json.dumps({"cloud": {"plugin": "aws", "properties": properties}}))
    return path


def cpi(config: Path, world: dict) -> Cpi:
    return Cpi(config, env={**DIRECTOR_ENV, "HOME": str(world["home"])})


def test_the_old_temp_paths_planted_full_of_links_are_not_used(world):
    """The neighbour makes what used to be the root CPI's throttle and AWS lock directories
    (fixed names under the temp dir) and links every file name in them; the CPI keeps its
    state in root's own ~/.cache instead, and no endpoint password reaches a file name."""
    shared = world["shared"]
    key = f"aws-ec2-{REGION}-{endpoint_key(ENDPOINT)}"
    legacy_key = f"aws-ec2-{REGION}-bosh:hunter2-in-url@127.0.0.1:9"
    throttle_dir = shared / "bosh-cpi-0" / "throttle"
    lock_dir = shared / "bosh-cpi-aws-0"
    plant(throttle_dir, key_names(key) + key_names(legacy_key), world)
    plant(lock_dir, [f"{VM_CID}.lock", f"{VM_CID}", "salt"], world)
    planted = {throttle_dir: snapshot(throttle_dir), lock_dir: snapshot(lock_dir)}

    env = {**DIRECTOR_ENV, "HOME": str(world["home"]), "TMPDIR": str(shared)}
    response = Cpi(aws_config(world["base"] / "cpi.json"), env=env).call("attach_disk", VM_CID, DISK_CID)
    assert response.error is not None and response.error["type"] == "Bosh::Clouds::CloudError", response.doc

    assert_untouched(world, planted)
    cache = world["home"] / ".cache" / "bosh-cpi"
    for used in (cache / "throttle", cache / "aws-locks"):
        assert used.is_dir() and stat.S_IMODE(used.stat().st_mode) == 0o700 and used.stat().st_uid == 0, used
    files = list((cache / "throttle").iterdir())
    assert files, "the shared backoff was not reached: the test no longer covers it"
    for path in files:
        assert "hunter2" not in path.name and "hunter2" not in path.read_text(), path
    # (the aws-locks directory above proves the lock was taken: its file goes with the lock)
    assert "hunter2" not in response.raw and "hunter2" not in response.stderr
    assert "@127.0.0.1" not in response.error["message"], "the endpoint's user info is shown (if masked)"


@pytest.mark.parametrize("setting", ["throttle.state_dir", "aws.lock_dir"])
def test_a_setting_pointing_into_the_neighbours_directory_fails_clearly(world, setting):
    """An operator's setting names a directory the neighbour owns (or made first, in a
    shared temp dir): the call fails with a CpiError naming the setting, and neither the
    directory nor anything its links point at is touched."""
    theirs = world["shared"] / "cpi-state"
    key = f"aws-ec2-{REGION}-{endpoint_key(ENDPOINT)}"
    plant(theirs, [*key_names(key), f"{VM_CID}.lock"], world)
    planted = {theirs: snapshot(theirs)}
    extra: dict = {}
    if setting == "throttle.state_dir":
        extra["throttle"] = {"state_dir": str(theirs)}
    else:
        extra["lock_dir"] = str(theirs)

    response = cpi(aws_config(world["base"] / "cpi.json", **extra), world).call("attach_disk", VM_CID, DISK_CID)
    error = response.error
    assert error is not None and error["type"] == "Bosh::Clouds::CpiError", response.doc
    assert f"cloud.properties.{setting}" in error["message"] and str(theirs) in error["message"], error
    assert_untouched(world, planted)


@pytest.mark.parametrize("how", ["owned by the neighbour", "a link the neighbour made"])
def test_a_state_dir_below_the_neighbours_directory_fails_clearly(world, how):
    """A setting whose directory does not exist yet, below one the neighbour controls (or
    reached through the neighbour's symlink): nothing is created there."""
    theirs = world["shared"] / "parent"
    as_neighbour(f"mkdir -m 0755 '{theirs}'")
    if how == "a link the neighbour made":
        mine = world["base"] / "mine"
        mine.mkdir(mode=0o755)
        as_neighbour(f"ln -s '{mine}' '{world['shared']}/alias'")
        state_dir, watched = world["shared"] / "alias" / "throttle", mine
    else:
        state_dir, watched = theirs / "throttle", theirs
    response = cpi(aws_config(world["base"] / "cpi.json", throttle={"state_dir": str(state_dir)}), world).call(
        "attach_disk", VM_CID, DISK_CID)
    error = response.error
    assert error is not None and error["type"] == "Bosh::Clouds::CpiError", response.doc
    assert "cloud.properties.throttle.state_dir" in error["message"] and "uid" in error["message"], error
    assert list(watched.iterdir()) == []


def test_openstack_token_cache_in_the_neighbours_directory_fails_clearly(world):
    theirs = world["shared"] / "tokens"
    plant(theirs, ["salt", "0" * 40 + ".json"], world)
    planted = {theirs: snapshot(theirs)}
    config = world["base"] / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "openstack", "properties": {
        "openstack": {"auth_url": "http://bosh:hunter2-in-url@127.0.0.1:9/v3", "username": "bosh",
                      "api_key": "api-key-example", "project": "bosh", "domain": "Default",
                      "token_cache_dir": str(theirs), "max_retries": 0, "retry_budget_seconds": 1},
        "agent": {"mbus": "nats://nats:nats-pw@10.0.0.6:4222"}}}}))
    response = cpi(config, world).call("has_vm", "0b1c2d3e-0000-4000-8000-000000000000")
    error = response.error
    assert error is not None and error["type"] == "Bosh::Clouds::CpiError", response.doc
    assert "cloud.properties.openstack.token_cache_dir" in error["message"], error
    assert_untouched(world, planted)
    assert "hunter2" not in response.raw and "hunter2" not in response.stderr
    assert "@127.0.0.1" not in response.error["message"], "the endpoint's user info is shown (if masked)"
