package e2e

import (
	"context"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/tracing"
)

// TestOnePipelinesTraceFromTheOperatorToAnHTTPEndpoint: with --otlp-endpoint the operator
// and its plugins send their spans to an OTLP receiver (this test's), and one pipeline is
// one trace: the pipeline, its step, the hook call, the gRPC call into the plugin, the
// plugin's side of it and the plugin's HTTP request, whose traceparent the endpoint gets.
func TestOnePipelinesTraceFromTheOperatorToAnHTTPEndpoint(t *testing.T) {
	// Not parallel: it restarts the shared operator.
	ctx := t.Context()
	collector := startOTLPReceiver(t)
	var mu sync.Mutex
	var traceparents []string
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		traceparents = append(traceparents, r.Header.Get("traceparent"))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(endpoint.Close)
	restartOperator(t, append(pluginArgs(), "--otlp-endpoint="+collector.address, "--otlp-insecure")...)

	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	created, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(ctx, recordPipeline(ns, "traced", "runner",
		v1alpha1.Step{Name: "ready", Executor: "http.ready", With: map[string]string{"url": endpoint.URL + "/healthz"}}), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPipeline(t, ns, "traced", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })

	traceID := tracing.PipelineTraceID(string(created.UID))
	want := []string{"pipeline", "step ready", "hook Create", "Executor/RunHook", "HTTP GET"}
	var spans []receivedSpan
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		spans = collector.trace(traceID[:])
		for _, name := range want {
			if !hasSpan(spans, name) {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "spans of trace %s: %+v", traceID, spans)
	for _, s := range spans {
		t.Logf("span %-40s service %-26s id %s parent %s", s.name, s.service, s.id, s.parent)
	}

	find := func(match func(s receivedSpan) bool, what string) receivedSpan {
		for _, s := range spans {
			if match(s) {
				return s
			}
		}
		t.Fatalf("no span %s", what)
		return receivedSpan{}
	}
	byName := func(name string) receivedSpan {
		return find(func(s receivedSpan) bool { return s.name == name }, name)
	}
	pipeline, step, hook := byName("pipeline"), byName("step ready"), byName("hook Create")
	assert.Empty(t, pipeline.parent, "the pipeline's span is the root")
	assert.Equal(t, pipeline.id, step.parent)
	assert.Equal(t, step.id, hook.parent)
	call := find(func(s receivedSpan) bool { return s.kind == tracepb.Span_SPAN_KIND_CLIENT && s.parent == hook.id }, "of the gRPC call of hook Create")
	assert.Equal(t, "stepwise.plugin.v1.Executor/RunHook", call.name, "the gRPC call into the plugin is the hook's child")
	server := find(func(s receivedSpan) bool { return s.kind == tracepb.Span_SPAN_KIND_SERVER && s.parent == call.id }, "of the plugin's side of the call")
	assert.Equal(t, "stepwise-plugin-httpcheck", server.service, "the plugin's side of the call continues the trace")
	httpSpan := byName("HTTP GET")
	assert.Equal(t, server.id, httpSpan.parent, "the plugin's request is a child of its call")
	assert.Equal(t, "stepwise-plugin-httpcheck", httpSpan.service)

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, traceparents)
	assert.Equal(t, "00-"+hex.EncodeToString(traceID[:])+"-"+httpSpan.id+"-01", traceparents[0],
		"the endpoint gets the trace, with the plugin's request as the parent")
}

type receivedSpan struct {
	name, service, id, parent string
	traceID                   []byte
	kind                      tracepb.Span_SpanKind
}

func hasSpan(spans []receivedSpan, name string) bool {
	for _, s := range spans {
		if strings.Contains(s.name, name) {
			return true
		}
	}
	return false
}

// otlpReceiver is an OTLP/gRPC trace receiver on loopback that keeps what it is sent.
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	address string
	mu      sync.Mutex
	spans   []receivedSpan
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &otlpReceiver{address: lis.Addr().String()}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return r
}

func (r *otlpReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, receivedSpan{name: s.GetName(), service: service, kind: s.GetKind(),
					id: hex.EncodeToString(s.GetSpanId()), parent: hex.EncodeToString(s.GetParentSpanId()), traceID: s.GetTraceId()})
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// trace is the spans received of the trace id.
func (r *otlpReceiver) trace(id []byte) []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receivedSpan
	for _, s := range r.spans {
		if string(s.traceID) == string(id) {
			out = append(out, s)
		}
	}
	return out
}
