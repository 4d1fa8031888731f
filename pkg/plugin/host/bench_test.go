package host

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// inProcessGreet is example.greet compiled into the operator, for comparison.
type inProcessGreet struct{ executor.Base }

func (inProcessGreet) Name() string { return "example.greet" }

func (inProcessGreet) Create(_ context.Context, req *executor.Request) (executor.Result, error) {
	return executor.DoneWithOutputs("greeted "+req.Params["name"], map[string]string{"greeting": "Hello, " + req.Params["name"] + "!"}), nil
}

func benchmarkHook(b *testing.B, e executor.TaskExecutor) {
	req := request(v1alpha1.HookCreate, map[string]string{"name": "Ada"})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Create(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHookInProcess(b *testing.B) { benchmarkHook(b, inProcessGreet{}) }

func BenchmarkHookPlugin(b *testing.B) {
	h := New(klog.Background(), Options{Dir: benchDir(b)})
	defer h.Close()
	reg := executor.NewRegistry()
	require.NoError(b, h.Load(context.Background(), reg))
	e, ok := reg.Get("example.greet")
	require.True(b, ok)
	benchmarkHook(b, e)
}

func benchDir(b *testing.B) string {
	dir := b.TempDir()
	copyPlugin(b, dir, "stepwise-plugin-example")
	return dir
}

// TestHookLatencyP50 measures the p50 of 2000 hook calls through the plugin; the target
// overhead is under 300µs (logged, and checked loosely since -race slows everything).
func TestHookLatencyP50(t *testing.T) {
	_, reg := startHost(t, klog.Background(), pluginDir(t, []string{"stepwise-plugin-example"}, nil))
	e := get(t, reg, "example.greet")
	req := request(v1alpha1.HookCreate, map[string]string{"name": "Ada"})
	ctx := context.Background()
	const n = 2000
	d := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		_, err := e.Create(ctx, req)
		require.NoError(t, err)
		d = append(d, time.Since(start))
	}
	slices.Sort(d)
	t.Logf("plugin hook latency over %d calls: p50 %s, p90 %s, p99 %s", n, d[n/2], d[n*9/10], d[n*99/100])
	require.Less(t, d[n/2], 5*time.Millisecond)
}
