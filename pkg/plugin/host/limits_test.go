package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/egress"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/plugin/client"
)

// maxDataSize reads the limit "Max data size" of a process: soft and hard, in bytes, or
// "unlimited".
func maxDataSize(t *testing.T, pid int) (soft, hard string) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^Max data size\s+(\S+)\s+(\S+)\s+bytes`).FindStringSubmatch(string(b))
	require.NotNil(t, m, "%s", b)
	return m[1], m[2]
}

// environOf is the environment a process was started with, as the kernel keeps it.
func environOf(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	require.NoError(t, err)
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// showEnv is what the test plugin reads of one variable of its environment.
func showEnv(t *testing.T, reg *executor.Registry, name string) string {
	t.Helper()
	res, err := get(t, reg, "test.environ").Create(context.Background(), request(contract.HookCreate, map[string]string{"show": name}))
	require.NoError(t, err)
	return res.Outputs["value"]
}

// TestPluginStartsUnderItsMemoryLimit: each plugin process runs under a hard limit of its
// own on the memory it may map (RLIMIT_DATA: the address space a Go program reserves
// without using it is not counted) and with GOMEMLIMIT below it, so that its garbage
// collector works hard before the limit is reached. Without a limit, neither is set.
func TestPluginStartsUnderItsMemoryLimit(t *testing.T) {
	tests := []struct {
		name           string
		limit          int64
		wantData       string
		wantGoMemLimit string
	}{
		{name: "no limit", wantData: "unlimited"},
		{name: "128Mi", limit: 128 << 20, wantData: "134217728", wantGoMemLimit: strconv.Itoa(((128 - 64) << 20) / 5 * 4)},
		{name: "1Gi", limit: 1 << 30, wantData: "1073741824", wantGoMemLimit: strconv.Itoa(((1024 - 64) << 20) / 5 * 4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(klog.Background(), Options{
				Dir:         pluginDir(t, []string{"stepwise-plugin-test", "stepwise-plugin-example"}, nil),
				MemoryLimit: tt.limit,
			})
			t.Cleanup(h.Close)
			reg := executor.NewRegistry()
			require.NoError(t, h.Load(context.Background(), reg))
			require.Len(t, h.PIDs(), 2)
			for name, pid := range h.PIDs() {
				soft, hard := maxDataSize(t, pid)
				assert.Equal(t, tt.wantData, soft, name)
				assert.Equal(t, tt.wantData, hard, name)
			}
			assert.Equal(t, tt.wantGoMemLimit, showEnv(t, reg, "GOMEMLIMIT"))
		})
	}
}

// TestPluginOverItsMemoryLimitDiesAlone: a hook that inflates far beyond its plugin's
// memory limit kills that plugin only, never the operator: the calls in flight in it fail
// (retryable) naming the plugin and why it died, another plugin goes on, and the next call
// starts it again, under its limit again.
func TestPluginOverItsMemoryLimitDiesAlone(t *testing.T) {
	restarts := &countRestarts{}
	h := New(klog.Background(), Options{
		Dir:         pluginDir(t, []string{"stepwise-plugin-test", "stepwise-plugin-example"}, nil),
		MemoryLimit: 128 << 20,
		Restarts:    restarts,
	})
	t.Cleanup(h.Close)
	reg := executor.NewRegistry()
	require.NoError(t, h.Load(context.Background(), reg))
	pids := h.PIDs()
	require.Len(t, pids, 2)

	// Another tenant's hook, in flight in the same plugin.
	started := filepath.Join(t.TempDir(), "started")
	inFlight := make(chan error, 1)
	go func() {
		_, err := get(t, reg, "test.block").Create(context.Background(), request(contract.HookCreate, map[string]string{"started": started}))
		inFlight <- err
	}()
	waitForFile(t, started)

	_, err := get(t, reg, "test.hostile").Create(context.Background(), request(contract.HookCreate, map[string]string{"mode": "inflate", "mib": "512"}))
	require.Error(t, err)
	assert.Equal(t, client.ReasonPluginUnavailable, executor.ReasonFor(err))
	assert.False(t, contract.IsPermanent(err))
	assert.Contains(t, err.Error(), "plugin stepwise-plugin-test")
	assert.Contains(t, err.Error(), "out of memory")
	assert.Contains(t, err.Error(), "128Mi")

	select {
	case err := <-inFlight:
		require.Error(t, err)
		assert.Equal(t, client.ReasonPluginUnavailable, executor.ReasonFor(err))
		assert.Contains(t, err.Error(), "plugin stepwise-plugin-test")
	case <-time.After(10 * time.Second):
		t.Fatal("the hook in flight did not return after its plugin died")
	}

	// The other plugin was not touched.
	assert.Equal(t, pids["stepwise-plugin-example"], h.PIDs()["stepwise-plugin-example"])
	res, err := get(t, reg, "example.greet").Create(context.Background(), request(contract.HookCreate, map[string]string{"name": "Ada"}))
	require.NoError(t, err)
	assert.True(t, res.Done)

	// The next call starts the plugin again, under its limit again.
	res, err = get(t, reg, "test.echo").Create(context.Background(), request(contract.HookCreate, nil))
	require.NoError(t, err)
	assert.True(t, res.Done)
	assert.Equal(t, []string{"stepwise-plugin-test/" + RestartOutOfMemory}, restarts.get(), "counted once, with its cause")
	pid := h.PIDs()["stepwise-plugin-test"]
	require.NotZero(t, pid)
	assert.NotEqual(t, pids["stepwise-plugin-test"], pid)
	soft, _ := maxDataSize(t, pid)
	assert.Equal(t, "134217728", soft)

	// Within its limit, a hook that needs memory is served.
	res, err = get(t, reg, "test.hostile").Create(context.Background(), request(contract.HookCreate, map[string]string{"mode": "inflate", "mib": "16"}))
	require.NoError(t, err)
	assert.Equal(t, "inflated 16 MiB", res.Message)
	assert.Equal(t, pid, h.PIDs()["stepwise-plugin-test"])
}

// TestEnvironmentForOnePlugin: what Options.EnvFor gives a plugin reaches that plugin
// only, over Options.Env's value of the same variable (the CIDRs one plugin, say vSphere,
// may connect to are no other plugin's); a name no plugin has is logged.
func TestEnvironmentForOnePlugin(t *testing.T) {
	var logs logSink
	h := New(logs.logger(), Options{
		Dir: pluginDir(t, []string{"stepwise-plugin-test", "stepwise-plugin-example"}, nil),
		Env: []string{egress.EnvAllowedCIDRs + "=127.0.0.0/8"},
		EnvFor: map[string][]string{
			"stepwise-plugin-test":    {egress.EnvAllowedCIDRs + "=127.0.0.0/8,10.20.0.0/16"},
			"stepwise-plugin-missing": {egress.EnvAllowedCIDRs + "=10.30.0.0/16"},
		},
	})
	t.Cleanup(h.Close)
	reg := executor.NewRegistry()
	require.NoError(t, h.Load(context.Background(), reg))

	assert.Equal(t, "127.0.0.0/8,10.20.0.0/16", showEnv(t, reg, egress.EnvAllowedCIDRs), "what the plugin reads")
	tests := []struct {
		plugin string
		want   string
	}{
		{plugin: "stepwise-plugin-test", want: egress.EnvAllowedCIDRs + "=127.0.0.0/8,10.20.0.0/16"},
		{plugin: "stepwise-plugin-example", want: egress.EnvAllowedCIDRs + "=127.0.0.0/8"},
	}
	for _, tt := range tests {
		t.Run(tt.plugin, func(t *testing.T) {
			pid := h.PIDs()[tt.plugin]
			require.NotZero(t, pid)
			var got []string
			for _, kv := range environOf(t, pid) {
				if strings.HasPrefix(kv, egress.EnvAllowedCIDRs+"=") {
					got = append(got, kv)
				}
			}
			assert.Equal(t, []string{tt.want}, got, "set once, to this plugin's value")
		})
	}
	assert.True(t, logs.contains("stepwise-plugin-missing"), "logs: %v", logs.lines)
}
