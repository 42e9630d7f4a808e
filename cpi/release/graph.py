"""Package dependencies: every name resolves, no cycles, and jobs list what they run on.

bosh-cli finds an unknown dependency when it builds, but a cycle only when create-env
sorts packages for compilation ("Circular dependency detected while sorting packages"),
and a job that lists `cpi` without `python3` only at run time, when the venv's interpreter
is not on the VM. All three are checked here, before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cpi.release.errors import ReleaseError


def check_known(package_dependencies: Mapping[str, Sequence[str]], job_packages: Mapping[str, Sequence[str]]) -> None:
    known = set(package_dependencies)
    listed = f"(release.yml packages: {', '.join(sorted(known)) or 'none'})"
    unknown = _first_unknown(package_dependencies, known)
    if unknown:
        raise ReleaseError(f"package '{unknown[0]}' depends on '{unknown[1]}', which is not a package of this "
                           f"release {listed}")
    unknown = _first_unknown(job_packages, known)
    if unknown:
        raise ReleaseError(f"job '{unknown[0]}' uses package '{unknown[1]}', which is not a package of this release "
                           f"{listed}")


def _first_unknown(uses: Mapping[str, Sequence[str]], known: set[str]) -> tuple[str, str] | None:
    """The first (user, package) pair whose package is not one of `known`, in the order
    release.yml lists them: one error at a time, the first an author would meet."""
    for user, packages in uses.items():
        for package in packages:
            if package not in known:
                return user, package
    return None


def compile_order(package_dependencies: Mapping[str, Sequence[str]]) -> list[str]:
    """Packages with every dependency before its dependents (ties by name), or a
    ReleaseError naming one cycle, e.g. `a -> b -> a`."""
    order: list[str] = []
    state: dict[str, str] = {}  # "visiting" | "done"

    def visit(package: str, path: list[str]) -> None:
        if state.get(package) == "done":
            return
        if state.get(package) == "visiting":
            cycle = [*path[path.index(package) :], package]
            raise ReleaseError(f"package dependency cycle: {' -> '.join(cycle)}")
        state[package] = "visiting"
        for dependency in sorted(package_dependencies.get(package, ())):
            visit(dependency, [*path, package])
        state[package] = "done"
        order.append(package)

    for package in sorted(package_dependencies):
        visit(package, [])
    return order


def closure(packages: Sequence[str], package_dependencies: Mapping[str, Sequence[str]]) -> set[str]:
    """`packages` and everything they depend on, transitively."""
    seen: set[str] = set()
    pending = list(packages)
    while pending:
        package = pending.pop()
        if package not in seen:
            seen.add(package)
            pending.extend(package_dependencies.get(package, ()))
    return seen


def check_job_closure(
    job_packages: Mapping[str, Sequence[str]], package_dependencies: Mapping[str, Sequence[str]]
) -> None:
    """A VM gets exactly the packages its jobs list, so a job must list the dependencies of
    its packages too (package cpi's venv runs package python3's interpreter)."""
    for job, packages in job_packages.items():
        missing = sorted(closure(packages, package_dependencies) - set(packages))
        if missing:
            needed_by = {
                name: sorted(p for p in packages if name in closure([p], package_dependencies) and p != name)
                for name in missing
            }
            detail = "; ".join(f"'{name}' (needed by {', '.join(needed_by[name])})" for name in missing)
            raise ReleaseError(
                f"job '{job}' must also list the packages its packages depend on: {detail}. "
                f"BOSH installs only the packages a job lists"
            )
