"""The supply-chain checks of bin/test (tests/support/security.py), run for real: bandit on
a scratch file and on cpi/, pip-audit on scratch locks against PyPI's advisory data."""

from __future__ import annotations

import pytest

from tests.support import security


def test_a_bandit_finding_in_the_code_fails_the_check(tmp_path):
    package = tmp_path / "scratch"
    package.mkdir()
    (package / "run.py").write_text("import subprocess\n\n\ndef run(line):\n"
                                    "    return subprocess.call(line, shell=True)\n")
    clean, findings = security.bandit((str(package),))
    assert not clean
    assert "run.py:5: B602" in findings


def test_the_code_has_no_finding_but_those_waived_with_their_reason():
    clean, findings = security.bandit()
    assert clean, findings


def test_a_package_the_advisory_data_does_not_know_is_never_counted_clean(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text("no-such-package-of-this-cpi-test==1.0\n")
    found = security.advisories(lock, waived={}, timeout=120)
    assert found.checked == 0 and not found.vulnerable
    assert "SKIPPED" in found.summary() or "INCOMPLETE" in found.summary()


def test_a_vulnerable_pin_fails_the_check_unless_waived(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text("urllib3==1.26.4\n")  # CVE-2021-33503, among others, fixed in 1.26.5
    found = security.advisories(lock, waived={}, timeout=120)
    if found.failure is not None or found.unchecked:
        pytest.skip(f"PyPI's advisory data for exact versions cannot be reached from here: {found.summary()}")
    assert found.vulnerable and all(line.startswith("urllib3==1.26.4: ") for line in found.vulnerable)
    ids = {line.split(": ")[1].split()[0] for line in found.vulnerable}
    waived = security.advisories(lock, waived=dict.fromkeys(ids, "this test's"), timeout=120)
    assert not waived.vulnerable and len(waived.waived) == len(ids)
