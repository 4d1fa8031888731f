package host

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/stepwise-dev/stepwise/internal/apitest"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
)

// TestWhatAHookWritesReachesTheOperatorLog: a plain line a hook writes to stderr or stdout
// and a line through sdk.Logger reach the operator's log at the default level, tagged with
// the plugin; the logger's line carries the pipeline and step, and the Secret's value is
// masked.
func TestWhatAHookWritesReachesTheOperatorLog(t *testing.T) {
	var out apitest.SyncBuffer
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&out))) // verbosity 0
	_, reg := startHost(t, logger, pluginDir(t, []string{"stepwise-plugin-test"}, nil))

	req := request(contract.HookCreate, nil)
	req.Secrets = map[string][]byte{"token": []byte("t0p-s3cr3t-t0k3n")}
	res, err := executor.RunHook(context.Background(), get(t, reg, "test.logs"), req)
	require.NoError(t, err)
	assert.Equal(t, "logged", res.Message)

	require.Eventually(t, func() bool {
		s := out.String()
		return strings.Contains(s, "plain line from step second") && strings.Contains(s, "stdout line from step second") &&
			strings.Contains(s, "structured line")
	}, 10*time.Second, 20*time.Millisecond, "log: %s", out.String())
	var structured string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "structured line") {
			structured = line
		}
	}
	assert.Contains(t, structured, "stepwise-plugin-test")
	assert.Contains(t, structured, "ns/p")
	assert.Contains(t, structured, "second")
	assert.NotContains(t, out.String(), "t0p-s3cr3t-t0k3n")
}

// TestReattachToAPluginStartedByHand: a plugin a developer started in debug mode
// (STEPWISE_PLUGIN_DEBUG=1, as under a debugger) prints how to reach it; a host given that
// serves its executors without starting or verifying the executable, and leaves it running
// when it closes.
func TestReattachToAPluginStartedByHand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "stepwise-plugin-test"))
	cmd.Env = append(os.Environ(), proto.ReattachEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(stdout)
	var reattachJSON string
	for lines.Scan() {
		if after, ok := strings.CutPrefix(lines.Text(), proto.ReattachPrefix); ok {
			reattachJSON = after
			break
		}
	}
	require.NotEmpty(t, reattachJSON, "the plugin printed how to reach it")
	cfg, err := proto.ParseReattach([]byte(reattachJSON))
	require.NoError(t, err)
	assert.Equal(t, cmd.Process.Pid, cfg.Pid)

	h := New(klog.Background(), Options{Reattach: map[string]*plugin.ReattachConfig{"stepwise-plugin-test": cfg}})
	reg := executor.NewRegistry()
	require.NoError(t, h.Load(ctx, reg))
	res, err := executor.RunHook(ctx, get(t, reg, "test.echo"), request(contract.HookCreate, nil))
	require.NoError(t, err)
	assert.Equal(t, "second", res.Outputs["step"])
	h.Close()
	assert.NoError(t, cmd.Process.Signal(syscall.Signal(0)), "the developer's process still runs")
}
