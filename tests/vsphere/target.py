"""The vsphere cloud as a lifecycle target, against VMware's simulator on 127.0.0.1
(tests/support/vcsim.py), started for the session.

Checks look at the vCenter itself (pyVmomi in the test process), never at what the CPI says.
The CPI works in folders of its own (`cpi-vms`, `cpi-templates`, `cpi-disks` on each
datastore), so whatever is there afterwards is what it left.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.lifecycle.targets import Target
from tests.support import vcsim as vcsim_server
from tests.vsphere import stemcell

DATACENTER = "DC0"
VM_FOLDER = "cpi-vms"
TEMPLATE_FOLDER = "cpi-templates"
DISK_PATH = "cpi-disks"
NETWORK = "DC0_DVPG0"
SUBNET = "10.0.0"


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

    def __init__(self, server: vcsim_server.Vcsim, si: Any = None):
        """A connection of its own, or `si` (the `si` fixture's, which `close` then leaves open)."""
        from pyVim.connect import SmartConnect

        self.own = si is None
        self.si = si if si is not None else SmartConnect(host=server.host, port=server.port, user=server.username,
                                                         pwd=server.password, disableSslCertValidation=True)
        self.content = self.si.content

    def find(self, path: str) -> Any:
        return self.content.searchIndex.FindByInventoryPath(path)

    def vms(self, folder: str) -> dict[str, Any]:
        found = self.find(f"{DATACENTER}/vm/{folder}")
        return {vm.name: vm for vm in (found.childEntity if found is not None else [])}

    def datastores(self) -> list[Any]:
        return list(self.find(DATACENTER).datastore)

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


class VsphereTarget(Target):
    name = "vsphere"
    supports_manual_ips = True

    def __init__(self, config_path: Path, server: vcsim_server.Vcsim, workdir: Path):
        super().__init__(config_path)
        self.server = server
        self.workdir = workdir
        self.vcenter = Vcenter(server)
        self.image = stemcell.build(workdir / "stemcell")

    # -- inputs
    def stemcell_args(self) -> list[Any]:
        return stemcell_args(self.image)

    def vm_cloud_properties(self) -> dict[str, Any]:
        return {"cpu": 1, "ram": 512, "disk": 1024}

    def manual_network(self, index: int) -> dict[str, Any]:
        return {"default": {"type": "manual", "ip": f"{SUBNET}.{10 + index}", "netmask": "255.255.255.0",
                            "gateway": f"{SUBNET}.1", "dns": [f"{SUBNET}.2"], "default": ["dns", "gateway"],
                            "cloud_properties": {"name": NETWORK}}}

    def dynamic_network(self) -> dict[str, Any]:
        return {"default": {"type": "dynamic", "dns": [f"{SUBNET}.2"], "default": ["dns", "gateway"],
                            "cloud_properties": {"name": "VM Network"}}}

    # -- checks against the vCenter
    def disk_files(self, disk_cid: str) -> dict[str, int]:
        value = disk_cid.split(".", 1)[0]
        found = {}
        for datastore in self.vcenter.datastores():
            for name, size in self.vcenter.files(datastore, DISK_PATH).items():
                if name.startswith((f"{value}.", f"{value}-")):
                    found[f"[{datastore.name}] {name}"] = size
        return found

    def disk_size_mib(self, disk_cid: str) -> int:
        """The simulator records a disk's capacity as its -flat.vmdk's size."""
        sizes = [size for name, size in self.disk_files(disk_cid).items() if name.endswith("-flat.vmdk")]
        assert len(sizes) == 1, self.disk_files(disk_cid)
        return sizes[0] >> 20

    def vm_exists(self, vm_cid: str) -> bool:
        return vm_cid in self.vcenter.vms(VM_FOLDER)

    def disk_attached_to(self, disk_cid: str) -> str | None:
        from pyVmomi import vim

        value = disk_cid.split(".", 1)[0]
        holders = [name for name, vm in self.vcenter.vms(VM_FOLDER).items()
                   for device in vm.config.hardware.device
                   if isinstance(device, vim.vm.device.VirtualDisk)
                   and device.backing.fileName.endswith(f"/{value}.vmdk")]
        assert len(holders) <= 1, holders
        return holders[0] if holders else None

    def stemcell_tags(self, stemcell_cid: str) -> dict[str, str]:
        return self.vcenter.custom_values(self.vcenter.vms(TEMPLATE_FOLDER)[stemcell_cid])

    def offered_resources(self, vm_cloud_properties: dict[str, Any]) -> dict[str, int]:
        """A VM made with these cloud_properties, as the vCenter describes it: on vSphere the
        vm_type sizes the VM itself, so one is made, read and deleted."""
        from pyVmomi import vim

        stemcell_cid = self.cpi("create_stemcell", *self.stemcell_args())
        try:
            vm_cid = self.cpi("create_vm", "agent-offered", stemcell_cid, vm_cloud_properties,
                              self.manual_network(199), [], {})[0]
            try:
                hardware = self.vcenter.vms(VM_FOLDER)[vm_cid].config.hardware
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

        vm = self.vcenter.vms(VM_FOLDER)[vm_cid]
        extra = {o.key: o.value for o in vm.config.extraConfig or []}
        return json.loads(base64.b64decode(extra["guestinfo.userdata"]))

    def leftovers(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        vms = sorted(self.vcenter.vms(VM_FOLDER))
        templates = sorted(self.vcenter.vms(TEMPLATE_FOLDER))
        disks = sorted(f"[{ds.name}] {name}" for ds in self.vcenter.datastores()
                       for name in self.vcenter.files(ds, DISK_PATH) if name.endswith(".vmdk"))
        snapshots = sorted(f"[{ds.name}] {name}" for ds in self.vcenter.datastores()
                           for name in self.vcenter.files(ds, f"{DISK_PATH}/snapshots") if name.endswith(".vmdk"))
        for kind, names in (("vms", vms), ("stemcells", templates), ("disks", disks), ("snapshots", snapshots)):
            if names:
                found[kind] = names
        return found

    def cleanup(self) -> None:
        try:
            self.vcenter.close()
        finally:
            self.server.stop()


def make(tmp_path_factory) -> VsphereTarget:
    server = vcsim_server.server()
    try:
        workdir = tmp_path_factory.mktemp("vsphere-vcsim")
        return VsphereTarget(write_config(workdir / "cpi.json", server), server, workdir)
    except BaseException:
        server.stop()
        raise
