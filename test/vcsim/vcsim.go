// Package vcsim runs govmomi's vCenter simulator (the VPX model: one datacenter, a
// standalone host and a cluster, four powered-on VMs) on loopback over HTTPS, accepting one
// login. The vSphere plugin's tests, the e2e tests and `make demo` (through the vcsim
// command beside this package) share it.
package vcsim

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// Options says where the simulator listens and which login it accepts.
type Options struct {
	// Listen is the host:port to serve on; 127.0.0.1:0 (a free loopback port) when empty.
	Listen   string
	Username string
	Password string
}

// Simulator is a running vCenter simulator.
type Simulator struct {
	// URL is the SDK endpoint, without credentials.
	URL string
	// CA is the server's self-signed certificate in PEM: what a client must trust.
	CA       []byte
	Username string
	Password string

	model  *simulator.Model
	server *simulator.Server
	// client is an administrator's session, to arrange and check the inventory.
	client *govmomi.Client
}

// VM is a simulated virtual machine as a test or the demo sees it.
type VM struct {
	Ref types.ManagedObjectReference
	// Name is the inventory name.
	Name string
	// UUID is the BIOS UUID (config.uuid), what a Node's providerID vsphere://<uuid> names.
	UUID       string
	PowerState types.VirtualMachinePowerState
}

// Start creates the VPX model and serves it until Close. ctx bounds the start only.
func Start(ctx context.Context, o Options) (*Simulator, error) {
	if o.Username == "" || o.Password == "" {
		return nil, errors.New("a username and a password are required")
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	m := simulator.VPX()
	if err := m.Create(); err != nil {
		return nil, fmt.Errorf("create the simulator's inventory: %w", err)
	}
	// With a user in the listen URL only these credentials log in (the default accepts any).
	m.Service.Listen = &url.URL{Host: o.Listen, User: url.UserPassword(o.Username, o.Password)}
	m.Service.TLS = new(tls.Config)
	s := m.Service.NewServer()
	c, err := govmomi.NewClient(ctx, s.URL, true)
	if err != nil {
		s.Close()
		m.Remove()
		return nil, fmt.Errorf("log in to the simulator: %w", err)
	}
	u := *s.URL
	u.User = nil
	return &Simulator{
		URL: u.String(), Username: o.Username, Password: o.Password,
		CA:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}),
		model: m, server: s, client: c,
	}, nil
}

// Close logs out and stops serving.
func (s *Simulator) Close(ctx context.Context) {
	_ = s.client.Logout(ctx)
	s.server.Close()
	s.model.Remove()
}

// Client is the administrator's session.
func (s *Simulator) Client() *govmomi.Client { return s.client }

// VMs lists the VMs by name.
func (s *Simulator) VMs(ctx context.Context) (map[string]VM, error) { return ListVMs(ctx, s.client) }

// ListVMs lists the VMs a vCenter session sees, by name.
func ListVMs(ctx context.Context, c *govmomi.Client) (map[string]VM, error) {
	cv, err := view.NewManager(c.Client).CreateContainerView(ctx, c.ServiceContent.RootFolder, []string{"VirtualMachine"}, true)
	if err != nil {
		return nil, fmt.Errorf("create a view of the VMs: %w", err)
	}
	defer func() { _ = cv.Destroy(context.WithoutCancel(ctx)) }()
	var all []mo.VirtualMachine
	if err := cv.Retrieve(ctx, []string{"VirtualMachine"}, []string{"name", "config.uuid", "runtime.powerState"}, &all); err != nil {
		return nil, fmt.Errorf("list the VMs: %w", err)
	}
	out := make(map[string]VM, len(all))
	for _, m := range all {
		vm := VM{Ref: m.Reference(), Name: m.Name, PowerState: m.Runtime.PowerState}
		if m.Config != nil {
			vm.UUID = m.Config.Uuid
		}
		out[m.Name] = vm
	}
	return out, nil
}

// Exists tells whether the VM is still in the inventory.
func (s *Simulator) Exists(ctx context.Context, ref types.ManagedObjectReference) (bool, error) {
	var m mo.VirtualMachine
	err := property.DefaultCollector(s.client.Client).RetrieveOne(ctx, ref, []string{"name"}, &m)
	if fault.Is(err, &types.ManagedObjectNotFound{}) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up %s: %w", ref, err)
	}
	return true, nil
}

// SetToolsRunning makes the simulator report VMware Tools running in the VM's guest, so
// that it may be asked to shut down (the VPX model's VMs have no Tools running).
func (s *Simulator) SetToolsRunning(ref types.ManagedObjectReference) error {
	obj := s.model.Map().Get(ref)
	if obj == nil {
		return fmt.Errorf("no object %s in the simulator", ref)
	}
	s.model.Map().AtomicUpdate(s.model.Service.Context, obj, []types.PropertyChange{{
		Name: "guest.toolsRunningStatus", Val: string(types.VirtualMachineToolsRunningStatusGuestToolsRunning),
	}})
	return nil
}

// Rename gives an existing VM a new name and BIOS UUID, so a Node's providerID can name it
// before the simulator runs (the model's own UUIDs are derived from file paths).
func (s *Simulator) Rename(ctx context.Context, vm VM, name, uuid string) (VM, error) {
	task, err := object.NewVirtualMachine(s.client.Client, vm.Ref).Reconfigure(ctx, types.VirtualMachineConfigSpec{Name: name, Uuid: uuid})
	if err != nil {
		return VM{}, fmt.Errorf("reconfigure VM %s: %w", vm.Name, err)
	}
	if err := task.Wait(ctx); err != nil {
		return VM{}, fmt.Errorf("reconfigure VM %s: %w", vm.Name, err)
	}
	vm.Name, vm.UUID = name, uuid
	return vm, nil
}
