package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

// runCreate runs Create of e once for the step of instanceID at endpoint, with valid
// credentials.
func runCreate(t *testing.T, e *terminateInstance, endpoint string) (sdk.Result, error) {
	t.Helper()
	return plugintest.ServeCloud(t, e, paramCredentialsSecret).Create(t, stepParams(endpoint), validSecrets())
}

func TestLoopbackEndpointIsRefusedWithoutAllowance(t *testing.T) {
	f := newFakeEC2(t, accessKeyID, secretAccessKey, region)
	f.addInstance(instanceID, "running", 0)
	_, err := runCreate(t, newTestInstance(), f.URL)
	plugintest.AssertEndpointRefused(t, err, "127.0.0.1 is a loopback address")
	assert.Zero(t, f.count("DescribeInstances")+f.count("TerminateInstances"), "nothing reached the endpoint")
}

// An endpoint may carry credentials in its user info or query: no message shows them.
func TestMessagesShowTheEndpointWithoutCredentials(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	tests := []struct {
		name     string
		endpoint func(f *fakeEC2) string
		want     plugintest.Outcome
	}{
		{name: "not an http URL", endpoint: func(*fakeEC2) string { return plugintest.WithCredentials("ftp://ec2.example/") },
			want: plugintest.Outcome{Reason: "InvalidParameter", Permanent: true}},
		{name: "unreachable", endpoint: func(*fakeEC2) string { return plugintest.WithCredentials(closed.URL + "/") },
			want: plugintest.Outcome{Reason: "CloudUnreachable"}},
		{name: "refused", endpoint: func(f *fakeEC2) string { return plugintest.WithCredentials(f.URL + "/") },
			want: plugintest.Outcome{Reason: "EndpointNotAllowed", Permanent: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeEC2(t, accessKeyID, secretAccessKey, region)
			f.addInstance(instanceID, "running", 0)
			e := newTestInstance(loopback)
			if tt.want.Reason == "EndpointNotAllowed" {
				e = newTestInstance()
			}
			_, err := runCreate(t, e, tt.endpoint(f))
			plugintest.AssertOutcome(t, tt.want, sdk.Result{}, err)
			require.Error(t, err)
			plugintest.AssertNoSecret(t, err.Error(), append(plugintest.URLSecrets(), secretAccessKey)...)
		})
	}
}
