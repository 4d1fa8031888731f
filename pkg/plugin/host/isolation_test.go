package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/plugin/client"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
)

// TestHostileHookFailsOnlyItsStep: what one tenant's hook answers (text that is not UTF-8,
// a result or a request over the size limit) fails that hook alone. The plugin process,
// which every tenant shares, keeps running, and another tenant's hook in flight goes on.
func TestHostileHookFailsOnlyItsStep(t *testing.T) {
	h, reg := startHost(t, klog.Background(), pluginDir(t, []string{"stepwise-plugin-test"}, nil))
	hostile := get(t, reg, "test.hostile")

	// Another tenant's hook, in flight the whole time.
	started := filepath.Join(t.TempDir(), "started")
	ctx, cancel := context.WithCancel(context.Background())
	inFlight := make(chan error, 1)
	go func() {
		_, err := get(t, reg, "test.block").Create(ctx, request(contract.HookCreate, map[string]string{"started": started}))
		inFlight <- err
	}()
	pid := waitForFile(t, started)

	tests := []struct {
		mode string
		// wantErr is the error's reason, empty for a result.
		wantErr       string
		wantPermanent bool
		wantText      string
	}{
		{mode: "invalid-message", wantText: "HTTP/1.1 500 " + string(utf8.RuneError)},
		{mode: "invalid-error", wantErr: "ReceiverFailed", wantText: "HTTP/1.1 500 " + string(utf8.RuneError)},
		{mode: "cut-character", wantErr: contract.ReasonHookFailed, wantText: "Ung"},
		{mode: "invalid-outputs"},
		{mode: "huge-result", wantErr: proto.ReasonMessageTooLarge, wantPermanent: true, wantText: "larger than"},
		{mode: "huge-error", wantErr: contract.ReasonHookFailed, wantText: "xxx"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			res, err := hostile.Create(context.Background(), request(contract.HookCreate, map[string]string{"mode": tt.mode}))
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.True(t, utf8.ValidString(res.Message), "message %q", res.Message)
				assert.Contains(t, res.Message, tt.wantText)
				for k, v := range res.Outputs {
					assert.True(t, utf8.ValidString(k) && utf8.ValidString(v), "output %q=%q", k, v)
				}
			} else {
				require.Error(t, err)
				assert.Equal(t, tt.wantErr, executor.ReasonFor(err))
				assert.Equal(t, tt.wantPermanent, contract.IsPermanent(err))
				assert.True(t, utf8.ValidString(err.Error()), "error %q", err)
				assert.Contains(t, err.Error(), tt.wantText)
				assert.Less(t, len(err.Error()), 64<<10)
			}
			assert.Equal(t, pid, h.PIDs()["stepwise-plugin-test"], "the plugin process was not replaced")
		})
	}

	t.Run("request over the size limit", func(t *testing.T) {
		req := request(contract.HookCreate, nil)
		req.Secrets = map[string][]byte{"blob": []byte(strings.Repeat("x", 5<<20))}
		_, err := get(t, reg, "test.echo").Create(context.Background(), req)
		require.Error(t, err)
		assert.Equal(t, proto.ReasonMessageTooLarge, executor.ReasonFor(err))
		assert.True(t, contract.IsPermanent(err))
		assert.Equal(t, pid, h.PIDs()["stepwise-plugin-test"], "the plugin process was not replaced")
	})

	select {
	case err := <-inFlight:
		t.Fatalf("the other tenant's hook ended early: %v", err)
	default:
	}
	cancel()
	err := <-inFlight
	require.Error(t, err)
	assert.NotEqual(t, client.ReasonPluginUnavailable, executor.ReasonFor(err), "%v", err)
	assert.Equal(t, pid, h.PIDs()["stepwise-plugin-test"])
}

// TestPluginStartsWithACleanEnvironment: a plugin sees what the host passes it, not the
// operator's environment (tokens, cloud credentials, proxies).
func TestPluginStartsWithACleanEnvironment(t *testing.T) {
	t.Setenv("STEPWISE_TEST_OPERATOR_TOKEN", "operator-only")
	h := New(klog.Background(), Options{
		Dir: pluginDir(t, []string{"stepwise-plugin-test"}, nil),
		Env: []string{"STEPWISE_PLUGIN_ALLOWED_CIDRS=127.0.0.0/8"},
	})
	t.Cleanup(h.Close)
	reg := executor.NewRegistry()
	require.NoError(t, h.Load(context.Background(), reg))

	res, err := get(t, reg, "test.environ").Create(context.Background(), request(contract.HookCreate, nil))
	require.NoError(t, err)
	names := strings.Split(res.Outputs["names"], ",")
	assert.Contains(t, names, "STEPWISE_PLUGIN_ALLOWED_CIDRS")
	assert.NotContains(t, names, "STEPWISE_TEST_OPERATOR_TOKEN")
	assert.NotContains(t, names, "HOME")
}

// TestPluginRunsTheFileThatWasChecked: the host hashes the bytes it copies into a private
// directory and runs that copy, so replacing the plugin's file between the check and the
// exec (or while it runs) changes nothing; a replaced file is refused at the next start.
func TestPluginRunsTheFileThatWasChecked(t *testing.T) {
	dir := pluginDir(t, []string{"stepwise-plugin-test"}, nil)
	original := filepath.Join(dir, "stepwise-plugin-test")
	h, reg := startHost(t, klog.Background(), dir)
	pid := h.PIDs()["stepwise-plugin-test"]
	require.NotZero(t, pid)

	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	require.NoError(t, err)
	assert.NotEqual(t, original, exe, "the plugin runs from the host's private copy")
	info, err := os.Stat(filepath.Dir(exe))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "only the operator may write the copies")

	// Replace the file (another valid plugin, not the one listed), then make the host
	// start the plugin again.
	other, err := os.ReadFile(filepath.Join(binDir, "stepwise-plugin-example"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(original+".new", other, 0o755))
	require.NoError(t, os.Rename(original+".new", original))
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))

	echo := get(t, reg, "test.echo")
	var lastErr error
	require.Eventually(t, func() bool {
		_, lastErr = echo.Create(context.Background(), request(contract.HookCreate, nil))
		return lastErr != nil && strings.Contains(lastErr.Error(), "but the checksum file")
	}, 10*time.Second, 50*time.Millisecond, "last error: %v", lastErr)
	assert.Equal(t, client.ReasonPluginUnavailable, executor.ReasonFor(lastErr))
	assert.Empty(t, h.PIDs(), "the replaced file never ran")
}

// TestPluginThatDiesWhileStartingIsStartedAgain: a plugin killed during its start (as a
// chaos run killed one 12 ms after it started) was refused for the operator's whole life,
// and every step naming its executors failed with UnknownExecutor. The host tries again.
func TestPluginThatDiesWhileStartingIsStartedAgain(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "crash-once")
	require.NoError(t, os.WriteFile(marker, nil, 0o600))
	h := New(klog.Background(), Options{
		Dir: pluginDir(t, []string{"stepwise-plugin-test"}, nil),
		Env: []string{"STEPWISE_TEST_CRASH_ONCE=" + marker},
	})
	t.Cleanup(h.Close)
	reg := executor.NewRegistry()
	require.NoError(t, h.Load(context.Background(), reg))

	assert.NoFileExists(t, marker, "the first start crashed")
	res, err := get(t, reg, "test.echo").Create(context.Background(), request(contract.HookCreate, nil))
	require.NoError(t, err)
	assert.True(t, res.Done)
}

// TestStaleCopiesOfAKilledOperatorAreRemoved: an operator killed with SIGKILL cannot remove
// its private copies of the plugins (about 100 MiB a start); the next host removes the
// directories no running host holds, and leaves those of a host that runs.
func TestStaleCopiesOfAKilledOperatorAreRemoved(t *testing.T) {
	runDir := t.TempDir()
	dir := pluginDir(t, []string{"stepwise-plugin-test"}, nil)
	stale := filepath.Join(runDir, "stepwise-plugins-123")
	require.NoError(t, os.MkdirAll(stale, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(stale, privateDirLock), nil, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(stale, "stepwise-plugin-test-1"), []byte("copy"), 0o500))

	running := New(klog.Background(), Options{Dir: dir, RunDir: runDir})
	t.Cleanup(running.Close)
	require.NoError(t, running.Load(context.Background(), executor.NewRegistry()))
	assert.NoDirExists(t, stale, "the killed host's copies are removed")

	next := New(klog.Background(), Options{Dir: dir, RunDir: runDir})
	t.Cleanup(next.Close)
	require.NoError(t, next.Load(context.Background(), executor.NewRegistry()))
	dirs, err := filepath.Glob(filepath.Join(runDir, "stepwise-plugins-*"))
	require.NoError(t, err)
	assert.Len(t, dirs, 2, "the running host's directory stays")

	running.Close()
	next.Close()
	dirs, err = filepath.Glob(filepath.Join(runDir, "stepwise-plugins-*"))
	require.NoError(t, err)
	assert.Empty(t, dirs, "Close removes its own")
}

// TestHostsStartingTogetherKeepTheirDirectories: a host that removed abandoned directories
// while another was between creating its lock file and locking it took that directory for
// abandoned and removed it; the other host's plugins then failed to copy ("no such file or
// directory", seen in a chaos run where replicas started at once).
func TestHostsStartingTogetherKeepTheirDirectories(t *testing.T) {
	runDir := t.TempDir()
	const rounds, hosts = 300, 8
	for round := range rounds {
		all := make([]*Host, hosts)
		dirs := make([]string, hosts)
		errs := make([]error, hosts)
		var wg sync.WaitGroup
		for i := range all {
			all[i] = New(klog.Background(), Options{RunDir: runDir})
			wg.Go(func() { dirs[i], errs[i] = all[i].privateDir() })
		}
		wg.Wait()
		for i := range all {
			if assert.NoError(t, errs[i], "round %d: host %d", round, i) {
				assert.FileExists(t, filepath.Join(dirs[i], privateDirLock), "round %d: host %d's directory was removed under it", round, i)
			}
			all[i].Close()
		}
		if t.Failed() {
			return
		}
	}
}
