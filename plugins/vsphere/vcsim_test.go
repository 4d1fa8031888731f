package main

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

const (
	simUser     = "retirer@vsphere.local"
	simPassword = "correct-horse-battery-staple"
)

// vcsim is govmomi's vCenter simulator (the VPX model: one datacenter, a standalone host
// and a cluster, four powered-on VMs) serving HTTPS on 127.0.0.1, stopped by the test.
type vcsim struct {
	model  *simulator.Model
	server *simulator.Server
	// client is an administrator's session, to arrange and check the inventory.
	client *govmomi.Client
	// ca is the server's certificate in PEM.
	ca []byte
}

func startVCSim(t *testing.T) *vcsim {
	t.Helper()
	m := simulator.VPX()
	require.NoError(t, m.Create())
	// Only these credentials log in (the default accepts any).
	m.Service.Listen = &url.URL{Host: "127.0.0.1:0", User: url.UserPassword(simUser, simPassword)}
	m.Service.TLS = new(tls.Config)
	s := m.Service.NewServer()
	t.Cleanup(func() {
		s.Close()
		m.Remove()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := govmomi.NewClient(ctx, s.URL, true)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Logout(ctx)
	})
	return &vcsim{
		model: m, server: s, client: c,
		ca: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}),
	}
}

// url is the SDK URL without credentials.
func (s *vcsim) url() string {
	u := *s.server.URL
	u.User = nil
	return u.String()
}

// secrets is the data of a credentials Secret for the simulator, trusting its CA.
func (s *vcsim) secrets() map[string][]byte {
	return map[string][]byte{
		keyURL: []byte(s.url()), keyUsername: []byte(simUser), keyPassword: []byte(simPassword), keyCA: s.ca,
	}
}

// simVM is a VM of the simulator as the tests see it.
type simVM struct {
	ref        types.ManagedObjectReference
	name       string
	uuid       string
	powerState types.VirtualMachinePowerState
}

// vms lists the simulator's VMs by name.
func (s *vcsim) vms(t *testing.T) map[string]simVM {
	t.Helper()
	ctx := t.Context()
	cv, err := view.NewManager(s.client.Client).CreateContainerView(ctx, s.client.ServiceContent.RootFolder, []string{"VirtualMachine"}, true)
	require.NoError(t, err)
	defer func() { _ = cv.Destroy(context.Background()) }()
	var all []mo.VirtualMachine
	require.NoError(t, cv.Retrieve(ctx, []string{"VirtualMachine"}, []string{"name", "config.uuid", "runtime.powerState"}, &all))
	out := map[string]simVM{}
	for _, m := range all {
		out[m.Name] = simVM{ref: m.Reference(), name: m.Name, uuid: m.Config.Uuid, powerState: m.Runtime.PowerState}
	}
	return out
}

// vm returns the VM named name.
func (s *vcsim) vm(t *testing.T, name string) simVM {
	t.Helper()
	v, ok := s.vms(t)[name]
	require.True(t, ok, "no VM %q in the simulator", name)
	return v
}

// exists tells whether the VM is still in the inventory.
func (s *vcsim) exists(t *testing.T, v simVM) bool {
	t.Helper()
	var m mo.VirtualMachine
	err := property.DefaultCollector(s.client.Client).RetrieveOne(t.Context(), v.ref, []string{"name"}, &m)
	if fault.Is(err, &types.ManagedObjectNotFound{}) {
		return false
	}
	require.NoError(t, err)
	return true
}

// power runs a power operation on the VM: "off" or "suspend".
func (s *vcsim) power(t *testing.T, v simVM, op string) {
	t.Helper()
	o := object.NewVirtualMachine(s.client.Client, v.ref)
	var task *object.Task
	var err error
	switch op {
	case "off":
		task, err = o.PowerOff(t.Context())
	case "suspend":
		task, err = o.Suspend(t.Context())
	default:
		t.Fatalf("unknown power operation %q", op)
	}
	require.NoError(t, err)
	require.NoError(t, task.Wait(t.Context()))
}

// toolsRunning makes the simulator report VMware Tools running in the VM's guest, so that
// it may be asked to shut down (the VPX model's VMs have no Tools running).
func (s *vcsim) toolsRunning(t *testing.T, v simVM) {
	t.Helper()
	ctx := s.model.Service.Context
	obj := s.model.Map().Get(v.ref)
	require.NotNil(t, obj)
	s.model.Map().AtomicUpdate(ctx, obj, []types.PropertyChange{{
		Name: "guest.toolsRunningStatus", Val: string(types.VirtualMachineToolsRunningStatusGuestToolsRunning),
	}})
}
