package main

import (
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
	instanceID      = "i-0123456789abcdef0"
	accessKeyID     = "AKIAFAKEFAKEFAKE0001"
	secretAccessKey = "fake/Secret+Key/For/Tests/Only/0123456789"
	region          = "us-east-1"
	// nodeName is the Node whose instance is instanceID: EC2's default name, the
	// instance's private DNS name.
	nodeName = "ip-10-0-1-23.ec2.internal"
)

func validSecrets() map[string][]byte {
	return map[string][]byte{keyAccessKeyID: []byte(accessKeyID), keySecretAccessKey: []byte(secretAccessKey)}
}

// stepParams are the parameters of the step of instanceID at endpoint, named by its
// providerID.
func stepParams(endpoint string) map[string]string {
	return map[string]string{"providerID": "aws:///us-east-1a/" + instanceID, "endpoint": endpoint, "credentialsSecret": "aws-creds", "node": nodeName}
}

// step is a step's setting: the fake EC2 with setup done, its parameters (params of the
// fake, or stepParams) and its Secret's data (secrets, or validSecrets).
func step(t *testing.T, setup func(f *fakeEC2), params func(f *fakeEC2) map[string]string,
	secrets map[string][]byte) (*fakeEC2, map[string]string, map[string][]byte) {
	t.Helper()
	f := newFakeEC2(t, accessKeyID, secretAccessKey, region)
	if setup != nil {
		setup(f)
	}
	p := stepParams(f.URL)
	if params != nil {
		p = params(f)
	}
	if secrets == nil {
		secrets = validSecrets()
	}
	return f, p, secrets
}

// What a Create call answers when it waits for the instance, and when it is done.
var (
	wait = plugintest.Outcome{RequeueAfter: pollInterval}
	done = plugintest.Outcome{Done: true}
)

func TestTerminateInstance(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(f *fakeEC2)
		params  func(f *fakeEC2) map[string]string // nil: providerID aws:///us-east-1a/<id>, endpoint f
		secrets map[string][]byte                  // nil: valid
		// want is one outcome per Create, run in order with the outputs fed forward as
		// the engine does.
		want           []plugintest.Outcome
		wantOutputs    map[string]string // of the last result
		wantTerminates int
		wantDescribes  int
	}{
		{
			name:  "running instance goes shutting-down then terminated, a second run is a no-op",
			setup: func(f *fakeEC2) { f.addInstance(instanceID, "running", 1) },
			// terminate (shutting-down) → shutting-down → terminated → terminated again
			want:           []plugintest.Outcome{wait, wait, done, done},
			wantOutputs:    map[string]string{outInstanceID: instanceID, outPreviousPowerState: "running"},
			wantTerminates: 1, wantDescribes: 4,
		},
		{
			name:  "stopped instance, instanceID and region parameters",
			setup: func(f *fakeEC2) { f.addInstance(instanceID, "stopped", 0) },
			params: func(f *fakeEC2) map[string]string {
				return map[string]string{"instanceID": instanceID, "region": region, "endpoint": f.URL, "credentialsSecret": "aws-creds", "node": nodeName}
			},
			want:           []plugintest.Outcome{wait, done},
			wantOutputs:    map[string]string{outInstanceID: instanceID, outPreviousPowerState: "stopped"},
			wantTerminates: 1, wantDescribes: 2,
		},
		{
			name:  "instance already shutting down is waited for, not terminated again",
			setup: func(f *fakeEC2) { f.addInstance(instanceID, "shutting-down", 1) },
			want:  []plugintest.Outcome{wait, done},
			// The first DescribeInstances already sees shutting-down.
			wantOutputs:   map[string]string{outInstanceID: instanceID, outPreviousPowerState: "shutting-down"},
			wantDescribes: 2,
		},
		{
			name:          "instance EC2 no longer knows is done",
			want:          []plugintest.Outcome{done, done},
			wantOutputs:   map[string]string{outInstanceID: instanceID, outPreviousPowerState: unknownState},
			wantDescribes: 2,
		},
		{
			name:    "session token is sent and accepted",
			setup:   func(f *fakeEC2) { f.addInstance(instanceID, "running", 0) },
			secrets: map[string][]byte{keyAccessKeyID: []byte(accessKeyID), keySecretAccessKey: []byte(secretAccessKey), keySessionToken: []byte("FwoGZXIvYXdzEFAKE")},
			want:    []plugintest.Outcome{wait, done}, wantTerminates: 1, wantDescribes: 2,
		},
		{
			name:          "wrong secret key is a permanent InvalidCredentials (AuthFailure)",
			setup:         func(f *fakeEC2) { f.addInstance(instanceID, "running", 0) },
			secrets:       map[string][]byte{keyAccessKeyID: []byte(accessKeyID), keySecretAccessKey: []byte("wrong" + secretAccessKey)},
			want:          []plugintest.Outcome{{Reason: "InvalidCredentials", Permanent: true}},
			wantDescribes: 1,
		},
		{
			name: "UnauthorizedOperation is permanent",
			setup: func(f *fakeEC2) {
				f.addInstance(instanceID, "running", 0)
				f.fail(http.StatusForbidden, "UnauthorizedOperation")
			},
			want:          []plugintest.Outcome{{Reason: "Unauthorized", Permanent: true}},
			wantDescribes: 1,
		},
		{
			name: "503 is retryable, after at most the SDK's bounded retries",
			setup: func(f *fakeEC2) {
				f.addInstance(instanceID, "running", 0)
				f.fail(http.StatusServiceUnavailable, "Unavailable")
			},
			want:          []plugintest.Outcome{{Reason: "CloudUnavailable"}},
			wantDescribes: sdkMaxAttempts,
		},
		{
			name: "RequestLimitExceeded is retryable",
			setup: func(f *fakeEC2) {
				f.addInstance(instanceID, "running", 0)
				f.fail(http.StatusServiceUnavailable, "RequestLimitExceeded")
			},
			want:          []plugintest.Outcome{{Reason: "Throttled"}},
			wantDescribes: sdkMaxAttempts,
		},
		{
			name: "termination protection is permanent",
			setup: func(f *fakeEC2) {
				f.addInstance(instanceID, "running", 0)
				f.fail(http.StatusBadRequest, "OperationNotPermitted")
			},
			want:          []plugintest.Outcome{{Reason: "OperationNotPermitted", Permanent: true}},
			wantDescribes: 1,
		},
		{
			name: "malformed providerID is permanent and calls nothing",
			params: func(f *fakeEC2) map[string]string {
				return map[string]string{"providerID": "aws:///us-east-1a/not-an-instance", "endpoint": f.URL, "credentialsSecret": "aws-creds", "node": nodeName}
			},
			want: []plugintest.Outcome{{Reason: "InvalidProviderID", Permanent: true}},
		},
		{
			name: "providerID of another cloud is permanent",
			params: func(f *fakeEC2) map[string]string {
				return map[string]string{"providerID": "openstack:///8c3a7e0e-5f7b-4c8e-9d55-2f1a0b6c9d01", "region": region, "credentialsSecret": "aws-creds", "node": nodeName}
			},
			want: []plugintest.Outcome{{Reason: "InvalidProviderID", Permanent: true}},
		},
		{
			name: "no region and a providerID without zone is permanent",
			params: func(f *fakeEC2) map[string]string {
				return map[string]string{"providerID": "aws:///" + instanceID, "endpoint": f.URL, "credentialsSecret": "aws-creds", "node": nodeName}
			},
			want: []plugintest.Outcome{{Reason: "InvalidParameter", Permanent: true}},
		},
		{
			name: "instanceID and providerID disagreeing is permanent",
			params: func(f *fakeEC2) map[string]string {
				return map[string]string{"providerID": "aws:///us-east-1a/" + instanceID, "instanceID": "i-0fedcba9876543210", "endpoint": f.URL, "credentialsSecret": "aws-creds", "node": nodeName}
			},
			want: []plugintest.Outcome{{Reason: "InvalidParameter", Permanent: true}},
		},
		{
			name: "no credentialsSecret: the engine refuses the step",
			params: func(f *fakeEC2) map[string]string {
				return map[string]string{"providerID": "aws:///us-east-1a/" + instanceID, "endpoint": f.URL, "node": nodeName}
			},
			want: []plugintest.Outcome{{Reason: "InvalidParameter", Permanent: true}},
		},
		{
			name:  "no node: the engine refuses the step",
			setup: func(f *fakeEC2) { f.addInstance(instanceID, "running", 0) },
			params: func(f *fakeEC2) map[string]string {
				return map[string]string{"providerID": "aws:///us-east-1a/" + instanceID, "endpoint": f.URL, "credentialsSecret": "aws-creds"}
			},
			want: []plugintest.Outcome{{Reason: "InvalidParameter", Permanent: true}},
		},
		{
			name:  "a node of blanks is permanent and calls nothing",
			setup: func(f *fakeEC2) { f.addInstance(instanceID, "running", 0) },
			params: func(f *fakeEC2) map[string]string {
				return map[string]string{"providerID": "aws:///us-east-1a/" + instanceID, "endpoint": f.URL, "credentialsSecret": "aws-creds", "node": "  "}
			},
			want: []plugintest.Outcome{{Reason: "InvalidParameter", Permanent: true}},
		},
		{
			name: "an endpoint that is no http(s) URL: the engine refuses the step",
			params: func(*fakeEC2) map[string]string {
				return map[string]string{"instanceID": instanceID, "region": region, "endpoint": "ftp://ec2.example", "credentialsSecret": "aws-creds", "node": nodeName}
			},
			want: []plugintest.Outcome{{Reason: "InvalidParameter", Permanent: true}},
		},
		{
			name:    "Secret without a secret key is permanent",
			secrets: map[string][]byte{keyAccessKeyID: []byte(accessKeyID)},
			want:    []plugintest.Outcome{{Reason: "MissingCredentials", Permanent: true}},
		},
		{
			name: "unreachable endpoint is retryable",
			params: func(*fakeEC2) map[string]string {
				closed := httptest.NewServer(http.NotFoundHandler())
				closed.Close()
				return stepParams(closed.URL)
			},
			want: []plugintest.Outcome{{Reason: "CloudUnreachable"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, params, secrets := step(t, tt.setup, tt.params, tt.secrets)
			c := plugintest.ServeCloud(t, newTestInstance(loopback), paramCredentialsSecret)
			// No answer may carry the secret key.
			last := c.AssertCalls(t, sdk.HookCreate, params, secrets, tt.want, secretAccessKey)
			if tt.wantOutputs != nil {
				assert.Equal(t, tt.wantOutputs, last.Outputs)
			}
			assert.Equal(t, tt.wantTerminates, f.count("TerminateInstances"), "TerminateInstances requests")
			assert.Equal(t, tt.wantDescribes, f.count("DescribeInstances"), "DescribeInstances requests")
		})
	}
}

// TestInstanceMustBeTheNodes: a kubelet sets its own Node's providerID, so a compromised
// node could name another's instance; the step terminates only an instance whose private
// DNS name or Name tag is the node's.
func TestInstanceMustBeTheNodes(t *testing.T) {
	const otherDNS = "ip-10-0-9-99.ec2.internal"
	tests := []struct {
		name           string
		setup          func(f *fakeEC2)
		node           string
		want           plugintest.Outcome
		wantTerminates int
	}{
		{
			name:           "private DNS name is the node's",
			setup:          func(f *fakeEC2) { f.addInstance(instanceID, "running", 0) },
			node:           nodeName,
			want:           wait,
			wantTerminates: 1,
		},
		{
			name: "private DNS name is the node's but for case",
			setup: func(f *fakeEC2) {
				f.addInstance(instanceID, "running", 0)
				f.renameInstance(instanceID, "IP-10-0-1-23.EC2.Internal")
			},
			node:           nodeName,
			want:           wait,
			wantTerminates: 1,
		},
		{
			name:           "node named by the short name of the private DNS name",
			setup:          func(f *fakeEC2) { f.addInstance(instanceID, "running", 0) },
			node:           "ip-10-0-1-23",
			want:           wait,
			wantTerminates: 1,
		},
		{
			name: "Name tag is the node's",
			setup: func(f *fakeEC2) {
				f.addInstance(instanceID, "running", 0)
				f.renameInstance(instanceID, otherDNS)
				f.nameInstance(instanceID, "k8s-node-3")
			},
			node:           "k8s-node-3",
			want:           wait,
			wantTerminates: 1,
		},
		{
			name: "another node's instance is refused and not terminated",
			setup: func(f *fakeEC2) {
				f.addInstance(instanceID, "running", 0)
				f.renameInstance(instanceID, otherDNS)
				f.nameInstance(instanceID, "k8s-node-9")
			},
			node: nodeName,
			want: plugintest.Outcome{Reason: "InstanceNotTheNodes", Permanent: true},
		},
		{
			name:  "a prefix of the private DNS name is not the node's",
			setup: func(f *fakeEC2) { f.addInstance(instanceID, "running", 0) },
			node:  "ip-10-0-1-2",
			want:  plugintest.Outcome{Reason: "InstanceNotTheNodes", Permanent: true},
		},
		{
			name: "an instance without private DNS name or Name tag is refused",
			setup: func(f *fakeEC2) {
				f.addInstance(instanceID, "stopped", 0)
				f.renameInstance(instanceID, "")
			},
			node: nodeName,
			want: plugintest.Outcome{Reason: "InstanceNotTheNodes", Permanent: true},
		},
		{
			// Nothing is done to it, and EC2 clears a terminated instance's private DNS
			// name: checking would fail the last poll of the step's own termination.
			name: "another node's instance terminated already is done",
			setup: func(f *fakeEC2) {
				f.addInstance(instanceID, "terminated", 0)
				f.renameInstance(instanceID, "")
			},
			node: nodeName,
			want: done,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeEC2(t, accessKeyID, secretAccessKey, region)
			tt.setup(f)
			params := stepParams(f.URL)
			params["node"] = tt.node

			res, err := plugintest.ServeCloud(t, newTestInstance(loopback), paramCredentialsSecret).Create(t, params, validSecrets())
			plugintest.AssertOutcome(t, tt.want, res, err)
			if tt.want.Reason != "" {
				require.Error(t, err)
				for _, s := range []string{instanceID, tt.node, "nothing was done"} {
					assert.Contains(t, err.Error(), s)
				}
			}
			assert.Equal(t, tt.wantTerminates, f.count("TerminateInstances"), "TerminateInstances requests")
		})
	}
}

func TestParseTarget(t *testing.T) {
	tests := []struct {
		params map[string]string
		want   target
	}{
		{map[string]string{"providerID": "aws:///us-east-1a/" + instanceID, "node": nodeName}, target{instanceID: instanceID, region: "us-east-1", node: nodeName}},
		{map[string]string{"providerID": "aws:///us-west-2-lax-1a/" + instanceID, "node": nodeName}, target{instanceID: instanceID, region: "us-west-2", node: nodeName}},
		{map[string]string{"providerID": "aws:///us-gov-west-1b/" + instanceID, "node": nodeName}, target{instanceID: instanceID, region: "us-gov-west-1", node: nodeName}},
		{map[string]string{"providerID": "aws://eu-central-2c/" + instanceID, "node": nodeName}, target{instanceID: instanceID, region: "eu-central-2", node: nodeName}},
		{map[string]string{"providerID": "aws:///us-east-1a/" + instanceID, "region": "eu-west-1", "node": nodeName}, target{instanceID: instanceID, region: "eu-west-1", node: nodeName}},
		{map[string]string{"instanceID": " " + instanceID + " ", "region": "r1", "endpoint": "https://ec2.cloud.example", "node": nodeName}, target{instanceID: instanceID, region: "r1", endpoint: "https://ec2.cloud.example", node: nodeName}},
	}
	for _, tt := range tests {
		got, err := parseTarget(&sdk.Request{Params: tt.params})
		require.NoError(t, err, tt.params)
		assert.Equal(t, tt.want, got, tt.params)
	}
}

func TestRequestsGoThroughTheGivenTransport(t *testing.T) {
	f := newFakeEC2(t, accessKeyID, secretAccessKey, region)
	f.addInstance(instanceID, "running", 0)
	counter := &plugintest.CountingTransport{}
	c := plugintest.ServeCloud(t, newTerminateInstance(egress.New(loopback), func(rt http.RoundTripper) http.RoundTripper {
		counter.Base = rt
		return sdk.NewTenantLimiter(limits).Transport(counter)
	}), paramCredentialsSecret)
	_, err := c.Create(t, map[string]string{"instanceID": instanceID, "region": region, "endpoint": f.URL, "credentialsSecret": "aws-creds", "node": nodeName}, validSecrets())
	require.NoError(t, err)
	assert.Equal(t, 2, counter.Count(), "DescribeInstances and TerminateInstances through the plugin's transport")
}

// TestNamespacesRateLimitFailsFast: a namespace whose bucket is empty fails its hook at
// once with RateLimited, the SDK's retryer not trying the request again (the engine
// retries the hook with its backoff), while another namespace's hook passes.
func TestNamespacesRateLimitFailsFast(t *testing.T) {
	const otherInstance = "i-0fedcba9876543210"
	f := newFakeEC2(t, accessKeyID, secretAccessKey, region)
	f.addInstance(instanceID, "running", 0)
	f.addInstance(otherInstance, "running", 0)
	counter := &plugintest.CountingTransport{}
	// Two requests for each namespace and endpoint, what one termination costs.
	limiter := sdk.NewTenantLimiter(sdk.TenantLimits{TenantQPS: 0.001, TenantBurst: 2, PluginQPS: limits.PluginQPS, PluginBurst: limits.PluginBurst})
	c := plugintest.ServeCloud(t, newTerminateInstance(egress.New(loopback), func(rt http.RoundTripper) http.RoundTripper {
		counter.Base = limiter.Transport(rt)
		return counter
	}), paramCredentialsSecret)
	run := func(namespace, instance string) error {
		req := plugintest.AddSecret(plugintest.Request(sdk.HookCreate, "uid-"+namespace,
			map[string]string{"instanceID": instance, "region": region, "endpoint": f.URL, "credentialsSecret": "aws-creds", "node": nodeName}),
			paramCredentialsSecret, validSecrets())
		req.Pipeline.Namespace = namespace
		_, err := c.Run(t, sdk.HookCreate, req)
		return err
	}

	require.NoError(t, run("team-a", instanceID))
	counter.Reset()
	start := time.Now()
	err := run("team-a", instanceID)
	plugintest.AssertOutcome(t, plugintest.Outcome{Reason: "RateLimited"}, sdk.Result{}, err)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `namespace "team-a"`)
	assert.Less(t, time.Since(start), sdkMaxBackoff, "no wait for a token")
	assert.Equal(t, 1, counter.Count(), "the refused request is not retried by the SDK")
	assert.Equal(t, 1, f.count("DescribeInstances"), "the refused request never reached EC2")

	require.NoError(t, run("team-b", otherInstance), "another namespace's hook passes")
	assert.Equal(t, 2, f.count("TerminateInstances"))
}

func TestTeardownHooksAreNoOps(t *testing.T) {
	f := newFakeEC2(t, accessKeyID, secretAccessKey, region)
	f.addInstance(instanceID, "running", 0)
	c := plugintest.ServeCloud(t, newTestInstance(loopback), paramCredentialsSecret)
	c.AssertTeardownDone(t, map[string]string{"instanceID": instanceID, "region": region, "endpoint": f.URL, "credentialsSecret": "aws-creds", "node": nodeName}, validSecrets())
	assert.Zero(t, f.count("DescribeInstances")+f.count("TerminateInstances"), "a teardown must not call the cloud")
}

func TestDescribe(t *testing.T) {
	required, types := plugintest.ServeCloud(t, newTestInstance(loopback), paramCredentialsSecret).Parameters(t)
	assert.Equal(t, map[string]bool{"providerID": false, "instanceID": false, "region": false, "endpoint": false, "credentialsSecret": true, "node": true}, required)
	assert.Equal(t, map[string]string{"providerID": "string", "instanceID": "string", "region": "string", "endpoint": "url", "credentialsSecret": "secret", "node": "string"}, types)

	// Every parameter the executor reads is declared: the engine would refuse any other.
	plugintest.AssertDeclarations(t, newTestInstance().Describe(), map[string]string{
		"providerID": "aws:///us-east-1a/" + instanceID, "instanceID": instanceID, "region": region,
		"endpoint": "https://ec2.cloud.example", "credentialsSecret": "aws-creds", "node": nodeName,
	})
}

func TestConformance(t *testing.T) {
	f := newFakeEC2(t, accessKeyID, secretAccessKey, region)
	f.addInstance(instanceID, "running", 0)
	plugintest.Conformance(t, newTestInstance(loopback),
		stepParams(f.URL),
		plugintest.WithSecretParam(paramCredentialsSecret, validSecrets()), plugintest.WithWaits(10))
}

// loopback is where the fake EC2 listens: the policy of most tests allows it.
var loopback = netip.MustParsePrefix("127.0.0.0/8")

// newTestInstance is the executor without rate limit, whose policy allows the given prefixes.
func newTestInstance(allowed ...netip.Prefix) *terminateInstance {
	return newTerminateInstance(egress.New(allowed...), func(rt http.RoundTripper) http.RoundTripper { return rt })
}
