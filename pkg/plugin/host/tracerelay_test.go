package host

import (
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/tracing"
)

// collector is an OTLP/gRPC receiver on loopback that keeps the services it got spans of.
type collector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu       sync.Mutex
	services map[string]int
}

func (c *collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				c.services[a.GetValue().GetStringValue()]++
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (c *collector) spansOf(service string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.services[service]
}

// TestPluginSpansGoThroughTheHostsRelay: a plugin is given the relay's Unix socket as its
// collector, never the collector's address (on loopback, which its egress policy refuses),
// and its spans reach the collector through the relay; Close ends the relay.
func TestPluginSpansGoThroughTheHostsRelay(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c := &collector{services: map[string]int{}}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, c)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	dir := pluginDir(t, []string{"stepwise-plugin-test"}, nil)
	h := New(klog.Background(), Options{Dir: dir, RunDir: shortTempDir(t),
		TraceCollector: tracing.Options{Endpoint: lis.Addr().String(), Insecure: true}})
	reg := executor.NewRegistry()
	require.NoError(t, h.Load(context.Background(), reg))

	res, err := get(t, reg, "test.environ").Create(context.Background(), request(contract.HookCreate, map[string]string{"show": tracing.EndpointEnv}))
	require.NoError(t, err)
	endpoint := res.Outputs["value"]
	assert.True(t, strings.HasPrefix(endpoint, "unix://"), "the plugin's collector is the relay: %q", endpoint)
	assert.NotContains(t, endpoint, lis.Addr().String())

	assert.Eventually(t, func() bool { return c.spansOf("stepwise-plugin-test") > 0 }, 30*time.Second, 50*time.Millisecond,
		"the plugin's spans reached the collector")

	h.Close()
	_, err = net.Dial("unix", strings.TrimPrefix(endpoint, "unix://"))
	assert.Error(t, err, "the relay is gone with the host")
}

// shortTempDir is a temporary directory with a path short enough for a Unix socket in it
// (t.TempDir's, with the test's name, may not be).
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sw-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
