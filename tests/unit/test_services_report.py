"""bin/test's closing lines: the services a run leaves running, their memory, and how to
stop them, read from setup.sh's pid files and /proc."""

from __future__ import annotations

import subprocess
import sys

from tests.support import services_report


def test_a_running_service_is_named_with_its_memory_and_the_stop_command(tmp_path, monkeypatch):
    monkeypatch.setattr(services_report, "STATE_DIR", tmp_path)
    (tmp_path / "run").mkdir()
    # a service as setup.sh starts one: its own session, a pid file naming the leader
    service = subprocess.Popen([sys.executable, "-c", "import time; b = bytearray(8 << 20); time.sleep(60)"],
                               start_new_session=True)
    try:
        (tmp_path / "run/keystone.pid").write_text(f"{service.pid}\n")
        (tmp_path / "run/keystone-again.pid").write_text(f"{service.pid}\n")  # one service, two files
        (tmp_path / "run/gone.pid").write_text("999999999\n")
        for _ in range(50):
            found = services_report.services()
            if found and found[0][3] >= 8 * 1024:
                break
            subprocess.run(["sleep", "0.1"], check=True)
        assert [(name, pid, count) for name, pid, count, _ in found] == [("keystone", service.pid, 1)]
        assert found[0][3] >= 8 * 1024  # KiB: the 8 MiB it holds
        text = services_report.report()
        assert "1 services of the loopback OpenStack are left running" in text
        assert f"keystone               pid {service.pid}" in text
        assert "stop them all with: tests/openstack/stop.sh" in text
    finally:
        service.kill()
        service.wait()
    assert services_report.services() == []
    assert "no OpenStack service is left running" in services_report.report()
