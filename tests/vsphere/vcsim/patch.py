"""The fixes the tests' vSphere simulator needs, applied to a copy of govmomi 0.24's
`simulator` package (Debian's golang-github-vmware-govmomi-dev) in an overlay GOPATH, never
to /usr/share.

Each fix changes a line or two of the package, most of them into a call of a function in
simulator/cpi_fixes.go (copied next to them), which says why in Go. A line that is not
found exactly once fails the build, naming it: a newer govmomi changed the code, and the
fix must be looked at again rather than go missing unnoticed.

    python -m tests.vsphere.vcsim.patch DIR     patch the simulator package copied to DIR
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: added to the package: the functions the edits call
FIXES = HERE / "simulator" / "cpi_fixes.go"


class PatchError(Exception):
    pass


#: (file of the package, the line as 0.24.2 has it, what it becomes, what it fixes)
EDITS: list[tuple[str, str, str, str]] = [
    ("task.go",
     "\ttask.Info.Entity = &ref\n\ttask.Info.EntityName = ref.Value\n",
     "\ttask.Info.Entity, task.Info.EntityName = cpiTaskEntity(ref, e)\n",
     "a task's entity is a managed entity or unset (WaitForTask on a VirtualDiskManager task)"),
    ("property_collector.go",
     "\tif len(obj.PropSet) == 0 {\n\t\tfault := obj.MissingSet[0].Fault\n",
     ("\tif len(obj.PropSet) == 0 && len(obj.MissingSet) == 0 {\n"
      "\t\tbody.Res = &internal.FetchResponse{} // an unset property (vm.snapshot with none): no value\n"
      "\t\treturn body\n"
      "\t}\n"
      "\tif len(obj.PropSet) == 0 {\n\t\tfault := obj.MissingSet[0].Fault\n"),
     "reading an unset property panicked the server and dropped the connection"),
    ("virtual_machine.go",
     "\t\tdevices := vm.Config.Hardware.Device\n",
     "\t\tdevices := cpiCopyDevices(vm.Config.Hardware.Device)\n",
     "CloneVM_Task gave the clone the source's own device objects"),
    ("virtual_machine.go",
     ("\t\tif req.Spec.Config != nil && req.Spec.Config.DeviceChange != nil {\n"
     "\t\t\tclone.configureDevices(&types.VirtualMachineConfigSpec{DeviceChange: req.Spec.Config.DeviceChange})\n"
     "\t\t}\n"),
     ("\t\tif fault := cpiConfigureClone(clone, &req.Spec); fault != nil {\n"
     "\t\t\treturn nil, fault\n"
     "\t\t}\n"),
     ("CloneVM_Task applied only the devices and extraConfig of the clone spec's config, not its CPUs, memory, "
     "reservations and the rest")),
    ("../pbm/simulator/simulator.go",
     "\tbody.Res = new(types.PbmQueryAssociatedProfileResponse)\n",
     ("\tbody.Res = new(types.PbmQueryAssociatedProfileResponse)\n"
      "\tfor _, id := range simulator.CpiAssociatedProfiles(req.Entity.Key) {\n"
      "\t\tbody.Res.Returnval = append(body.Res.Returnval, types.PbmProfileId{UniqueId: id})\n"
      "\t}\n"),
     "the storage policy service answered no policy for any VM or disk (see cpiRecordProfiles)"),
    ("virtual_machine.go",
     "\t\tif key == val.Key {\n\t\t\tvm.Config.ExtraConfig = append(vm.Config.ExtraConfig, c)\n",
     "\t\tif key == val.Key {\n\t\t\tvm.Config.ExtraConfig = cpiSetExtraConfig(vm.Config.ExtraConfig, val)\n",
     "an extraConfig key set again was added once more, and one set to \"\" kept, where vSphere replaces and removes"),
    ("service_instance.go",
     "\trefs := mo.References(content)\n",
     ("\tif content.ExtensionManager != nil {\n"
      "\t\tMap.Put(cpiExtensionManager(content))\n"
      "\t}\n"
      "\trefs := mo.References(content)\n"),
     "the ExtensionManager the service content names answered no method (see ExtensionManager)"),
    ("file_manager.go",
     "\tmkdir := os.Mkdir\n",
     ("\tif fault := cpiDirectoryExists(req.Name, name); fault != nil {\n"
      "\t\tbody.Fault_ = Fault(\"\", fault)\n"
      "\t\treturn body\n"
      "\t}\n"
      "\tmkdir := os.Mkdir\n"),
     ("MakeDirectory with createParentDirectories made nothing of a directory that is there, where vSphere "
      "answers FileAlreadyExists")),
    ("virtual_disk_manager.go",
     "\t\tif err := vdmCreateVirtualDisk(types.VirtualDeviceConfigSpecFileOperationCreate, req); err != nil {\n",
     "\t\tif err := cpiCreateVirtualDisk(req); err != nil {\n",
     "CreateVirtualDisk_Task records the capacity, so that ExtendVirtualDisk_Task can refuse a shrink"),
    ("folder.go",
     ("\t\t\tparent, ok := Map.Get(*(obj.Entity()).Parent).(*Folder)\n\n"
      "\t\t\tif !ok || !folderHasChildType(&f.Folder, ref.Type) {\n"
      "\t\t\t\treturn nil, &types.NotSupported{}\n"
      "\t\t\t}\n\n"
      "\t\t\tfolderRemoveChild(ctx, &parent.Folder, ref)\n"),
     ("\t\t\tparent, ok := cpiParentFolder(obj)\n\n"
      "\t\t\tif !ok || !folderHasChildType(&f.Folder, ref.Type) {\n"
      "\t\t\t\treturn nil, &types.NotSupported{}\n"
      "\t\t\t}\n\n"
      "\t\t\tfolderRemoveChild(ctx, parent, ref)\n"),
     "MoveIntoFolder_Task refused to move a datastore out of a datastore cluster (StoragePod)"),
    ("folder.go",
     ("\tf := &Folder{Folder: p.Folder}\n"
      "\tres := f.MoveIntoFolderTask(ctx, c)\n"
      "\tp.ChildEntity = append(p.ChildEntity, f.ChildEntity...)\n"
      "\treturn res\n"),
     "\treturn cpiMoveIntoPod(ctx, p, c)\n",
     "a datastore cluster's MoveIntoFolder_Task listed its earlier datastores twice"),
    ("virtual_machine.go",
     "\t\t\tdevice.DeviceInfo.GetDescription().Summary = \"\" // regenerate summary\n",
     "\t\t\tcpiRegenerateSummary(device)\n",
     "an edit of a device given without deviceInfo (a SCSI controller of another class) panicked the server"),
    ("../pbm/simulator/simulator.go",
     "\t\t// TODO: filter\n\t\tref := ds.Reference()\n",
     ("\t\tref := ds.Reference()\n"
      "\t\tvar hubs, descriptions []string\n"
      "\t\tfor _, hub := range req.HubsToSearch {\n"
      "\t\t\thubs = append(hubs, hub.HubId)\n"
      "\t\t}\n"
      "\t\tfor _, asked := range req.PlacementSubjectRequirement {\n"
      "\t\t\tif wanted, ok := asked.(*types.PbmPlacementCapabilityProfileRequirement); ok {\n"
      "\t\t\t\tfor _, profile := range profiles {\n"
      "\t\t\t\t\tif profile.GetPbmProfile().ProfileId.UniqueId == wanted.ProfileId.UniqueId {\n"
      "\t\t\t\t\t\tdescriptions = append(descriptions, profile.GetPbmProfile().Description)\n"
      "\t\t\t\t\t}\n"
      "\t\t\t\t}\n"
      "\t\t\t}\n"
      "\t\t}\n"
      "\t\tif !simulator.CpiPlacementAllows(hubs, descriptions, ref.Value, ds.Entity().Name) {\n"
      "\t\t\tcontinue\n"
      "\t\t}\n"),
     ("the placement solver found every datastore compatible with every policy, whatever hubs it was asked about "
      "(see CpiPlacementAllows)")),
    ("virtual_machine.go",
     "\treturn vm.configureDevices(spec)\n}\n\nfunc getVMFileType",
     ("\tproperties, fault := cpiVAppProperties(vm, spec.VAppConfig)\n"
      "\tif fault != nil {\n\t\treturn fault\n\t}\n"
      "\tif fault := vm.configureDevices(spec); fault != nil {\n\t\treturn fault\n\t}\n"
      "\tcpiSetVAppProperties(vm, spec.VAppConfig, properties)\n"
      "\treturn nil\n}\n\nfunc getVMFileType"),
     ("ReconfigVM_Task ignored the vAppConfig properties of its spec (the official CPI's \"BOSH Persistent "
      "Disks\"), where vSphere adds, edits and removes them by key")),
    ("property_collector.go",
     ("func (rr *retrieveResult) add(ctx *Context, name string, val types.AnyType, content *types.ObjectContent) {\n"
      "\tif ctx.Session != nil {\n"),
     ("func (rr *retrieveResult) add(ctx *Context, name string, val types.AnyType, content *types.ObjectContent) {\n"
      "\tif ctx.Session != nil || content.Obj.Type == \"ServiceInstance\" {\n"),
     ("the ServiceInstance's properties (its content) were refused before login (NotAuthenticated), where vSphere "
      "serves them to anyone, as clients such as the official CPI read them to find the SessionManager")),
    ("host_datastore_browser.go",
     "\t\t\t\t\ts.addFile(file, &res)\n",
     "\t\t\t\t\ts.addFile(file, &res)\n\t\t\t\t\tcpiDiskCapacity(s.SearchSpec, dir, &res)\n",
     ("a search with a VmDiskQuery answered a disk without its capacityKb, which vSphere gives and the official "
      "CPI reads to find a disk")),
]


def apply(package: Path) -> list[str]:
    """Patch the simulator package copied to `package` (in place); returns what was fixed."""
    done = []
    for name, old, new, why in EDITS:
        path = package / name
        text = path.read_text()
        found = text.count(old)
        if found != 1:
            raise PatchError(f"{path}: expected the line(s) {old.strip()!r} once, found {found} times; "
                             f"the fix '{why}' needs a new look for this govmomi")
        path.write_text(text.replace(old, new))
        done.append(f"{name}: {why}")
    shutil.copyfile(FIXES, package / FIXES.name)
    done.append(f"{FIXES.name}: ExtendVirtualDisk_Task and a datastore cluster's Destroy_Task, which 0.24 lacks")
    return done


def sources() -> list[Path]:
    """What a build of the simulator depends on in this checkout (its cache key)."""
    return sorted(p for p in HERE.rglob("*") if p.is_file() and p.suffix in (".go", ".py"))


if __name__ == "__main__":
    for line in apply(Path(sys.argv[1])):
        print(line)
