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
	// its init registers the storage policy service (/pbm): a vm_type's storage_policy
	_ "github.com/vmware/govmomi/pbm/simulator"
	// its init registers the REST endpoints (tags, content library) that
	// Service.RegisterEndpoints then serves: a CPI tags what it makes
	_ "github.com/vmware/govmomi/vapi/simulator"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "host:port to serve on (port 0: any free port)")
	datastores := flag.Int("datastores", 2, "local datastores (LocalDS_0, LocalDS_1, ...)")
	hosts := flag.Int("cluster-hosts", 3, "hosts in each cluster")
	flag.Parse()

	// the credentials come through the environment, not argv, which `ps` shows to anyone
	user, password := os.Getenv("VCSIM_USERNAME"), os.Getenv("VCSIM_PASSWORD")
	if user == "" || password == "" {
		log.Fatal("VCSIM_USERNAME and VCSIM_PASSWORD must be set")
	}

	model := simulator.VPX()
	model.Datastore = *datastores
	model.ClusterHost = *hosts
	if err := model.Create(); err != nil {
		log.Fatalf("creating the inventory: %v", err)
	}

	model.Service.Listen = &url.URL{Host: *listen, User: url.UserPassword(user, password)}
	// an empty config: the server makes a self-signed certificate, as a fresh vCenter has
	model.Service.TLS = new(tls.Config)
	model.Service.RegisterEndpoints = true
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
