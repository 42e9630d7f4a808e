"""create_vm on the vsphere cloud as a director runs it (one bin/cpi process per call) with 10
and with 2,000 port groups in the datacenter, and where 20 persistent disks and the VMs'
ephemeral disks land, against the vSphere simulator on 127.0.0.1 (tests/support/vcsim.py).

Prints, for each size, the median wall time of a whole create_vm process (the VM on a
distributed port group, deleted after each run) and its vCenter requests, then the ratio
2,000 ÷ 10; then how many of 20 create_disk calls, and of the timed VMs' ephemeral disks,
went to each datastore that `persistent_datastore_pattern` / `datastore_pattern` match.

    .venv/bin/python bench/vsphere_create_vm.py [--runs 9]
"""

from __future__ import annotations

import argparse
import collections
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.vsphere_lookups import grow_to
from cpi.clouds.vsphere import lookups
from cpi.clouds.vsphere.vcenter import session
from tests.support import vcsim as vcsim_server
from tests.support.runner import Cpi
from tests.vsphere import target as vsphere_target
from tests.vsphere.conftest import vsphere_properties

SIZES = (10, 2000)
DISKS = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    server = vcsim_server.server()
    workdir = Path(tempfile.mkdtemp(prefix="bench-vsphere-"))
    try:
        target = vsphere_target.VsphereTarget(vsphere_target.write_config(workdir / "cpi.json", server),
                                              vsphere_target.Site.simulator(server), workdir)
        cpi = Cpi(target.config_path)
        stemcell = cpi("create_stemcell", *target.stemcell_args())
        current = session.get(vsphere_properties(server))
        ephemeral: collections.Counter[str] = collections.Counter()
        results = {}
        for size in SIZES:
            networks = grow_to(current, size)
            assert lookups.network(current, "DC0", vsphere_target.NETWORK)
            times, requests = [], []
            for run in range(args.runs + 1):  # the first makes the stemcell's copies: not timed
                started = time.perf_counter()
                response = cpi.call("create_vm", f"agent-bench-{size}-{run}", stemcell, target.vm_cloud_properties(),
                                    target.manual_network(run % 200), [], {})
                took = time.perf_counter() - started
                vm_cid = response.result[0]
                if run:
                    times.append(took)
                    requests.append(int(re.search(r"create_vm: (\d+) vCenter requests", response.log).group(1)))
                    ephemeral[re.search(r"onto datastore (\S+)", response.log).group(1)] += 1
                cpi("delete_vm", vm_cid)
            results[size] = statistics.median(times)
            print(f"{networks:5d} networks: create_vm median {results[size] * 1000:7.1f} ms "
                  f"(min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f}; {statistics.median(requests):.0f} "
                  f"vCenter requests), {args.runs} runs")
        print(f"ratio {SIZES[1]} ÷ {SIZES[0]}: {results[SIZES[1]] / results[SIZES[0]]:.2f}")
        persistent: collections.Counter[str] = collections.Counter()
        made = []
        for _ in range(DISKS):
            response = cpi.call("create_disk", 1024, {}, None)
            made.append(response.result)
            persistent[re.search(r"on datastore (\S+)", response.log).group(1)] += 1
        for disk_cid in made:
            cpi("delete_disk", disk_cid)
        print(f"{DISKS} persistent disks: " + ", ".join(f"{name} {n}" for name, n in sorted(persistent.items())))
        print(f"{sum(ephemeral.values())} ephemeral disks: "
              + ", ".join(f"{name} {n}" for name, n in sorted(ephemeral.items())))
        cpi("delete_stemcell", stemcell)
        target.vcenter.close()
    finally:
        session.forget()
        server.stop()


if __name__ == "__main__":
    main()
