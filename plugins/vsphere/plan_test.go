package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
	"github.com/stepwise-dev/stepwise/test/vcsim"
)

// The VM the plan tests look at, renamed so that the expected plans read as real ones.
const (
	planVMName = "demo-worker-1"
	planVMUUID = "4210f0a4-7b1c-4c2e-9d3a-5e6f7a8b9c0d"
	goneUUID   = "00000000-0000-0000-0000-000000000001"
)

// readOnlyMethods are the vSphere methods a plan may call: the session, the look-ups and
// the container view they use. Anything else (ShutdownGuest, PowerOffVM_Task,
// Destroy_Task...) would change vCenter.
var readOnlyMethods = []string{
	"RetrieveServiceContent", "Login", "Logout", "FindByUuid", "RetrieveProperties", "RetrievePropertiesEx",
	"ContinueRetrievePropertiesEx", "CreateContainerView", "DestroyView",
}

// soapRecorder is a TLS reverse proxy in front of the simulator that records the method of
// every SOAP request: everything the executor asked vCenter, whatever the simulator does
// with it (its guest shutdown, for one, powers the VM off only later).
type soapRecorder struct {
	*httptest.Server
	sim simulator

	mu      sync.Mutex
	methods []string
}

// soapMethod is the first element in a SOAP envelope's body: the method called.
var soapMethod = regexp.MustCompile(`<(?:[\w-]+:)?Body[^>]*>\s*<(?:[\w-]+:)?(\w+)`)

func newSOAPRecorder(t *testing.T, sim simulator) *soapRecorder {
	t.Helper()
	u, err := url.Parse(sim.URL)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(sim.CA))
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	r := &soapRecorder{sim: sim}
	r.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if m := soapMethod.FindSubmatch(body); m != nil {
			r.mu.Lock()
			r.methods = append(r.methods, string(m[1]))
			r.mu.Unlock()
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

// secrets is the data of a credentials Secret for the simulator behind the recorder.
func (r *soapRecorder) secrets() map[string][]byte {
	s := r.sim.secrets()
	s[keyURL] = []byte(r.URL + "/sdk")
	s[keyCA] = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate().Raw})
	return s
}

func (r *soapRecorder) called() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.methods)
}

// planRequest is what the engine hands Plan (plugintest.PlanRequest), with the Secret's
// data.
func planRequest(t *testing.T, params map[string]string, secrets map[string][]byte) *sdk.Request {
	t.Helper()
	return plugintest.AddSecret(plugintest.PlanRequest(t, newTestExecutor(), params), paramCredentialsSecret, secrets)
}

// assertNoSecret checks that no value of the Secret, nor the path of its url, is in what
// the plan or the error says; the SDK would remove them, the executor must not rely on it.
func assertNoSecret(t *testing.T, secrets map[string][]byte, p sdk.Plan, err error) {
	t.Helper()
	texts := plugintest.PlanTexts(p)
	if err != nil {
		texts = append(texts, err.Error())
	}
	forbidden := append([]string{simPassword, "hunter2", "/sdk"}, plugintest.SecretValues(secrets)...)
	for _, text := range texts {
		plugintest.AssertNoSecret(t, text, forbidden...)
	}
}

func TestPlan(t *testing.T) {
	byUUID := withParams(nil, paramProviderID, "vsphere://"+planVMUUID, paramNode, planVMName)
	tests := []struct {
		name    string
		arrange func(t *testing.T, sim simulator, vm vcsim.VM)
		params  map[string]string
		// secrets changes the valid credentials; nil keeps them.
		secrets func(s map[string][]byte)
		// want is the plan, with HOST for the address of vCenter; wantReason an error's.
		want       sdk.Plan
		wantReason string
	}{
		{
			name:    "powered on with VMware Tools: guest shutdown first",
			arrange: func(t *testing.T, sim simulator, vm vcsim.VM) { sim.toolsRunning(t, vm) },
			params:  byUUID,
			want: sdk.Plan{
				Summary: `destroy VM "demo-worker-1" (4210f0a4-7b1c-4c2e-9d3a-5e6f7a8b9c0d), poweredOn, VMware Tools running: guest shutdown first, power off after 5m`,
				Details: []sdk.PlanItem{{Kind: "VirtualMachine", Name: "demo-worker-1 (4210f0a4-7b1c-4c2e-9d3a-5e6f7a8b9c0d)", Action: "destroy",
					Note: "poweredOn, VMware Tools running: guest shutdown first, power off after 5m"}},
				Outputs: map[string]string{outInstanceID: planVMUUID, outPreviousPowerState: "poweredOn"},
			},
		},
		{
			name:   "powered on without VMware Tools, found by name: powered off",
			params: withParams(nil, paramNode, planVMName, paramShutdownTimeout, "90s"),
			want: sdk.Plan{
				Summary: `destroy VM "demo-worker-1" (4210f0a4-7b1c-4c2e-9d3a-5e6f7a8b9c0d), poweredOn, VMware Tools not running: power off at once`,
				Details: []sdk.PlanItem{{Kind: "VirtualMachine", Name: "demo-worker-1 (4210f0a4-7b1c-4c2e-9d3a-5e6f7a8b9c0d)", Action: "destroy",
					Note: "poweredOn, VMware Tools not running: power off at once"}},
				Outputs: map[string]string{outInstanceID: planVMUUID, outPreviousPowerState: "poweredOn"},
			},
		},
		{
			name:    "shutdownTimeout 0s: powered off although Tools run",
			arrange: func(t *testing.T, sim simulator, vm vcsim.VM) { sim.toolsRunning(t, vm) },
			params:  withParams(byUUID, paramShutdownTimeout, "0s", paramDatacenter, "DC0"),
			want: sdk.Plan{
				Summary: `destroy VM "demo-worker-1" (4210f0a4-7b1c-4c2e-9d3a-5e6f7a8b9c0d), poweredOn: power off at once (shutdownTimeout 0s)`,
				Details: []sdk.PlanItem{{Kind: "VirtualMachine", Name: "demo-worker-1 (4210f0a4-7b1c-4c2e-9d3a-5e6f7a8b9c0d)", Action: "destroy",
					Note: "poweredOn: power off at once (shutdownTimeout 0s)"}},
				Outputs: map[string]string{outInstanceID: planVMUUID, outPreviousPowerState: "poweredOn"},
			},
		},
		{
			name:    "powered off: destroyed as it is",
			arrange: func(t *testing.T, sim simulator, vm vcsim.VM) { sim.power(t, vm, "off") },
			params:  byUUID,
			want: sdk.Plan{
				Summary: `destroy VM "demo-worker-1" (4210f0a4-7b1c-4c2e-9d3a-5e6f7a8b9c0d), poweredOff: no power-off needed`,
				Details: []sdk.PlanItem{{Kind: "VirtualMachine", Name: "demo-worker-1 (4210f0a4-7b1c-4c2e-9d3a-5e6f7a8b9c0d)", Action: "destroy",
					Note: "poweredOff: no power-off needed"}},
				Outputs: map[string]string{outInstanceID: planVMUUID, outPreviousPowerState: "poweredOff"},
			},
		},
		{
			name:    "suspended: powered off",
			arrange: func(t *testing.T, sim simulator, vm vcsim.VM) { sim.power(t, vm, "suspend") },
			params:  byUUID,
			want: sdk.Plan{
				Summary: `destroy VM "demo-worker-1" (4210f0a4-7b1c-4c2e-9d3a-5e6f7a8b9c0d), suspended: power off at once`,
				Details: []sdk.PlanItem{{Kind: "VirtualMachine", Name: "demo-worker-1 (4210f0a4-7b1c-4c2e-9d3a-5e6f7a8b9c0d)", Action: "destroy",
					Note: "suspended: power off at once"}},
				Outputs: map[string]string{outInstanceID: planVMUUID, outPreviousPowerState: "suspended"},
			},
		},
		{
			// As Create, a providerID that matches no VM never falls back to the node's name.
			name:   "gone: nothing to do, the VM of the node's name untouched",
			params: withParams(nil, paramProviderID, "vsphere://"+goneUUID, paramNode, planVMName),
			want: sdk.Plan{
				Summary: "VM 00000000-0000-0000-0000-000000000001 is gone already: nothing to do",
				Details: []sdk.PlanItem{{Kind: "VirtualMachine", Name: goneUUID, Action: "unchanged",
					Note: "no VM with UUID 00000000-0000-0000-0000-000000000001 in vCenter HOST: already gone"}},
			},
		},
		{
			name:   "gone, looked up by name",
			params: withParams(nil, paramNode, "k8s-node-gone"),
			want: sdk.Plan{
				Summary: `VM "k8s-node-gone" is gone already: nothing to do`,
				Details: []sdk.PlanItem{{Kind: "VirtualMachine", Name: `"k8s-node-gone"`, Action: "unchanged",
					Note: `no VM named "k8s-node-gone" in vCenter HOST: already gone`}},
			},
		},
		{
			// A kubelet chooses its Node's providerID: the plan fails as the run would.
			name:       "a VM that is not the node's: Create's error",
			params:     withParams(nil, paramProviderID, "vsphere://"+planVMUUID, paramNode, "k8s-node-7"),
			wantReason: "VMNotTheNodes",
		},
		{
			name:       "wrong password: Create's error",
			params:     byUUID,
			secrets:    func(s map[string][]byte) { s[keyPassword] = []byte("hunter2") },
			wantReason: "InvalidCredentials",
		},
		{
			name:       "unknown user: Create's error",
			params:     byUUID,
			secrets:    func(s map[string][]byte) { s[keyUsername] = []byte("nobody@vsphere.local") },
			wantReason: "InvalidCredentials",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := startVCSim(t)
			vm, err := sim.Rename(t.Context(), sim.vm(t, "DC0_H0_VM0"), planVMName, planVMUUID)
			require.NoError(t, err)
			if tt.arrange != nil {
				tt.arrange(t, sim, vm)
			}
			before := sim.vms(t)
			rec := newSOAPRecorder(t, sim)
			secrets := rec.secrets()
			if tt.secrets != nil {
				tt.secrets(secrets)
			}
			e := newTestExecutor()

			got, err := e.Plan(t.Context(), planRequest(t, tt.params, secrets))
			assertNoSecret(t, secrets, got, err)
			if tt.wantReason != "" {
				plugintest.AssertOutcome(t, plugintest.Outcome{Reason: tt.wantReason, Permanent: true}, sdk.Result{}, err)
				// The engine fails the step as a run would: with Create's very error (a
				// login refused, Create destroys nothing either).
				plugintest.AssertPlanFailsAsCreate(t, e, planRequest(t, tt.params, secrets), err)
			} else {
				require.NoError(t, err)
				host := strings.TrimPrefix(rec.URL, "https://")
				for i := range tt.want.Details {
					tt.want.Details[i].Note = strings.ReplaceAll(tt.want.Details[i].Note, "HOST", host)
				}
				assert.Equal(t, tt.want, got)
				assert.Equal(t, got, got.Bounded(), "within what a step's status keeps")
			}

			// Nothing changed: every VM is there in its power state, and vCenter was asked
			// nothing but reads.
			assert.Equal(t, before, sim.vms(t), "no VM changed")
			assert.True(t, sim.exists(t, vm), "the VM is still there")
			assert.NotEmpty(t, rec.called())
			for _, m := range rec.called() {
				assert.Contains(t, readOnlyMethods, m, "Plan called a vSphere method that is not a read")
			}
		})
	}
}

// TestPlanPowersNothingOff: for a VM whose guest would be asked to shut down, the plan
// asks vCenter nothing but reads (the simulator's guest shutdown takes effect later, so the
// power state alone would not show a shutdown request), and the VM is still on.
func TestPlanPowersNothingOff(t *testing.T) {
	sim := startVCSim(t)
	vm := sim.vm(t, "DC0_H0_VM0")
	sim.toolsRunning(t, vm)
	rec := newSOAPRecorder(t, sim)
	got, err := newTestExecutor().Plan(t.Context(), planRequest(t, withParams(nil, paramProviderID, "vsphere://"+vm.UUID, paramNode, vm.Name), rec.secrets()))
	require.NoError(t, err)
	assert.Equal(t, "destroy", got.Details[0].Action)
	assert.NotEmpty(t, rec.called())
	for _, m := range rec.called() {
		assert.Contains(t, readOnlyMethods, m, "Plan called a vSphere method that is not a read")
	}
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, sim.vm(t, vm.Name).PowerState)
	assert.True(t, sim.exists(t, vm))
}

// TestPlanNamesTheVMCreateDestroys: Plan and Create find the VM by the same code, so a
// plan's outputs are those of the run that follows it.
func TestPlanNamesTheVMCreateDestroys(t *testing.T) {
	sim := startVCSim(t)
	vm := sim.vm(t, "DC0_H0_VM0")
	e := newTestExecutor()
	params := withParams(nil, paramNode, vm.Name)

	plan, err := e.Plan(t.Context(), planRequest(t, params, sim.secrets()))
	require.NoError(t, err)
	req := planRequest(t, params, sim.secrets())
	req.Hook = sdk.HookCreate
	res, err := e.Create(t.Context(), req)
	require.NoError(t, err)
	assert.True(t, res.Done)
	assert.Equal(t, plan.Outputs, res.Outputs)
	assert.False(t, sim.exists(t, vm))
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 90 * time.Second: "1m30s", 5 * time.Minute: "5m", time.Hour: "1h", 90 * time.Minute: "1h30m", 1500 * time.Millisecond: "1.5s",
	} {
		assert.Equal(t, want, shortDuration(d), d)
	}
}
