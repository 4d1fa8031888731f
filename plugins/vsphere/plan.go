package main

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// kindVM is the kind of the row of a plan.
const kindVM = "VirtualMachine"

var _ sdk.Planner = (*terminateVM)(nil)

// Plan tells what Create would do, from vCenter as it is now: it logs in and finds the VM
// as Create does (find), so that a login vCenter refuses fails the plan with Create's
// error, and reads its power state and VMware Tools. It changes nothing: no guest
// shutdown, power-off or destroy is sent, only the login, look-ups and logout.
func (e *terminateVM) Plan(ctx context.Context, req *sdk.Request) (sdk.Plan, error) {
	f, err := e.find(ctx, req)
	if err != nil {
		return sdk.Plan{}, err
	}
	defer f.vc.logout(ctx)

	if f.target == nil {
		name := goneName(f.p, f.own)
		return sdk.Plan{
			Summary: fmt.Sprintf("VM %s is gone already: nothing to do", name),
			Details: []sdk.PlanItem{{Kind: kindVM, Name: name, Action: "unchanged", Note: goneMessage(f.p, f.own, f.host)}},
			// What Create outputs for a VM that is gone: what an earlier call recorded.
			Outputs: maps.Clone(f.own),
		}, nil
	}
	how := stopPlan(f.target, f.p)
	return sdk.Plan{
		Summary: fmt.Sprintf("destroy %s, %s", f.target, how),
		Details: []sdk.PlanItem{{
			Kind: kindVM, Name: fmt.Sprintf("%s (%s)", f.target.name, f.target.id()), Action: "destroy", Note: how,
		}},
		Outputs: f.outputs(),
	}, nil
}

// stopPlan says how Create would stop the VM before destroying it, by the same decision
// (shutdownFirst): its power state, then a guest shutdown or a power-off.
func stopPlan(target *vm, p params) string {
	switch {
	case target.powerState == types.VirtualMachinePowerStatePoweredOff:
		return "poweredOff: no power-off needed"
	case shutdownFirst(target, p):
		return fmt.Sprintf("poweredOn, VMware Tools running: guest shutdown first, power off after %s", shortDuration(p.shutdownTimeout))
	case target.powerState == types.VirtualMachinePowerStateSuspended:
		return "suspended: power off at once"
	case p.shutdownTimeout == 0:
		return "poweredOn: power off at once (shutdownTimeout 0s)"
	default:
		return "poweredOn, VMware Tools not running: power off at once"
	}
}

// goneName names the VM that is gone as the step looked for it: by the UUID an earlier
// call recorded, the providerID's, or the node's name.
func goneName(p params, own map[string]string) string {
	switch {
	case own[outInstanceID] != "":
		return own[outInstanceID]
	case p.uuid != "":
		return p.uuid
	default:
		return fmt.Sprintf("%q", p.node)
	}
}

// shortDuration prints d as people write it: 5m rather than 5m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
