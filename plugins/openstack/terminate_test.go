package main

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

const (
	serverID = "8c3a7e0e-5f7b-4c8e-9d55-2f1a0b6c9d01"
	password = "s3cret-Passw0rd"
	// nodeName is the Node the tests' steps retire, and the name of the fake's servers.
	nodeName = "k8s-node-3"
)

func validSecrets(authURL string) map[string][]byte {
	return map[string][]byte{
		keyAuthURL: []byte(authURL), keyUsername: []byte("stepwise"), keyPassword: []byte(password),
		keyProjectName: []byte("ops"), keyDomainName: []byte("Default"), keyRegion: []byte("RegionOne"),
	}
}

// outcome is what one Create call is expected to answer.
type outcome struct {
	done      bool
	reason    string // an error's reason; empty for a result
	permanent bool
}

var (
	wait = outcome{}
	done = outcome{done: true}
)

func TestTerminateServer(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(f *fakeCloud)
		params  map[string]string                    // nil: providerID openstack:///serverID
		secrets func(f *fakeCloud) map[string][]byte // nil: valid password credentials
		// want is one outcome per Create, run in order with the outputs fed forward as
		// the engine does.
		want        []outcome
		wantOutputs map[string]string // of the last result
		wantDeletes int
		wantAuths   int // -1: do not check
	}{
		{
			name:  "running server is deleted, done once Nova answers 404, a second run is a no-op",
			setup: func(f *fakeCloud) { f.addServer(serverID, "ACTIVE", 1, 1) },
			want:  []outcome{wait, wait, done, done},
			wantOutputs: map[string]string{
				outInstanceID: serverID, outPreviousPowerState: "RUNNING", outPreviousStatus: "ACTIVE"},
			wantDeletes: 1, wantAuths: 4,
		},
		{
			name:   "serverID parameter and a shut-off server",
			setup:  func(f *fakeCloud) { f.addServer(serverID, "SHUTOFF", 4, 0) },
			params: map[string]string{"serverID": serverID, "node": nodeName, "credentialsSecret": "os-creds"},
			want:   []outcome{wait, done},
			wantOutputs: map[string]string{
				outInstanceID: serverID, outPreviousPowerState: "SHUTDOWN", outPreviousStatus: "SHUTOFF"},
			wantDeletes: 1, wantAuths: 2,
		},
		{
			name:   "providerID with a region and an agreeing serverID",
			setup:  func(f *fakeCloud) { f.addServer(serverID, "ACTIVE", 1, 0) },
			params: map[string]string{"providerID": "openstack://RegionOne/" + serverID, "serverID": serverID, "node": nodeName, "credentialsSecret": "os-creds"},
			secrets: func(f *fakeCloud) map[string][]byte {
				s := validSecrets(f.authURL())
				delete(s, keyRegion)
				return s
			},
			want:        []outcome{wait, done},
			wantDeletes: 1, wantAuths: 2,
		},
		{
			name:      "providerID region not in the catalog is permanent",
			params:    map[string]string{"providerID": "openstack://RegionTwo/" + serverID, "node": nodeName, "credentialsSecret": "os-creds"},
			want:      []outcome{{reason: "ComputeEndpointNotFound", permanent: true}},
			wantAuths: 1,
		},
		{
			name:  "application credential",
			setup: func(f *fakeCloud) { f.addServer(serverID, "ACTIVE", 1, 0) },
			secrets: func(f *fakeCloud) map[string][]byte {
				return map[string][]byte{keyAuthURL: []byte(f.authURL()),
					keyAppCredentialID: []byte("ac1"), keyAppCredentialSecret: []byte(password)}
			},
			want:        []outcome{wait, done},
			wantDeletes: 1, wantAuths: 2,
		},
		{
			name: "server already gone",
			want: []outcome{done, done},
			wantOutputs: map[string]string{
				outInstanceID: serverID, outPreviousPowerState: unknownState, outPreviousStatus: unknownState},
			wantAuths: 2,
		},
		{
			name: "server already being deleted is waited for, not deleted again",
			setup: func(f *fakeCloud) {
				f.addServer(serverID, "ACTIVE", 1, 1)
				f.servers[serverID].deleting = true
			},
			want:        []outcome{wait, done},
			wantDeletes: 0, wantAuths: 2,
		},
		{
			name:  "wrong password is a permanent InvalidCredentials",
			setup: func(f *fakeCloud) { f.addServer(serverID, "ACTIVE", 1, 0) },
			secrets: func(f *fakeCloud) map[string][]byte {
				s := validSecrets(f.authURL())
				s[keyPassword] = []byte("wrong-" + password)
				return s
			},
			want:      []outcome{{reason: "InvalidCredentials", permanent: true}},
			wantAuths: 1,
		},
		{
			name: "Nova 500 is retryable",
			setup: func(f *fakeCloud) {
				f.addServer(serverID, "ACTIVE", 1, 0)
				f.setNovaStatus(http.StatusInternalServerError)
			},
			want:      []outcome{{reason: "CloudUnavailable"}},
			wantAuths: 1,
		},
		{
			name: "Nova 429 is retryable",
			setup: func(f *fakeCloud) {
				f.addServer(serverID, "ACTIVE", 1, 0)
				f.setNovaStatus(http.StatusTooManyRequests)
			},
			want:      []outcome{{reason: "Throttled"}},
			wantAuths: 1,
		},
		{
			name: "Nova 403 is permanent",
			setup: func(f *fakeCloud) {
				f.addServer(serverID, "ACTIVE", 1, 0)
				f.setNovaStatus(http.StatusForbidden)
			},
			want:      []outcome{{reason: "Forbidden", permanent: true}},
			wantAuths: 1,
		},
		{
			name:   "malformed providerID is permanent and calls nothing",
			params: map[string]string{"providerID": "openstack:///../../v3/auth", "node": nodeName, "credentialsSecret": "os-creds"},
			want:   []outcome{{reason: "InvalidProviderID", permanent: true}},
		},
		{
			name:   "providerID of another cloud is permanent",
			params: map[string]string{"providerID": "aws:///us-east-1a/i-0123456789abcdef0", "node": nodeName, "credentialsSecret": "os-creds"},
			want:   []outcome{{reason: "InvalidProviderID", permanent: true}},
		},
		{
			name:   "no server named is permanent",
			params: map[string]string{"providerID": "", "node": nodeName, "credentialsSecret": "os-creds"},
			want:   []outcome{{reason: "InvalidParameter", permanent: true}},
		},
		{
			name:   "serverID and providerID disagreeing is permanent",
			params: map[string]string{"providerID": "openstack:///" + serverID, "serverID": "11111111-2222-3333-4444-555555555555", "node": nodeName, "credentialsSecret": "os-creds"},
			want:   []outcome{{reason: "InvalidParameter", permanent: true}},
		},
		{
			name:   "no node: refused before any hook",
			params: map[string]string{"serverID": serverID, "credentialsSecret": "os-creds"},
			want:   []outcome{{reason: "InvalidParameter", permanent: true}},
		},
		{
			name:   "a blank node is refused and calls nothing",
			params: map[string]string{"serverID": serverID, "node": "  ", "credentialsSecret": "os-creds"},
			want:   []outcome{{reason: "InvalidParameter", permanent: true}},
		},
		{
			name: "a server not the node's is refused and not deleted",
			setup: func(f *fakeCloud) {
				f.addServer(serverID, "ACTIVE", 1, 0)
				f.servers[serverID].name = "db-primary"
			},
			want:      []outcome{{reason: "ServerNotTheNodes", permanent: true}},
			wantAuths: 1,
		},
		{
			name:   "no credentialsSecret: refused before any hook",
			params: map[string]string{"serverID": serverID, "node": nodeName},
			want:   []outcome{{reason: "InvalidParameter", permanent: true}},
		},
		{
			name:   "a parameter it does not take: refused before any hook",
			params: map[string]string{"serverID": serverID, "node": nodeName, "credentialsSecret": "os-creds", "region": "RegionOne"},
			want:   []outcome{{reason: "InvalidParameter", permanent: true}},
		},
		{
			name: "Secret without a password is permanent",
			secrets: func(f *fakeCloud) map[string][]byte {
				s := validSecrets(f.authURL())
				delete(s, keyPassword)
				return s
			},
			want: []outcome{{reason: "MissingCredentials", permanent: true}},
		},
		{
			name: "unreachable Keystone is retryable",
			secrets: func(*fakeCloud) map[string][]byte {
				closed := httptest.NewServer(http.NotFoundHandler())
				closed.Close()
				return validSecrets(closed.URL + "/v3")
			},
			want:      []outcome{{reason: "CloudUnreachable"}},
			wantAuths: -1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCloud(t, password)
			if tt.setup != nil {
				tt.setup(f)
			}
			params := tt.params
			if params == nil {
				params = map[string]string{"providerID": "openstack:///" + serverID, "node": nodeName, "credentialsSecret": "os-creds"}
			}
			secrets := validSecrets(f.authURL())
			if tt.secrets != nil {
				secrets = tt.secrets(f)
			}
			c := plugintest.Serve(t, newTestServer(loopback))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			var last sdk.Result
			recorded := map[string]string{}
			for i, want := range tt.want {
				req := withSecret(plugintest.Request(sdk.HookCreate, "uid-1", params), secrets)
				req.Outputs[req.Step] = maps.Clone(recorded)
				res, err := c.Run(ctx, executorName, sdk.HookCreate, req)
				if want.reason != "" {
					var e *sdk.Error
					require.ErrorAs(t, err, &e, "call %d", i+1)
					assert.Equal(t, want.reason, e.Reason, "call %d: %v", i+1, err)
					assert.Equal(t, want.permanent, e.Permanent, "call %d: %v", i+1, err)
					assert.NotContains(t, err.Error(), password, "an error message must not carry the password")
					continue
				}
				require.NoError(t, err, "call %d", i+1)
				assert.Equal(t, want.done, res.Done, "call %d: %+v", i+1, res)
				if !res.Done {
					assert.Equal(t, pollInterval, res.RequeueAfter, "call %d", i+1)
				}
				maps.Copy(recorded, res.Outputs) // the engine merges a hook's outputs
				last = res
			}
			if tt.wantOutputs != nil {
				assert.Equal(t, tt.wantOutputs, last.Outputs)
			}
			assert.Equal(t, tt.wantDeletes, f.count("DELETE /servers/{id}"), "DELETE requests")
			if tt.wantAuths >= 0 {
				assert.Equal(t, tt.wantAuths, f.count("POST /v3/auth/tokens"), "token requests")
			}
		})
	}
}

// TestServerMustBeTheNodes: a kubelet sets its Node's providerID itself, so a compromised
// node could name another node's server; Create and Plan refuse a server that is not the
// node's, before any DELETE.
func TestServerMustBeTheNodes(t *testing.T) {
	tests := []struct {
		name       string
		node       string
		serverName string
		metadata   map[string]string
		deleting   bool
		wantRefuse bool
	}{
		{name: "same name", node: nodeName, serverName: nodeName},
		{name: "same name but for case", node: nodeName, serverName: "K8S-Node-3"},
		{name: "the server's FQDN, the node's short name", node: nodeName, serverName: "k8s-node-3.novalocal"},
		{name: "the node's FQDN, the server's short name", node: "k8s-node-3.cluster.example", serverName: nodeName},
		{name: "metadata hostname matches", node: nodeName, serverName: "worker-7f3a", metadata: map[string]string{"hostname": nodeName}},
		{name: "metadata hostname FQDN matches", node: nodeName, serverName: "worker-7f3a", metadata: map[string]string{"hostname": "k8s-node-3.cluster.example"}},
		{name: "name and metadata hostname differ", node: nodeName, serverName: "db-primary",
			metadata: map[string]string{"hostname": "db-primary", "role": nodeName}, wantRefuse: true},
		{name: "name only starts with the node's", node: nodeName, serverName: "k8s-node-30", wantRefuse: true},
		{name: "server without name or metadata", node: nodeName, serverName: "", wantRefuse: true},
		{name: "another server being deleted is not waited for", node: nodeName, serverName: "db-primary", deleting: true, wantRefuse: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCloud(t, password)
			f.addServer(serverID, "ACTIVE", 1, 5) // a deletion outlasts the plan's and the run's GETs
			f.servers[serverID].name, f.servers[serverID].metadata = tt.serverName, tt.metadata
			f.servers[serverID].deleting = tt.deleting
			params := map[string]string{"providerID": "openstack:///" + serverID, "node": tt.node, "credentialsSecret": "os-creds"}
			e := newTestServer(loopback)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()

			plan, planErr := e.Plan(ctx, planRequest(t, params, validSecrets(f.authURL())))
			req := planRequest(t, params, validSecrets(f.authURL()))
			req.Hook = sdk.HookCreate
			res, err := e.Create(ctx, req)

			if !tt.wantRefuse {
				require.NoError(t, planErr)
				require.NoError(t, err)
				assert.Equal(t, "delete", plan.Details[0].Action)
				assert.False(t, res.Done)
				assert.Equal(t, 1, f.count("DELETE /servers/{id}"), "DELETE requests")
				return
			}
			var se *sdk.Error
			require.ErrorAs(t, err, &se)
			assert.Equal(t, "ServerNotTheNodes", se.Reason)
			assert.True(t, se.Permanent)
			for _, want := range []string{serverID, tt.node, "nothing"} {
				assert.Contains(t, err.Error(), want)
			}
			if tt.serverName != "" {
				assert.Contains(t, err.Error(), tt.serverName)
			}
			// The plan fails as the run would: with Create's very error.
			require.Error(t, planErr)
			assert.Equal(t, err.Error(), planErr.Error())
			assert.Equal(t, sdk.OwnReason(err), sdk.OwnReason(planErr))

			assert.Zero(t, f.count("DELETE /servers/{id}"), "DELETE requests")
			assert.Equal(t, tt.deleting, f.deleting(serverID), "the server is not being deleted unless it was")
		})
	}
}

func TestApplicationCredentialIsUsedInsteadOfPassword(t *testing.T) {
	f := newFakeCloud(t, password)
	c := plugintest.Serve(t, newTestServer(loopback))
	req := withSecret(plugintest.Request(sdk.HookCreate, "uid-1", map[string]string{"serverID": serverID, "node": nodeName, "credentialsSecret": "os-creds"}),
		map[string][]byte{keyAuthURL: []byte(f.authURL()), keyUsername: []byte("ignored"),
			keyAppCredentialID: []byte("ac1"), keyAppCredentialSecret: []byte(password)})
	res, err := c.Run(context.Background(), executorName, sdk.HookCreate, req)
	require.NoError(t, err)
	assert.True(t, res.Done)
	bodies := f.keystoneBodies()
	require.Len(t, bodies, 1)
	assert.Contains(t, bodies[0], `"application_credential"`)
	assert.NotContains(t, bodies[0], `"password"`)
}

// countingTransport counts the requests that pass through it to base.
type countingTransport struct {
	base http.RoundTripper
	n    atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(r)
}

func TestRequestsGoThroughTheGivenTransport(t *testing.T) {
	f := newFakeCloud(t, password)
	f.addServer(serverID, "ACTIVE", 1, 0)
	counter := &countingTransport{}
	c := plugintest.Serve(t, newTerminateServer(egress.New(loopback), func(rt http.RoundTripper) http.RoundTripper {
		counter.base = rt
		return sdk.NewTenantLimiter(limits()).Transport(counter)
	}))
	req := withSecret(plugintest.Request(sdk.HookCreate, "uid-1", map[string]string{"serverID": serverID, "node": nodeName, "credentialsSecret": "os-creds"}),
		validSecrets(f.authURL()))
	_, err := c.Run(context.Background(), executorName, sdk.HookCreate, req)
	require.NoError(t, err)
	assert.Equal(t, int32(3), counter.n.Load(), "token, GET and DELETE through the plugin's transport")
}

func TestTeardownHooksAreNoOps(t *testing.T) {
	f := newFakeCloud(t, password)
	f.addServer(serverID, "ACTIVE", 1, 0)
	c := plugintest.Serve(t, newTestServer(loopback))
	for _, hook := range []sdk.Hook{sdk.HookPreDelete, sdk.HookDelete, sdk.HookPostDelete} {
		req := withSecret(plugintest.Request(hook, "uid-1", map[string]string{"serverID": serverID, "node": nodeName, "credentialsSecret": "os-creds"}),
			validSecrets(f.authURL()))
		res, err := c.Run(context.Background(), executorName, hook, req)
		require.NoError(t, err, hook)
		assert.True(t, res.Done, hook)
	}
	assert.Zero(t, f.count("POST /v3/auth/tokens"), "a teardown must not call the cloud")
}

func TestDescribe(t *testing.T) {
	c := plugintest.Serve(t, newTestServer(loopback))
	infos, err := c.Describe(context.Background())
	require.NoError(t, err)
	require.Len(t, infos, 1)
	required := map[string]bool{}
	types := map[string]string{}
	for _, p := range infos[0].GetParameters() {
		assert.NotEmpty(t, p.GetDescription(), p.GetName())
		required[p.GetName()] = p.GetRequired()
		types[p.GetName()] = p.GetType()
	}
	assert.Equal(t, map[string]bool{"providerID": false, "serverID": false, "node": true, "credentialsSecret": true}, required)
	assert.Equal(t, map[string]string{"providerID": "string", "serverID": "string", "node": "string", "credentialsSecret": "secret"}, types)

	// Every parameter the executor reads is declared: the engine would refuse any other.
	plugintest.AssertDeclarations(t, newTestServer().Describe(), map[string]string{
		"providerID": "openstack:///" + serverID, "serverID": serverID, "node": nodeName, "credentialsSecret": "os-creds",
	})
}

func TestConformance(t *testing.T) {
	f := newFakeCloud(t, password)
	f.addServer(serverID, "ACTIVE", 1, 0)
	plugintest.Conformance(t, newTestServer(loopback),
		map[string]string{"providerID": "openstack:///" + serverID, "node": nodeName, "credentialsSecret": "os-creds"},
		plugintest.WithSecretParam(paramCredentialsSecret, validSecrets(f.authURL())), plugintest.WithWaits(10))
}

// loopback is where the fake cloud listens: the policy of most tests allows it.
var loopback = netip.MustParsePrefix("127.0.0.0/8")

// newTestServer is the executor without rate limit, whose policy allows the given prefixes.
func newTestServer(allowed ...netip.Prefix) *terminateServer {
	return newTerminateServer(egress.New(allowed...), func(rt http.RoundTripper) http.RoundTripper { return rt })
}
