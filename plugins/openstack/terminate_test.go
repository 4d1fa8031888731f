package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
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

// defaultParams are the parameters of the step of serverID, named by its providerID.
func defaultParams() map[string]string {
	return map[string]string{"providerID": "openstack:///" + serverID, "node": nodeName, "credentialsSecret": "os-creds"}
}

// step is a step's setting: the fake cloud with setup done, its parameters (params, or
// defaultParams) and the valid password credentials of its Secret.
func step(t *testing.T, setup func(f *fakeCloud), params map[string]string) (*fakeCloud, map[string]string, map[string][]byte) {
	t.Helper()
	f := newFakeCloud(t, password)
	if setup != nil {
		setup(f)
	}
	if params == nil {
		params = defaultParams()
	}
	return f, params, validSecrets(f.authURL())
}

// What a Create call answers when it waits for the server, and when it is done.
var (
	wait = plugintest.Outcome{RequeueAfter: pollInterval}
	done = plugintest.Outcome{Done: true}
)

func TestTerminateServer(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(f *fakeCloud)
		params  map[string]string                    // nil: providerID openstack:///serverID
		secrets func(f *fakeCloud) map[string][]byte // nil: valid password credentials
		// want is one outcome per Create, run in order with the outputs fed forward as
		// the engine does.
		want        []plugintest.Outcome
		wantOutputs map[string]string // of the last result
		wantDeletes int
		wantAuths   int // -1: do not check
	}{
		{
			name:  "running server is deleted, done once Nova answers 404, a second run is a no-op",
			setup: func(f *fakeCloud) { f.addServer(serverID, "ACTIVE", 1, 1) },
			want:  []plugintest.Outcome{wait, wait, done, done},
			wantOutputs: map[string]string{
				outInstanceID: serverID, outPreviousPowerState: "RUNNING", outPreviousStatus: "ACTIVE"},
			wantDeletes: 1, wantAuths: 4,
		},
		{
			name:   "serverID parameter and a shut-off server",
			setup:  func(f *fakeCloud) { f.addServer(serverID, "SHUTOFF", 4, 0) },
			params: map[string]string{"serverID": serverID, "node": nodeName, "credentialsSecret": "os-creds"},
			want:   []plugintest.Outcome{wait, done},
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
			want:        []plugintest.Outcome{wait, done},
			wantDeletes: 1, wantAuths: 2,
		},
		{
			name:      "providerID region not in the catalog is permanent",
			params:    map[string]string{"providerID": "openstack://RegionTwo/" + serverID, "node": nodeName, "credentialsSecret": "os-creds"},
			want:      []plugintest.Outcome{{Reason: "ComputeEndpointNotFound", Permanent: true}},
			wantAuths: 1,
		},
		{
			name:  "application credential",
			setup: func(f *fakeCloud) { f.addServer(serverID, "ACTIVE", 1, 0) },
			secrets: func(f *fakeCloud) map[string][]byte {
				return map[string][]byte{keyAuthURL: []byte(f.authURL()),
					keyAppCredentialID: []byte("ac1"), keyAppCredentialSecret: []byte(password)}
			},
			want:        []plugintest.Outcome{wait, done},
			wantDeletes: 1, wantAuths: 2,
		},
		{
			name: "server already gone",
			want: []plugintest.Outcome{done, done},
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
			want:        []plugintest.Outcome{wait, done},
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
			want:      []plugintest.Outcome{{Reason: "InvalidCredentials", Permanent: true}},
			wantAuths: 1,
		},
		{
			name: "Nova 500 is retryable",
			setup: func(f *fakeCloud) {
				f.addServer(serverID, "ACTIVE", 1, 0)
				f.setNovaStatus(http.StatusInternalServerError)
			},
			want:      []plugintest.Outcome{{Reason: "CloudUnavailable"}},
			wantAuths: 1,
		},
		{
			name: "Nova 429 is retryable",
			setup: func(f *fakeCloud) {
				f.addServer(serverID, "ACTIVE", 1, 0)
				f.setNovaStatus(http.StatusTooManyRequests)
			},
			want:      []plugintest.Outcome{{Reason: "Throttled"}},
			wantAuths: 1,
		},
		{
			name: "Nova 403 is permanent",
			setup: func(f *fakeCloud) {
				f.addServer(serverID, "ACTIVE", 1, 0)
				f.setNovaStatus(http.StatusForbidden)
			},
			want:      []plugintest.Outcome{{Reason: "Forbidden", Permanent: true}},
			wantAuths: 1,
		},
		{
			name:   "malformed providerID is permanent and calls nothing",
			params: map[string]string{"providerID": "openstack:///../../v3/auth", "node": nodeName, "credentialsSecret": "os-creds"},
			want:   []plugintest.Outcome{{Reason: "InvalidProviderID", Permanent: true}},
		},
		{
			name:   "providerID of another cloud is permanent",
			params: map[string]string{"providerID": "aws:///us-east-1a/i-0123456789abcdef0", "node": nodeName, "credentialsSecret": "os-creds"},
			want:   []plugintest.Outcome{{Reason: "InvalidProviderID", Permanent: true}},
		},
		{
			name:   "no server named is permanent",
			params: map[string]string{"providerID": "", "node": nodeName, "credentialsSecret": "os-creds"},
			want:   []plugintest.Outcome{{Reason: "InvalidParameter", Permanent: true}},
		},
		{
			name:   "serverID and providerID disagreeing is permanent",
			params: map[string]string{"providerID": "openstack:///" + serverID, "serverID": "11111111-2222-3333-4444-555555555555", "node": nodeName, "credentialsSecret": "os-creds"},
			want:   []plugintest.Outcome{{Reason: "InvalidParameter", Permanent: true}},
		},
		{
			name:   "no node: refused before any hook",
			params: map[string]string{"serverID": serverID, "credentialsSecret": "os-creds"},
			want:   []plugintest.Outcome{{Reason: "InvalidParameter", Permanent: true}},
		},
		{
			name:   "a blank node is refused and calls nothing",
			params: map[string]string{"serverID": serverID, "node": "  ", "credentialsSecret": "os-creds"},
			want:   []plugintest.Outcome{{Reason: "InvalidParameter", Permanent: true}},
		},
		{
			name: "a server not the node's is refused and not deleted",
			setup: func(f *fakeCloud) {
				f.addServer(serverID, "ACTIVE", 1, 0)
				f.servers[serverID].name = "db-primary"
			},
			want:      []plugintest.Outcome{{Reason: "ServerNotTheNodes", Permanent: true}},
			wantAuths: 1,
		},
		{
			name:   "no credentialsSecret: refused before any hook",
			params: map[string]string{"serverID": serverID, "node": nodeName},
			want:   []plugintest.Outcome{{Reason: "InvalidParameter", Permanent: true}},
		},
		{
			name:   "a parameter it does not take: refused before any hook",
			params: map[string]string{"serverID": serverID, "node": nodeName, "credentialsSecret": "os-creds", "region": "RegionOne"},
			want:   []plugintest.Outcome{{Reason: "InvalidParameter", Permanent: true}},
		},
		{
			name: "Secret without a password is permanent",
			secrets: func(f *fakeCloud) map[string][]byte {
				s := validSecrets(f.authURL())
				delete(s, keyPassword)
				return s
			},
			want: []plugintest.Outcome{{Reason: "MissingCredentials", Permanent: true}},
		},
		{
			name: "unreachable Keystone is retryable",
			secrets: func(*fakeCloud) map[string][]byte {
				closed := httptest.NewServer(http.NotFoundHandler())
				closed.Close()
				return validSecrets(closed.URL + "/v3")
			},
			want:      []plugintest.Outcome{{Reason: "CloudUnreachable"}},
			wantAuths: -1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, params, secrets := step(t, tt.setup, tt.params)
			if tt.secrets != nil {
				secrets = tt.secrets(f)
			}
			c := plugintest.ServeCloud(t, newTestServer(loopback), paramCredentialsSecret)
			// No answer may carry the password.
			last := c.AssertCalls(t, sdk.HookCreate, params, secrets, tt.want, password)
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
			params := defaultParams()
			params["node"] = tt.node
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
	c := plugintest.ServeCloud(t, newTestServer(loopback), paramCredentialsSecret)
	res, err := c.Create(t, map[string]string{"serverID": serverID, "node": nodeName, "credentialsSecret": "os-creds"},
		map[string][]byte{keyAuthURL: []byte(f.authURL()), keyUsername: []byte("ignored"),
			keyAppCredentialID: []byte("ac1"), keyAppCredentialSecret: []byte(password)})
	require.NoError(t, err)
	assert.True(t, res.Done)
	bodies := f.keystoneBodies()
	require.Len(t, bodies, 1)
	assert.Contains(t, bodies[0], `"application_credential"`)
	assert.NotContains(t, bodies[0], `"password"`)
}

func TestRequestsGoThroughTheGivenTransport(t *testing.T) {
	f := newFakeCloud(t, password)
	f.addServer(serverID, "ACTIVE", 1, 0)
	counter := &plugintest.CountingTransport{}
	c := plugintest.ServeCloud(t, newTerminateServer(egress.New(loopback), func(rt http.RoundTripper) http.RoundTripper {
		counter.Base = rt
		return sdk.NewTenantLimiter(limits).Transport(counter)
	}), paramCredentialsSecret)
	_, err := c.Create(t, map[string]string{"serverID": serverID, "node": nodeName, "credentialsSecret": "os-creds"}, validSecrets(f.authURL()))
	require.NoError(t, err)
	assert.Equal(t, 3, counter.Count(), "token, GET and DELETE through the plugin's transport")
}

func TestTeardownHooksAreNoOps(t *testing.T) {
	f := newFakeCloud(t, password)
	f.addServer(serverID, "ACTIVE", 1, 0)
	c := plugintest.ServeCloud(t, newTestServer(loopback), paramCredentialsSecret)
	c.AssertTeardownDone(t, map[string]string{"serverID": serverID, "node": nodeName, "credentialsSecret": "os-creds"}, validSecrets(f.authURL()))
	assert.Zero(t, f.count("POST /v3/auth/tokens"), "a teardown must not call the cloud")
}

func TestDescribe(t *testing.T) {
	required, types := plugintest.ServeCloud(t, newTestServer(loopback), paramCredentialsSecret).Parameters(t)
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
		defaultParams(),
		plugintest.WithSecretParam(paramCredentialsSecret, validSecrets(f.authURL())), plugintest.WithWaits(10))
}

// loopback is where the fake cloud listens: the policy of most tests allows it.
var loopback = netip.MustParsePrefix("127.0.0.0/8")

// newTestServer is the executor without rate limit, whose policy allows the given prefixes.
func newTestServer(allowed ...netip.Prefix) *terminateServer {
	return newTerminateServer(egress.New(allowed...), func(rt http.RoundTripper) http.RoundTripper { return rt })
}
