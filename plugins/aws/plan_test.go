package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

// planRequest is what the engine hands Plan (plugintest.PlanRequest), with the Secret's
// data.
func planRequest(t *testing.T, params map[string]string, secrets map[string][]byte) *sdk.Request {
	t.Helper()
	return plugintest.AddSecret(plugintest.PlanRequest(t, newTestInstance(), params), paramCredentialsSecret, secrets)
}

func TestPlan(t *testing.T) {
	const wrongKey = "wrong/Secret+Key/For/Tests/Only/9876543210"
	tests := []struct {
		name    string
		setup   func(f *fakeEC2)
		params  func(f *fakeEC2) map[string]string // nil: providerID aws:///us-east-1a/<id>, endpoint f
		secrets map[string][]byte                  // nil: valid
		// want is the plan; wantReason an error's, which must be Create's.
		want       sdk.Plan
		wantReason string
		// wantState is the instance's state in the cloud after the plan: unchanged.
		wantState string
	}{
		{
			name: "running, with a Name tag: terminate",
			setup: func(f *fakeEC2) {
				f.addInstance(instanceID, "running", 0)
				f.nameInstance(instanceID, "k8s-node-3")
			},
			want: sdk.Plan{
				Summary: "terminate instance k8s-node-3 (i-0123456789abcdef0), running",
				Details: []sdk.PlanItem{{Kind: "Instance", Name: "k8s-node-3 (i-0123456789abcdef0)", Action: "terminate", Note: "running, in us-east-1"}},
				Outputs: map[string]string{outInstanceID: instanceID, outPreviousPowerState: "running"},
			},
			wantState: "running",
		},
		{
			name:  "stopped, by instanceID and region: terminate",
			setup: func(f *fakeEC2) { f.addInstance(instanceID, "stopped", 0) },
			params: func(f *fakeEC2) map[string]string {
				return map[string]string{"instanceID": instanceID, "region": region, "endpoint": f.URL, "credentialsSecret": "aws-creds", "node": nodeName}
			},
			want: sdk.Plan{
				Summary: "terminate instance i-0123456789abcdef0, stopped",
				Details: []sdk.PlanItem{{Kind: "Instance", Name: "i-0123456789abcdef0", Action: "terminate", Note: "stopped, in us-east-1"}},
				Outputs: map[string]string{outInstanceID: instanceID, outPreviousPowerState: "stopped"},
			},
			wantState: "stopped",
		},
		{
			name:  "shutting down already: wait",
			setup: func(f *fakeEC2) { f.addInstance(instanceID, "shutting-down", 10) },
			want: sdk.Plan{
				Summary: "instance i-0123456789abcdef0 is shutting down already: wait until it is terminated",
				Details: []sdk.PlanItem{{Kind: "Instance", Name: "i-0123456789abcdef0", Action: "wait", Note: "shutting-down, in us-east-1"}},
				Outputs: map[string]string{outInstanceID: instanceID, outPreviousPowerState: "shutting-down"},
			},
			wantState: "shutting-down",
		},
		{
			name:  "terminated: nothing to do",
			setup: func(f *fakeEC2) { f.addInstance(instanceID, "terminated", 0) },
			want: sdk.Plan{
				Summary: "instance i-0123456789abcdef0 is terminated already: nothing to do",
				Details: []sdk.PlanItem{{Kind: "Instance", Name: "i-0123456789abcdef0", Action: "unchanged", Note: "terminated, in us-east-1"}},
				Outputs: map[string]string{outInstanceID: instanceID, outPreviousPowerState: "terminated"},
			},
			wantState: "terminated",
		},
		{
			name: "gone: nothing to do",
			want: sdk.Plan{
				Summary: "instance i-0123456789abcdef0 is gone already: nothing to do",
				Details: []sdk.PlanItem{{Kind: "Instance", Name: "i-0123456789abcdef0", Action: "unchanged", Note: "EC2 in us-east-1 does not know it (any more)"}},
				Outputs: map[string]string{outInstanceID: instanceID, outPreviousPowerState: unknownState},
			},
		},
		{
			name: "another node's instance: Create's error",
			setup: func(f *fakeEC2) {
				f.addInstance(instanceID, "running", 0)
				f.renameInstance(instanceID, "ip-10-0-9-99.ec2.internal")
				f.nameInstance(instanceID, "k8s-node-9")
			},
			wantReason: "InstanceNotTheNodes",
			wantState:  "running",
		},
		{
			name:       "wrong secret key: Create's error",
			setup:      func(f *fakeEC2) { f.addInstance(instanceID, "running", 0) },
			secrets:    map[string][]byte{keyAccessKeyID: []byte(accessKeyID), keySecretAccessKey: []byte(wrongKey)},
			wantReason: "InvalidCredentials",
			wantState:  "running",
		},
		{
			name:       "Secret without a secret key: Create's error",
			setup:      func(f *fakeEC2) { f.addInstance(instanceID, "running", 0) },
			secrets:    map[string][]byte{keyAccessKeyID: []byte(accessKeyID)},
			wantReason: "MissingCredentials",
			wantState:  "running",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, params, secrets := step(t, tt.setup, tt.params, tt.secrets)
			e := newTestInstance(loopback)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()

			got, err := e.Plan(ctx, planRequest(t, params, secrets))
			texts := plugintest.PlanTexts(got)
			if tt.wantReason != "" {
				plugintest.AssertOutcome(t, plugintest.Outcome{Reason: tt.wantReason, Permanent: true}, sdk.Result{}, err)
				require.Error(t, err)
				texts = append(texts, err.Error())
				// The engine fails the step as a run would: with Create's very error.
				plugintest.AssertPlanFailsAsCreate(t, e, planRequest(t, params, secrets), err)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				assert.Equal(t, got, got.Bounded(), "within what a step's status keeps")
			}
			for _, text := range texts {
				plugintest.AssertNoSecret(t, text, secretAccessKey, wrongKey, accessKeyID)
			}

			// Nothing changed: the cloud was asked DescribeInstances only (none at all
			// without a key), and the instance is as it was.
			assert.Zero(t, f.count("TerminateInstances"), "TerminateInstances requests")
			for action := range f.actions() {
				assert.Equal(t, "DescribeInstances", action, "Plan sent an action that is not a read")
			}
			if tt.wantState != "" {
				f.mu.Lock()
				assert.Equal(t, tt.wantState, f.instances[instanceID].state)
				f.mu.Unlock()
			}
		})
	}
}

// TestPlanNamesTheInstanceCreateTerminates: Plan and Create look the instance up by the
// same code, so a plan's outputs are those of the run that follows it.
func TestPlanNamesTheInstanceCreateTerminates(t *testing.T) {
	f := newFakeEC2(t, accessKeyID, secretAccessKey, region)
	f.addInstance(instanceID, "running", 0)
	e := newTestInstance(loopback)
	params := stepParams(f.URL)

	plan, err := e.Plan(t.Context(), planRequest(t, params, validSecrets()))
	require.NoError(t, err)
	assert.Zero(t, f.count("TerminateInstances"))
	req := planRequest(t, params, validSecrets())
	req.Hook = sdk.HookCreate
	res, err := e.Create(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, plan.Outputs, res.Outputs)
	assert.Equal(t, 1, f.count("TerminateInstances"))
}
