package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// kindInstance is the kind of the row of a plan.
const kindInstance = "Instance"

var _ sdk.Planner = (*terminateInstance)(nil)

// Plan tells what Create would do, from EC2 as it is now: it looks the instance up as
// Create does (lookup), so that a key EC2 refuses fails the plan with Create's error. It
// changes nothing: it sends DescribeInstances only, never TerminateInstances, not even
// with DryRun: a plan must not hang on one flag of a destructive request.
func (t *terminateInstance) Plan(ctx context.Context, req *sdk.Request) (sdk.Plan, error) {
	l, err := t.lookup(ctx, req)
	if err != nil {
		return sdk.Plan{}, err
	}
	if l.instance == nil {
		return sdk.Plan{
			Summary: fmt.Sprintf("instance %s is gone already: nothing to do", l.instanceID),
			Details: []sdk.PlanItem{{Kind: kindInstance, Name: l.instanceID, Action: "unchanged",
				Note: fmt.Sprintf("EC2 in %s does not know it (any more)", l.region)}},
			Outputs: l.outputs,
		}, nil
	}
	name := instanceName(l.instance)
	state := l.instance.State.Name
	row := sdk.PlanItem{Kind: kindInstance, Name: name, Note: fmt.Sprintf("%s, in %s", state, l.region)}
	var summary string
	switch state {
	case types.InstanceStateNameTerminated:
		row.Action = "unchanged"
		summary = fmt.Sprintf("instance %s is terminated already: nothing to do", name)
	case types.InstanceStateNameShuttingDown:
		// Create terminates nothing then: it waits for EC2 to finish.
		row.Action = "wait"
		summary = fmt.Sprintf("instance %s is shutting down already: wait until it is terminated", name)
	default:
		// Create would refuse another node's instance: the plan fails with its error.
		if err := l.checkNodesInstance(); err != nil {
			return sdk.Plan{}, err
		}
		row.Action = "terminate"
		summary = fmt.Sprintf("terminate instance %s, %s", name, state)
	}
	return sdk.Plan{Summary: summary, Details: []sdk.PlanItem{row}, Outputs: l.outputs}, nil
}

// instanceName is the instance's Name tag, if it has one, and its ID: "k8s-node-3
// (i-0123...)", as the EC2 console shows it.
func instanceName(i *types.Instance) string {
	id := aws.ToString(i.InstanceId)
	if name := nameTag(i); name != "" {
		return fmt.Sprintf("%s (%s)", name, id)
	}
	return id
}

// nameTag is the instance's Name tag, trimmed; "" if it has none.
func nameTag(i *types.Instance) string {
	for _, tag := range i.Tags {
		if aws.ToString(tag.Key) == "Name" {
			return strings.TrimSpace(aws.ToString(tag.Value))
		}
	}
	return ""
}
