package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

// The checks every executor passes, and the effects on the remote system: one ticket a
// step, recorded, closed by the teardown.

func TestConformance(t *testing.T) {
	f := newFake(t, testToken)
	plugintest.Conformance(t, newTestApproval(), map[string]string{"url": f.url, "summary": "deploy v2"},
		plugintest.WithSecretParam("tokenSecret", map[string][]byte{"token": []byte(testToken)}),
		plugintest.WithWaits(10))
}

func TestLifecycle(t *testing.T) {
	f := newFake(t, "")
	created := plugintest.Lifecycle(t, plugintest.Serve(t, newTestApproval()), executorName,
		map[string]string{"url": f.url, "summary": "deploy v2"}, f.remote())
	assert.Equal(t, map[string]string{"ticket": "T-1"}, created)
	assert.Equal(t, statusClosed, f.status("T-1"))
}

func TestCrashReplay(t *testing.T) {
	tests := []struct {
		name      string
		ignoreKey bool
		want      string // the failure CrashReplay reports; "" for none
	}{
		{name: "the same key finds the same ticket"},
		{name: "an API that ignores the key opens a second", ignoreKey: true, want: "made 2 things, not 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, "")
			f.set(func(f *fakeAPI) { f.ignoreKey = tt.ignoreKey })
			failures := plugintest.Failures(t, func(tb testing.TB) {
				plugintest.CrashReplay(tb, plugintest.Serve(t, newTestApproval()), executorName,
					map[string]string{"url": f.url, "summary": "deploy v2"}, f.remote())
			})
			if tt.want == "" {
				assert.Empty(t, failures)
				return
			}
			assert.Contains(t, strings.Join(failures, "\n"), tt.want)
		})
	}
}
