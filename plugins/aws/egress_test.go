package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

func runCreate(t *testing.T, e *terminateInstance, endpoint string) (sdk.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := withSecret(plugintest.Request(sdk.HookCreate, "uid-1", map[string]string{
		"providerID": "aws:///us-east-1a/" + instanceID, "endpoint": endpoint, "credentialsSecret": "aws-creds", "node": nodeName}), validSecrets())
	return plugintest.Serve(t, e).Run(ctx, executorName, sdk.HookCreate, req)
}

func TestLoopbackEndpointIsRefusedWithoutAllowance(t *testing.T) {
	f := newFakeEC2(t, accessKeyID, secretAccessKey, region)
	f.addInstance(instanceID, "running", 0)
	res, err := runCreate(t, newTestInstance(), f.URL)
	var e *sdk.Error
	require.ErrorAs(t, err, &e, "result: %+v", res)
	assert.Equal(t, "EndpointNotAllowed", e.Reason)
	assert.True(t, e.Permanent)
	assert.Contains(t, err.Error(), "127.0.0.1 is a loopback address")
	assert.Contains(t, err.Error(), "--plugin-allowed-cidrs")
	assert.Zero(t, f.count("DescribeInstances")+f.count("TerminateInstances"), "nothing reached the endpoint")
}

// An endpoint may carry credentials in its user info or query: no message shows them.
func TestMessagesShowTheEndpointWithoutCredentials(t *testing.T) {
	withCredentials := func(u string) string {
		return strings.Replace(u, "://", "://admin:Sup3rS3cret@", 1) + "/?token=abc123"
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	tests := []struct {
		name     string
		endpoint func(f *fakeEC2) string
		reason   string
	}{
		{name: "not an http URL", endpoint: func(*fakeEC2) string { return "ftp://admin:Sup3rS3cret@ec2.example/?token=abc123" }, reason: "InvalidParameter"},
		{name: "unreachable", endpoint: func(*fakeEC2) string { return withCredentials(closed.URL) }, reason: "CloudUnreachable"},
		{name: "refused", endpoint: func(f *fakeEC2) string { return withCredentials(f.URL) }, reason: "EndpointNotAllowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeEC2(t, accessKeyID, secretAccessKey, region)
			f.addInstance(instanceID, "running", 0)
			e := newTestInstance(loopback)
			if tt.reason == "EndpointNotAllowed" {
				e = newTestInstance()
			}
			_, err := runCreate(t, e, tt.endpoint(f))
			var se *sdk.Error
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.reason, se.Reason, "%v", err)
			for _, secret := range []string{"admin:", "Sup3rS3cret", "abc123", secretAccessKey} {
				assert.NotContains(t, err.Error(), secret)
			}
		})
	}
}
