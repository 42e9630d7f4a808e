"""Whole-process cost of one CPI call on the local cloud, as the director pays it.

Every CPI call is a new interpreter, so start-up is on every call's path. Prints, per
method, the median and best wall time of N bin/cpi processes, and the slowest imports of
`info` from `python -X importtime`.

    .venv/bin/python bench/startup.py [-n 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


def run(config: Path, method: str, *args) -> tuple[float, dict]:
    request = json.dumps({"method": method, "arguments": list(args), "context": {"director_uuid": "b"}, "api_version": 2})
    started = time.perf_counter()
    proc = subprocess.run([str(ROOT / "bin" / "cpi"), str(config)], input=request.encode(), capture_output=True, env=ENV)
    elapsed = time.perf_counter() - started
    return elapsed, json.loads(proc.stdout)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=15)
    n = parser.parse_args().n
    work = Path(tempfile.mkdtemp(prefix="cpi-bench-"))
    config = work / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {"local": {"state_dir": str(work / "state")}}}}))
    image = work / "image"
    image.write_bytes(b"x" * 4096)
    _, stemcell = run(config, "create_stemcell", str(image), {})
    _, vm = run(config, "create_vm", "a", stemcell["result"], {}, {"n": {"type": "dynamic"}}, [], {})
    vm_cid = vm["result"][0]

    baseline = [time.perf_counter()]
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-c", "pass"], env=ENV)
        baseline.append(time.perf_counter() - t)
    print(f"{'bare python -I -c pass':32s} median {statistics.median(baseline[1:]) * 1000:7.1f} ms")

    cases = [
        ("info", []),
        ("has_vm", [vm_cid]),
        ("create_disk+delete_disk", None),
        ("attach_disk+detach_disk", None),
        ("set_vm_metadata", [vm_cid, {"director": "b"}]),
    ]
    for name, args in cases:
        times = []
        for _ in range(n):
            if name == "create_disk+delete_disk":
                t1, disk = run(config, "create_disk", 1024, {}, None)
                t2, _ = run(config, "delete_disk", disk["result"])
                times.append((t1 + t2) / 2)
            elif name == "attach_disk+detach_disk":
                _, disk = run(config, "create_disk", 16, {}, None)
                t1, _ = run(config, "attach_disk", vm_cid, disk["result"])
                t2, _ = run(config, "detach_disk", vm_cid, disk["result"])
                run(config, "delete_disk", disk["result"])
                times.append((t1 + t2) / 2)
            else:
                t, response = run(config, name, *args)
                assert response["error"] is None, response
                times.append(t)
        print(f"{name:32s} median {statistics.median(times) * 1000:7.1f} ms   best {min(times) * 1000:7.1f} ms   (n={n})")

    create = []
    for i in range(max(3, n // 3)):
        t, response = run(config, "create_vm", f"a{i}", stemcell["result"], {}, {"n": {"type": "dynamic"}}, [], {})
        create.append(t)
        run(config, "delete_vm", response["result"][0])
    print(f"{'create_vm (built-in agent)':32s} median {statistics.median(create) * 1000:7.1f} ms")
    run(config, "delete_vm", vm_cid)

    proc = subprocess.run(
        [str(ROOT / ".venv/bin/python"), "-X", "importtime", "-c",
         "import sys; sys.path.insert(0, sys.argv.pop(1)); from cpi.rpc import main; sys.exit(main())", str(ROOT), str(config)],
        input=b'{"method":"info","arguments":[]}', capture_output=True, env=ENV,
    )
    rows = []
    for line in proc.stderr.decode().splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            self_us, cumulative, name = line.split(":", 1)[1].split("|")
            rows.append((int(cumulative), name.rstrip()))
    top = sorted((r for r in rows if not r[1].startswith("  ")), reverse=True)[:8]
    print("info: slowest top-level imports (cumulative):")
    for cumulative, name in top:
        print(f"  {cumulative / 1000:7.1f} ms  {name}")
    total_heavy = [name for _, name in rows if name.strip().split(".")[0] in ("boto3", "botocore", "openstack")]
    print(f"info imported boto3/botocore/openstack modules: {len(total_heavy)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
