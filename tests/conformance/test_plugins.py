"""Third-party clouds found through the `bosh_cpi.clouds` entry-point group, imported only
when selected; and the methods every cloud answers the same way."""

from __future__ import annotations

import json
import subprocess
import textwrap

from tests.support.runner import COLD_ENV, ROOT, Cpi, check_envelope

PLUGIN = textwrap.dedent('''
    from pydantic import BaseModel, ConfigDict
    from cpi.clouds.base import Cloud

    class Props(BaseModel):
        model_config = ConfigDict(extra="forbid")
        greeting: str = "hello"

    class TinyCloud(Cloud):
        """Implements has_vm only: everything else must come back NotImplemented."""
        name = "tiny"
        stemcell_formats = ["tiny-raw"]
        Properties = Props

        def has_vm(self, vm_cid):
            if vm_cid == "bug":
                return 1 / 0
            if vm_cid == "recursion":
                def down(n):
                    return down(n + 1)
                return down(0)
            if vm_cid == "exit":
                raise SystemExit(3)
            if vm_cid == "interrupt":
                raise KeyboardInterrupt
            return vm_cid == self.properties.greeting

        def get_disks(self, vm_cid):
            return [float("nan"), "disk-made-" + vm_cid]  # NaN is not JSON: the director cannot read it
''')


def run_with_plugin(tmp_path, request: dict, properties: dict | None = None) -> dict:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "tinycloud.py").write_text(PLUGIN)
    dist = site / "tinycloud-0.1.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tinycloud\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[bosh_cpi.clouds]\ntiny = tinycloud:TinyCloud\n")
    config = tmp_path / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "tiny", "properties": {"tiny": properties or {}}}}))
    proc = subprocess.run(
        [str(ROOT / ".venv/bin/python"), "-I", "-c",
         "import sys; sys.path[:0] = [sys.argv.pop(1), sys.argv.pop(1)]; from cpi.entry import main; sys.exit(main())",
         str(ROOT), str(site), str(config)],
        # cold: each test's plugin path would get a warm helper of its own, used by no other call
        input=json.dumps(request).encode(), capture_output=True, env=COLD_ENV, cwd="/",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    check_envelope(doc)
    return doc


def test_entry_point_cloud_is_loaded_and_validated(tmp_path):
    info = run_with_plugin(tmp_path, {"method": "info", "arguments": []})
    assert info["result"] == {"stemcell_formats": ["tiny-raw"], "api_version": 3}
    has = run_with_plugin(tmp_path, {"method": "has_vm", "arguments": ["hi"]}, {"greeting": "hi"})
    assert has["result"] is True
    typo = run_with_plugin(tmp_path, {"method": "has_vm", "arguments": ["hi"]}, {"greeting": "hi", "greting": "x"})
    assert typo["result"] is True
    assert "cloud.properties.tiny.greting: unknown property ignored, did you mean greeting?" in typo["log"]
    bad = run_with_plugin(tmp_path, {"method": "info", "arguments": []}, {"greeting": 5})
    assert "cloud.properties.tiny.greeting" in bad["error"]["message"]


def test_unimplemented_methods_of_a_partial_cloud_are_not_implemented(tmp_path):
    doc = run_with_plugin(tmp_path, {"method": "create_disk", "arguments": [1024, {}, None]})
    assert doc["error"]["type"] == "Bosh::Clouds::NotImplemented"
    assert "create_disk" in doc["error"]["message"] and "tiny" in doc["error"]["message"]


def test_ping(tmp_path):
    config = tmp_path / "cpi.json"
    config.write_text(json.dumps({"cloud": {"properties": {"local": {"state_dir": str(tmp_path / "s")}}}}))
    assert Cpi(config)("ping") == "pong"


def test_unexpected_exception_is_cloud_error_with_traceback_only_in_log(tmp_path):
    for cid, name in [("bug", "ZeroDivisionError"), ("recursion", "RecursionError"), ("exit", "SystemExit"),
                      ("interrupt", "KeyboardInterrupt")]:
        doc = run_with_plugin(tmp_path, {"method": "has_vm", "arguments": [cid]})
        assert doc["error"]["type"] == "Bosh::Clouds::CloudError", doc
        assert f"unexpected {name}" in doc["error"]["message"]
        assert "Traceback" not in doc["error"]["message"]
        assert "Traceback" in doc["log"]


def test_a_result_json_cannot_hold_is_an_error_naming_it(tmp_path):
    """Never NaN on the wire (the director's parser refuses it): the call fails, and the
    message still shows what the cloud returned so an operator can find what it made."""
    doc = run_with_plugin(tmp_path, {"method": "get_disks", "arguments": ["vm-1"]})
    assert doc["error"]["type"] == "Bosh::Clouds::CloudError"
    assert "not JSON" in doc["error"]["message"] and "disk-made-vm-1" in doc["error"]["message"]


WRITING_PLUGIN = PLUGIN + textwrap.dedent('''
    import os

    class WritingCloud(TinyCloud):
        """Makes its disks for real, with no plan support declared."""
        name = "writing"

        def create_disk(self, size, cloud_properties, vm_cid):
            with open(os.environ["WRITING_CLOUD_MARKER"], "a") as marker:
                marker.write("created\\n")
            return "disk-real-1"
''')


def test_cpi_plan_refuses_a_cloud_that_cannot_withhold_its_writes(tmp_path):
    """It ran create_disk for real and printed "0 changes"; now nothing is called."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "writingcloud.py").write_text(WRITING_PLUGIN)
    dist = site / "writingcloud-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: writingcloud\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[bosh_cpi.clouds]\nwriting = writingcloud:WritingCloud\n")
    config = tmp_path / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "writing", "properties": {"writing": {}}}}))
    marker = tmp_path / "made"
    proc = subprocess.run([str(ROOT / ".venv/bin/python"), "-m", "cpi.cli", "plan", "create_disk", "1024", "{}",
                           "null", "--config", str(config)], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**COLD_ENV, "PYTHONPATH": str(site), "WRITING_CLOUD_MARKER": str(marker)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the writing cloud cannot withhold its writes" in proc.stderr and "nothing was called" in proc.stderr
    assert "0 changes" not in proc.stdout
    assert not marker.exists(), "the plan made the disk for real"


def test_a_plugin_class_that_is_not_a_cloud_is_refused_naming_it(tmp_path):
    """A class registered in the entry-point group that does not subclass
    cpi.clouds.base.Cloud failed later with an AttributeError on the first hook the CPI
    asked of it; now the config is refused at once, naming the plugin and its class."""
    site = tmp_path / "site"
    files = {"strangecloud.py": "class StrangeCloud:\n    name = 'strange'\n",
             "strangecloud-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: strangecloud\nVersion: 0.1\n",
             "strangecloud-0.1.dist-info/entry_points.txt": "[bosh_cpi.clouds]\nstrange = strangecloud:StrangeCloud\n"}
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    config = tmp_path / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "strange", "properties": {"strange": {}}}}))
    proc = subprocess.run(
        [str(ROOT / ".venv/bin/python"), "-I", "-c",
         "import sys; sys.path[:0] = [sys.argv.pop(1), sys.argv.pop(1)]; from cpi.entry import main; sys.exit(main())",
         str(ROOT), str(site), str(config)],
        input=json.dumps({"method": "has_vm", "arguments": ["vm-1"], "context": {}}).encode(),
        capture_output=True, env=COLD_ENV, cwd="/",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    check_envelope(doc)
    message = doc["error"]["message"]
    assert "strange" in message and "StrangeCloud" in message and "cpi.clouds.base.Cloud" in message, message
    assert "AttributeError" not in message, message
