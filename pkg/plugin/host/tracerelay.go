package host

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/tracing"
)

// traceRelay carries the plugins' OTLP connections from a Unix socket in the host's
// private directory to the operator's collector. The plugins' exporters so connect
// nowhere on the network: the egress policy holds for every connection a plugin makes,
// and the collector's address and TLS stay the operator's. It copies bytes only: the
// plugins speak OTLP/gRPC in plaintext to the socket, the relay speaks it to the collector
// as the operator does (over TLS unless Insecure).
type traceRelay struct {
	listener net.Listener
	upstream tracing.Options
	logger   klog.Logger
	// slots bounds the connections relayed at once: a plugin opening many holds only these.
	slots chan struct{}

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

const (
	traceRelaySocket = "otlp.sock"
	// maxRelayedConns: an exporter keeps one connection; a few spare for restarts.
	maxRelayedConns  = 16
	relayDialTimeout = 10 * time.Second
)

// startTraceRelay listens on dir/otlp.sock and relays each connection to upstream.
func startTraceRelay(logger klog.Logger, dir string, upstream tracing.Options) (*traceRelay, error) {
	socket := filepath.Join(dir, traceRelaySocket)
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("listen for the plugins' traces on %s: %w", socket, err)
	}
	r := &traceRelay{listener: l, upstream: upstream, logger: logger.WithValues("collector", upstream.Endpoint),
		slots: make(chan struct{}, maxRelayedConns), conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

// env is what a plugin is given to export its spans through the relay.
func (r *traceRelay) env() []string {
	return tracing.Env(tracing.Options{Endpoint: "unix://" + r.listener.Addr().String(), Insecure: true})
}

func (r *traceRelay) serve() {
	defer r.wg.Done()
	for {
		conn, err := r.listener.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				r.logger.Error(err, "The plugins' trace relay stopped accepting")
			}
			return
		}
		select {
		case r.slots <- struct{}{}:
		default:
			r.logger.V(1).Info("Trace relay full: a plugin's connection refused", "max", maxRelayedConns)
			_ = conn.Close()
			continue
		}
		if !r.track(conn) {
			<-r.slots
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer func() { <-r.slots }()
			r.relay(conn)
		}()
	}
}

// relay copies conn to a new connection to the collector and back, until either ends.
func (r *traceRelay) relay(conn net.Conn) {
	defer r.untrack(conn)
	ctx, cancel := context.WithTimeout(context.Background(), relayDialTimeout)
	up, err := r.dial(ctx)
	cancel()
	if err != nil {
		r.logger.V(1).Info("Trace relay could not reach the collector", "err", err)
		return
	}
	if !r.track(up) {
		return
	}
	defer r.untrack(up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, conn)
	go pipe(conn, up)
	<-done // one side ended: untrack closes both, which ends the other copy
}

func (r *traceRelay) dial(ctx context.Context) (net.Conn, error) {
	d := &net.Dialer{}
	if r.upstream.Insecure {
		return d.DialContext(ctx, "tcp", r.upstream.Endpoint)
	}
	host, _, err := net.SplitHostPort(r.upstream.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("the collector's address %q: %w", r.upstream.Endpoint, err)
	}
	td := &tls.Dialer{NetDialer: d, Config: &tls.Config{ServerName: host, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}}
	return td.DialContext(ctx, "tcp", r.upstream.Endpoint)
}

// track records conn to be closed with the relay; false (conn closed) once it is closed.
func (r *traceRelay) track(conn net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		_ = conn.Close()
		return false
	}
	r.conns[conn] = struct{}{}
	return true
}

func (r *traceRelay) untrack(conn net.Conn) {
	r.mu.Lock()
	delete(r.conns, conn)
	r.mu.Unlock()
	_ = conn.Close()
}

// Close stops listening, closes every relayed connection and waits for the copies to end.
func (r *traceRelay) Close() {
	r.mu.Lock()
	r.closed = true
	conns := make([]net.Conn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.mu.Unlock()
	_ = r.listener.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	r.wg.Wait()
}
