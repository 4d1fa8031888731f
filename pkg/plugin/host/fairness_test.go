package host

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// requestOf is request for a pipeline of namespace ns.
func requestOf(ns, name string, params map[string]string) *executor.Request {
	req := request(contract.HookCreate, params)
	req.Pipeline.Namespace, req.Pipeline.Name = ns, name
	return req
}

// TestACallIsNeverRefusedBecauseAnotherNamespaceHoldsCalls (issue 44, item 5): with the
// engine's workers all but one busy in one namespace's plugin calls that hang, another
// namespace's call to the same plugin is served, not refused: the workers are shared
// between namespaces by the engine's queue (fairqueue), and the host adds no bound of its
// own that could turn a wait into a failed step.
func TestACallIsNeverRefusedBecauseAnotherNamespaceHoldsCalls(t *testing.T) {
	_, reg := startHost(t, klog.Background(), pluginDir(t, []string{"stepwise-plugin-test"}, nil))
	block, echo := get(t, reg, "test.block"), get(t, reg, "test.echo")
	for _, tt := range []struct {
		workers, namespaces int
	}{
		{workers: 8, namespaces: 2},
		{workers: 11, namespaces: 2},
		{workers: 16, namespaces: 2},
		{workers: 16, namespaces: 3},
	} {
		t.Run(fmt.Sprintf("%d workers, %d namespaces", tt.workers, tt.namespaces), func(t *testing.T) {
			// The busy namespaces hold what the queue lets them: all the workers but one.
			ctx, release := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			t.Cleanup(func() { release(); wg.Wait() })
			dir := t.TempDir()
			for i := range tt.workers - 1 {
				ns := fmt.Sprintf("busy-%d", i%(tt.namespaces-1))
				started := filepath.Join(dir, fmt.Sprintf("started-%d", i))
				wg.Go(func() {
					_, _ = block.Create(ctx, requestOf(ns, fmt.Sprintf("hang-%d", i), map[string]string{"started": started}))
				})
				waitForFile(t, started)
			}

			// Bounded as the engine bounds a call (--hook-call-timeout); it answers at once.
			callCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := echo.Create(callCtx, requestOf("other", "p", nil))
			require.NoError(t, err, "another namespace's call is served, not refused")
			assert.True(t, res.Done)
			assert.Equal(t, "other/p/uid-1/3", res.Outputs["pipeline"])
		})
	}
}
