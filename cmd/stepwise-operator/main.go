// Command stepwise-operator runs Stepwise Pipelines: it watches them and runs their steps
// through the registered executors.
package main

import (
	"context"
	"flag"
	"fmt"
	"go.opentelemetry.io/otel/trace"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/tools/leaderelection"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	buildversion "github.com/stepwise-dev/stepwise/internal/version"
	"github.com/stepwise-dev/stepwise/pkg/catalog"
	"github.com/stepwise-dev/stepwise/pkg/metrics"
	"github.com/stepwise-dev/stepwise/pkg/tracing"

	// The image has no zoneinfo: maintenance windows name IANA time zones.
	_ "time/tzdata"
)

func main() {
	fs := flag.NewFlagSet("stepwise-operator", flag.ExitOnError)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "Usage: stepwise-operator [flags]\n\nRuns Stepwise Pipelines in the cluster of the kubeconfig (or in-cluster).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	var opts options
	// ExitOnError: a bad flag exits with usage (2), -h with 0; the error left is printing
	// the version failing.
	versionOnly, err := opts.parse(fs, os.Args[1:], os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if versionOnly {
		os.Exit(0)
	}
	if err := opts.validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// Before any goroutine logs: the format and verbosity are global to klog.
	if err := logsapi.ValidateAndApply(opts.logging, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	if err := run(ctx, &opts); err != nil {
		klog.FromContext(ctx).Error(err, "Operator failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}

// run wires the operator together and runs it until ctx ends: clients, executors (built in
// and plugins), the executor catalogue, Events, the metrics and probe endpoints, then the
// engine, under leader election when asked.
func run(ctx context.Context, opts *options) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	clients, err := newClients(opts, reg)
	if err != nil {
		return err
	}
	tp, stopTracing, err := tracing.NewProvider(ctx, opts.tracing())
	if err != nil {
		return err
	}
	defer func() { // flushes the last spans, for a while
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = stopTracing(flushCtx)
	}()
	var traced trace.TracerProvider // nil: no spans are even started
	if opts.otlpEndpoint != "" {
		traced = tp
	}
	// Plugins start before the engine, and are killed when the operator stops.
	registry, plugins, err := loadExecutors(ctx, opts, startDrainRules(ctx, clients.stepwise, opts.resync), metrics.NewPluginRestarts(reg), traced)
	if plugins != nil {
		defer plugins.Close()
	}
	if err != nil {
		return err
	}
	store, err := openArchive(ctx, opts)
	if err != nil {
		return err
	}
	if store != nil {
		defer store.Close()
	}
	recorder, events := newRecorder(ctx, clients.kube)
	defer events.Shutdown()
	archiveEvents(ctx, store, events)
	pruneArchive(ctx, store, opts.archiveRetention)
	if err := serveHistory(ctx, opts, store); err != nil {
		return err
	}

	var ready atomic.Bool // caches synced, or standing by for leadership
	var election *leaderelection.HealthzAdaptor
	if opts.leaderElect {
		election = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}
	servers, err := startServers(ctx, opts, clients.kube, reg, &ready, election)
	defer shutdownServers(servers)
	if err != nil {
		return err
	}

	e := &engine{opts: opts, clients: clients, executors: registry, recorder: recorder, metrics: reg, ready: &ready, tracer: tracerOf(traced)}
	if store != nil {
		e.archive = store // a nil *Store in the interface would not be nil
	}
	if opts.catalogName != "" {
		publisher, offered := catalog.NewPublisher(clients.kube, recorder, opts.ownNamespace(), opts.catalogName), catalog.Build(registry, buildversion.Version)
		e.publishCatalog = func(ctx context.Context) { publisher.Run(ctx, offered) }
	}
	if !opts.leaderElect {
		// Alone, it never has to stop at once: hooks always get the grace period.
		return e.run(ctx, context.WithoutCancel(ctx))
	}
	ready.Store(true) // a standby is ready: it serves probes and waits for the Lease
	le, err := newLeaderElection(opts, clients.kube, recorder, election)
	if err != nil {
		return err
	}
	return le.run(ctx, e.run)
}

// tracerOf is the engine's tracer of tp; nil when it does not trace.
func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer("github.com/stepwise-dev/stepwise/pkg/controller")
}
