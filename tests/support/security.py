"""The supply-chain checks bin/test runs after the linters, before any suite.

- **Known vulnerabilities**: pip-audit asks PyPI's advisory data about every exact version
  requirements.lock pins (the runtime packages the release vendors and the tools the tests
  run). A known vulnerability fails the run unless `[tool.cpi.advisories]` in
  pyproject.toml waives its id with the reason beside it. A package the advisory data
  could not be asked about is never counted as clean: the check then says, loudly, how
  many went unchecked and why (offline, or an index that does not serve PyPI's JSON API),
  and that the lock was not fully checked.
- **Static analysis**: bandit reads cpi/ with `[tool.bandit]` of pyproject.toml (each test it
  skips named there with its reason; the rest waived only on their line, `# nosec BXXX`
  with the reason). A finding fails the run.

    .venv/bin/python -m tests.support.security       # both, as bin/test runs them
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv" / "bin"
#: What bandit reads: the CPI's code (bin/cpi is a shell script; jobs/ has ERB templates).
CODE = ("cpi",)
#: The advisory answers kept between runs (a run's requests are then a few conditional GETs).
CACHE = ROOT / ".venv" / "pip-audit-cache"


@dataclass
class Advisories:
    """What the advisory check found: `vulnerable` lines (not waived), `waived` lines, and
    the packages it could not ask about (`unchecked`, with why)."""

    checked: int = 0
    vulnerable: list[str] = field(default_factory=list)
    waived: list[str] = field(default_factory=list)
    unchecked: dict[str, str] = field(default_factory=dict)
    failure: str | None = None  # pip-audit could not run at all (no network): nothing was checked

    def summary(self) -> str:
        if self.failure is not None:
            return f"ADVISORY CHECK SKIPPED: nothing was checked: {self.failure}"
        lines = [f"{self.checked} locked versions checked against PyPI's advisory data"]
        lines += [f"VULNERABLE: {line}" for line in self.vulnerable]
        lines += [f"waived: {line}" for line in self.waived]
        if self.unchecked:
            reasons = sorted(set(self.unchecked.values()))
            verdict = "SKIPPED: none" if not self.checked else f"INCOMPLETE: {len(self.unchecked)}"
            lines.append(f"ADVISORY CHECK {verdict} of the {self.checked + len(self.unchecked)} "
                         f"locked versions could be checked ({'; '.join(reasons)[:300]}): "
                         f"{', '.join(sorted(self.unchecked)[:12])}{' ...' if len(self.unchecked) > 12 else ''}")
        return "\n".join(lines)


def waivers(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, str]:
    """`[tool.cpi.advisories]`: advisory id -> the reason it does not apply."""
    with open(pyproject, "rb") as handle:
        table = tomllib.load(handle).get("tool", {}).get("cpi", {}).get("advisories", {})
    return {str(key): str(value) for key, value in table.items()}


def advisories(lock: Path = ROOT / "requirements.lock", waived: dict[str, str] | None = None,
               timeout: float = 300) -> Advisories:
    """pip-audit on `lock`'s exact versions (no resolution, no pip: the lock is the list)."""
    waived = waivers() if waived is None else waived
    argv = [str(VENV / "pip-audit"), "--disable-pip", "--no-deps", "--requirement", str(lock),
            "--vulnerability-service", "pypi", "--format", "json", "--progress-spinner", "off",
            "--cache-dir", str(CACHE), "--timeout", "30"]
    for advisory in waived:
        argv += ["--ignore-vuln", advisory]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return Advisories(failure=f"pip-audit did not finish within {timeout:.0f} s")
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        tail = " ".join(proc.stderr.strip().splitlines()[-2:])[-300:]
        return Advisories(failure=f"pip-audit exited {proc.returncode} without a report: {tail}")
    found = Advisories()
    for dependency in report.get("dependencies", []):
        version = dependency.get("version")
        if "skip_reason" in dependency:  # "Dependency not found on PyPI and could not be audited: name (1.0)"
            why, _, which = dependency["skip_reason"].partition(": ")
            version = version or which.rpartition("(")[2].rstrip(")") or "?"
            found.unchecked[f"{dependency['name']}=={version}"] = why
            continue
        name = f"{dependency['name']}=={version}"
        found.checked += 1
        for vuln in dependency.get("vulns", []):
            fixed = ", ".join(vuln.get("fix_versions") or []) or "no fixed version"
            found.vulnerable.append(f"{name}: {vuln['id']} (fixed in {fixed})")
    found.waived = [f"{advisory}: {reason}" for advisory, reason in waived.items()]
    return found


def bandit(paths: tuple[str, ...] = CODE, config: Path = ROOT / "pyproject.toml") -> tuple[bool, str]:
    """(clean, findings): bandit on `paths` with `config`'s [tool.bandit]."""
    proc = subprocess.run([str(VENV / "bandit"), "--configfile", str(config), "--quiet", "--recursive", *paths,
                           "--format", "custom", "--msg-template", "{relpath}:{line}: {test_id} {msg}"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    findings = proc.stdout.strip()
    return proc.returncode == 0 and not findings, findings or proc.stderr.strip()[-2000:]


def main() -> int:
    clean, findings = bandit()
    print(f"bandit ({', '.join(CODE)}/): " + ("no finding" if clean else f"findings:\n{findings}"))
    found = advisories()
    print(found.summary())
    return 0 if clean and not found.vulnerable else 1


if __name__ == "__main__":
    sys.exit(main())
