"""The vsphere cloud as a lifecycle target: VMware's simulator on 127.0.0.1
(tests/support/vcsim.py), started for the session, or a real vCenter.

Checks look at the vCenter itself (pyVmomi in the test process), never at what the CPI says.
The CPI works in folders of its own (`cpi-vms`, `cpi-templates`, `cpi-disks` on each
datastore of the simulator; those cpi.json names on a real vCenter), so whatever is there
afterwards is what it left.

Which vCenter:
- `CPI_LIFECYCLE_VSPHERE_CONFIG=/path/file.json`: a real one, described by a cpi.json
  (docs/cloud-vsphere.md's: `cloud.plugin: vsphere`, the vCenter and one datacenter in
  `cloud.properties.vsphere`) with a `"lifecycle": {...}` next to `"cloud"`: the `network`
  (port group) the test VMs go on, its `subnet_cidr`, and optionally `gateway` (the
  subnet's first address), `first_ip_offset` (50; 200 addresses from there), `dns` and
  `stemcell` (the path of a
  stemcell's image; the tests build a light one otherwise). load() names what is missing.
  Use folders, a disk_path and a subnet of their own: leftovers() counts all that is there.
- otherwise the simulator.
"""

from __future__ import annotations

import ipaddress
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.lifecycle.targets import Target
from tests.support import vcsim as vcsim_server
from tests.support.config_files import read_json
from tests.vsphere import stemcell

DATACENTER = "DC0"
VM_FOLDER = "cpi-vms"
TEMPLATE_FOLDER = "cpi-templates"
DISK_PATH = "cpi-disks"
NETWORK = "DC0_DVPG0"
SUBNET = "10.0.0"
ENV = "CPI_LIFECYCLE_VSPHERE_CONFIG"
#: how many addresses of the subnet the lifecycle's VMs use (their indexes run to 199)
ADDRESSES = 200


def cpi_properties(server: vcsim_server.Vcsim, **overrides: Any) -> dict[str, Any]:
    datacenter = {"name": DATACENTER, "vm_folder": VM_FOLDER, "template_folder": TEMPLATE_FOLDER,
                  "disk_path": DISK_PATH, "datastore_pattern": "^LocalDS_", "persistent_datastore_pattern": "^LocalDS_",
                  "clusters": ["DC0_C0"]}
    return {"host": f"{server.host}:{server.port}", "user": server.username, "password": server.password,
            "datacenters": [datacenter], **overrides}


def write_config(path: Path, server: vcsim_server.Vcsim, **overrides: Any) -> Path:
    config = {"cloud": {"plugin": "vsphere", "properties": {
        "vsphere": cpi_properties(server, **overrides),
        "agent": {"mbus": "nats://nats:nats-secret-pw@127.0.0.1:4222", "ntp": ["0.pool.ntp.org"]},
    }}}
    path.write_text(json.dumps(config, indent=2))
    return path


def stemcell_args(image: Path) -> list[Any]:
    """create_stemcell's image path and cloud_properties for an image stemcell.build made."""
    return [str(image), {"name": "bosh-vsphere-esxi-ubuntu-jammy-go_agent", "version": "1.0",
                         "infrastructure": "vsphere", "disk": 2048, "disk_format": "ovf"}]


class Vcenter:
    """The test's own pyVmomi view of the simulator."""

    def __init__(self, server: Any, si: Any = None):
        """A connection of its own to `server` (the simulator, or a real vCenter's Site, whose
        TLS settings are cpi.json's), or `si` (the `si` fixture's, which `close` then leaves
        open)."""
        from pyVim.connect import SmartConnect

        self.own = si is None
        tls = {"sslContext": server.ssl_context} if getattr(server, "ssl_context", None) is not None \
            else {"disableSslCertValidation": True}
        self.si = si if si is not None else SmartConnect(host=server.host, port=server.port, user=server.username,
                                                         pwd=server.password, **tls)
        self.content = self.si.content
        self.datacenter = getattr(server, "datacenter", DATACENTER)

    def find(self, path: str) -> Any:
        return self.content.searchIndex.FindByInventoryPath(path)

    def vms(self, folder: str) -> dict[str, Any]:
        found = self.find(f"{self.datacenter}/vm/{folder}")
        return {vm.name: vm for vm in (found.childEntity if found is not None else [])}

    def datastores(self) -> list[Any]:
        return list(self.find(self.datacenter).datastore)

    def files(self, datastore: Any, folder: str) -> dict[str, int]:
        """Name → size of the files of `folder` on `datastore` ({} when it is not there)."""
        from pyVim.task import WaitForTask
        from pyVmomi import vim

        spec = vim.host.DatastoreBrowser.SearchSpec(matchPattern=["*"],
                                                    details=vim.host.DatastoreBrowser.FileInfo.Details(fileSize=True))
        task = datastore.browser.SearchDatastore_Task(datastorePath=f"[{datastore.name}] {folder}", searchSpec=spec)
        try:
            WaitForTask(task)
        except vim.fault.FileNotFound:
            return {}
        return {f.path: f.fileSize or 0 for f in task.info.result.file}

    def disk_capacities_kb(self, folder: str) -> dict[str, int]:
        """`[ds] path` → capacity in KiB of each disk of `folder` on every datastore, as the
        datastore browser's disk query reports it (0 where it does not: the simulator)."""
        from pyVim.task import WaitForTask
        from pyVmomi import vim

        browser = vim.host.DatastoreBrowser
        query = browser.VmDiskQuery(details=browser.VmDiskQuery.Details(capacityKb=True, diskType=True))
        found = {}
        for datastore in self.datastores():
            task = datastore.browser.SearchDatastore_Task(datastorePath=f"[{datastore.name}] {folder}",
                                                          searchSpec=browser.SearchSpec(query=[query]))
            try:
                WaitForTask(task)
            except vim.fault.FileNotFound:
                continue
            for info in task.info.result.file or []:
                found[f"[{datastore.name}] {info.path}"] = getattr(info, "capacityKb", None) or 0
        return found

    def custom_values(self, entity: Any) -> dict[str, str]:
        names = {f.key: f.name for f in self.content.customFieldsManager.field or []}
        return {names[v.key]: v.value for v in entity.customValue or [] if v.key in names}

    def state(self) -> dict[str, Any]:
        """Everything a CPI call could change, as the vCenter tells it: each VM (name, folder,
        power, devices and their files, extraConfig, custom attributes, snapshots), each
        folder, every file on every datastore with its size, the custom field definitions and
        the clusters' DRS rules and groups. Equal before and after: nothing was changed."""
        from pyVim.task import WaitForTask
        from pyVmomi import vim

        def every(kind: type) -> list[Any]:
            view = self.content.viewManager.CreateContainerView(self.content.rootFolder, [kind], True)
            try:
                return list(view.view)
            finally:
                view.DestroyView()

        vms = {}
        for vm in every(vim.VirtualMachine):
            config = vm.config
            vms[vm._moId] = {
                "name": vm.name, "folder": vm.parent._moId, "power": str(vm.runtime.powerState),
                "cpu": config.hardware.numCPU, "ram": config.hardware.memoryMB, "version": config.version,
                "devices": sorted(f"{type(d).__name__} {d.key} {getattr(d.backing, 'fileName', '')}"
                                  for d in config.hardware.device),
                "extra": sorted((o.key, str(o.value)) for o in config.extraConfig or []),
                "custom": self.custom_values(vm),
                "snapshot": vm.snapshot.currentSnapshot._moId if vm.snapshot else None}
        folders = sorted((f._moId, f.name, f.parent._moId if f.parent else None) for f in every(vim.Folder))
        files = {}
        browser = vim.host.DatastoreBrowser
        for datastore in self.datastores():
            task = datastore.browser.SearchDatastoreSubFolders_Task(
                datastorePath=f"[{datastore.name}]",
                searchSpec=browser.SearchSpec(matchPattern=["*"], details=browser.FileInfo.Details(fileSize=True)))
            WaitForTask(task)
            for folder in task.info.result or []:
                for found in folder.file or []:
                    files[f"{folder.folderPath.rstrip('/')}/{found.path}"] = found.fileSize
        clusters = {c._moId: {"rules": sorted((r.name, sorted(v._moId for v in getattr(r, "vm", None) or []))
                                              for r in c.configurationEx.rule or []),
                              "groups": sorted(g.name for g in c.configurationEx.group or []),
                              "drs_vms": sorted(i.key._moId for i in c.configurationEx.drsVmConfig or [])}
                    for c in every(vim.ClusterComputeResource)}
        fields = sorted((f.key, f.name) for f in self.content.customFieldsManager.field or [])
        return {"vms": vms, "folders": folders, "files": files, "clusters": clusters, "fields": fields}

    def close(self) -> None:
        from pyVim.connect import Disconnect

        if self.own:
            Disconnect(self.si)


@dataclass
class Site:
    """Where the lifecycle runs: the vCenter (host, port, user, password, TLS), the cpi.json
    folders the CPI works in, and the network and addresses of the test VMs."""

    host: str
    port: int
    username: str
    password: str
    vm_folder: str = VM_FOLDER
    template_folder: str = TEMPLATE_FOLDER
    disk_path: str = DISK_PATH
    network: str = NETWORK
    subnet: str = f"{SUBNET}.0/24"
    gateway: str = f"{SUBNET}.1"
    first_ip_offset: int = 10
    dns: str = f"{SUBNET}.2"
    stemcell: str | None = None
    datacenter: str = DATACENTER
    ssl_context: Any = None  # a real vCenter's, from cpi.json's TLS settings; None: the simulator's, unchecked
    server: vcsim_server.Vcsim | None = None  # the simulator, stopped at cleanup

    @classmethod
    def simulator(cls, server: vcsim_server.Vcsim, stop: bool = False) -> Site:
        """The simulator's site (`stop`: stopped at the target's cleanup)."""
        return cls(host=server.host, port=server.port, username=server.username, password=server.password,
                   server=server if stop else None)

    def ip(self, index: int) -> str:
        """The address of the lifecycle's `index` (0 to 199) in the subnet, from first_ip_offset."""
        subnet = ipaddress.ip_network(self.subnet)
        if self.first_ip_offset + ADDRESSES > subnet.num_addresses - 1:
            raise LifecycleConfigError(f"lifecycle: the tests use {ADDRESSES} addresses from first_ip_offset "
                                       f"{self.first_ip_offset}, more than subnet_cidr {self.subnet} holds: choose a "
                                       "smaller offset or a larger subnet")
        return str(subnet[self.first_ip_offset + index])

    def netmask(self) -> str:
        return str(ipaddress.ip_network(self.subnet).netmask)


class LifecycleConfigError(Exception):
    """The file CPI_LIFECYCLE_VSPHERE_CONFIG names lacks something; the message names it."""


def load(path: Path) -> tuple[dict[str, Any], Site]:
    """The cpi.json (without `lifecycle`) and the Site a real vCenter's file describes."""
    from cpi.clouds.vsphere.job_config import VsphereProperties
    from cpi.clouds.vsphere.vcenter import session
    from cpi.errors import CpiError
    from cpi.validation import parse

    document = read_json(path, ENV, LifecycleConfigError)
    lifecycle = document.pop("lifecycle", None) or {}
    cloud = document.get("cloud") or {}
    if cloud.get("plugin") != "vsphere":
        raise LifecycleConfigError(f"{path}: cloud.plugin must be \"vsphere\"")
    missing = [f"lifecycle.{key}" for key in ("network", "subnet_cidr") if not lifecycle.get(key)]
    if missing:
        raise LifecycleConfigError(f"{path}: {', '.join(missing)} missing (docs/testing.md)")
    try:  # the CPI's own messages: they name each bad field, never a value (the password)
        properties = parse(VsphereProperties, (cloud.get("properties") or {}).get("vsphere"),
                           "cloud.properties.vsphere")
    except CpiError as exc:
        raise LifecycleConfigError(f"{path}: {exc.message}") from None
    host, port = session.endpoint(properties)
    subnet = ipaddress.ip_network(lifecycle["subnet_cidr"], strict=False)
    datacenter = properties.datacenter
    site = Site(host=host, port=port, username=properties.user, password=properties.password.get_secret_value(),
                vm_folder=datacenter.vm_folder.strip("/"), template_folder=datacenter.template_folder.strip("/"),
                disk_path=datacenter.disk_path.strip("/"), network=lifecycle["network"], subnet=str(subnet),
                gateway=lifecycle.get("gateway") or str(subnet[1]),
                first_ip_offset=int(lifecycle.get("first_ip_offset", 50)),
                dns=lifecycle.get("dns") or lifecycle.get("gateway") or str(subnet[1]),
                stemcell=lifecycle.get("stemcell"), datacenter=datacenter.name,
                ssl_context=session.ssl_context(properties))
    return document, site


class VsphereTarget(Target):
    name = "vsphere"
    supports_manual_ips = True
    disks_carry_director = False

    def __init__(self, config_path: Path, site: Site, workdir: Path):
        super().__init__(config_path)
        self.site = site
        self.workdir = workdir
        self.vcenter = Vcenter(site)
        self.image = Path(site.stemcell) if site.stemcell else stemcell.build(workdir / "stemcell")

    # -- inputs
    def stemcell_args(self) -> list[Any]:
        return stemcell_args(self.image)

    def vm_cloud_properties(self) -> dict[str, Any]:
        return {"cpu": 1, "ram": 512, "disk": 1024}

    def manual_network(self, index: int) -> dict[str, Any]:
        site = self.site
        return {"default": {"type": "manual", "ip": site.ip(index), "netmask": site.netmask(),
                            "gateway": site.gateway, "dns": [site.dns], "default": ["dns", "gateway"],
                            "cloud_properties": {"name": site.network}}}

    def dynamic_network(self) -> dict[str, Any]:
        return {"default": {"type": "dynamic", "dns": [self.site.dns], "default": ["dns", "gateway"],
                            "cloud_properties": {"name": "VM Network" if self.site.server else self.site.network}}}

    # -- checks against the vCenter
    def disk_files(self, disk_cid: str) -> dict[str, int]:
        value = disk_cid.split(".", 1)[0]
        found = {}
        for datastore in self.vcenter.datastores():
            for name, size in self.vcenter.files(datastore, self.site.disk_path).items():
                if name.startswith((f"{value}.", f"{value}-")):
                    found[f"[{datastore.name}] {name}"] = size
        return found

    def disk_size_mib(self, disk_cid: str) -> int:
        """The disk's capacity, as the datastore browser's disk query reports it; the
        simulator, which reports none, records it as the -flat.vmdk's size."""
        capacities = self.vcenter.disk_capacities_kb(self.site.disk_path)
        value = disk_cid.split(".", 1)[0]
        reported = [kb for name, kb in capacities.items() if name.endswith(f"] {value}.vmdk") and kb]
        if reported:
            return reported[0] // 1024
        sizes = [size for name, size in self.disk_files(disk_cid).items() if name.endswith("-flat.vmdk")]
        assert len(sizes) == 1, self.disk_files(disk_cid)
        return sizes[0] >> 20

    def vm_exists(self, vm_cid: str) -> bool:
        return vm_cid in self.vcenter.vms(self.site.vm_folder)

    def disk_attached_to(self, disk_cid: str) -> str | None:
        from pyVmomi import vim

        value = disk_cid.split(".", 1)[0]
        holders = [name for name, vm in self.vcenter.vms(self.site.vm_folder).items()
                   for device in vm.config.hardware.device
                   if isinstance(device, vim.vm.device.VirtualDisk)
                   and device.backing.fileName.endswith(f"/{value}.vmdk")]
        assert len(holders) <= 1, holders
        return holders[0] if holders else None

    def stemcell_tags(self, stemcell_cid: str) -> dict[str, str]:
        return self.vcenter.custom_values(self.vcenter.vms(self.site.template_folder)[stemcell_cid])

    def offered_resources(self, vm_cloud_properties: dict[str, Any]) -> dict[str, int]:
        """A VM made with these cloud_properties, as the vCenter describes it: on vSphere the
        vm_type sizes the VM itself, so one is made, read and deleted."""
        from pyVmomi import vim

        stemcell_cid = self.cpi("create_stemcell", *self.stemcell_args())
        try:
            vm_cid = self.cpi("create_vm", "agent-offered", stemcell_cid, vm_cloud_properties,
                              self.manual_network(199), [], {})[0]
            try:
                hardware = self.vcenter.vms(self.site.vm_folder)[vm_cid].config.hardware
                ephemeral = next(d for d in hardware.device if isinstance(d, vim.vm.device.VirtualDisk)
                                 and d.backing.fileName.endswith("/ephemeral_disk.vmdk"))
                return {"cpu": hardware.numCPU, "ram": hardware.memoryMB,
                        "ephemeral_disk": ephemeral.capacityInKB // 1024}
            finally:
                self.cpi("delete_vm", vm_cid)
        finally:
            self.cpi("delete_stemcell", stemcell_cid)

    def settings(self, vm_cid: str) -> dict:
        """The agent settings the VM boots with, from its guestinfo.userdata."""
        import base64

        vm = self.vcenter.vms(self.site.vm_folder)[vm_cid]
        extra = {o.key: o.value for o in vm.config.extraConfig or []}
        return json.loads(base64.b64decode(extra["guestinfo.userdata"]))

    def leftovers(self) -> dict[str, list[str]]:
        return leftovers(self.vcenter, self.site)

    def cleanup(self) -> None:
        try:
            self.vcenter.close()
        finally:
            if self.site.server is not None:
                self.site.server.stop()


def leftovers(vcenter: Vcenter, site: Site) -> dict[str, list[str]]:
    """What is in the site's folders and disk_path: VMs, stemcells, disks, snapshots, and any
    other file of disk_path (which the official CPI's delete_disk would leave there)."""
    found: dict[str, list[str]] = {}
    vms = sorted(vcenter.vms(site.vm_folder))
    templates = sorted(vcenter.vms(site.template_folder))
    in_disk_path = [f"[{ds.name}] {name}" for ds in vcenter.datastores() for name in vcenter.files(ds, site.disk_path)
                    if name != "snapshots"]
    disks = sorted(name for name in in_disk_path if name.endswith(".vmdk"))
    others = sorted(name for name in in_disk_path if not name.endswith(".vmdk"))
    snapshots = sorted(f"[{ds.name}] {name}" for ds in vcenter.datastores()
                       for name in vcenter.files(ds, f"{site.disk_path}/snapshots") if name.endswith(".vmdk"))
    for kind, names in (("vms", vms), ("stemcells", templates), ("disks", disks), ("other files", others),
                        ("snapshots", snapshots)):
        if names:
            found[kind] = names
    return found


def real(tmp_path_factory, path: Path) -> VsphereTarget:
    """The target on the real vCenter the file `path` describes (CPI_LIFECYCLE_VSPHERE_CONFIG)."""
    document, site = load(path)
    workdir = tmp_path_factory.mktemp("vsphere-real")
    config = workdir / "cpi.json"
    config.write_text(json.dumps(document, indent=2))
    config.chmod(0o600)  # it holds the vCenter's password
    return VsphereTarget(config, site, workdir)


def simulated(tmp_path_factory) -> VsphereTarget:
    """The target on a simulator of its own, stopped at its cleanup."""
    server = vcsim_server.server()
    try:
        workdir = tmp_path_factory.mktemp("vsphere-vcsim")
        return VsphereTarget(write_config(workdir / "cpi.json", server), Site.simulator(server, stop=True), workdir)
    except BaseException:
        server.stop()
        raise


def make(tmp_path_factory) -> VsphereTarget:
    """The lifecycle's target: the real vCenter CPI_LIFECYCLE_VSPHERE_CONFIG describes, else
    the simulator."""
    if os.environ.get(ENV):
        return real(tmp_path_factory, Path(os.environ[ENV]))
    return simulated(tmp_path_factory)
