package main

import (
	"context"
	"net/http"
	"strings"
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
	return plugintest.AddSecret(plugintest.PlanRequest(t, newTestServer(), params), paramCredentialsSecret, secrets)
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(f *fakeCloud)
		params  map[string]string         // nil: providerID openstack:///serverID
		secrets func(s map[string][]byte) // changes the valid password credentials
		// want is the plan; wantReason an error's, which must be Create's.
		want       sdk.Plan
		wantReason string
	}{
		{
			name:  "active and running: delete",
			setup: func(f *fakeCloud) { f.addServer(serverID, "ACTIVE", 1, 0) },
			want: sdk.Plan{
				Summary: "delete server k8s-node-3 (8c3a7e0e-5f7b-4c8e-9d55-2f1a0b6c9d01), ACTIVE, power state RUNNING",
				Details: []sdk.PlanItem{{Kind: "Server", Name: "k8s-node-3 (8c3a7e0e-5f7b-4c8e-9d55-2f1a0b6c9d01)", Action: "delete",
					Note: "ACTIVE, power state RUNNING"}},
				Outputs: map[string]string{outInstanceID: serverID, outPreviousPowerState: "RUNNING", outPreviousStatus: "ACTIVE"},
			},
		},
		{
			name:   "shut off, by serverID: delete",
			setup:  func(f *fakeCloud) { f.addServer(serverID, "SHUTOFF", 4, 0) },
			params: map[string]string{"serverID": serverID, "node": nodeName, "credentialsSecret": "os-creds"},
			want: sdk.Plan{
				Summary: "delete server k8s-node-3 (8c3a7e0e-5f7b-4c8e-9d55-2f1a0b6c9d01), SHUTOFF, power state SHUTDOWN",
				Details: []sdk.PlanItem{{Kind: "Server", Name: "k8s-node-3 (8c3a7e0e-5f7b-4c8e-9d55-2f1a0b6c9d01)", Action: "delete",
					Note: "SHUTOFF, power state SHUTDOWN"}},
				Outputs: map[string]string{outInstanceID: serverID, outPreviousPowerState: "SHUTDOWN", outPreviousStatus: "SHUTOFF"},
			},
		},
		{
			name: "being deleted already: wait",
			setup: func(f *fakeCloud) {
				f.addServer(serverID, "ACTIVE", 1, 10)
				f.servers[serverID].deleting = true
			},
			want: sdk.Plan{
				Summary: "server k8s-node-3 (8c3a7e0e-5f7b-4c8e-9d55-2f1a0b6c9d01) is being deleted already: wait until Nova no longer knows it",
				Details: []sdk.PlanItem{{Kind: "Server", Name: "k8s-node-3 (8c3a7e0e-5f7b-4c8e-9d55-2f1a0b6c9d01)", Action: "wait",
					Note: "ACTIVE, power state RUNNING, task deleting"}},
				Outputs: map[string]string{outInstanceID: serverID, outPreviousPowerState: "RUNNING", outPreviousStatus: "ACTIVE"},
			},
		},
		{
			name: "gone: nothing to do",
			want: sdk.Plan{
				Summary: "server 8c3a7e0e-5f7b-4c8e-9d55-2f1a0b6c9d01 is gone already: nothing to do",
				Details: []sdk.PlanItem{{Kind: "Server", Name: serverID, Action: "unchanged", Note: "Nova does not know it (any more)"}},
				Outputs: map[string]string{outInstanceID: serverID, outPreviousPowerState: unknownState, outPreviousStatus: unknownState},
			},
		},
		{
			name:       "wrong password: Create's error",
			setup:      func(f *fakeCloud) { f.addServer(serverID, "ACTIVE", 1, 0) },
			secrets:    func(s map[string][]byte) { s[keyPassword] = []byte("wrong-" + password) },
			wantReason: "InvalidCredentials",
		},
		{
			name:  "wrong application credential secret: Create's error",
			setup: func(f *fakeCloud) { f.addServer(serverID, "ACTIVE", 1, 0) },
			secrets: func(s map[string][]byte) {
				s[keyAppCredentialID], s[keyAppCredentialSecret] = []byte("ac1"), []byte("wrong-"+password)
			},
			wantReason: "InvalidCredentials",
		},
		{
			name: "a server not the node's: Create's error",
			setup: func(f *fakeCloud) {
				f.addServer(serverID, "ACTIVE", 1, 0)
				f.servers[serverID].name = "db-primary"
			},
			wantReason: "ServerNotTheNodes",
		},
		{
			name:       "Secret without a password: Create's error",
			setup:      func(f *fakeCloud) { f.addServer(serverID, "ACTIVE", 1, 0) },
			secrets:    func(s map[string][]byte) { delete(s, keyPassword) },
			wantReason: "MissingCredentials",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, params, secrets := step(t, tt.setup, tt.params)
			if tt.secrets != nil {
				tt.secrets(secrets)
			}
			wasDeleting := f.deleting(serverID)
			e := newTestServer(loopback)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()

			got, err := e.Plan(ctx, planRequest(t, params, secrets))
			texts := plugintest.PlanTexts(got)
			if tt.wantReason != "" {
				plugintest.AssertOutcome(t, plugintest.Outcome{Reason: tt.wantReason, Permanent: true}, sdk.Result{}, err)
				require.Error(t, err)
				// Create's error names Keystone's URL (without user info and query), never a
				// password.
				plugintest.AssertNoSecret(t, err.Error(), password)
				// The engine fails the step as a run would: with Create's very error.
				plugintest.AssertPlanFailsAsCreate(t, e, planRequest(t, params, secrets), err)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				assert.Equal(t, got, got.Bounded(), "within what a step's status keeps")
			}
			forbidden := append([]string{password, "wrong-" + password}, plugintest.SecretValues(secrets)...)
			for _, text := range texts {
				plugintest.AssertNoSecret(t, text, forbidden...)
			}

			// Nothing changed: the cloud got token requests and GETs of the server only,
			// and the server is as it was.
			assert.Zero(t, f.count("DELETE /servers/{id}"), "DELETE requests")
			for _, r := range f.received() {
				method, _, _ := strings.Cut(r, " ")
				assert.True(t, r == "POST /v3/auth/tokens" || method == http.MethodGet, "Plan sent %s, not a read", r)
			}
			assert.Equal(t, wasDeleting, f.deleting(serverID), "the server is not being deleted unless it was")
		})
	}
}

// TestPlanNamesTheServerCreateDeletes: Plan and Create look the server up by the same
// code, so a plan's outputs are those of the run that follows it.
func TestPlanNamesTheServerCreateDeletes(t *testing.T) {
	f := newFakeCloud(t, password)
	f.addServer(serverID, "ACTIVE", 1, 0)
	e := newTestServer(loopback)
	params := defaultParams()

	plan, err := e.Plan(t.Context(), planRequest(t, params, validSecrets(f.authURL())))
	require.NoError(t, err)
	assert.Zero(t, f.count("DELETE /servers/{id}"))
	req := planRequest(t, params, validSecrets(f.authURL()))
	req.Hook = sdk.HookCreate
	res, err := e.Create(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, plan.Outputs, res.Outputs)
	assert.Equal(t, 1, f.count("DELETE /servers/{id}"))
}
