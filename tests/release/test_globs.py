"""Package `files` globs behave like bosh-cli's (doublestar), not like Python's glob."""

from __future__ import annotations

import os

import pytest

from cpi.release import globs
from cpi.release.errors import ReleaseError
from tests.release.support import write


@pytest.fixture
def tree(tmp_path):
    for name in (
        "cpi/__init__.py",
        "cpi/.hidden",
        "cpi/clouds/aws/vms.py",
        "cpi/clouds/local/cloud.py",
        "cpi/__pycache__/x.cpython-311.pyc",
        "wheels/any/a-1-py3-none-any.whl",
        "wheels/linux-x86_64/b-1-cp311-cp311-manylinux_2_17_x86_64.whl",
        "wheels/requirements.txt",
        "python3/Python-3.11.2.tgz",
        "top.toml",
        "x1y",
        "xay",
    ):
        write(tmp_path / name, name)
    return tmp_path


@pytest.mark.parametrize(
    "pattern, expected",
    [
        # `**` matches zero or more directories, and `*` matches dot files.
        (
            "cpi/**/*",
            [
                "cpi/.hidden",
                "cpi/__init__.py",
                "cpi/__pycache__/x.cpython-311.pyc",
                "cpi/clouds/aws/vms.py",
                "cpi/clouds/local/cloud.py",
            ],
        ),
        ("cpi/*", ["cpi/.hidden", "cpi/__init__.py"]),
        ("cpi/**/__pycache__/**", ["cpi/__pycache__/x.cpython-311.pyc"]),
        (
            "wheels/**/*.whl",
            ["wheels/any/a-1-py3-none-any.whl", "wheels/linux-x86_64/b-1-cp311-cp311-manylinux_2_17_x86_64.whl"],
        ),
        ("wheels/requirements.txt", ["wheels/requirements.txt"]),
        ("python3/Python-3.*", ["python3/Python-3.11.2.tgz"]),
        ("cpi/clouds/{aws,gcp}/*.py", ["cpi/clouds/aws/vms.py"]),
        ("x[!a]y", ["x1y"]),
        ("x[0-9]y", ["x1y"]),
        ("x?y", ["x1y", "xay"]),
        ("*.toml", ["top.toml"]),  # `*` does not cross directories
        ("./top.toml", ["top.toml"]),
        # Directories are never packaged themselves.
        ("cpi", []),
        ("cpi/clouds", []),
        ("missing/**/*", []),
    ],
)
def test_patterns(tree, pattern, expected):
    assert globs.match(tree, pattern) == expected


def test_double_star_alone_matches_everything_below(tree):
    assert "cpi/clouds/aws/vms.py" in globs.match(tree, "**")
    assert "top.toml" in globs.match(tree, "**")


def test_symlinks_are_packaged_as_symlinks_and_symlinked_dirs_are_not_entered(tmp_path):
    write(tmp_path / "outside/secret.py", "x")
    write(tmp_path / "src/app/real.py", "x")
    os.symlink("real.py", tmp_path / "src/app/alias.py")
    os.symlink("../../outside", tmp_path / "src/app/linked_dir")
    os.symlink("../outside", tmp_path / "src/linked_top")
    # The symlinks themselves match (bosh-cli packs them as symlinks) ...
    assert globs.match(tmp_path / "src", "app/**/*") == ["app/alias.py", "app/linked_dir", "app/real.py"]
    # ... but files reached through a symlinked directory do not.
    assert globs.match(tmp_path / "src", "app/linked_dir/*.py") == []
    assert globs.match(tmp_path / "src", "linked_top/**/*") == []
    assert globs.match(tmp_path / "src", "linked_top/secret.py") == []


@pytest.mark.parametrize("pattern", ["/etc/passwd", "../outside/*", "a/../../b", ""])
def test_patterns_must_stay_inside_the_root(tmp_path, pattern):
    with pytest.raises(ReleaseError, match="relative path"):
        globs.match(tmp_path, pattern)


def test_fixed_depth_patterns_do_not_walk_the_whole_tree(tmp_path, monkeypatch):
    write(tmp_path / "a/b/c/d/e.txt", "x")
    write(tmp_path / "a/f.txt", "x")
    visited = []
    real_walk = os.walk

    def walk(top, *args, **kwargs):
        for item in real_walk(top, *args, **kwargs):
            visited.append(item[0])
            yield item

    monkeypatch.setattr(globs.os, "walk", walk)
    assert globs.match(tmp_path, "a/*.txt") == ["a/f.txt"]
    assert visited == [str(tmp_path / "a")]
