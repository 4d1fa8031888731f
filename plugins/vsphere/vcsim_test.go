package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/stepwise-dev/stepwise/test/vcsim"
)

const (
	simUser     = "retirer@vsphere.local"
	simPassword = "correct-horse-battery-staple"
)

// simulator is govmomi's vCenter simulator (test/vcsim) with the helpers these tests use.
type simulator struct {
	*vcsim.Simulator
}

func startVCSim(t *testing.T) simulator {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := vcsim.Start(ctx, vcsim.Options{Username: simUser, Password: simPassword})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return simulator{s}
}

// secrets is the data of a credentials Secret for the simulator, trusting its CA.
func (s simulator) secrets() map[string][]byte {
	return map[string][]byte{
		keyURL: []byte(s.URL), keyUsername: []byte(simUser), keyPassword: []byte(simPassword), keyCA: s.CA,
	}
}

// vms lists the VMs by name.
func (s simulator) vms(t *testing.T) map[string]vcsim.VM {
	t.Helper()
	vms, err := s.VMs(t.Context())
	require.NoError(t, err)
	return vms
}

// vm returns the VM named name.
func (s simulator) vm(t *testing.T, name string) vcsim.VM {
	t.Helper()
	v, ok := s.vms(t)[name]
	require.True(t, ok, "no VM %q in the simulator", name)
	return v
}

// exists tells whether the VM is still in the inventory.
func (s simulator) exists(t *testing.T, v vcsim.VM) bool {
	t.Helper()
	ok, err := s.Exists(t.Context(), v.Ref)
	require.NoError(t, err)
	return ok
}

// power runs a power operation on the VM: "off" or "suspend".
func (s simulator) power(t *testing.T, v vcsim.VM, op string) {
	t.Helper()
	o := object.NewVirtualMachine(s.Client().Client, v.Ref)
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

// toolsRunning makes the simulator report VMware Tools running in the VM's guest.
func (s simulator) toolsRunning(t *testing.T, v vcsim.VM) {
	t.Helper()
	require.NoError(t, s.SetToolsRunning(v.Ref))
}

// guestHostName makes the simulator report host as the hostname VMware Tools see in the
// VM's guest (guest.hostName and summary.guest.hostName).
func (s simulator) guestHostName(t *testing.T, v vcsim.VM, host string) {
	t.Helper()
	task, err := object.NewVirtualMachine(s.Client().Client, v.Ref).Reconfigure(t.Context(), types.VirtualMachineConfigSpec{
		ExtraConfig: []types.BaseOptionValue{&types.OptionValue{Key: "SET.guest.hostName", Value: host}},
	})
	require.NoError(t, err)
	require.NoError(t, task.Wait(t.Context()))
}
