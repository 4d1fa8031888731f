package main

import (
	"context"
	"fmt"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// kindServer is the kind of the row of a plan.
const kindServer = "Server"

var _ sdk.Planner = (*terminateServer)(nil)

// Plan tells what Create would do, from Nova as it is now: it authenticates and gets the
// server as Create does (lookup), so that credentials Keystone refuses fail the plan with
// Create's error. It changes nothing: a token request and a GET of the server, never a
// DELETE.
func (t *terminateServer) Plan(ctx context.Context, req *sdk.Request) (sdk.Plan, error) {
	l, err := t.lookup(ctx, req)
	if err != nil {
		return sdk.Plan{}, err
	}
	if l.server == nil {
		return sdk.Plan{
			Summary: fmt.Sprintf("server %s is gone already: nothing to do", l.serverID),
			Details: []sdk.PlanItem{{Kind: kindServer, Name: l.serverID, Action: "unchanged", Note: "Nova does not know it (any more)"}},
			Outputs: l.outputs,
		}, nil
	}
	name := serverName(l.server, l.serverID)
	row := sdk.PlanItem{Kind: kindServer, Name: name, Note: serverState(l.server)}
	var summary string
	if beingDeleted(l.server) {
		// Create sends no second DELETE: it waits for Nova to finish.
		row.Action = "wait"
		summary = fmt.Sprintf("server %s is being deleted already: wait until Nova no longer knows it", name)
	} else {
		row.Action = "delete"
		summary = fmt.Sprintf("delete server %s, %s", name, row.Note)
	}
	return sdk.Plan{Summary: summary, Details: []sdk.PlanItem{row}, Outputs: l.outputs}, nil
}

// serverName is the server's name and ID, "k8s-node-3 (8c3a7e0e-...)", or its ID alone
// when it has no name.
func serverName(s *servers.Server, id string) string {
	if s.Name == "" {
		return id
	}
	return fmt.Sprintf("%s (%s)", s.Name, id)
}

// serverState is the server's status, with its power state and task when Nova reports
// them: "ACTIVE, power state RUNNING".
func serverState(s *servers.Server) string {
	state := s.Status
	if s.PowerState != servers.NOSTATE {
		state += ", power state " + s.PowerState.String()
	}
	if s.TaskState != "" {
		state += ", task " + s.TaskState
	}
	return state
}
