"""A network lookup by name (cpi/clouds/vsphere/lookups.py) with 10 and with 2,000 port groups
in the datacenter, against the vSphere simulator on 127.0.0.1 (tests/support/vcsim.py).

Prints, for each size: the median time of a lookup (SearchIndex by inventory path, one
request) and, for contrast, of a crawl (every network's name in one PropertyCollector
request through a container view: the cheapest way to do what the official CPI does), then
the ratios 2,000 ÷ 10.

    .venv/bin/python bench/vsphere_lookups.py [--runs 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyVim.task import WaitForTask
from pyVmomi import vim, vmodl

from cpi.clouds.vsphere import lookups
from cpi.clouds.vsphere.vcenter import session
from tests.support import vcsim as vcsim_server
from tests.vsphere.conftest import vsphere_properties

SIZES = (10, 2000)


def grow_to(current, total: int) -> int:
    """Distributed port groups added (in one task) until the datacenter has `total` networks."""
    dc = lookups.datacenter(current, "DC0")
    have = len(dc.network)
    if have >= total:
        return have
    switch = next(n for n in dc.networkFolder.childEntity if isinstance(n, vim.DistributedVirtualSwitch))
    spec = vim.dvs.DistributedVirtualPortgroup.ConfigSpec
    WaitForTask(switch.AddDVPortgroup_Task(spec=[spec(name=f"bench-pg-{have + i}", type="earlyBinding", numPorts=8)
                                                 for i in range(total - have)]))
    return len(dc.network)


def crawl(current, name: str):
    """Every network's name, then the one called `name`: what a crawl costs at best."""
    content = current.content
    dc = lookups.datacenter(current, "DC0")
    view = content.viewManager.CreateContainerView(container=dc.networkFolder, type=[vim.Network], recursive=True)
    try:
        spec = vmodl.query.PropertyCollector.FilterSpec(
            objectSet=[vmodl.query.PropertyCollector.ObjectSpec(
                obj=view, skip=True, selectSet=[vmodl.query.PropertyCollector.TraversalSpec(
                    name="view", path="view", skip=False, type=vim.view.ContainerView)])],
            propSet=[vmodl.query.PropertyCollector.PropertySpec(type=vim.Network, pathSet=["name"])])
        result = content.propertyCollector.RetrievePropertiesEx(
            specSet=[spec], options=vmodl.query.PropertyCollector.RetrieveOptions())
        objects = list(result.objects)
        token = result.token
        while token:
            result = content.propertyCollector.ContinueRetrievePropertiesEx(token=token)
            objects.extend(result.objects)
            token = result.token
    finally:
        view.DestroyView()
    return next(o.obj for o in objects if o.propSet[0].val == name)


def median_seconds(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    server = vcsim_server.server()
    try:
        current = session.get(vsphere_properties(server))
        results = {}
        for size in SIZES:
            networks = grow_to(current, size)
            before = current.requests
            lookup = median_seconds(lambda: lookups.network(current, "DC0", "DC0_DVPG0"), args.runs)
            per_lookup = (current.requests - before) / args.runs
            walk = median_seconds(lambda: crawl(current, "DC0_DVPG0"), max(3, args.runs // 5))
            results[size] = (lookup, walk)
            print(f"{networks:5d} networks: lookup median {lookup * 1000:7.2f} ms ({per_lookup:.0f} request), "
                  f"crawl median {walk * 1000:8.2f} ms")
        small, large = (results[size] for size in SIZES)
        print(f"ratio {SIZES[1]} ÷ {SIZES[0]}: lookup {large[0] / small[0]:.2f}, crawl {large[1] / small[1]:.2f}")
    finally:
        session.forget()
        server.stop()


if __name__ == "__main__":
    main()
