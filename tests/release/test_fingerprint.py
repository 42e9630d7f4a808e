"""Fingerprints equal bosh-cli's: published known answers, and the rules for each entry."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from cpi.release.definition import load_definition
from cpi.release.fingerprint import Entry, file_entry, fingerprint, fingerprint_chunks
from cpi.release.reader import read_job, read_license, read_package
from tests.release.support import minimal_release, write

# Known answers from a real release built by bosh-cli: cloudfoundry/bosh-package-python-release
# at commit 07a34fe. Each expected value is the fingerprint recorded in that repository's
# .final_builds/{jobs,packages,license}/*/index.yml (and releases/python/python-0.9.0.yml).
# The entries are (relpath, sha256 of the file at that commit, mode as bosh-cli writes it,
# None where it fingerprints no mode); blob digests are the `sha` fields of config/blobs.yml.
KNOWN_ANSWERS = {
    "package python-3.12-test": (
        [("packaging", "sha256:dc1ddfa9bedff2ab3d574a7e7e59034d1469a533854e812e1aebc4e8a4114271", None)],
        ["python-3.12"],
        "4a48f67e4359511f0f75ff09c26dd00269dd2a5d9bb99a7aad373886eb77a05d",
    ),
    "job python-3.12-test": (
        [
            ("job.MF", "sha256:977229011c9f98a11e74bc377baa31cc56c6872429cd05a7cc7e5516eaf29197", "100644"),
            ("monit", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "100644"),
            ("templates/run", "sha256:e63889d3912ae96c4ee5b3dc6135ee491b495e9d4b78ef509661ced6fb1e14c6", "100644"),
        ],
        [],
        "bf9fd0b43d46163bdf4bc6d45972d1104d3eeb5d86e4863997888f9fcd3856fb",
    ),
    "license": (
        [
            ("LICENSE", "sha256:e0c01e71eb67453430e43947b628a40d2cca58ed7154bc33339fc3b0f3189671", None),
            ("NOTICE", "sha256:7c9b73f27746d97ae4177397760f42d2b5a6336620b8123d5913881fd5345e9f", None),
        ],
        [],
        "850893456ab4b5e6be730bbcf0056892bb753e2cba4fba21e5f64035f3fc53db",
    ),
    # Listed out of order on purpose: the fingerprint sorts by relpath.
    "package python-3.12 (5 blobs)": (
        [
            ("packaging", "sha256:52fdcdb7fd7d88e6eaab12e6d4d18040259d939e3142a11fb9781d4c5b771160", None),
            ("runtime-3.12.env", "sha256:2bbb2a79e6749ea666ccef4100f92dfcba5c6c76611e7115f2144da34b3a4c0b", "100644"),
            ("compile-3.12.env", "sha256:820bdfce823268f2940e44d17c67afd69f396790a91e8a5e91d131f473e47cbd", "100644"),
            (
                "python-3.12/Python-3.12.13.tgz",
                "sha256:0816c4761c97ecdb3f50a3924de0a93fd78cb63ee8e6c04201ddfaedca500b0b",
                "100644",
            ),
            (
                "python-3.12/setuptools-67.7.2.tar.gz",
                "sha256:f104fa03692a2602fa0fec6c6a9e63b6c8a968de13e17c026957dd1f53d80990",
                "100644",
            ),
            ("xz-5.6.3.tar.gz", "sha256:b1d45295d3f71f25a4c9101bd7c8d16cb56348bbef3bbc738da0351e17c73317", "100644"),
            (
                "libffi-3.4.4.tar.gz",
                "sha256:d66c56ad259a82cf2a9dfc408b32bf5da52371500b84745f7fb8b645712df676",
                "100644",
            ),
            (
                "sqlite-autoconf-3450200.tar.gz",
                "sha256:bc9067442eedf3dd39989b5c5cfbfff37ae66cc9c99274e0c3052dc4d4a8f6ae",
                "100644",
            ),
        ],
        [],
        "8b2932b405e7748a7a606ee4fc3280b5197ca7e56bcd0c5235414520d19893d9",
    ),
}


@pytest.mark.parametrize("name", sorted(KNOWN_ANSWERS))
def test_known_answers_from_a_bosh_cli_built_release(name):
    rows, dependencies, expected = KNOWN_ANSWERS[name]
    entries = [Entry(relpath, Path(relpath), digest, mode or "") for relpath, digest, mode in rows]
    assert fingerprint(entries, dependencies) == expected


def test_the_empty_monit_digest_is_the_digest_of_an_empty_file(tmp_path):
    # Ties the table's `monit` row to file_entry: bosh-cli hashed the same empty file.
    monit = write(tmp_path / "monit", "")
    entry = file_entry(monit, "monit", with_mode=True, follow_symlinks=True)
    assert (entry.digest, entry.mode) == KNOWN_ANSWERS["job python-3.12-test"][0][1][1:]


def _by_hand(rows, dependencies=()):
    """The documented algorithm, written independently of the module under test."""
    text = "v2" + "".join(rel + digest + mode for rel, digest, mode in sorted(rows, key=lambda r: r[0].encode()))
    if dependencies:
        text += ",".join(sorted(dependencies))
    return hashlib.sha256(text.encode()).hexdigest()


def test_entries_sort_bytewise_and_dependencies_are_sorted_and_joined():
    rows = [("b", "sha256:2", "100644"), ("B", "sha256:1", "100644"), ("a/b", "sha256:3", ""), ("a.b", "sha256:4", "")]
    entries = [Entry(r, Path(r), d, m) for r, d, m in rows]
    assert fingerprint(entries, ["zlib", "b", "a"]) == _by_hand(rows, ["zlib", "b", "a"])
    # "a.b" (0x2e) sorts before "a/b" (0x2f); upper case before lower case.
    assert fingerprint_chunks(
        ["Bsha256:1100644", "a.bsha256:4", "a/bsha256:3", "bsha256:2100644"], ["a", "b", "zlib"]
    ) == (fingerprint(entries, ["zlib", "b", "a"]))


def test_no_dependencies_add_nothing():
    entry = Entry("packaging", Path("packaging"), "sha256:00", "")
    assert fingerprint([entry]) == fingerprint([entry], []) == hashlib.sha256(b"v2packagingsha256:00").hexdigest()


def test_file_modes(tmp_path):
    plain = write(tmp_path / "plain", "x", 0o644)
    owner_exec = write(tmp_path / "owner", "x", 0o744)
    group_exec = write(tmp_path / "group", "x", 0o654)
    assert file_entry(plain, "plain", with_mode=True, follow_symlinks=False).mode == "100644"
    assert file_entry(owner_exec, "owner", with_mode=True, follow_symlinks=False).mode == "100755"
    # Any exec bit counts for the fingerprint; only the owner's for the archive mode.
    group = file_entry(group_exec, "group", with_mode=True, follow_symlinks=False)
    assert (group.mode, group.executable) == ("100755", False)
    assert file_entry(plain, "plain", with_mode=False, follow_symlinks=False).mode == ""
    assert file_entry(plain, "plain", with_mode=True, follow_symlinks=False).digest == (
        "sha256:" + hashlib.sha256(b"x").hexdigest()
    )


def test_unfollowed_symlink_hashes_its_target_string(tmp_path):
    write(tmp_path / "real.txt", "contents")
    os.symlink("real.txt", tmp_path / "link")
    entry = file_entry(tmp_path / "link", "link", with_mode=True, follow_symlinks=False)
    assert entry.digest == "sha256:" + hashlib.sha256(b"real.txt").hexdigest()
    assert entry.mode == "symlink"
    assert entry.link_target == "real.txt"


def test_followed_symlink_hashes_contents_and_counts_as_executable(tmp_path):
    # bosh-cli takes the mode from lstat, and a symlink's own mode has exec bits.
    write(tmp_path / "real.txt", "contents", 0o644)
    os.symlink("real.txt", tmp_path / "link")
    entry = file_entry(tmp_path / "link", "templates/link", with_mode=True, follow_symlinks=True)
    assert entry.digest == "sha256:" + hashlib.sha256(b"contents").hexdigest()
    assert entry.mode == "100755"
    assert entry.link_target is None


def test_job_package_and_license_fingerprints_from_files(tmp_path):
    root = minimal_release(tmp_path)
    definition = load_definition(root)

    def digest(path):
        return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()

    job = read_job(root, "web")
    assert job.fingerprint == _by_hand(
        [
            ("job.MF", digest(root / "jobs/web/spec"), "100644"),
            ("monit", digest(root / "jobs/web/monit"), "100644"),
            ("templates/ctl.erb", digest(root / "jobs/web/templates/ctl.erb"), "100755"),
            ("templates/config.json.erb", digest(root / "jobs/web/templates/config.json.erb"), "100644"),
        ]
    )
    app = read_package(root, definition, "app")
    assert app.fingerprint == _by_hand(
        [
            ("packaging", digest(root / "packages/app/packaging"), ""),
            ("app/main.py", digest(root / "src/app/main.py"), "100644"),
            ("app/bin/run", digest(root / "src/app/bin/run"), "100755"),
        ],
        ["runtime"],
    )
    runtime = read_package(root, definition, "runtime")
    assert runtime.fingerprint == _by_hand(
        [
            ("packaging", digest(root / "packages/runtime/packaging"), ""),
            ("runtime/runtime-1.0.tgz", digest(root / "blobs/runtime/runtime-1.0.tgz"), "100644"),
        ]
    )
    license_ = read_license(root, definition)
    assert license_.fingerprint == _by_hand(
        [("LICENSE", digest(root / "LICENSE"), ""), ("NOTICE", digest(root / "NOTICE"), "")]
    )


def test_package_fingerprint_ignores_file_mtimes_and_dependency_contents(tmp_path):
    root = minimal_release(tmp_path)
    definition = load_definition(root)
    before = read_package(root, definition, "app").fingerprint
    os.utime(root / "src/app/main.py", (0, 0))
    write(root / "blobs/runtime/runtime-1.0.tgz", b"another runtime")  # a dependency's content
    assert read_package(root, definition, "app").fingerprint == before
    write(root / "src/app/main.py", "print('changed')\n")
    assert read_package(root, definition, "app").fingerprint != before
