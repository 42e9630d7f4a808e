// What tests/vsphere/vcsim/patch.py adds to the test fixture's copy of govmomi 0.24's
// simulator package (never to /usr/share): the functions its one-line edits call, and the
// VirtualDiskManager method 0.24 lacks. Each makes the simulator answer as vSphere does
// where 0.24 did not, so that the CPI is written against vSphere's behaviour, not against
// a bug of the simulator.

package simulator

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// cpiTaskEntity is the entity a task reports: vSphere's TaskInfo.entity is a managed entity
// (a VM, a datastore) or unset. 0.24 also set it to managers (VirtualDiskManager,
// FileManager), which a client then fails to read as a ManagedEntity (pyvmomi's WaitForTask
// raises TypeError). `e` is the object or only its reference (the power tasks pass that).
func cpiTaskEntity(ref types.ManagedObjectReference, e mo.Reference) (*types.ManagedObjectReference, string) {
	obj := e
	if _, ok := obj.(mo.Entity); !ok {
		obj = Map.Get(ref)
	}
	entity, ok := obj.(mo.Entity)
	if !ok {
		return nil, ""
	}
	name := entity.Entity().Name
	if name == "" {
		name = ref.Value
	}
	return &ref, name
}

// cpiCopyDevices is a deep copy of a VM's devices. 0.24's CloneVM_Task handed the source's
// own device objects to the clone and blanked their disk file names on the way, so a
// template ended up pointing at its newest clone's disk.
func cpiCopyDevices(devices []types.BaseVirtualDevice) []types.BaseVirtualDevice {
	var copied types.VirtualHardware
	deepCopy(&types.VirtualHardware{Device: devices}, &copied)
	return copied.Device
}

// The simulator's disks are empty files; the capacity of one made or grown through the
// VirtualDiskManager is recorded as the size of its (sparse) -flat.vmdk, which the datastore
// browser reports as the file's size. That is what lets ExtendVirtualDisk_Task refuse to
// shrink a disk, as vSphere does.

func cpiRecordCapacity(dc *types.ManagedObjectReference, name string, capacityKb int64) types.BaseMethodFault {
	fm := Map.FileManager()
	file, fault := fm.resolve(dc, name)
	if fault != nil {
		return fault
	}
	data := vdmNames(file)[0]
	info, err := os.Stat(data)
	if err != nil {
		return fm.fault(name, err, new(types.FileNotFound))
	}
	if capacityKb*1024 < info.Size() {
		return &types.InvalidArgument{InvalidProperty: "newCapacityKb"}
	}
	if err := os.Truncate(data, capacityKb*1024); err != nil {
		return fm.fault(name, err, new(types.CannotAccessFile))
	}
	return nil
}

// cpiCreateVirtualDisk is CreateVirtualDisk_Task's work, recording the capacity asked for.
func cpiCreateVirtualDisk(req *types.CreateVirtualDisk_Task) types.BaseMethodFault {
	if fault := vdmCreateVirtualDisk(types.VirtualDeviceConfigSpecFileOperationCreate, req); fault != nil {
		return fault
	}
	if spec, ok := req.Spec.(types.BaseFileBackedVirtualDiskSpec); ok {
		return cpiRecordCapacity(req.Datacenter, req.Name, spec.GetFileBackedVirtualDiskSpec().CapacityKb)
	}
	return nil
}

// ExtendVirtualDiskTask is vSphere's ExtendVirtualDisk_Task (0.24 answered MethodNotFound):
// it grows a disk and refuses to shrink one (InvalidArgument on newCapacityKb).
func (m *VirtualDiskManager) ExtendVirtualDiskTask(_ *Context, req *types.ExtendVirtualDisk_Task) soap.HasFault {
	task := CreateTask(m, "extendVirtualDisk", func(*Task) (types.AnyType, types.BaseMethodFault) {
		return nil, cpiRecordCapacity(req.Datacenter, req.Name, req.NewCapacityKb)
	})
	return &methods.ExtendVirtualDisk_TaskBody{
		Res: &types.ExtendVirtualDisk_TaskResponse{Returnval: task.Run()},
	}
}

// cpiConfigureClone applies a CloneVM_Task's spec.config to the clone, as vSphere does: 0.24
// applied its device changes only (and extraConfig, given to the clone at its creation), so
// a clone kept the source's CPUs, memory and reservations whatever the spec asked. It also
// records the storage policies the spec gives the VM and its disks (cpiRecordProfiles).
func cpiConfigureClone(clone *VirtualMachine, spec *types.VirtualMachineCloneSpec) types.BaseMethodFault {
	config := spec.Config
	if config == nil {
		return nil
	}
	if config.DeviceChange != nil {
		if fault := clone.configureDevices(&types.VirtualMachineConfigSpec{DeviceChange: config.DeviceChange}); fault != nil {
			return fault
		}
	}
	rest := *config
	rest.DeviceChange = nil
	rest.ExtraConfig = nil // given to the clone when it was made
	rest.Name = ""
	rest.Files = nil
	if fault := clone.configure(&rest); fault != nil {
		return fault
	}
	cpiRecordProfiles(clone, spec)
	return nil
}

// The storage policies of VMs and disks, which 0.24's storage policy service did not keep
// (its PbmQueryAssociatedProfile answered nothing): keyed as that service names entities,
// "vm-42" for a VM's home and "vm-42:2000" for its disk of device key 2000.
var cpiProfiles = struct {
	sync.Mutex
	by map[string][]string
}{by: map[string][]string{}}

func cpiProfileIDs(specs []types.BaseVirtualMachineProfileSpec) []string {
	var ids []string
	for _, spec := range specs {
		if defined, ok := spec.(*types.VirtualMachineDefinedProfileSpec); ok {
			ids = append(ids, defined.ProfileId)
		}
	}
	return ids
}

// cpiRecordProfiles keeps what a clone spec gives the clone: spec.config.vmProfile for the
// VM, the profile of each disk its device changes add or edit (their keys are the clone's
// once configureDevices ran), and of each disk a spec.location.disk locator names.
func cpiRecordProfiles(clone *VirtualMachine, spec *types.VirtualMachineCloneSpec) {
	cpiProfiles.Lock()
	defer cpiProfiles.Unlock()
	vm := clone.Self.Value
	if ids := cpiProfileIDs(spec.Config.VmProfile); len(ids) > 0 {
		cpiProfiles.by[vm] = ids
	}
	for _, change := range spec.Config.DeviceChange {
		c := change.GetVirtualDeviceConfigSpec()
		if _, disk := c.Device.(*types.VirtualDisk); disk {
			if ids := cpiProfileIDs(c.Profile); len(ids) > 0 {
				cpiProfiles.by[fmt.Sprintf("%s:%d", vm, c.Device.GetVirtualDevice().Key)] = ids
			}
		}
	}
	for _, locator := range spec.Location.Disk {
		if ids := cpiProfileIDs(locator.Profile); len(ids) > 0 {
			cpiProfiles.by[fmt.Sprintf("%s:%d", vm, locator.DiskId)] = ids
		}
	}
}

// CpiAssociatedProfiles is what the storage policy service's PbmQueryAssociatedProfile
// answers for an entity (see cpiProfiles).
func CpiAssociatedProfiles(key string) []string {
	cpiProfiles.Lock()
	defer cpiProfiles.Unlock()
	return append([]string(nil), cpiProfiles.by[key]...)
}

// cpiSetExtraConfig sets one extraConfig option as vSphere's ReconfigVM_Task does: a key
// already there gets the new value, and an empty value removes the key (0.24 appended the
// option whatever it held, so a VM's keys could not be changed or dropped).
func cpiSetExtraConfig(options []types.BaseOptionValue, set *types.OptionValue) []types.BaseOptionValue {
	kept := options[:0:0]
	for _, option := range options {
		if option.GetOptionValue().Key != set.Key {
			kept = append(kept, option)
		}
	}
	if value, ok := set.Value.(string); ok && value == "" {
		return kept
	}
	return append(kept, set)
}

// ExtensionManager is vCenter's registry of extensions (solutions such as a CPI, which
// mark the VMs they manage with managedBy). 0.24 served none: its ServiceContent named an
// ExtensionManager that answered no method.
type ExtensionManager struct {
	mo.ExtensionManager
}

func cpiExtensionManager(content types.ServiceContent) *ExtensionManager {
	m := &ExtensionManager{}
	m.Self = *content.ExtensionManager
	return m
}

func (m *ExtensionManager) FindExtension(req *types.FindExtension) soap.HasFault {
	body := &methods.FindExtensionBody{Res: &types.FindExtensionResponse{}}
	for i := range m.ExtensionList {
		if m.ExtensionList[i].Key == req.ExtensionKey {
			found := m.ExtensionList[i]
			body.Res.Returnval = &found
		}
	}
	return body
}

func (m *ExtensionManager) RegisterExtension(req *types.RegisterExtension) soap.HasFault {
	body := &methods.RegisterExtensionBody{}
	for _, e := range m.ExtensionList {
		if e.Key == req.Extension.Key {
			body.Fault_ = Fault("", &types.InvalidArgument{InvalidProperty: "extension.key"})
			return body
		}
	}
	m.ExtensionList = append(m.ExtensionList, req.Extension)
	body.Res = &types.RegisterExtensionResponse{}
	return body
}

func (m *ExtensionManager) UnregisterExtension(req *types.UnregisterExtension) soap.HasFault {
	body := &methods.UnregisterExtensionBody{}
	for i, e := range m.ExtensionList {
		if e.Key == req.ExtensionKey {
			m.ExtensionList = append(append([]types.Extension(nil), m.ExtensionList[:i]...), m.ExtensionList[i+1:]...)
			body.Res = &types.UnregisterExtensionResponse{}
			return body
		}
	}
	body.Fault_ = Fault("", &types.NotFound{})
	return body
}

// cpiDirectoryExists is vSphere's answer to MakeDirectory of a directory that is there:
// FileAlreadyExists, with or without createParentDirectories (0.24 let os.MkdirAll succeed).
func cpiDirectoryExists(datastorePath string, local string) types.BaseMethodFault {
	if info, err := os.Stat(local); err == nil && info.IsDir() {
		return &types.FileAlreadyExists{FileFault: types.FileFault{File: datastorePath}}
	}
	return nil
}

// Datastore clusters (StoragePods). vSphere moves a datastore into a datastore cluster with
// the cluster's MoveIntoFolder_Task and out of it with its new folder's, and destroys a
// cluster with Destroy_Task, its datastores going to the cluster's folder. 0.24 refused the
// move out (it looked for the datastore's parent among plain folders), listed a cluster's
// earlier datastores twice after a second move in (it appended a copy of the list to
// itself), and had no Destroy_Task for a cluster.

// cpiParentFolder is the folder or datastore cluster that holds `obj`, as a Folder.
func cpiParentFolder(obj mo.Entity) (*mo.Folder, bool) {
	parent := obj.Entity().Parent
	if parent == nil {
		return nil, false
	}
	switch p := Map.Get(*parent).(type) {
	case *Folder:
		return &p.Folder, true
	case *StoragePod:
		return &p.Folder, true
	}
	return nil, false
}

// cpiMoveIntoPod moves datastores into the datastore cluster `p` (its MoveIntoFolder_Task).
func cpiMoveIntoPod(ctx *Context, p *StoragePod, req *types.MoveIntoFolder_Task) soap.HasFault {
	task := CreateTask(p, "moveIntoFolder", func(*Task) (types.AnyType, types.BaseMethodFault) {
		for _, ref := range req.List {
			obj, ok := Map.Get(ref).(mo.Entity)
			if !ok || !folderHasChildType(&p.Folder, ref.Type) {
				return nil, &types.NotSupported{}
			}
			parent, ok := cpiParentFolder(obj)
			if !ok {
				return nil, &types.NotSupported{}
			}
			folderRemoveChild(ctx, parent, ref)
			folderPutChild(ctx, &p.Folder, obj)
		}
		return nil, nil
	})
	return &methods.MoveIntoFolder_TaskBody{
		Res: &types.MoveIntoFolder_TaskResponse{Returnval: task.Run()},
	}
}

// DestroyTask is a datastore cluster's Destroy_Task (0.24 answered MethodNotFound): its
// datastores go to the folder that holds it, not away, and then it goes.
func (p *StoragePod) DestroyTask(ctx *Context, req *types.Destroy_Task) soap.HasFault {
	task := CreateTask(p, "destroy", func(*Task) (types.AnyType, types.BaseMethodFault) {
		parent, ok := cpiParentFolder(p)
		if !ok {
			return nil, &types.NotSupported{}
		}
		for _, ref := range append([]types.ManagedObjectReference(nil), p.ChildEntity...) {
			if obj, ok := Map.Get(ref).(mo.Entity); ok {
				folderRemoveChild(ctx, &p.Folder, ref)
				folderPutChild(ctx, parent, obj)
			}
		}
		folderRemoveChild(ctx, parent, p.Self)
		return nil, nil
	})
	return &methods.Destroy_TaskBody{
		Res: &types.Destroy_TaskResponse{Returnval: task.Run()},
	}
}

// cpiRegenerateSummary blanks the summary of a device an edit changes, so that it is made
// again, as 0.24 did; vSphere takes an edit whose device has no deviceInfo (the official
// CPI turns a stemcell's SCSI controller into one of another class so, same key, no
// deviceInfo), and 0.24 then dereferenced the missing deviceInfo and panicked, dropping the
// connection. Without one, configureDevice gives the device a new label and summary.
func cpiRegenerateSummary(device *types.VirtualDevice) {
	if device.DeviceInfo != nil {
		device.DeviceInfo.GetDescription().Summary = ""
	}
}

// CpiPlacementAllows is whether the storage policy service's placement solver
// (PbmCheckRequirements) answers the datastore `hub` (named `name`) as compatible with the
// policies of `descriptions`. As vSphere's, it answers only about the hubs it was asked
// about (`hubs`, when any). 0.24's found every datastore compatible with every policy, so
// that a CPI placing disks on a datastore the policy excludes passed every test: a policy
// whose description reads `vcsim-datastores: A, B` is compatible with the datastores named
// A and B only (none, for `vcsim-datastores:` with no name), as a tag-based policy is with
// the datastores that carry its tag. Every other policy keeps 0.24's answer.
func CpiPlacementAllows(hubs []string, descriptions []string, hub string, name string) bool {
	if len(hubs) > 0 {
		asked := false
		for _, h := range hubs {
			asked = asked || h == hub
		}
		if !asked {
			return false
		}
	}
	for _, description := range descriptions {
		if !strings.HasPrefix(description, "vcsim-datastores:") {
			continue
		}
		listed := strings.TrimPrefix(description, "vcsim-datastores:")
		found := false
		for _, allowed := range strings.Split(listed, ",") {
			found = found || strings.TrimSpace(allowed) == name
		}
		if !found {
			return false
		}
	}
	return true
}

// cpiVAppProperties is the VM's vApp properties once a reconfiguration's vAppConfig is
// applied as vSphere applies it: each added (a key the VM has is refused), edited or
// removed by key, all or none (InvalidArgument). 0.24 ignored a reconfiguration's
// vAppConfig, so a VM never had the properties a CPI gave it (the official vSphere CPI
// records each persistent disk it attaches in one, and reads it back on detach).
func cpiVAppProperties(vm *VirtualMachine, spec types.BaseVmConfigSpec) ([]types.VAppPropertyInfo, types.BaseMethodFault) {
	if spec == nil {
		return nil, nil
	}
	var properties []types.VAppPropertyInfo
	if info, ok := vm.Config.VAppConfig.(*types.VmConfigInfo); ok && info != nil {
		properties = append(properties, info.Property...)
	}
	find := func(key interface{}) int {
		for i, p := range properties {
			if fmt.Sprint(p.Key) == fmt.Sprint(key) {
				return i
			}
		}
		return -1
	}
	invalid := &types.InvalidArgument{InvalidProperty: "vAppConfig.property"}
	for _, change := range spec.GetVmConfigSpec().Property {
		switch change.Operation {
		case types.ArrayUpdateOperationAdd:
			if change.Info == nil || find(change.Info.Key) >= 0 {
				return nil, invalid
			}
			properties = append(properties, *change.Info)
		case types.ArrayUpdateOperationEdit:
			if change.Info == nil || find(change.Info.Key) < 0 {
				return nil, invalid
			}
			properties[find(change.Info.Key)] = *change.Info
		case types.ArrayUpdateOperationRemove:
			i := find(change.RemoveKey)
			if i < 0 {
				return nil, invalid
			}
			properties = append(properties[:i], properties[i+1:]...)
		default:
			return nil, invalid
		}
	}
	return properties, nil
}

// cpiSetVAppProperties gives the VM the properties cpiVAppProperties made, once the rest of
// the reconfiguration succeeded; a VM keeps its vApp config (empty) when its last property
// goes, as vSphere keeps it.
func cpiSetVAppProperties(vm *VirtualMachine, spec types.BaseVmConfigSpec, properties []types.VAppPropertyInfo) {
	if spec == nil {
		return
	}
	info, ok := vm.Config.VAppConfig.(*types.VmConfigInfo)
	if !ok || info == nil {
		info = &types.VmConfigInfo{}
	}
	info.Property = properties
	vm.Config.VAppConfig = info
}

// cpiDiskCapacity gives the disk a datastore search just listed (a VmDiskFileInfo: the spec
// asked for file types) the capacity vSphere reports when the spec's VmDiskQuery asks for
// it: here the size of its data file (`<name>-flat.vmdk`, as CreateVirtualDisk_Task and
// ExtendVirtualDisk_Task record it). 0.24 left it unset, and the official CPI, which finds
// a disk by that query, failed on every disk.
func cpiDiskCapacity(spec *types.HostDatastoreBrowserSearchSpec, dir string, res *types.HostDatastoreBrowserSearchResults) {
	if len(res.File) == 0 {
		return
	}
	disk, ok := res.File[len(res.File)-1].(*types.VmDiskFileInfo)
	if !ok {
		return
	}
	asked := false
	for _, query := range spec.Query {
		if q, ok := query.(*types.VmDiskFileQuery); ok && q.Details != nil && q.Details.CapacityKb {
			asked = true
		}
	}
	if !asked {
		return
	}
	data := strings.TrimSuffix(disk.Path, ".vmdk") + "-flat.vmdk"
	info, err := os.Stat(dir + "/" + data)
	if err != nil {
		info, err = os.Stat(dir + "/" + disk.Path)
	}
	if err == nil {
		disk.CapacityKb = info.Size() / 1024
	}
}
