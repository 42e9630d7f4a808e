"""cpi.private: the rules every state and lock directory goes through on a shared machine."""

from __future__ import annotations

import errno
import os
import stat

import pytest

from cpi import private
from cpi.errors import CpiError
from cpi.private import NotPrivate, open_nofollow, private_dir, replace_file

WHAT = "cloud.properties.example.dir"
NOBODY = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make files owned by another uid")


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_missing_directories_are_created_0700(tmp_path):
    target = tmp_path / "a" / "b" / "c"
    assert private_dir(target, WHAT) == target
    for directory in (tmp_path / "a", tmp_path / "a" / "b", target):
        assert mode(directory) == 0o700, directory


def test_a_readable_directory_of_ours_is_tightened(tmp_path):
    target = tmp_path / "d"
    target.mkdir()
    target.chmod(0o755)
    private_dir(target, WHAT)
    assert mode(target) == 0o700


@pytest.mark.parametrize("bits", [0o770, 0o707, 0o777, 0o1777])
def test_a_directory_others_can_write_is_refused(tmp_path, bits):
    target = tmp_path / "d"
    target.mkdir()
    target.chmod(bits)
    with pytest.raises(NotPrivate, match=f"{WHAT}: .* writable by other users"):
        private_dir(target, WHAT)
    assert mode(target) == bits, "a refused directory is left as it was"


def test_a_symlink_is_refused_even_to_a_good_directory(tmp_path):
    good = tmp_path / "good"
    good.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(good)
    with pytest.raises(NotPrivate, match=f"{WHAT}: .*link is a symlink"):
        private_dir(tmp_path / "link", WHAT)


def test_a_file_is_not_a_directory(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(CpiError, match=f"{WHAT}: .* not a directory"):
        private_dir(tmp_path / "f", WHAT)


@pytest.mark.parametrize("path", ["relative/dir", ""])
def test_a_relative_path_is_refused(path):
    with pytest.raises(CpiError, match=f"{WHAT} must be an absolute path"):
        private_dir(path, WHAT)


def test_nothing_is_created_below_a_parent_others_can_write(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: anyone could rename what we make in there
    with pytest.raises(NotPrivate, match=r"writable by other users .* not sticky"):
        private_dir(shared / "x" / "y", WHAT)
    assert list(shared.iterdir()) == []


def test_a_sticky_shared_parent_is_fine(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp: others cannot rename or remove what is ours
    assert mode(private_dir(shared / "mine", WHAT)) == 0o700


def test_a_parent_reached_through_our_own_symlink_is_fine(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    private_dir(tmp_path / "alias" / "state", WHAT)
    assert mode(real / "state") == 0o700


@root_only
def test_a_directory_owned_by_another_user_is_refused(tmp_path):
    target = tmp_path / "d"
    target.mkdir(mode=0o700)
    os.chown(target, NOBODY, NOBODY)
    with pytest.raises(NotPrivate, match=f"{WHAT}: .* owned by uid {NOBODY}"):
        private_dir(target, WHAT)


@root_only
def test_a_parent_owned_by_another_user_is_refused(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(NotPrivate, match=f"owned by uid {NOBODY}"):
        private_dir(theirs / "state", WHAT)
    assert list(theirs.iterdir()) == [], "nothing is created below someone else's directory"


@root_only
def test_a_symlink_on_the_way_made_by_another_user_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    os.lchown(link, NOBODY, NOBODY)
    with pytest.raises(NotPrivate, match=f"link is a symlink owned by uid {NOBODY}"):
        private_dir(link / "state", WHAT)
    assert list(real.iterdir()) == []


@root_only
def test_a_parent_slipped_in_while_we_create_is_caught(tmp_path, monkeypatch):
    """The race on a missing parent in a sticky dir: the check before creating passes, another
    user makes the parent first; the check after creating must refuse."""
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    real_mkdir = os.mkdir

    def mkdir(path, mode=0o777, **kw):
        if str(path) == str(sticky / "a"):
            real_mkdir(path, 0o777)
            os.chown(path, NOBODY, NOBODY)
            raise FileExistsError(errno.EEXIST, "File exists", str(path))
        return real_mkdir(path, mode, **kw)

    monkeypatch.setattr(private.os, "mkdir", mkdir)
    with pytest.raises(NotPrivate, match=f"owned by uid {NOBODY}"):
        private_dir(sticky / "a" / "b", WHAT)


def test_open_nofollow_refuses_a_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    (tmp_path / "link").symlink_to(victim)
    with pytest.raises(OSError) as caught:
        open_nofollow(tmp_path / "link", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    assert caught.value.errno == errno.ELOOP
    assert victim.read_text() == "untouched"


def test_replace_file_replaces_a_link_without_writing_through_it(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    (tmp_path / "state").symlink_to(victim)
    replace_file(tmp_path / "state", b"new")
    assert victim.read_text() == "untouched"
    assert not (tmp_path / "state").is_symlink() and (tmp_path / "state").read_bytes() == b"new"
    assert mode(tmp_path / "state") == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state", "victim"], "no temporary file left"


def test_cache_dir_is_in_the_home_and_names_the_setting_without_one(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert private.cache_dir("throttle", WHAT) == tmp_path / ".cache" / "bosh-cpi" / "throttle"

    def no_home():
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(private.Path, "home", staticmethod(no_home))
    with pytest.raises(CpiError, match=f"{WHAT} is not set .* no home directory"):
        private.cache_dir("throttle", WHAT)


def test_replace_file_reuses_what_a_killed_writer_left(tmp_path):
    """A writer killed between writing and renaming leaves its temporary file; the next
    process with that pid reuses the name instead of adding one more."""
    import threading

    left = tmp_path / f".state.{os.getpid()}-{threading.get_ident()}.tmp"
    left.write_text("half")
    replace_file(tmp_path / "state", b"whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]
    assert (tmp_path / "state").read_bytes() == b"whole"
