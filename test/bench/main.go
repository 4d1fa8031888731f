// Command bench measures Stepwise against the API server's write limit on a local control
// plane (bin/localcluster): the raw write rate of a client with the operator's settings,
// then pipelines of instant steps run by bin/stepwise-operator (throughput, apply→Ready
// latency, API requests and reconciles per pipeline, CPU and memory), the same with a step
// served by the example plugin, a PipelineTrigger draining a backlog of objects, and an
// operator holding many finished pipelines at rest.
// It prints a table and writes the figures as JSON. See README.md next to this file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	"github.com/stepwise-dev/stepwise/pkg/metrics"
	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

const (
	// namespace holds everything the benchmark creates.
	namespace = "bench"
	// operatorNamespace is the operator's default own namespace.
	operatorNamespace = "stepwise-system"
)

type config struct {
	n, k, workers, creators int
	qps                     float64
	burst                   int
	latencySamples          int
	idle                    int
	idleDuration            time.Duration
	triggerObjects          int
	triggerConcurrency      int
	triggerStep             time.Duration
	triggerNodes            int
	goMemLimit              string
	plugin, restart, keep   bool
	// archive runs the operator with an archive; historyRecords and historyLists size the
	// history phase.
	archive                      bool
	historyRecords, historyLists int
	restartProfile               time.Duration
	runProfile                   time.Duration
	// fairnessHang and fairnessSlow are tenant A's pipelines in the fairness phase.
	fairnessHang, fairnessSlow int
	namespaceShare             int
	// trace: the operator sends its traces to a span counter (--otlp-endpoint).
	trace   bool
	timeout time.Duration
	out     string
}

func main() {
	var cfg config
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	fs.IntVar(&cfg.n, "n", 1000, "Pipelines per throughput run (the no-op run and the plugin run).")
	fs.IntVar(&cfg.k, "k", 3, "Steps per pipeline, each an instant test.noop.")
	fs.IntVar(&cfg.workers, "workers", 8, "The operator's --workers; also the raw write test's goroutines.")
	fs.Float64Var(&cfg.qps, "qps", 200, "The operator's --kube-api-qps; also the raw write test's client QPS.")
	fs.IntVar(&cfg.burst, "burst", 400, "The operator's --kube-api-burst; also the raw write test's client burst.")
	fs.IntVar(&cfg.creators, "creators", 16, "Goroutines creating pipelines (the benchmark's client is not throttled).")
	fs.IntVar(&cfg.latencySamples, "latency-samples", 50, "Pipelines created one at a time to measure apply→Ready on an idle cluster.")
	fs.IntVar(&cfg.idle, "idle", 10000, "Finished pipelines in the cluster during the idle phase (the runs' pipelines count); 0 skips it.")
	fs.DurationVar(&cfg.idleDuration, "idle-duration", 60*time.Second, "How long the idle phase watches the operator.")
	fs.IntVar(&cfg.triggerObjects, "trigger-objects", 1000, "ConfigMaps a PipelineTrigger starts a pipeline of -k no-op steps for, in the trigger phase; 0 skips it.")
	fs.IntVar(&cfg.triggerConcurrency, "trigger-concurrency", 50, "The trigger's spec.concurrency: its pipelines unfinished at once (1-1000).")
	fs.StringVar(&cfg.goMemLimit, "gomemlimit", "sizing", "GOMEMLIMIT of the operator (as the chart's goMemLimit sets it, e.g. 300MiB), the soft limit its garbage collector keeps under; \"sizing\": what the README's sizing says for the run's pipelines (sizingGoMemLimit); \"none\": no limit.")
	fs.IntVar(&cfg.triggerNodes, "trigger-nodes", 0, "Nodes (kwok, each with 30 images and a kubelet's status) that a suspended PipelineTrigger on Nodes counts, in the node phase, first of all: what their cache costs the operator; 0 skips it.")
	fs.DurationVar(&cfg.triggerStep, "trigger-step", 0, "In the trigger phase, the first step is a test.wait of this duration (a step that takes time without holding a worker); 0: every step is an instant test.noop.")
	fs.BoolVar(&cfg.plugin, "plugin", true, "Run the plugin phase (needs bin/plugins from `make plugins`).")
	fs.BoolVar(&cfg.restart, "restart", true, "After the idle phase, restart the operator and measure it catching up with the finished pipelines.")
	fs.DurationVar(&cfg.restartProfile, "restart-cpu-profile", 20*time.Second, "How long the restart's CPU profile records, from the operator's start (saved beside the results; 0: none).")
	fs.DurationVar(&cfg.runProfile, "run-cpu-profile", 0, "Length of the operator's CPU profile of each throughput run's end: profiles of this length are recorded one after the other and the last complete one kept (saved beside the results; 0: none).")
	fs.IntVar(&cfg.fairnessHang, "fairness-hang", 8, "Fairness phase: tenant A's pipelines whose hook hangs (0 with -fairness-slow 0 skips the phase).")
	fs.IntVar(&cfg.fairnessSlow, "fairness-slow", 1000, "Fairness phase: tenant A's pipelines whose hook is slow (500 ms) and fails, retried.")
	fs.IntVar(&cfg.namespaceShare, "max-workers-per-namespace", 0, "The operator's --max-workers-per-namespace (0: its default, no cap: the share follows the namespaces with work); -workers lets one namespace hold every worker, for a before/after comparison.")
	fs.BoolVar(&cfg.trace, "trace", false, "Run the operator with tracing on (--otlp-endpoint), sending its spans to a receiver that counts them, to measure what tracing costs.")
	fs.BoolVar(&cfg.archive, "archive", false, "Run the operator with an archive in a PostgreSQL of the run's own (--archive-dsn-file) and its history API: every pipeline is archived as it finishes.")
	fs.IntVar(&cfg.historyRecords, "history-records", 0, "With -archive, last: fill the archive with this many records over 100 namespaces, then time lists of one namespace's records through the aggregation layer (--limit 100, as kubectl); 0 skips it.")
	fs.IntVar(&cfg.historyLists, "history-lists", 200, "Lists (and as many second pages) the history phase times.")
	fs.BoolVar(&cfg.keep, "keep", false, "Keep the control plane's state directory (logs) after the run.")
	fs.DurationVar(&cfg.timeout, "timeout", 30*time.Minute, "Deadline of the whole run.")
	fs.StringVar(&cfg.out, "out", "bin/bench-results.json", "Where to write the results as JSON.")
	_ = fs.Parse(os.Args[1:]) // ExitOnError
	if cfg.n < 1 || cfg.k < 1 || cfg.workers < 1 || cfg.creators < 1 || cfg.latencySamples < 0 || cfg.idle < 0 ||
		cfg.triggerObjects < 0 || cfg.triggerConcurrency < 1 || cfg.triggerConcurrency > 1000 || cfg.triggerStep < 0 || cfg.triggerNodes < 0 ||
		cfg.fairnessHang < 0 || cfg.fairnessSlow < 0 || cfg.namespaceShare < 0 {
		fmt.Fprintln(os.Stderr, "-n, -k, -workers and -creators must be at least 1; -latency-samples, -idle, -trigger-objects, -fairness-hang, -fairness-slow, -max-workers-per-namespace, -trigger-step and -trigger-nodes not negative; -trigger-concurrency 1-1000")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()

	res, err := run(ctx, cfg)
	printTable(os.Stdout, res)
	if werr := writeJSON(cfg.out, res); werr != nil {
		err = errors.Join(err, werr)
	} else {
		fmt.Printf("\nResults written to %s\n", cfg.out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// bench holds what the phases share.
type bench struct {
	cfg     config
	cluster *framework.Cluster
	client  clientset.Interface
	tracker *tracker
	op      *operator
	probe   *probe
	res     *results
	// spans counts the operator's spans in a -trace run.
	spans        *spanCounter
	spansAddress string
}

// run runs every phase and always returns what it measured, with the first error.
func run(ctx context.Context, cfg config) (res *results, err error) {
	res = newResults(cfg)
	log := logf

	log("Starting the local control plane")
	startCtx, cancelStart := context.WithTimeout(ctx, 3*time.Minute)
	cluster, err := framework.StartCluster(startCtx, framework.Options{KeepStateDir: cfg.keep})
	cancelStart()
	if err != nil {
		return res, fmt.Errorf("start the control plane: %w", err)
	}
	defer func() {
		if cfg.keep {
			log("Control plane state kept in %s", cluster.Dir)
		}
		err = errors.Join(err, cluster.Stop())
	}()
	switch cfg.goMemLimit {
	case "sizing":
		cfg.goMemLimit = sizingGoMemLimit(cfg.pipelines())
		res.Settings.GoMemLimit = cfg.goMemLimit
	case "none":
		cfg.goMemLimit = ""
		res.Settings.GoMemLimit = ""
	}
	if cfg.goMemLimit != "" {
		cluster.OperatorEnv = []string{"GOMEMLIMIT=" + cfg.goMemLimit}
	}
	if err := cluster.InstallCRDs(ctx); err != nil {
		return res, err
	}
	if cfg.archive {
		a, err := cluster.StartArchive(ctx)
		if err != nil {
			return res, err
		}
		defer func() { err = errors.Join(err, a.Close()) }()
	}
	// The operator's own namespace is where it publishes its executor catalogue at start;
	// without it the publisher would keep retrying (a GET each time) during the run.
	for _, ns := range []string{namespace, operatorNamespace} {
		if _, err := cluster.Client.CoreV1().Namespaces().Create(ctx,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return res, fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}

	// The benchmark's own client is not throttled, and counts its requests so that they
	// can be told apart from the operator's in apiserver_request_total.
	benchReg := prometheus.NewRegistry()
	benchCfg := unthrottled(cluster.Config)
	benchCfg.Wrap(metrics.NewAPIRequests(benchReg).WrapTransport)
	client, err := clientset.NewForConfig(benchCfg)
	if err != nil {
		return res, fmt.Errorf("create stepwise client: %w", err)
	}
	// The tracker watches the namespace from before the raw tests: the API server sends the
	// raw Pipelines' events to it as it sends the runs' pipelines', so that the raw rate and
	// the runs' share the machine with the same benchmark.
	trackerCtx, stopTracker := context.WithCancel(ctx)
	defer stopTracker()
	t, err := newTracker(trackerCtx, client, namespace)
	if err != nil {
		return res, err
	}

	log("Raw write limit: %d ConfigMaps created and updated", cfg.n)
	limited, err := measureRaw(ctx, cluster.Config, namespace, "operator-settings", cfg.n, cfg.workers, cfg.qps, cfg.burst)
	if err != nil {
		return res, fmt.Errorf("raw write limit: %w", err)
	}
	unlimited, err := measureRaw(ctx, cluster.Config, namespace, "unthrottled", cfg.n, 16, -1, 0)
	if err != nil {
		return res, fmt.Errorf("raw write limit: %w", err)
	}
	log("Raw write limit: %d Pipelines created (unthrottled), patched and their status updated", cfg.n)
	pipelines, err := measureRawPipelines(ctx, cluster.Config, namespace, "pipelines", cfg.n, cfg.creators, cfg.workers, cfg.qps, cfg.burst,
		pipelineSpec{steps: cfg.k, pluginStep: -1})
	if err != nil {
		return res, fmt.Errorf("raw write limit: %w", err)
	}
	res.Raw = []rawResult{limited, unlimited, pipelines}

	b := &bench{cfg: cfg, cluster: cluster, client: client, tracker: t, res: res}
	defer func() {
		if b.spans != nil {
			res.Spans = b.spans.spans.Load()
			log("Spans received from the operator and its plugins: %d", res.Spans)
			b.spans.server.Stop()
		}
	}()
	if err := b.startOperator(ctx, nil); err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, b.op.stop()) }()
	b.probe = &probe{op: b.op, admin: cluster.Client, bench: benchReg}
	synced, err := b.probe.settle(ctx, time.Minute)
	if err != nil {
		return res, err
	}

	if cfg.triggerNodes > 0 {
		log("Nodes: a suspended PipelineTrigger on %d Nodes", cfg.triggerNodes)
		if err := b.nodePhase(ctx); err != nil {
			return res, err
		}
	}

	log("Run: %d pipelines of %d no-op steps", cfg.n, cfg.k)
	noop := pipelineSpec{steps: cfg.k, pluginStep: -1}
	r, err := b.pipelineRun(ctx, "noop", names("noop", 0, cfg.n), noop)
	res.Runs = append(res.Runs, r)
	if err != nil {
		return res, err
	}
	log("Latency: %d pipelines of %d no-op steps, one at a time", cfg.latencySamples, cfg.k)
	if err := b.latencyRun(ctx, "noop", noop); err != nil {
		return res, err
	}
	created := cfg.n + cfg.latencySamples

	if cfg.plugin {
		withPlugin := pipelineSpec{steps: cfg.k, pluginStep: cfg.k / 2}
		log("Run: %d pipelines of %d steps, step %d served by the example plugin", cfg.n, cfg.k, withPlugin.pluginStep)
		r, err := b.pipelineRun(ctx, "plugin", names("plugin", 0, cfg.n), withPlugin)
		res.Runs = append(res.Runs, r)
		if err != nil {
			return res, err
		}
		log("Latency: %d pipelines with a plugin step, one at a time", cfg.latencySamples)
		if err := b.latencyRun(ctx, "plugin", withPlugin); err != nil {
			return res, err
		}
		created += cfg.n + cfg.latencySamples
	}

	if cfg.triggerObjects > 0 {
		log("Trigger: a PipelineTrigger on %d ConfigMaps, concurrency %d, %d no-op steps", cfg.triggerObjects, cfg.triggerConcurrency, cfg.k)
		if err := b.triggerPhase(ctx); err != nil {
			return res, err
		}
		created += cfg.triggerObjects // its pipelines stay, finished
	}

	if cfg.idle > 0 {
		if err := b.idlePhase(ctx, created, noop); err != nil {
			return res, err
		}
	}

	// Reads after the caches synced, over the whole run (the restart has its own count).
	end, err := b.probe.snapshot(ctx)
	if err != nil {
		return res, err
	}
	d := between(synced, end)
	res.ReadsAfterSync = count(d.operator, isRead)
	res.ReadsAfterSyncByVerb = filter(d.operator, isRead)

	if cfg.idle > 0 && cfg.restart {
		log("Restart: a new operator catching up with %d finished pipelines", res.Idle.Pipelines)
		if err := b.restartPhase(ctx); err != nil {
			return res, err
		}
	}
	// Last: tenant A's pipelines keep the operator busy until the end.
	if cfg.fairnessHang+cfg.fairnessSlow > 0 {
		logf("Fairness: tenant B applies %d pipelines one at a time, alone, then under tenant A's load", max(cfg.latencySamples, 1))
		if err := b.fairnessPhase(ctx); err != nil {
			return res, err
		}
	}
	if cfg.archive && cfg.historyRecords > 0 {
		log("History: %d records in the archive, lists of one namespace's", cfg.historyRecords)
		if err := b.historyPhase(ctx); err != nil {
			return res, err
		}
	}
	res.evaluate()
	return res, nil
}

// startOperator starts the operator with the benchmark's settings, and the example plugin
// when the plugin phase runs.
func (b *bench) startOperator(ctx context.Context, started func(*operator)) error {
	args := []string{
		fmt.Sprintf("--workers=%d", b.cfg.workers),
		fmt.Sprintf("--kube-api-qps=%g", b.cfg.qps),
		fmt.Sprintf("--kube-api-burst=%d", b.cfg.burst),
	}
	if b.cfg.namespaceShare > 0 {
		args = append(args, fmt.Sprintf("--max-workers-per-namespace=%d", b.cfg.namespaceShare))
	}
	if b.cfg.plugin {
		dir := b.cluster.BinPath("plugins")
		if _, err := os.Stat(filepath.Join(dir, "SHA256SUMS")); err != nil {
			return fmt.Errorf("the plugin phase needs %s/SHA256SUMS; run `make plugins` or pass -plugin=false: %w", dir, err)
		}
		args = append(args, "--plugin-dir="+dir)
	}
	if b.cfg.trace {
		if b.spans == nil {
			spans, address, err := startSpanCounter()
			if err != nil {
				return err
			}
			b.spans, b.spansAddress = spans, address
		}
		args = append(args, "--otlp-endpoint="+b.spansAddress, "--otlp-insecure")
	}
	if b.cfg.triggerObjects > 0 || b.cfg.triggerNodes > 0 {
		// For the whole run, so that one operator serves every phase: the operator watches
		// a kind only once a trigger on it may act, so the other phases do not see it.
		args = append(args, "--trigger-resources="+triggerResources)
	}
	op, err := startOperator(ctx, b.cluster, started, args...)
	if err != nil {
		return err
	}
	b.op = op
	if b.probe != nil {
		b.probe.op = op
	}
	return nil
}

// profiled is a CPU profile's top, recorded while a phase ran.
type profiled struct {
	top []string
	err error
}

// pipelineRun creates the pipelines as fast as the benchmark can and measures how the
// operator runs them.
func (b *bench) pipelineRun(ctx context.Context, label string, names []string, spec pipelineSpec) (pipelineRun, error) {
	r := pipelineRun{Name: label, Pipelines: len(names), Steps: spec.steps}
	pluginsBefore := b.op.recordPlugins()
	r.PeakRSSIsPhasePeak = resetPeak(b.op.pid)
	before, err := b.probe.snapshot(ctx)
	if err != nil {
		return r, err
	}
	cpuBefore, err := cpuSeconds(b.op.pid)
	if err != nil {
		return r, err
	}
	benchCPUBefore, err := cpuSeconds(os.Getpid())
	if err != nil {
		return r, err
	}
	// The CPU profile of the run's end says where the operator's share of the machine goes
	// once its cache holds what the run created (filling it, the end is what grows).
	var profile chan profiled
	profileCtx, stopProfile := context.WithCancel(ctx)
	defer stopProfile()
	if b.cfg.runProfile > 0 {
		profile = make(chan profiled, 1)
		go func() {
			top, err := b.op.lastCPUProfile(profileCtx, b.profilePath("cpu", label), b.cfg.runProfile, cpuTopLines)
			profile <- profiled{top, err}
		}()
	}
	// A deadline that only a broken run misses: at least 5 pipelines a second.
	timeout := 2*time.Minute + time.Duration(len(names))*200*time.Millisecond
	start, end, err := createAll(ctx, b.client, b.tracker, namespace, names, spec, b.cfg.creators, timeout)
	if err != nil {
		return r, fmt.Errorf("run %s: %w", label, err)
	}
	after, err := b.probe.settle(ctx, 3*time.Minute)
	if err != nil {
		return r, fmt.Errorf("run %s: %w", label, err)
	}
	cpuAfter, err := cpuSeconds(b.op.pid)
	if err != nil {
		return r, err
	}
	benchCPUAfter, err := cpuSeconds(os.Getpid())
	if err != nil {
		return r, err
	}
	st, err := readProcStatus(b.op.pid)
	if err != nil {
		return r, err
	}
	pluginsAfter := b.op.recordPlugins()

	d := between(before, after)
	n := float64(len(names))
	r.WallSeconds = end.Sub(start).Seconds()
	r.PipelinesPerSec = n / r.WallSeconds
	var lat []time.Duration
	for _, name := range names {
		if l, err := b.tracker.result(name); err == nil {
			lat = append(lat, l)
		}
	}
	r.Latency = percentilesOf(lat)
	r.requestsPerPipeline = perPipelineOf(d, n)
	pipelineWrites := count(d.operator, onResource("pipelines", isWrite))
	r.Conflicts = d.conflicts
	r.Reads = count(d.operator, isRead)
	r.ReconcilesPerPipeline = d.reconciles / n
	r.ReconcileMeanMs = d.reconcileMs
	r.QueueWaitMeanMs = d.queueWaitMs
	r.PipelineWritesPerSec = pipelineWrites / r.WallSeconds
	if raw := b.res.Raw[0].WritesPerSec; raw > 0 {
		r.RatioToRawLimit = r.PipelineWritesPerSec / raw
	}
	if raw := b.res.Raw[2].WritesPerSec; raw > 0 {
		r.RatioToRawPipelineLimit = r.PipelineWritesPerSec / raw
		r.WriteLimitPerSec = writeLimit(raw, pipelineWrites, b.cfg.qps, b.cfg.burst)
		r.RatioToWriteLimit = r.PipelineWritesPerSec / r.WriteLimitPerSec
	}
	r.CPUSeconds = cpuAfter - cpuBefore
	r.CPUMsPerPipeline = r.CPUSeconds / n * 1000
	r.BenchCPUSeconds = benchCPUAfter - benchCPUBefore
	r.PeakRSSMiB = mib(st.PeakBytes)
	r.RSSMiB = mib(st.RSSBytes)
	r.HookMeanMicros = d.hookMean
	if spec.pluginStep >= 0 {
		r.PluginProcessesBefore = pidList(pluginsBefore)
		r.PluginProcessesAfter = pidList(pluginsAfter)
		restarts, err := countInFile(b.op.Log, "Plugin process exited")
		if err != nil {
			return r, err
		}
		r.PluginRestarts = &restarts
	}
	if profile != nil {
		stopProfile()
		p := <-profile
		r.CPUTop, r.CPUProfileSeconds = p.top, b.cfg.runProfile.Seconds()
		return r, p.err
	}
	return r, nil
}

// latencyRun measures apply→Ready of pipelines created one at a time.
func (b *bench) latencyRun(ctx context.Context, label string, spec pipelineSpec) error {
	if b.cfg.latencySamples == 0 {
		return nil
	}
	if _, err := b.probe.settle(ctx, 3*time.Minute); err != nil {
		return err
	}
	before, err := b.probe.snapshot(ctx)
	if err != nil {
		return err
	}
	lat, err := sequentialLatencies(ctx, b.client, b.tracker, namespace, names(label+"-seq", 0, b.cfg.latencySamples), spec, 30*time.Second)
	if err != nil {
		return fmt.Errorf("latency %s: %w", label, err)
	}
	after, err := b.probe.snapshot(ctx)
	if err != nil {
		return err
	}
	b.res.IdleLatency = append(b.res.IdleLatency, latencyRun{
		Name: label, Samples: len(lat), Steps: spec.steps, Latency: percentilesOf(lat),
		HookMeanMicros: between(before, after).hookMean,
	})
	return nil
}

// idlePhase fills the cluster up to the idle count with finished pipelines, then watches
// the operator doing nothing for the idle duration.
func (b *bench) idlePhase(ctx context.Context, created int, spec pipelineSpec) error {
	idle := &idleResult{Pipelines: max(b.cfg.idle, created), Seconds: b.cfg.idleDuration.Seconds()}
	b.res.Idle = idle
	if more := b.cfg.idle - created; more > 0 {
		fmt.Fprintf(os.Stderr, "%s Idle: creating %d more pipelines (%d in all)\n", time.Now().Format("15:04:05"), more, b.cfg.idle)
		r, err := b.pipelineRun(ctx, "fill", names("fill", 0, more), spec)
		idle.Fill = &r
		if err != nil {
			return err
		}
	}
	if _, err := b.probe.settle(ctx, 3*time.Minute); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%s Idle: watching the operator for %s\n", time.Now().Format("15:04:05"), b.cfg.idleDuration)
	resetPeak(b.op.pid)
	before, err := b.probe.snapshot(ctx)
	if err != nil {
		return err
	}
	select {
	case <-time.After(b.cfg.idleDuration):
	case <-ctx.Done():
		return fmt.Errorf("idle phase: %w", ctx.Err())
	}
	after, err := b.probe.snapshot(ctx)
	if err != nil {
		return err
	}
	st, err := readProcStatus(b.op.pid)
	if err != nil {
		return err
	}
	d := between(before, after)
	idle.ReconcilesPerSec = d.reconciles / d.seconds
	idle.Requests = d.operator
	idle.CPUSeconds = d.cpuSeconds
	idle.RSSMiB = mib(st.RSSBytes)
	idle.PeakRSSMiB = mib(st.PeakBytes)
	idle.HeapInuseMiB = mib(after.heapBytes)
	idle.HeapTop, err = b.op.heapProfile(ctx, b.profilePath("heap", "idle"), heapTopLines)
	return err
}

// restartPhase replaces the operator by a new one and measures it catching up with the
// finished pipelines: it should reconcile each once and write nothing.
func (b *bench) restartPhase(ctx context.Context) error {
	before, err := b.probe.snapshot(ctx)
	if err != nil {
		return err
	}
	if err := b.op.stop(); err != nil {
		return err
	}
	start := time.Now()
	// The CPU profile of the start says where a slow sync goes (decoding the lists, the
	// API server's share of the machine).
	var profile chan profiled
	started := func(o *operator) {
		if b.cfg.restartProfile <= 0 {
			return
		}
		profile = make(chan profiled, 1)
		go func() {
			top, err := o.cpuProfile(ctx, b.profilePath("cpu", "restart"), b.cfg.restartProfile, cpuTopLines)
			profile <- profiled{top, err}
		}()
	}
	if err := b.startOperator(ctx, started); err != nil {
		return err
	}
	rr := &restartResult{ReadySeconds: time.Since(start).Seconds()}
	b.res.Restart = rr
	after, err := b.probe.settle(ctx, 5*time.Minute)
	if err != nil {
		return err
	}
	st, err := readProcStatus(b.op.pid)
	if err != nil {
		return err
	}
	rr.SettledSeconds = after.at.Sub(start).Seconds()
	rr.Reconciles = after.reconciles
	rr.Requests = after.operator
	rr.Writes = count(after.operator, isWrite)
	rr.CPUSeconds = after.cpuSeconds
	rr.APIServerCPUSeconds = after.serverCPU - before.serverCPU
	rr.RSSMiB = mib(st.RSSBytes)
	rr.PeakRSSMiB = mib(st.PeakBytes)
	rr.HeapInuseMiB = mib(after.heapBytes)
	if rr.HeapTop, err = b.op.heapProfile(ctx, b.profilePath("heap", "restart"), heapTopLines); err != nil {
		return err
	}
	if profile != nil {
		p := <-profile
		rr.CPUTop, rr.CPUProfileSeconds = p.top, b.cfg.restartProfile.Seconds()
		return p.err
	}
	return nil
}

func perPipeline(m map[string]float64, n float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = v / n
	}
	return out
}

func filter(m map[string]float64, keep func(string) bool) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if keep(k) {
			out[k] = v
		}
	}
	return out
}

// sizingGoMemLimit is the GOMEMLIMIT the README's "Sizing" gives an operator with this many
// pipelines: 28MiB, and 3.2KiB per pipeline (what a finished pipeline takes in the cache,
// about 2.6KiB, and room for the garbage collector in proportion: with 2.8KiB, filling to
// 100,000 spent 89 % of the operator's CPU marking); the benchmark runs with it by default,
// so that its memory targets check the guidance.
func sizingGoMemLimit(pipelines int) string {
	return fmt.Sprintf("%dMiB", 28+pipelines*32/10240)
}

// pipelines is how many pipelines the run leaves in the cluster at most.
func (cfg config) pipelines() int {
	runs := 1
	if cfg.plugin {
		runs = 2
	}
	made := runs*(cfg.n+cfg.latencySamples) + cfg.triggerObjects
	return max(cfg.idle, made)
}

// heapTopLines is how much of `go tool pprof -top` the results keep: its header and the
// largest allocation sites.
const heapTopLines = 20

// profilePath is where a phase's profile of a kind (heap, cpu) is saved: beside the JSON
// results.
func (b *bench) profilePath(kind, phase string) string {
	return strings.TrimSuffix(b.cfg.out, ".json") + "-" + kind + "-" + phase + ".pb.gz"
}

func mib(bytes float64) float64 { return bytes / (1 << 20) }

func pidList(m map[int]string) []int {
	return slices.Sorted(maps.Keys(m))
}

func countInFile(path, s string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return strings.Count(string(data), s), nil
}

// cpuTopLines is how much of the restart's `go tool pprof -top -cum` the results keep: it
// reaches down past the runtime's frames to the operator's own.
const cpuTopLines = 40
