package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

// Outputs of vsphere.terminate-vm.
const (
	outInstanceID         = "instanceID"
	outPreviousPowerState = "previousPowerState"
)

// stateShutdownAsked, in the state the hook keeps across its waits (Result.WithState),
// says that it asked the guest to shut down: the executor keeps no memory, the engine
// hands the state back on the next call. It is no output: later steps have no use for it.
const stateShutdownAsked = "shutdownAsked"

// shutdownPoll is how often a guest shutdown in progress is looked at.
const shutdownPoll = 5 * time.Second

// terminateVM is vsphere.terminate-vm: it finds the node's VM, asks its guest to shut down
// (or powers it off when VMware Tools do not run or the guest has not stopped within
// shutdownTimeout of the hook's first call, the request's HookStarted), and destroys it
// once it is off. It never blocks on the guest: until
// the VM is off it answers "look again". A VM that is not there is done: a second run is a
// no-op.
//
// Delete and the other hooks are sdk.Base's no-ops on purpose: a destroyed VM cannot come
// back, so the teardown of this step has nothing to undo.
type terminateVM struct {
	sdk.Base
	// policy says which addresses vCenter may be at: the url is the Secret's, so a
	// pipeline's author chooses it, and the plugin runs inside the operator's pod.
	policy *egress.Policy
	// limit puts the plugin's rate limits around the transport of every request to
	// vCenter: per namespace and vCenter, and for all the hooks the plugin serves.
	limit func(http.RoundTripper) http.RoundTripper
	// requestTimeout bounds each request to vCenter, its answer read whole included.
	requestTimeout time.Duration
	// log records the destructive actions on the plugin's stderr, which goes to the
	// operator's log. It never gets credentials.
	log *log.Logger
	now func() time.Time
}

// newTerminateVM returns the executor; policy checks every address it connects to, limit
// puts the plugin's rate limits around its transport.
func newTerminateVM(policy *egress.Policy, limit func(http.RoundTripper) http.RoundTripper) *terminateVM {
	return &terminateVM{policy: policy, limit: limit, requestTimeout: requestTimeout, log: log.New(os.Stderr, "", 0), now: time.Now}
}

// hookStarted is when the hook's first call was made, which the engine tells; a request
// without it (from a caller other than the engine) is a first call.
func (e *terminateVM) hookStarted(req *sdk.Request) time.Time {
	if req.HookStarted.IsZero() {
		return e.now()
	}
	return req.HookStarted
}

func (*terminateVM) Name() string { return "vsphere.terminate-vm" }

func (*terminateVM) Describe() sdk.Description {
	return sdk.Description{
		Version: "v0.1.0",
		Description: "Shuts down the guest of a node's vSphere VM (powering it off when the guest does not stop " +
			"in time) and destroys the VM. Outputs instanceID and previousPowerState.",
		Parameters: declarations(),
	}
}

// reasonVMNotTheNodes is the reason of the refusal to destroy a VM that is not the node's.
const reasonVMNotTheNodes = "VMNotTheNodes"

// vm is what the executor knows of the VM it terminates.
type vm struct {
	ref  types.ManagedObjectReference
	name string
	uuid string
	// hostName is the guest's hostname as VMware Tools report it; empty when unknown.
	hostName     string
	powerState   types.VirtualMachinePowerState
	toolsRunning bool
}

// isNodes tells whether the VM is the node's: its name is the node's, or its guest's
// hostname, ignoring case, is the node's name, or one of the two is the other's short name
// (a node is named by its FQDN or its short hostname). Two FQDNs in different domains
// never match: k8s-node-3.zone-a is not k8s-node-3.zone-b.
func (v *vm) isNodes(node string) bool {
	if v.name == node {
		return true
	}
	host, node := strings.ToLower(v.hostName), strings.ToLower(node)
	if host == "" {
		return false
	}
	return host == node || shortName(host) == node || host == shortName(node)
}

// shortName is a hostname's first label.
func shortName(host string) string {
	short, _, _ := strings.Cut(host, ".")
	return short
}

// notTheNodes is the refusal to destroy target, which is not node's.
func notTheNodes(target *vm, node string) error {
	host := "none reported"
	if target.hostName != "" {
		host = fmt.Sprintf("%q", target.hostName)
	}
	return sdk.Permanent(reasonVMNotTheNodes, fmt.Errorf(
		"%s, which the providerID names, is not node %q's: neither its name nor its guest hostname (%s) is the node's, "+
			"and a kubelet chooses its Node's providerID; nothing was done", target, node, host))
}

// id is the VM's BIOS UUID, or its managed object ID when vCenter does not know its
// configuration (an inaccessible VM).
func (v *vm) id() string {
	if v.uuid != "" {
		return v.uuid
	}
	return v.ref.Value
}

func (v *vm) String() string { return fmt.Sprintf("VM %q (%s)", v.name, v.id()) }

// found is what Create and Plan both start from: the parameters, the step's own outputs
// from earlier calls, a session with vCenter (the caller logs out) and the VM, nil when it
// is gone.
type found struct {
	p      params
	host   string
	own    map[string]string
	vc     *vcenter
	target *vm
}

// find logs in to vCenter and finds the step's VM: the one definition of which VM the step
// is about, so that a plan names the very VM a run would destroy, and fails where the run
// would (a refused login, an unknown datacenter, an ambiguous name).
func (e *terminateVM) find(ctx context.Context, req *sdk.Request) (*found, error) {
	p, err := parseParams(req)
	if err != nil {
		return nil, err
	}
	creds, err := parseCredentials(req.Secret(paramCredentialsSecret), p.secret)
	if err != nil {
		return nil, err
	}
	own := req.Outputs[req.Step]

	vc, err := e.login(ctx, creds, p.secret)
	if err != nil {
		return nil, err
	}
	target, err := vc.findVM(ctx, p, own[outInstanceID])
	if err != nil {
		vc.logout(ctx)
		return nil, err
	}
	return &found{p: p, host: creds.url.Host, own: own, vc: vc, target: target}, nil
}

// outputs are the step's outputs for the VM found.
func (f *found) outputs() map[string]string {
	out := map[string]string{outInstanceID: f.target.id(), outPreviousPowerState: string(f.target.powerState)}
	if v := f.own[outPreviousPowerState]; v != "" {
		out[outPreviousPowerState] = v // the state before this step touched the VM
	}
	return out
}

// shutdownFirst tells whether the VM's guest is asked to shut down before any power-off:
// it runs, with VMware Tools to ask, and shutdownTimeout gives it time.
func shutdownFirst(target *vm, p params) bool {
	return target.powerState == types.VirtualMachinePowerStatePoweredOn && p.shutdownTimeout > 0 && target.toolsRunning
}

func (e *terminateVM) Create(ctx context.Context, req *sdk.Request) (sdk.Result, error) {
	f, err := e.find(ctx, req)
	if err != nil {
		return sdk.Result{}, err
	}
	defer f.vc.logout(ctx)
	p, vc, target := f.p, f.vc, f.target
	if target == nil {
		return sdk.DoneWithOutputs(goneMessage(p, f.own, f.host), f.own), nil
	}

	out := f.outputs()
	who := fmt.Sprintf("pipeline %s/%s step %s", req.Pipeline.Namespace, req.Pipeline.Name, req.Step)

	// The guest has until shutdownTimeout after the hook's first call to stop.
	asked := req.State[stateShutdownAsked] != ""
	deadline := e.hookStarted(req).Add(p.shutdownTimeout)
	if target.powerState == types.VirtualMachinePowerStatePoweredOn {
		switch {
		case !asked && shutdownFirst(target, p):
			res, ok, err := e.shutdownGuest(ctx, vc, target, deadline, out, who)
			if ok || err != nil {
				return res, err
			}
			// VMware Tools stopped meanwhile: power off below.
		case asked && e.now().Before(deadline):
			return sdk.Result{
				RequeueAfter: min(shutdownPoll, max(time.Second, deadline.Sub(e.now()))),
				Outputs:      out,
				Message: fmt.Sprintf("waiting for the guest of %s to shut down; powering off at %s",
					target, deadline.UTC().Format(time.RFC3339)),
			}.WithState(req.State), nil
		}
	}

	why := ""
	if target.powerState != types.VirtualMachinePowerStatePoweredOff {
		why, err = e.powerOff(ctx, vc, target, p, asked, who)
		if err != nil {
			return sdk.Result{}, err
		}
	}
	e.log.Printf("%s: destroying %s", who, target)
	task, err := object.NewVirtualMachine(vc.client, target.ref).Destroy(ctx)
	if err == nil {
		err = vc.waitTask(ctx, task)
	}
	if err != nil && !fault.Is(err, &types.ManagedObjectNotFound{}) {
		return sdk.Result{}, vsphereError(fmt.Sprintf("destroy %s", target), err)
	}
	return sdk.DoneWithOutputs(fmt.Sprintf("%s%s destroyed", why, target), out), nil
}

// shutdownGuest asks the guest to shut down and answers "look again", keeping in its state
// that it asked. It returns false when the guest cannot be asked because VMware Tools
// stopped meanwhile: the caller powers off instead.
func (e *terminateVM) shutdownGuest(ctx context.Context, vc *vcenter, target *vm, deadline time.Time, out map[string]string, who string) (sdk.Result, bool, error) {
	e.log.Printf("%s: shutting down the guest of %s", who, target)
	err := object.NewVirtualMachine(vc.client, target.ref).ShutdownGuest(ctx)
	switch {
	case err == nil:
		return sdk.Result{
			RequeueAfter: min(shutdownPoll, max(time.Second, deadline.Sub(e.now()))),
			Outputs:      out,
			Message: fmt.Sprintf("guest shutdown of %s requested; powering off at %s if it has not stopped",
				target, deadline.UTC().Format(time.RFC3339)),
		}.WithState(map[string]string{stateShutdownAsked: "true"}), true, nil
	case fault.Is(err, &types.ToolsUnavailable{}):
		return sdk.Result{}, false, nil
	case fault.Is(err, &types.InvalidPowerState{}):
		// Powered off (or suspended) by someone else since it was read: look again.
		return sdk.Result{RequeueAfter: time.Second, Outputs: out,
			Message: fmt.Sprintf("the power state of %s changed; looking again", target)}, true, nil
	default:
		return sdk.Result{}, false, vsphereError(fmt.Sprintf("shut down the guest of %s", target), err)
	}
}

// powerOff powers the VM off and waits for the task, which takes seconds; it returns why,
// for the message.
func (e *terminateVM) powerOff(ctx context.Context, vc *vcenter, target *vm, p params, asked bool, who string) (string, error) {
	var why string
	switch {
	case target.powerState == types.VirtualMachinePowerStateSuspended:
		why = "suspended: powered off; "
	case asked:
		why = fmt.Sprintf("the guest did not shut down within %s: powered off; ", p.shutdownTimeout)
	case p.shutdownTimeout == 0:
		why = "powered off (shutdownTimeout 0s); "
	default:
		why = "VMware Tools not running: powered off; "
	}
	e.log.Printf("%s: powering off %s", who, target)
	task, err := object.NewVirtualMachine(vc.client, target.ref).PowerOff(ctx)
	if err == nil {
		err = vc.waitTask(ctx, task)
	}
	if err != nil && !fault.IsAlreadyPoweredOffError(err) {
		return "", vsphereError(fmt.Sprintf("power off %s", target), err)
	}
	return why, nil
}

func goneMessage(p params, own map[string]string, host string) string {
	switch {
	case own[outInstanceID] != "":
		return fmt.Sprintf("VM %s is gone from vCenter %s: destroyed already", own[outInstanceID], host)
	case p.uuid != "":
		return fmt.Sprintf("no VM with UUID %s in vCenter %s: already gone", p.uuid, host)
	default:
		return fmt.Sprintf("no VM named %q in vCenter %s: already gone", p.node, host)
	}
}

// vmProperties are the properties the executor reads of a VM.
var vmProperties = []string{"name", "config.uuid", "runtime.powerState", "guest.toolsRunningStatus", "guest.hostName", "summary.guest.hostName"}

// findVM returns the VM the step terminates, or nil when there is none. recorded is the
// instanceID an earlier call of this step found: once the step knows its VM it looks for
// that one only, so that a repeated run never picks another VM by name (such as the
// node's replacement).
func (v *vcenter) findVM(ctx context.Context, p params, recorded string) (*vm, error) {
	var dc *object.Datacenter
	if p.datacenter != "" {
		var err error
		dc, err = find.NewFinder(v.client, false).Datacenter(ctx, p.datacenter)
		var notFound *find.NotFoundError
		if errors.As(err, &notFound) {
			return nil, invalidParameter("parameter %s: no datacenter %q in vCenter", paramDatacenter, p.datacenter)
		}
		if err != nil {
			return nil, vsphereError(fmt.Sprintf("find datacenter %q", p.datacenter), err)
		}
	}
	switch {
	case recorded != "" && biosUUID.MatchString(recorded):
		return v.findByUUID(ctx, dc, recorded)
	case recorded != "":
		return v.vmProperties(ctx, types.ManagedObjectReference{Type: "VirtualMachine", Value: recorded})
	}
	// The providerID names the very machine the Node ran on: when no VM has its UUID, that
	// machine is gone, and a VM with the node's name may be its replacement.
	if p.uuid != "" {
		target, err := v.findByUUID(ctx, dc, p.uuid)
		if err != nil || target == nil {
			return target, err
		}
		// The kubelet chose the providerID, so a compromised node may name another node's
		// VM: refuse it here, before Create sends any power operation (a recorded
		// instanceID, above, was checked by the call that recorded it).
		if !target.isNodes(p.node) {
			return nil, notTheNodes(target, p.node)
		}
		return target, nil
	}
	// A VM found by the node's name is the node's by construction.
	return v.findByName(ctx, dc, p.node)
}

func (v *vcenter) findByUUID(ctx context.Context, dc *object.Datacenter, uuid string) (*vm, error) {
	// vmSearch true, instanceUuid false: the providerID holds the BIOS UUID (config.uuid).
	ref, err := object.NewSearchIndex(v.client).FindByUuid(ctx, dc, uuid, true, nil)
	if err != nil {
		return nil, vsphereError(fmt.Sprintf("find the VM with UUID %s", uuid), err)
	}
	if ref == nil {
		return nil, nil
	}
	return v.vmProperties(ctx, ref.Reference())
}

func (v *vcenter) findByName(ctx context.Context, dc *object.Datacenter, name string) (*vm, error) {
	root := v.client.ServiceContent.RootFolder
	if dc != nil {
		root = dc.Reference()
	}
	cv, err := view.NewManager(v.client).CreateContainerView(ctx, root, []string{"VirtualMachine"}, true)
	if err != nil {
		return nil, vsphereError(fmt.Sprintf("find the VM named %q", name), err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), logoutTimeout)
		defer cancel()
		_ = cv.Destroy(ctx) // the view dies with the session anyway
	}()
	// Names are compared here rather than with a property.Match filter, which globs.
	var all []mo.VirtualMachine
	if err := cv.Retrieve(ctx, []string{"VirtualMachine"}, []string{"name"}, &all); err != nil {
		return nil, vsphereError(fmt.Sprintf("find the VM named %q", name), err)
	}
	var refs []types.ManagedObjectReference
	for _, m := range all {
		if m.Name == name {
			refs = append(refs, m.Reference())
		}
	}
	switch len(refs) {
	case 0:
		return nil, nil
	case 1:
		return v.vmProperties(ctx, refs[0])
	default:
		return nil, sdk.Permanent("AmbiguousVM", fmt.Errorf(
			"%d VMs are named %q: give the node's providerID, or the parameter %s", len(refs), name, paramDatacenter))
	}
}

// vmProperties reads the VM; nil when it is gone meanwhile.
func (v *vcenter) vmProperties(ctx context.Context, ref types.ManagedObjectReference) (*vm, error) {
	var m mo.VirtualMachine
	err := property.DefaultCollector(v.client).RetrieveOne(ctx, ref, vmProperties, &m)
	if fault.Is(err, &types.ManagedObjectNotFound{}) {
		return nil, nil
	}
	if err != nil {
		return nil, vsphereError(fmt.Sprintf("read VM %s", ref.Value), err)
	}
	out := &vm{ref: ref, name: m.Name, powerState: m.Runtime.PowerState}
	if m.Config != nil {
		out.uuid = m.Config.Uuid
	}
	if m.Guest != nil {
		out.toolsRunning = m.Guest.ToolsRunningStatus == string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)
		out.hostName = m.Guest.HostName
	}
	if out.hostName == "" && m.Summary.Guest != nil {
		out.hostName = m.Summary.Guest.HostName
	}
	return out, nil
}
