package main

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
	"github.com/stepwise-dev/stepwise/test/vcsim"
)

const executorName = "vsphere.terminate-vm"

// newTestExecutor is the plugin's executor with its real rate limits and no audit log,
// whose policy allows loopback, where the simulator listens.
func newTestExecutor() *terminateVM {
	return newTestExecutorAllowing(netip.MustParsePrefix("127.0.0.0/8"))
}

func newTestExecutorAllowing(allowed ...netip.Prefix) *terminateVM {
	e := newTerminateVM(egress.New(allowed...), sdk.NewTenantLimiter(limits).Transport)
	e.log = log.New(io.Discard, "", 0)
	return e
}

// serve serves e for the test, its credentials Secret named by credentialsSecret.
func serve(t *testing.T, e *terminateVM) plugintest.Cloud {
	t.Helper()
	return plugintest.ServeCloud(t, e, paramCredentialsSecret)
}

// request is a Create of step "terminate" with the Secret data the operator would hand over
// (by the parameter that names it, and merged) and the step's own outputs from earlier
// calls.
func request(params map[string]string, secrets map[string][]byte, own map[string]string) *sdk.Request {
	req := plugintest.AddSecret(plugintest.Request(sdk.HookCreate, "uid-1", params), paramCredentialsSecret, secrets)
	req.Step = "terminate"
	if own != nil {
		req.Outputs["terminate"] = own
	}
	return req
}

func withParams(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{paramCredentialsSecret: "vsphere-creds"}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func TestTerminateDestroysTheVM(t *testing.T) {
	byProviderID := func(vm vcsim.VM) map[string]string {
		return withParams(nil, paramProviderID, "vsphere://"+vm.UUID, paramNode, vm.Name)
	}
	tests := []struct {
		name string
		// arrange prepares the VM; params are the step's parameters for it.
		arrange func(t *testing.T, sim simulator, vm vcsim.VM)
		params  func(vm vcsim.VM) map[string]string
		secrets func(sim simulator) map[string][]byte
		// wantPrevious is the VM's power state before the step; wantMessage is in the message.
		wantPrevious string
		wantMessage  string
	}{
		{
			name:         "powered on without VMware Tools, by providerID: powered off and destroyed",
			params:       byProviderID,
			wantPrevious: "poweredOn",
			wantMessage:  "VMware Tools not running: powered off",
		},
		{
			name:         "no providerID: found by node name",
			params:       func(vm vcsim.VM) map[string]string { return withParams(nil, paramNode, vm.Name) },
			wantPrevious: "poweredOn",
			wantMessage:  "destroyed",
		},
		{
			name: "upper-case providerID and a datacenter",
			params: func(vm vcsim.VM) map[string]string {
				return withParams(nil, paramProviderID, "vsphere://"+strings.ToUpper(vm.UUID), paramNode, vm.Name, paramDatacenter, "DC0")
			},
			wantPrevious: "poweredOn",
			wantMessage:  "destroyed",
		},
		{
			name:         "powered off already: destroyed",
			arrange:      func(t *testing.T, sim simulator, vm vcsim.VM) { sim.power(t, vm, "off") },
			params:       byProviderID,
			wantPrevious: "poweredOff",
			wantMessage:  "destroyed",
		},
		{
			name:         "suspended: powered off and destroyed",
			arrange:      func(t *testing.T, sim simulator, vm vcsim.VM) { sim.power(t, vm, "suspend") },
			params:       byProviderID,
			wantPrevious: "suspended",
			wantMessage:  "suspended: powered off",
		},
		{
			name:    "shutdownTimeout 0s: powered off at once although Tools run",
			arrange: func(t *testing.T, sim simulator, vm vcsim.VM) { sim.toolsRunning(t, vm) },
			params: func(vm vcsim.VM) map[string]string {
				return withParams(nil, paramProviderID, "vsphere://"+vm.UUID, paramNode, vm.Name, paramShutdownTimeout, "0s")
			},
			wantPrevious: "poweredOn",
			wantMessage:  "powered off (shutdownTimeout 0s)",
		},
		{
			name:   "insecure instead of a CA",
			params: byProviderID,
			secrets: func(sim simulator) map[string][]byte {
				s := sim.secrets()
				delete(s, keyCA)
				s[keyInsecure] = []byte("true")
				return s
			},
			wantPrevious: "poweredOn",
			wantMessage:  "destroyed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := startVCSim(t)
			vm := sim.vm(t, "DC0_H0_VM0")
			others := len(sim.vms(t)) - 1
			if tt.arrange != nil {
				tt.arrange(t, sim, vm)
			}
			secrets := sim.secrets()
			if tt.secrets != nil {
				secrets = tt.secrets(sim)
			}
			c := serve(t, newTestExecutor())

			res, err := c.Run(t, sdk.HookCreate, request(tt.params(vm), secrets, nil))
			require.NoError(t, err)
			assert.True(t, res.Done, "done: %+v", res)
			assert.Contains(t, res.Message, tt.wantMessage)
			assert.Equal(t, vm.UUID, res.Outputs[outInstanceID])
			assert.Equal(t, tt.wantPrevious, res.Outputs[outPreviousPowerState])
			assert.False(t, sim.exists(t, vm), "the VM is destroyed")
			assert.Len(t, sim.vms(t), others, "no other VM was touched")

			// Hooks run at least once: a second run with the step's outputs is a no-op.
			again, err := c.Run(t, sdk.HookCreate, request(tt.params(vm), secrets, res.Outputs))
			require.NoError(t, err)
			assert.True(t, again.Done)
			assert.Contains(t, again.Message, "destroyed already")
			assert.Equal(t, res.Outputs, again.Outputs, "the outputs stay")
			assert.Len(t, sim.vms(t), others, "no other VM was touched")
		})
	}
}

// The providerID names the machine the Node ran on: when no VM has that UUID, the machine is
// gone, and a VM that merely has the node's name (a replacement) must be left alone.
func TestProviderIDMatchingNoVMNeverFallsBackToTheName(t *testing.T) {
	sim := startVCSim(t)
	vm := sim.vm(t, "DC0_H0_VM0")
	before := sim.vms(t)
	c := serve(t, newTestExecutor())
	params := withParams(nil, paramProviderID, "vsphere://00000000-0000-0000-0000-000000000001", paramNode, vm.Name)

	res, err := c.Run(t, sdk.HookCreate, request(params, sim.secrets(), nil))
	require.NoError(t, err)
	assert.True(t, res.Done)
	assert.Contains(t, res.Message, "already gone")
	assert.True(t, sim.exists(t, vm), "the VM of the same name is not touched")
	assert.Equal(t, before, sim.vms(t), "nothing was touched")
}

// A kubelet chooses its Node's providerID: a compromised node may name another node's VM.
// The VM a providerID names is destroyed only if its name or its guest's hostname is the
// node's; otherwise the step fails before any power operation, and the VM runs on.
func TestTerminateChecksTheVMIsTheNodes(t *testing.T) {
	tests := []struct {
		name string
		// vmName renames the VM when set; hostName is its guest's hostname, when set.
		vmName   string
		hostName string
		node     string
		// wantRefused: the step fails with VMNotTheNodes; otherwise the VM is destroyed.
		wantRefused bool
	}{
		{name: "name and guest hostname are another node's", hostName: "k8s-node-7.example.com", node: "k8s-node-3", wantRefused: true},
		{name: "no guest hostname, another name", node: "k8s-node-3", wantRefused: true},
		{name: "the guest hostname shares only the short name", hostName: "k8s-node-3.zone-b.example.com", node: "k8s-node-3.zone-a.example.com", wantRefused: true},
		{name: "the guest hostname extends the node's name", hostName: "k8s-node-30", node: "k8s-node-3", wantRefused: true},
		{name: "the name is the node's", vmName: "k8s-node-3", hostName: "k8s-node-7", node: "k8s-node-3"},
		{name: "the guest hostname is the node's, another name", hostName: "K8S-Node-3", node: "k8s-node-3"},
		{name: "the guest hostname's short name is the node's", hostName: "k8s-node-3.example.com", node: "k8s-node-3"},
		{name: "the guest hostname is the node's short name", hostName: "k8s-node-3", node: "k8s-node-3.example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := startVCSim(t)
			vm := sim.vm(t, "DC0_H0_VM0")
			if tt.vmName != "" {
				var err error
				vm, err = sim.Rename(t.Context(), vm, tt.vmName, vm.UUID)
				require.NoError(t, err)
			}
			if tt.hostName != "" {
				sim.guestHostName(t, vm, tt.hostName)
			}
			// With Tools running, a guest shutdown sent before the check would show.
			sim.toolsRunning(t, vm)
			c := serve(t, newTestExecutor())
			params := withParams(nil, paramProviderID, "vsphere://"+vm.UUID, paramNode, tt.node, paramShutdownTimeout, "0s")

			res, err := c.Run(t, sdk.HookCreate, request(params, sim.secrets(), nil))
			if !tt.wantRefused {
				require.NoError(t, err)
				assert.True(t, res.Done)
				assert.False(t, sim.exists(t, vm), "the node's VM is destroyed")
				return
			}
			plugintest.AssertOutcome(t, plugintest.Outcome{Reason: "VMNotTheNodes", Permanent: true}, res, err)
			require.Error(t, err)
			for _, want := range []string{fmt.Sprintf("%q", vm.Name), vm.UUID, fmt.Sprintf("node %q", tt.node), "nothing was done"} {
				assert.Contains(t, err.Error(), want)
			}
			assert.True(t, sim.exists(t, vm), "the VM is still there")
			assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, sim.vm(t, vm.Name).PowerState, "and still powered on")
		})
	}
}

func TestTerminateOfAVMThatIsNotThereIsDone(t *testing.T) {
	sim := startVCSim(t)
	before := sim.vms(t)
	c := serve(t, newTestExecutor())
	params := withParams(nil, paramProviderID, "vsphere://00000000-0000-0000-0000-000000000001", paramNode, "k8s-node-gone")

	res, err := c.Run(t, sdk.HookCreate, request(params, sim.secrets(), nil))
	require.NoError(t, err)
	assert.True(t, res.Done)
	assert.Contains(t, res.Message, `no VM with UUID 00000000-0000-0000-0000-000000000001 in vCenter`)
	assert.Contains(t, res.Message, "already gone")
	assert.Equal(t, before, sim.vms(t), "nothing was touched")
}

func TestTerminateShutsTheGuestDownFirst(t *testing.T) {
	sim := startVCSim(t)
	vm := sim.vm(t, "DC0_H0_VM0")
	sim.toolsRunning(t, vm)
	c := serve(t, newTestExecutor())
	params := withParams(nil, paramProviderID, "vsphere://"+vm.UUID, paramNode, vm.Name)

	req := request(params, sim.secrets(), nil)
	req.HookStarted = time.Now()
	res, err := c.Run(t, sdk.HookCreate, req)
	require.NoError(t, err)
	require.False(t, res.Done, "a guest shutdown is waited for, never blocked on: %+v", res)
	assert.Equal(t, shutdownPoll, res.RequeueAfter)
	assert.Contains(t, res.Message, "guest shutdown of")
	assert.Contains(t, res.Message, "powering off at "+req.HookStarted.Add(5*time.Minute).UTC().Format(time.RFC3339), "the default shutdownTimeout, from the hook's start")
	assert.Equal(t, map[string]string{stateShutdownAsked: "true"}, res.State, "that it asked is kept for the next call, not in the outputs")
	assert.Equal(t, map[string]string{outInstanceID: vm.UUID, outPreviousPowerState: "poweredOn"}, res.Outputs)
	assert.True(t, sim.exists(t, vm), "not destroyed while the guest shuts down")

	// The simulated guest stops; the next call, with the state and outputs the engine hands
	// back, destroys the VM and keeps the state it had.
	require.Eventually(t, func() bool { return sim.vm(t, vm.Name).PowerState == types.VirtualMachinePowerStatePoweredOff },
		10*time.Second, 50*time.Millisecond)
	next := request(params, sim.secrets(), res.Outputs)
	next.HookStarted, next.State = req.HookStarted, res.State
	res, err = c.Run(t, sdk.HookCreate, next)
	require.NoError(t, err)
	assert.True(t, res.Done)
	assert.Equal(t, "poweredOn", res.Outputs[outPreviousPowerState])
	assert.Equal(t, vm.UUID, res.Outputs[outInstanceID])
	assert.NotContains(t, res.Message, "powered off", "the guest stopped by itself")
	assert.False(t, sim.exists(t, vm))
}

func TestTerminatePowersOffAGuestThatDoesNotStop(t *testing.T) {
	tests := []struct {
		name       string
		startedAgo time.Duration
		wantDone   bool
		wantInMsg  string
	}{
		{name: "within shutdownTimeout: waits", startedAgo: time.Minute, wantInMsg: "waiting for the guest"},
		{name: "past shutdownTimeout: powers off and destroys", startedAgo: 6 * time.Minute, wantDone: true, wantInMsg: "did not shut down within 5m0s: powered off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := startVCSim(t)
			vm := sim.vm(t, "DC0_H0_VM0")
			sim.toolsRunning(t, vm)
			c := serve(t, newTestExecutor())
			// An earlier call of the hook asked for the shutdown; the guest is still running.
			req := request(withParams(nil, paramProviderID, "vsphere://"+vm.UUID, paramNode, vm.Name, paramShutdownTimeout, "5m"), sim.secrets(),
				map[string]string{outInstanceID: vm.UUID, outPreviousPowerState: "poweredOn"})
			req.HookStarted = time.Now().Add(-tt.startedAgo)
			req.State = map[string]string{stateShutdownAsked: "true"}

			res, err := c.Run(t, sdk.HookCreate, req)
			require.NoError(t, err)
			assert.Equal(t, tt.wantDone, res.Done)
			assert.Contains(t, res.Message, tt.wantInMsg)
			assert.Equal(t, !tt.wantDone, sim.exists(t, vm))
			if !tt.wantDone {
				assert.Equal(t, shutdownPoll, res.RequeueAfter)
				assert.Equal(t, req.State, res.State, "that it asked is kept")
				assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, sim.vm(t, vm.Name).PowerState)
			}
		})
	}
}

// TestTerminateDrivenToItsEnd: driven as the engine drives a hook that waits (its state
// handed back, HookStarted moving back by each wait, without sleeping), the hook ends with
// the VM destroyed, whether the simulated guest stops before shutdownTimeout has passed
// or the VM is powered off then; its state stays within what the engine keeps.
func TestTerminateDrivenToItsEnd(t *testing.T) {
	sim := startVCSim(t)
	vm := sim.vm(t, "DC0_H0_VM0")
	sim.toolsRunning(t, vm)
	c := serve(t, newTestExecutor())
	req := request(withParams(nil, paramProviderID, "vsphere://"+vm.UUID, paramNode, vm.Name, paramShutdownTimeout, "20s"), sim.secrets(), nil)
	req.HookStarted = time.Now()
	d := plugintest.Drive(t, c.Client, executorName, sdk.HookCreate, req, plugintest.MaxPolls(20))
	require.NoError(t, d.Err)
	assert.True(t, d.Result.Done)
	assert.False(t, sim.exists(t, vm))
	assert.Equal(t, map[string]string{outInstanceID: vm.UUID, outPreviousPowerState: "poweredOn"}, d.Outputs)
}

func TestTerminateErrors(t *testing.T) {
	sim := startVCSim(t)
	vm := sim.vm(t, "DC0_H0_VM0")
	valid := withParams(nil, paramProviderID, "vsphere://"+vm.UUID, paramNode, vm.Name)
	secretsWith := func(kv ...string) map[string][]byte {
		s := sim.secrets()
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(s, kv[i])
			} else {
				s[kv[i]] = []byte(kv[i+1])
			}
		}
		return s
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	unreachable := "https://" + closed.Addr().String() + "/sdk"
	require.NoError(t, closed.Close())

	tests := []struct {
		name          string
		params        map[string]string
		secrets       map[string][]byte
		wantPermanent bool
		wantReason    string
		wantInMessage []string
	}{
		{
			name: "wrong password", params: valid, secrets: secretsWith(keyPassword, "hunter2"),
			wantPermanent: true, wantReason: "InvalidCredentials",
			wantInMessage: []string{"refused the login", `Secret "vsphere-creds"`},
		},
		{
			name: "unknown user", params: valid, secrets: secretsWith(keyUsername, "nobody"),
			wantPermanent: true, wantReason: "InvalidCredentials",
		},
		{
			name: "Secret without password and url", params: valid, secrets: secretsWith(keyPassword, "", keyURL, ""),
			wantPermanent: true, wantReason: "InvalidParameter",
			wantInMessage: []string{`Secret "vsphere-creds" lacks the key(s) url, password`},
		},
		{
			name: "no Secret data at all", params: valid, secrets: nil,
			wantPermanent: true, wantReason: "InvalidParameter", wantInMessage: []string{"lacks the key(s) url, username, password"},
		},
		{
			name: "url not a URL", params: valid, secrets: secretsWith(keyURL, "ftp://user:pw@host/sdk"),
			wantPermanent: true, wantReason: "InvalidParameter", wantInMessage: []string{"is not a vCenter URL"},
		},
		{
			name: "ca.crt not PEM", params: valid, secrets: secretsWith(keyCA, "not a certificate"),
			wantPermanent: true, wantReason: "InvalidParameter", wantInMessage: []string{"holds no PEM certificate"},
		},
		{
			name: "insecure not a boolean", params: valid, secrets: secretsWith(keyInsecure, "maybe"),
			wantPermanent: true, wantReason: "InvalidParameter",
		},
		{
			name: "certificate not trusted", params: valid, secrets: secretsWith(keyCA, ""),
			wantPermanent: true, wantReason: "UntrustedCertificate", wantInMessage: []string{"ca.crt"},
		},
		{
			name: "providerID of another cloud", params: withParams(nil, paramProviderID, "aws:///eu-west-1a/i-0123"), secrets: sim.secrets(),
			wantPermanent: true, wantReason: "InvalidParameter", wantInMessage: []string{"is not a vSphere providerID"},
		},
		{
			name: "providerID without a UUID", params: withParams(nil, paramProviderID, "vsphere://k8s-node-3"), secrets: sim.secrets(),
			wantPermanent: true, wantReason: "InvalidParameter", wantInMessage: []string{`"vsphere://k8s-node-3" is not a vSphere providerID`},
		},
		{
			name: "providerID without node", params: withParams(nil, paramProviderID, "vsphere://"+vm.UUID), secrets: sim.secrets(),
			wantPermanent: true, wantReason: "InvalidParameter", wantInMessage: []string{"parameter node is required with providerID"},
		},
		{
			name: "neither providerID nor node", params: withParams(nil), secrets: sim.secrets(),
			wantPermanent: true, wantReason: "InvalidParameter", wantInMessage: []string{"providerID or node is required"},
		},
		{
			name: "no credentialsSecret", params: map[string]string{paramNode: "n"}, secrets: sim.secrets(),
			wantPermanent: true, wantReason: "InvalidParameter", wantInMessage: []string{`parameter "credentialsSecret" is required`},
		},
		{
			name: "bad shutdownTimeout", params: withParams(valid, paramShutdownTimeout, "soon"), secrets: sim.secrets(),
			wantPermanent: true, wantReason: "InvalidParameter", wantInMessage: []string{`parameter "shutdownTimeout" is "soon", not a duration`},
		},
		{
			name: "negative shutdownTimeout", params: withParams(valid, paramShutdownTimeout, "-1m"), secrets: sim.secrets(),
			wantPermanent: true, wantReason: "InvalidParameter", wantInMessage: []string{`parameter shutdownTimeout: "-1m" is not a duration of 0s or more`},
		},
		{
			name: "a parameter it does not take", params: withParams(valid, "insecure", "true"), secrets: sim.secrets(),
			wantPermanent: true, wantReason: "InvalidParameter", wantInMessage: []string{`parameter "insecure" is not a parameter of the executor`},
		},
		{
			name: "unknown datacenter", params: withParams(valid, paramDatacenter, "DC9"), secrets: sim.secrets(),
			wantPermanent: true, wantReason: "InvalidParameter", wantInMessage: []string{`no datacenter "DC9"`},
		},
		{
			name: "vCenter unreachable", params: valid, secrets: secretsWith(keyURL, unreachable),
			wantPermanent: false, wantReason: "VSphereUnavailable", wantInMessage: []string{"connect to vCenter"},
		},
	}
	c := serve(t, newTestExecutor())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Run(t, sdk.HookCreate, request(tt.params, tt.secrets, nil))
			plugintest.AssertOutcome(t, plugintest.Outcome{Reason: tt.wantReason, Permanent: tt.wantPermanent}, sdk.Result{}, err)
			require.Error(t, err)
			for _, want := range tt.wantInMessage {
				assert.Contains(t, err.Error(), want)
			}
			plugintest.AssertNoSecret(t, err.Error(), simPassword, "hunter2", "pw@")
		})
	}
	assert.True(t, sim.exists(t, vm), "no error touched the VM")
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, sim.vm(t, vm.Name).PowerState)
}

func TestTerminateRefusesAnAmbiguousName(t *testing.T) {
	sim := startVCSim(t)
	ctx := t.Context()
	first, second := sim.vm(t, "DC0_H0_VM0"), sim.vm(t, "DC0_H0_VM1")
	// Names are unique within a folder only: move the second VM to another folder and give
	// it the first one's name.
	dc, err := object.NewSearchIndex(sim.Client().Client).FindByInventoryPath(ctx, "/DC0")
	require.NoError(t, err)
	folders, err := dc.(*object.Datacenter).Folders(ctx)
	require.NoError(t, err)
	other, err := folders.VmFolder.CreateFolder(ctx, "other")
	require.NoError(t, err)
	task, err := other.MoveInto(ctx, []types.ManagedObjectReference{second.Ref})
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
	task, err = object.NewVirtualMachine(sim.Client().Client, second.Ref).Rename(ctx, first.Name)
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))

	c := serve(t, newTestExecutor())
	_, err = c.Run(t, sdk.HookCreate, request(withParams(nil, paramNode, first.Name), sim.secrets(), nil))
	plugintest.AssertOutcome(t, plugintest.Outcome{Reason: "AmbiguousVM", Permanent: true}, sdk.Result{}, err)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `2 VMs are named "DC0_H0_VM0"`)
	assert.True(t, sim.exists(t, first))
	assert.True(t, sim.exists(t, second))
}

// TestNamespacesRateLimitFailsFast: with the plugin's limits, a namespace that used its
// bucket for vCenter fails its next hook at once with RateLimited, never waiting for a
// token, while another namespace terminates a VM on the same vCenter.
func TestNamespacesRateLimitFailsFast(t *testing.T) {
	sim := startVCSim(t)
	first, second := sim.vm(t, "DC0_H0_VM0"), sim.vm(t, "DC0_H0_VM1")
	c := serve(t, newTestExecutor())
	run := func(namespace string, vm vcsim.VM) (time.Duration, error) {
		req := request(withParams(nil, paramProviderID, "vsphere://"+vm.UUID, paramNode, vm.Name), sim.secrets(), nil)
		req.Pipeline.Namespace = namespace
		start := time.Now()
		_, err := c.Run(t, sdk.HookCreate, req)
		return time.Since(start), err
	}

	// team-a terminates its VM, then runs the no-op again and again, until its bucket is
	// empty: a termination fits in its burst, a storm does not.
	took, err := run("team-a", first)
	require.NoError(t, err, "a termination fits in a namespace's burst")
	require.False(t, sim.exists(t, first))
	for range limits.TenantBurst {
		if took, err = run("team-a", first); err != nil {
			break
		}
	}
	require.Error(t, err, "team-a's storm is limited")
	plugintest.AssertOutcome(t, plugintest.Outcome{Reason: "RateLimited"}, sdk.Result{}, err)
	assert.Contains(t, err.Error(), `namespace "team-a"`)
	assert.Less(t, took, time.Second, "no wait for a token")

	_, err = run("team-b", second)
	require.NoError(t, err, "another namespace is not held by team-a's storm")
	assert.False(t, sim.exists(t, second))
}

// TestEveryRequestOfAHookCountsAsItsNamespaces: govmomi sends some requests of a hook with
// a context of its own (the end of a task wait, with context.Background); they count as
// the hook's namespace's too, not as requests made outside any hook, whose one bucket
// every namespace would share.
func TestEveryRequestOfAHookCountsAsItsNamespaces(t *testing.T) {
	sim := startVCSim(t)
	vm := sim.vm(t, "DC0_H0_VM0")
	var mu sync.Mutex
	tenants := map[string]int{}
	e := newTestExecutor()
	e.limit = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			ns, ok := sdk.TenantFrom(r.Context())
			mu.Lock()
			tenants[fmt.Sprintf("%q %t", ns, ok)]++
			mu.Unlock()
			return rt.RoundTrip(r)
		})
	}
	c := serve(t, e)
	req := request(withParams(nil, paramProviderID, "vsphere://"+vm.UUID, paramNode, vm.Name), sim.secrets(), nil)
	req.Pipeline.Namespace = "team-a"

	res, err := c.Run(t, sdk.HookCreate, req)
	require.NoError(t, err)
	require.True(t, res.Done, "powered off and destroyed: two task waits")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, tenants, 1, "%v", tenants)
	assert.Contains(t, tenants, `"team-a" true`)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestDescribe(t *testing.T) {
	required, types := serve(t, newTestExecutor()).Parameters(t)
	assert.Equal(t, map[string]bool{
		paramProviderID: false, paramNode: false, paramCredentialsSecret: true, paramShutdownTimeout: false, paramDatacenter: false,
	}, required)
	assert.Equal(t, map[string]string{
		paramProviderID: "string", paramNode: "string", paramCredentialsSecret: "secret", paramShutdownTimeout: "duration", paramDatacenter: "string",
	}, types)

	// Every parameter the executor reads is declared: the engine would refuse any other.
	plugintest.AssertDeclarations(t, newTestExecutor().Describe(), map[string]string{
		paramProviderID: "vsphere://4201c0de-1234-5678-9abc-def012345678", paramNode: "k8s-node-3", paramCredentialsSecret: "vsphere-creds",
		paramShutdownTimeout: "1m", paramDatacenter: "DC0",
	})
}

// TestParseParams: what the SDK hands over, given or defaulted, reaches the executor as
// declared.
func TestParseParams(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]string
		want   params
	}{
		{"the defaults", withParams(nil, paramNode, "n1"), params{node: "n1", secret: "vsphere-creds", shutdownTimeout: 5 * time.Minute}},
		{"every parameter", withParams(nil, paramProviderID, "vsphere://4201C0DE-1234-5678-9ABC-DEF012345678", paramNode, "n1", paramShutdownTimeout, "0s", paramDatacenter, "DC0"),
			params{uuid: "4201c0de-1234-5678-9abc-def012345678", node: "n1", secret: "vsphere-creds", datacenter: "DC0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checked, err := contract.CheckParams(declarations(), tt.params)
			require.NoError(t, err)
			got, err := parseParams(&sdk.Request{Params: checked})
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestConformance(t *testing.T) {
	sim := startVCSim(t)
	vm := sim.vm(t, "DC0_H0_VM0")
	plugintest.Conformance(t, newTestExecutor(), withParams(nil, paramProviderID, "vsphere://"+vm.UUID, paramNode, vm.Name),
		plugintest.WithSecretParam(paramCredentialsSecret, sim.secrets()), plugintest.WithWaits(10))
	assert.False(t, sim.exists(t, vm), "Conformance's Create terminated the VM")
}
