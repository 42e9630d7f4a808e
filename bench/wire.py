"""Whole-process cost of large requests: is every stage (parse, redact, validate, log,
respond) linear in the request's size?

For each shape, requests of growing size go to bin/cpi (local cloud, a fresh process per
call, as the director runs it); the median of --runs wall times is printed with the
ratio to the previous size. Linear cost shows as a ratio near the size ratio (10) once the
interpreter's start-up no longer dominates; quadratic as ~100.

    .venv/bin/python bench/wire.py [--runs 3] [--max-mb 10] [--checkout DIR] [--timeout 60]

--checkout runs another checkout's bin/cpi (e.g. a worktree of an older commit) for a
before/after comparison; a call that exceeds --timeout is printed as such.
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


def shapes(size: int) -> dict[str, bytes]:
    """Requests of about `size` bytes."""
    return {
        "letters cid (has_vm)": json.dumps({"method": "has_vm", "arguments": ["a" * size]}).encode(),
        "url-like cid": json.dumps({"method": "has_vm", "arguments": ["x://" + "u" * (size - 8) + ":p@"]}).encode(),
        "many secrets (env)": json.dumps({"method": "create_vm", "arguments": [
            "agent", "sc-missing", {}, {"n": {"type": "dynamic"}}, [],
            {"bosh": {"password": [f"pw-{i:08d}" for i in range(size // 16)]}}]}).encode(),
        "wide networks": json.dumps({"method": "create_vm", "arguments": [
            "agent", "sc-missing", {}, {f"net{i}": {"type": "dynamic", "dns": ["10.0.0.1"]} for i in range(size // 48)},
            [], {}]}).encode(),
    }


def time_call(bin_cpi: Path, config: Path, stdin: bytes, timeout: float) -> float | None:
    started = time.monotonic()
    try:
        proc = subprocess.run([str(bin_cpi), str(config)], input=stdin, capture_output=True, timeout=timeout,
                              env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, cwd="/")
    except subprocess.TimeoutExpired:
        return None
    elapsed = time.monotonic() - started
    json.loads(proc.stdout)  # one valid response, or the benchmark is meaningless
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-mb", type=float, default=10)
    parser.add_argument("--checkout", type=Path, default=ROOT)
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()
    sizes = [s for s in (10_000, 100_000, 1_000_000, 10_000_000) if s <= args.max_mb * 1_000_000]
    work = Path(tempfile.mkdtemp(prefix="bench-wire-"))
    config = work / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "local",
                                            "properties": {"local": {"state_dir": str(work / "state")}}}}))
    bin_cpi = args.checkout / "bin" / "cpi"
    print(f"{bin_cpi}: median of {args.runs} runs per request")
    print(f"{'shape':<24} {'bytes':>10} {'median s':>9} {'ratio':>7}")
    for shape in shapes(10):
        previous = None
        for size in sizes:
            stdin = shapes(size)[shape]
            times = []
            for _ in range(args.runs):
                elapsed = time_call(bin_cpi, config, stdin, args.timeout)
                if elapsed is None:
                    break
                times.append(elapsed)
            if len(times) < args.runs:
                print(f"{shape:<24} {len(stdin):>10} {'> ' + str(int(args.timeout)):>9} {'':>7}")
                break
            median = statistics.median(times)
            ratio = f"{median / previous:.1f}" if previous else ""
            print(f"{shape:<24} {len(stdin):>10} {median:>9.3f} {ratio:>7}")
            previous = median
    return 0


if __name__ == "__main__":
    sys.exit(main())
