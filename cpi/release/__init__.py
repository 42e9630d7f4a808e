"""Build this CPI's BOSH release from release.yml, jobs/ and packages/.

`bosh create-release` needs the bosh CLI, a config/ directory and git bookkeeping
(.dev_builds, dev_releases indices). This package builds the same tarball from the
project's own tree with nothing but Python, and keeps what matters to BOSH identical:

- the checks bosh-cli makes before it builds (`reader`, `globs`, `graph`), each failing
  with a message that says what to fix;
- bosh-cli's fingerprints (`fingerprint`), so the director and create-env recognise
  packages they have already compiled;
- deterministic archives (`archive`): the same inputs give a byte-identical tarball, so
  a rebuild never trips the director's "same fingerprint, different sha1" check;
- `release.MF` (`manifest`), and the vendored blobs the packages need offline (`vendor`).

Entry points: `cpi release build|vendor` (`cli`), `python -m cpi.release`, and
`build_release()` for code.
"""

__all__ = ["BuildResult", "ReleaseError", "build_release"]


def __getattr__(name: str) -> object:
    # Lazy, so that `cpi release --help` (which imports cpi.release.cli) loads neither
    # YAML nor the builder.
    if name in ("BuildResult", "build_release"):
        from cpi.release import builder

        return getattr(builder, name)
    if name == "ReleaseError":
        from cpi.release.errors import ReleaseError

        return ReleaseError
    raise AttributeError(f"module 'cpi.release' has no attribute {name!r}")
