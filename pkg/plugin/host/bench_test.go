package host

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// inProcessGreet is example.greet compiled into the operator, for comparison.
type inProcessGreet struct{ executor.Base }

func (inProcessGreet) Name() string { return "example.greet" }

func (inProcessGreet) Create(_ context.Context, req *executor.Request) (contract.Result, error) {
	return contract.DoneWithOutputs("greeted "+req.Params["name"], map[string]string{"greeting": "Hello, " + req.Params["name"] + "!"}), nil
}

func benchmarkHook(b *testing.B, e executor.TaskExecutor) {
	req := request(contract.HookCreate, map[string]string{"name": "Ada"})
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

// BenchmarkHookPluginLatency reports the p50 and p99 of single hook calls through the
// plugin (gRPC over mutual TLS to a child process); the target overhead is p50 < 300µs.
// Compare with BenchmarkHookInProcess for the in-process cost.
func BenchmarkHookPluginLatency(b *testing.B) {
	h := New(klog.Background(), Options{Dir: benchDir(b)})
	defer h.Close()
	reg := executor.NewRegistry()
	require.NoError(b, h.Load(context.Background(), reg))
	e, ok := reg.Get("example.greet")
	require.True(b, ok)
	req := request(contract.HookCreate, map[string]string{"name": "Ada"})
	ctx := context.Background()
	d := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		if _, err := e.Create(ctx, req); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(start))
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-µs")
}
