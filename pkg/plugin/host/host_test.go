package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/plugin/client"
)

// binDir holds the example plugin and the test plugin, built once by TestMain.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "stepwise-plugins-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	// One go build for all: they share most of their packages.
	plugins := map[string]string{ // package's last element -> plugin name
		"example":      "stepwise-plugin-example",
		"testplugin":   "stepwise-plugin-test",
		"testpluginv1": "stepwise-plugin-v1",
	}
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"github.com/stepwise-dev/stepwise/plugins/example",
		"github.com/stepwise-dev/stepwise/pkg/plugin/internal/testplugin",
		"github.com/stepwise-dev/stepwise/pkg/plugin/internal/testpluginv1",
	)
	// Static, as the image's plugins are: a cgo build maps 8 MiB more for each thread's
	// stack, which counts toward the memory limit (limits_test.go).
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	if err != nil {
		_ = os.RemoveAll(dir)
		panic(fmt.Sprintf("build the test plugins: %v\n%s", err, out))
	}
	for built, name := range plugins {
		if err := os.Rename(filepath.Join(dir, built), filepath.Join(dir, name)); err != nil {
			_ = os.RemoveAll(dir)
			panic(err)
		}
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// copyPlugin copies a built plugin into dir and lists it in dir/SHA256SUMS.
func copyPlugin(tb testing.TB, dir, name string) {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(binDir, name))
	require.NoError(tb, err)
	require.NoError(tb, os.WriteFile(filepath.Join(dir, name), b, 0o755))
	sum := sha256.Sum256(b)
	require.NoError(tb, os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(hex.EncodeToString(sum[:])+"  "+name+"\n"), 0o644))
}

// pluginDir copies the named binaries into a fresh directory and writes SHA256SUMS;
// sums overrides a file's listed checksum.
func pluginDir(t *testing.T, names []string, sums map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	var lines []string
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(binDir, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o755))
		sum := sha256.Sum256(b)
		lines = append(lines, hex.EncodeToString(sum[:])+"  "+name)
	}
	for name, sum := range sums {
		lines = append(lines, sum+"  "+name)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	return dir
}

// logSink collects log lines.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *logSink) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.lines = append(s.lines, prefix+" "+args)
	}, funcr.Options{})
}

func (s *logSink) contains(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

func startHost(t *testing.T, logger klog.Logger, dir string) (*Host, *executor.Registry) {
	t.Helper()
	h := New(logger, Options{Dir: dir})
	t.Cleanup(h.Close)
	reg := executor.NewRegistry()
	require.NoError(t, h.Load(context.Background(), reg))
	return h, reg
}

func request(hook contract.Hook, params map[string]string) *executor.Request {
	return &executor.Request{Request: contract.Request{
		Pipeline: contract.PipelineRef{Namespace: "ns", Name: "p", UID: "uid-1", Generation: 3},
		Step:     "second", Hook: hook, Params: params, Attempt: 2,
		IdempotencyKey: contract.IdempotencyKey("uid-1", "second", hook),
		Outputs:        map[string]map[string]string{"first": {"x": "from-first"}},
	}}
}

func get(t *testing.T, reg *executor.Registry, name string) executor.TaskExecutor {
	t.Helper()
	e, ok := reg.Get(name)
	require.True(t, ok, "executor %s registered (have %v)", name, reg.Names())
	return e
}

func TestExamplePluginThroughTheHost(t *testing.T) {
	h, reg := startHost(t, klog.Background(), pluginDir(t, []string{"stepwise-plugin-example", "stepwise-plugin-test"}, nil))
	assert.Equal(t, []string{"example.greet", "test.block", "test.echo", "test.environ", "test.fail", "test.hostile", "test.logs"}, reg.Names())

	greet := get(t, reg, "example.greet")
	info := executor.Describe(greet)
	assert.Equal(t, "v0.1.0", info.Version)
	assert.NotEmpty(t, info.Description)
	require.Len(t, info.Parameters, 2)
	assert.Equal(t, "name", info.Parameters[0].Name)
	assert.True(t, info.Parameters[0].Required)

	ctx := context.Background()
	for _, hook := range contract.AllHooks() {
		res, err := executor.RunHook(ctx, greet, request(hook, map[string]string{"name": "Ada"}))
		require.NoError(t, err, hook)
		assert.True(t, res.Done, hook)
	}
	res, err := executor.RunHook(ctx, greet, request(contract.HookCreate, map[string]string{"name": "Ada"}))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"greeting": "Hello, Ada!"}, res.Outputs)
	assert.Equal(t, "greeted Ada", res.Message)

	_, err = greet.Create(ctx, request(contract.HookCreate, nil))
	require.Error(t, err)
	assert.True(t, contract.IsPermanent(err))
	assert.Equal(t, "InvalidParameter", executor.ReasonFor(err))
	assert.Equal(t, `parameter "name" is required`, err.Error(), "checked by the SDK before the hook")

	// Every field of the Request crosses the protocol.
	res, err = get(t, reg, "test.echo").Create(ctx, request(contract.HookCreate, nil))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"secrets": "", "pipeline": "ns/p/uid-1/3", "step": "second", "hook": "Create", "attempt": "2",
		"key": "uid-1/second/Create", "earlier": "from-first",
	}, res.Outputs)

	// Waiting, retryable with a reason, retryable without one.
	fail := get(t, reg, "test.fail")
	res, err = fail.Create(ctx, request(contract.HookCreate, nil))
	require.NoError(t, err)
	assert.False(t, res.Done)
	assert.Equal(t, 3*time.Second, res.RequeueAfter)
	assert.Equal(t, "still working", res.Message)
	_, err = fail.Delete(ctx, request(contract.HookDelete, nil))
	require.Error(t, err)
	assert.False(t, contract.IsPermanent(err))
	assert.Equal(t, "CloudBusy", executor.ReasonFor(err))
	_, err = fail.PostDelete(ctx, request(contract.HookPostDelete, nil))
	require.Error(t, err)
	assert.False(t, contract.IsPermanent(err))
	assert.Equal(t, contract.ReasonHookFailed, executor.ReasonFor(err))

	// One process serves every executor of a plugin and is reused.
	pids := h.PIDs()
	assert.Len(t, pids, 2)
	_, err = greet.Create(ctx, request(contract.HookCreate, map[string]string{"name": "Bob"}))
	require.NoError(t, err)
	assert.Equal(t, pids, h.PIDs())
}

// TestSecretsCrossToThePlugin: the engine resolves a step's Secrets (see the controller's
// tests); the host only carries them to the plugin.
func TestSecretsCrossToThePlugin(t *testing.T) {
	_, reg := startHost(t, klog.Background(), pluginDir(t, []string{"stepwise-plugin-test"}, nil))
	req := request(contract.HookCreate, map[string]string{"credentialsSecret": "creds"})
	req.Secrets = map[string][]byte{"username": []byte("admin"), "password": []byte("s3cret!")}
	res, err := get(t, reg, "test.echo").Create(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, "password=7,username=5", res.Outputs["secrets"])
}

// TestUnknownHookFailsAlikeThroughAPluginAndInProcess: a hook nobody knows fails for good
// with reason UnknownHook, whether the engine dispatches it or a plugin is asked for it.
func TestUnknownHookFailsAlikeThroughAPluginAndInProcess(t *testing.T) {
	_, reg := startHost(t, klog.Background(), pluginDir(t, []string{"stepwise-plugin-test"}, nil))
	echo := get(t, reg, "test.echo").(*pluginExecutor)

	_, inProcess := executor.RunHook(context.Background(), echo, request("Frobnicate", nil))
	require.Error(t, inProcess)

	// Past the engine's dispatcher: the plugin gets a hook the contract does not know (the
	// client's tests send one the protocol does not know).
	c, err := echo.proc.conn()
	require.NoError(t, err)
	_, throughPlugin := c.Run(context.Background(), "test.echo", &request("Frobnicate", nil).Request)
	require.Error(t, throughPlugin)
	assert.Equal(t, client.Answered, client.StageOf(throughPlugin), "the plugin's own answer")

	for name, err := range map[string]error{"in process": inProcess, "through the plugin": throughPlugin} {
		assert.Equal(t, contract.ReasonUnknownHook, executor.ReasonFor(err), name)
		assert.True(t, contract.IsPermanent(err), name)
	}
}

func waitForFile(t *testing.T, path string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || len(b) == 0 {
			return false
		}
		pid, err = strconv.Atoi(string(b))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	return pid
}

func TestPluginKilledMidHookIsRestarted(t *testing.T) {
	restarts := &countRestarts{}
	h := New(klog.Background(), Options{Dir: pluginDir(t, []string{"stepwise-plugin-test"}, nil), Restarts: restarts})
	t.Cleanup(h.Close)
	reg := executor.NewRegistry()
	require.NoError(t, h.Load(context.Background(), reg))
	block := get(t, reg, "test.block")
	started := filepath.Join(t.TempDir(), "started")

	type outcome struct {
		res contract.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := block.Create(context.Background(), request(contract.HookCreate, map[string]string{"started": started}))
		done <- outcome{res, err}
	}()
	pid := waitForFile(t, started)
	assert.Equal(t, pid, h.PIDs()["stepwise-plugin-test"])
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))

	select {
	case o := <-done:
		require.Error(t, o.err)
		assert.False(t, contract.IsPermanent(o.err))
		assert.Equal(t, client.ReasonPluginUnavailable, executor.ReasonFor(o.err))
		assert.Contains(t, o.err.Error(), "died")
	case <-time.After(10 * time.Second):
		t.Fatal("the hook did not return after its plugin was killed")
	}

	// The next call starts a new process and succeeds.
	res, err := get(t, reg, "test.echo").Create(context.Background(), request(contract.HookCreate, nil))
	require.NoError(t, err)
	assert.True(t, res.Done)
	newPID := h.PIDs()["stepwise-plugin-test"]
	assert.NotZero(t, newPID)
	assert.NotEqual(t, pid, newPID)
	assert.Equal(t, []string{"stepwise-plugin-test/" + RestartExited}, restarts.get(), "the restart is counted")
}

// countRestarts records the restarts a host reports, as plugin/cause.
type countRestarts struct {
	mu   sync.Mutex
	seen []string
}

func (c *countRestarts) PluginRestarted(plugin, cause string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = append(c.seen, plugin+"/"+cause)
}

func (c *countRestarts) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.seen)
}

func TestHangingPluginReturnsAtTheDeadline(t *testing.T) {
	_, reg := startHost(t, klog.Background(), pluginDir(t, []string{"stepwise-plugin-test"}, nil))
	block := get(t, reg, "test.block")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := block.Create(ctx, request(contract.HookCreate, map[string]string{"hang": "true"}))
	elapsed := time.Since(start)
	require.Error(t, err)
	assert.Equal(t, contract.ReasonTimeout, executor.ReasonFor(err))
	assert.False(t, contract.IsPermanent(err))
	assert.Less(t, elapsed, 2*time.Second, "returned %s after a 300ms deadline", elapsed)

	// The plugin is still usable.
	res, err := get(t, reg, "test.echo").Create(context.Background(), request(contract.HookCreate, nil))
	require.NoError(t, err)
	assert.True(t, res.Done)
}

func TestWrongChecksumIsRefused(t *testing.T) {
	dir := pluginDir(t, []string{"stepwise-plugin-test"}, map[string]string{
		"stepwise-plugin-example": strings.Repeat("ab", sha256.Size),
	})
	b, err := os.ReadFile(filepath.Join(binDir, "stepwise-plugin-example"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stepwise-plugin-example"), b, 0o755))
	// Listed nowhere: refused too.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stepwise-plugin-unlisted"), b, 0o755))

	var logs logSink
	h, reg := startHost(t, logs.logger(), dir)
	assert.Equal(t, []string{"test.block", "test.echo", "test.environ", "test.fail", "test.hostile", "test.logs"}, reg.Names(), "nothing of the refused plugins")
	assert.True(t, logs.contains("but the checksum file"), "logs: %v", logs.lines)
	assert.True(t, logs.contains("not listed in the checksum file"), "logs: %v", logs.lines)
	assert.Len(t, h.PIDs(), 1)
	// A step naming the refused plugin's executor is told why it cannot run.
	missing := reg.Missing("example.greet").Error()
	assert.Contains(t, missing, `no executor named "example.greet"`)
	// Once the plugin, the file and both hashes, and what to do.
	built := sha256.Sum256(b)
	assert.Contains(t, missing, "stepwise-plugin-example: it did not start: its SHA-256 is "+hex.EncodeToString(built[:])+
		", but the checksum file "+filepath.Join(dir, "SHA256SUMS")+" lists "+strings.Repeat("ab", sha256.Size)+
		`; if this build is the one to run, replace its line in that file with what "cd `+dir+` && sha256sum stepwise-plugin-example" prints, then restart the operator`)
	assert.Equal(t, 1, strings.Count(missing, "stepwise-plugin-example:"), "the plugin is named once: %s", missing)
	assert.Contains(t, missing, "stepwise-plugin-unlisted: it is not listed in the checksum file")
	// Typed, for the steps that wait on them and the catalogue.
	refusal, ok := reg.RefusalFor("example.greet")
	require.True(t, ok)
	assert.Equal(t, v1alpha1.PluginChecksumMismatch, refusal.Reason)
	refusal, ok = reg.RefusalFor("unlisted.anything")
	require.True(t, ok)
	assert.Equal(t, v1alpha1.PluginNotVerifiable, refusal.Reason)
	_, ok = reg.RefusalFor("test.echo")
	assert.False(t, ok)

	res, err := get(t, reg, "test.echo").Create(context.Background(), request(contract.HookCreate, nil))
	require.NoError(t, err)
	assert.True(t, res.Done)
}

func TestNonPluginExecutableIsIgnored(t *testing.T) {
	script := []byte("#!/bin/sh\necho 'I am not a plugin'\n")
	sum := sha256.Sum256(script)
	dir := pluginDir(t, []string{"stepwise-plugin-example"}, map[string]string{
		"stepwise-plugin-bogus": hex.EncodeToString(sum[:]),
	})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stepwise-plugin-bogus"), script, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README"), []byte("not a plugin by name"), 0o644))

	var logs logSink
	_, reg := startHost(t, logs.logger(), dir)
	assert.Equal(t, []string{"example.greet"}, reg.Names())
	assert.True(t, logs.contains("is it a Stepwise plugin?"), "logs: %v", logs.lines)
	assert.True(t, logs.contains("stepwise-plugin-bogus"), "logs: %v", logs.lines)
}

func TestCloseKillsEveryPlugin(t *testing.T) {
	h, reg := startHost(t, klog.Background(), pluginDir(t, []string{"stepwise-plugin-example", "stepwise-plugin-test"}, nil))
	pids := h.PIDs()
	require.Len(t, pids, 2)
	for _, pid := range pids {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		require.NoError(t, err, "plugin %d runs", pid)
	}
	h.Close()
	for name, pid := range pids {
		assert.Eventually(t, func() bool {
			_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
			return os.IsNotExist(err)
		}, 5*time.Second, 10*time.Millisecond, "%s (pid %d) still runs", name, pid)
	}
	_, err := get(t, reg, "example.greet").Create(context.Background(), request(contract.HookCreate, map[string]string{"name": "x"}))
	require.Error(t, err, "no call after Close")
	assert.Equal(t, client.ReasonPluginUnavailable, executor.ReasonFor(err))
	assert.Empty(t, h.PIDs())
}

func TestNoPluginDirectory(t *testing.T) {
	executors, refused, err := New(klog.Background(), Options{}).start(context.Background())
	require.NoError(t, err)
	assert.Empty(t, executors)
	assert.Empty(t, refused)
	_, _, err = New(klog.Background(), Options{Dir: filepath.Join(t.TempDir(), "missing")}).start(context.Background())
	assert.Error(t, err)
}
