"""The run's end check (tests/conftest.py) fails a run for what it left in the real
~/.cache/bosh-cpi, and only for that: anything else on the machine may use the CPI
meanwhile. Here on a scratch home, never the real one."""

from __future__ import annotations

from pathlib import Path

from tests.support import suite


def test_only_what_the_run_changed_in_the_real_cache_fails_it(tmp_path):
    home = tmp_path / "home"
    cache = home / ".cache" / "bosh-cpi"
    (cache / "audit").mkdir(parents=True)
    (cache / "audit" / "audit.log").write_text('{"method": "create_vm", "config": "/etc/elsewhere.json"}\n')
    before = suite.snapshot(cache)
    run_dir = str(tmp_path / "the-run")
    own = suite.own_helper_names(home)
    (cache / "helper").mkdir()
    for name in own:
        (cache / name).write_bytes(b"")  # the run's helper files
    (cache / "helper" / "0000000000000000.sock").write_bytes(b"")  # another checkout's helper
    with (cache / "audit" / "audit.log").open("a") as log:  # someone else's call, meanwhile
        log.write('{"method": "delete_vm", "config": "/etc/elsewhere.json"}\n')
    (cache / "local").mkdir()
    (cache / "local" / "vm.json").write_text(f'{{"image": "{run_dir}/image"}}')  # names the run's directory

    ours, others = suite.cache_changes(cache, before, own, [run_dir])

    assert sorted(line.split(" changed")[0] for line in ours) == sorted(
        f"the real {cache / name}" for name in ["helper", *own, "local", "local/vm.json"])
    assert sorted(others) == [f"the real {cache / name} changed meanwhile, not by this run"
                              for name in ["audit/audit.log", "helper/0000000000000000.sock"]]
    assert all(Path(cache / name).parent.name == "helper" for name in own)
