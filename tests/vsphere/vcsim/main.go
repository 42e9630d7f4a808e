// vcsim for the tests: VMware's vSphere API simulator (Debian's govmomi library, which ships
// no vcsim command) serving one vCenter inventory on the address given, until SIGTERM or
// until its standard input closes.
//
// tests/support/vcsim.py builds this in GOPATH mode against a patched copy of the simulator
// package (tests/vsphere/vcsim/patch.py) and starts it. Reading stdin to its end is how it
// notices that the test process that started it died without stopping it (stdin is a pipe
// the test process holds): the simulator then goes too instead of outliving the run.
//
// It prints one line when it answers: "vcsim listening on https://HOST:PORT/sdk".
//
// -gpu-host NAME makes that host a GPU host of a vCenter 7 (tests/vsphere/test_passthrough.py):
// an NVIDIA Tesla T4 enabled for passthrough, the T4's vGPU profiles, and an
// AssignableHardwareManager that knows no vendor device groups (a vSphere 8 method).
// -api-version 7.0.0.0 makes it announce vSphere 7's API (0.24's types are 7.0's; the model
// says 6.5), so that a client sends it 7.0 objects such as Dynamic DirectPath backings.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	// its init registers the storage policy service (/pbm): a vm_type's storage_policy
	pbmsimulator "github.com/vmware/govmomi/pbm/simulator"
	// its init registers the REST endpoints (tags, content library) that
	// Service.RegisterEndpoints then serves: a CPI tags what it makes
	_ "github.com/vmware/govmomi/vapi/simulator"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "host:port to serve on (port 0: any free port)")
	datastores := flag.Int("datastores", 2, "local datastores (LocalDS_0, LocalDS_1, ...)")
	hosts := flag.Int("cluster-hosts", 3, "hosts in each cluster")
	gpuHost := flag.String("gpu-host", "", "host to give a passthrough GPU and vGPU profiles (none by default)")
	apiVersion := flag.String("api-version", "", "vim25 API version to announce (default: the model's, 6.5)")
	flag.Parse()

	// the credentials come through the environment, not argv, which `ps` shows to anyone
	user, password := os.Getenv("VCSIM_USERNAME"), os.Getenv("VCSIM_PASSWORD")
	if user == "" || password == "" {
		log.Fatal("VCSIM_USERNAME and VCSIM_PASSWORD must be set")
	}

	model := simulator.VPX()
	if *apiVersion != "" {
		model.ServiceContent.About.ApiVersion = *apiVersion
	}
	model.Datastore = *datastores
	model.ClusterHost = *hosts
	if err := model.Create(); err != nil {
		log.Fatalf("creating the inventory: %v", err)
	}
	if *gpuHost != "" {
		if err := addGPU(*gpuHost); err != nil {
			log.Fatal(err)
		}
	}

	model.Service.Listen = &url.URL{Host: *listen, User: url.UserPassword(user, password)}
	// an empty config: the server makes a self-signed certificate, as a fresh vCenter has
	model.Service.TLS = new(tls.Config)
	model.Service.RegisterEndpoints = true
	// a vCenter serves the storage policy service at /pbm/sdk too, where the official CPI
	// asks for it (an instance of its own: the policies made at /pbm are not seen there)
	simulator.RegisterEndpoint(func(s *simulator.Service, r *simulator.Registry) {
		if r.IsVPX() {
			sdk := pbmsimulator.New()
			sdk.Path = "/pbm/sdk"
			s.RegisterSDK(sdk)
		}
	})
	server := model.Service.NewServer()

	address := *server.URL
	address.User = nil
	fmt.Printf("vcsim listening on %s\n", address.String())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	orphaned := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(orphaned)
	}()

	select {
	case got := <-stop:
		log.Printf("vcsim stopping on %v", got)
	case <-orphaned:
		log.Print("vcsim stopping: its standard input closed (the process that started it is gone)")
	}
	server.Close()
	// the datastores' directories, under the TMPDIR it was started with
	model.Remove()
}

// The GPU of -gpu-host: what a vCenter reports of a host with an NVIDIA Tesla T4 in
// 0000:3b:00.0, enabled for (Dynamic DirectPath) passthrough and active, with the NVIDIA
// host driver that offers the T4's vGPU profiles.
const (
	gpuID       = "0000:3b:00.0"
	gpuVendorID = 0x10de
	gpuDeviceID = 0x1eb8
)

var gpuProfiles = []string{"grid_t4-1q", "grid_t4-2q", "grid_t4-16q"}

func addGPU(name string) error {
	for _, entity := range simulator.Map.All("HostSystem") {
		host, ok := entity.(*simulator.HostSystem)
		if !ok || host.Name != name {
			continue
		}
		hardware := *host.Hardware // shared with the other hosts below its slices: copied, not appended to
		hardware.PciDevice = append(append([]types.HostPciDevice(nil), host.Hardware.PciDevice...), types.HostPciDevice{
			Id: gpuID, ClassId: 0x0302, Bus: 0x3b, VendorId: gpuVendorID, SubVendorId: gpuVendorID,
			VendorName: "NVIDIA Corporation", DeviceId: gpuDeviceID, SubDeviceId: 0x12a2,
			DeviceName: "TU104GL [Tesla T4]",
		})
		host.Hardware = &hardware
		host.Config.PciPassthruInfo = append(host.Config.PciPassthruInfo, &types.HostPciPassthruInfo{
			Id: gpuID, PassthruCapable: true, PassthruEnabled: true, PassthruActive: true,
		})
		host.Config.SharedPassthruGpuTypes = gpuProfiles
		manager := simulator.Map.Put(&mo.HostAssignableHardwareManager{}).Reference()
		host.ConfigManager.AssignableHardwareManager = &manager
		return nil
	}
	return fmt.Errorf("-gpu-host: no host named %q", name)
}
