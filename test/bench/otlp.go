package main

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

// spanCounter is an OTLP/gRPC receiver on loopback that counts the spans it is sent: the
// collector of the -trace run, which measures what tracing costs the operator.
type spanCounter struct {
	coltracepb.UnimplementedTraceServiceServer
	spans  atomic.Int64
	server *grpc.Server
}

// startSpanCounter starts the receiver and returns it with its address.
func startSpanCounter() (*spanCounter, string, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("listen for spans: %w", err)
	}
	c := &spanCounter{server: grpc.NewServer()}
	coltracepb.RegisterTraceServiceServer(c.server, c)
	go func() { _ = c.server.Serve(lis) }()
	return c, lis.Addr().String(), nil
}

func (c *spanCounter) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			c.spans.Add(int64(len(ss.GetSpans())))
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}
