package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// results is everything the benchmark measured; it is written as JSON.
type results struct {
	Started  time.Time `json:"started"`
	Settings settings  `json:"settings"`
	// Raw is the write rate of plain clients: first with the operator's QPS, burst and
	// worker count (the limit the operator's figures are compared with), then unthrottled.
	Raw         []rawResult     `json:"raw"`
	Runs        []pipelineRun   `json:"runs"`
	IdleLatency []latencyRun    `json:"idleLatency"`
	Trigger     *triggerResult  `json:"trigger,omitempty"`
	Nodes       *nodeResult     `json:"nodes,omitempty"`
	Idle        *idleResult     `json:"idle,omitempty"`
	Restart     *restartResult  `json:"restart,omitempty"`
	Fairness    *fairnessResult `json:"fairness,omitempty"`
	History     *historyResult  `json:"history,omitempty"`
	// Spans the operator and its plugins sent in a -trace run.
	Spans int64 `json:"spans,omitempty"`
	// ReadsAfterSync counts the operator's GET and LIST requests from its caches' sync to
	// the end of the idle phase.
	ReadsAfterSync       float64            `json:"readsAfterSync"`
	ReadsAfterSyncByVerb map[string]float64 `json:"readsAfterSyncByVerb,omitempty"`
	Targets              []target           `json:"targets"`
}

type settings struct {
	Pipelines      int     `json:"pipelines"`
	Steps          int     `json:"steps"`
	Workers        int     `json:"workers"`
	QPS            float64 `json:"qps"`
	Burst          int     `json:"burst"`
	Creators       int     `json:"creators"`
	LatencySamples int     `json:"latencySamples"`
	IdlePipelines  int     `json:"idlePipelines"`
	IdleSeconds    float64 `json:"idleSeconds"`
	// TriggerObjects is 0 when the trigger phase did not run.
	TriggerObjects     int `json:"triggerObjects"`
	TriggerConcurrency int `json:"triggerConcurrency"`
	CPUs               int `json:"cpus"`
	// GoMemLimit is the operator's GOMEMLIMIT; empty: none.
	GoMemLimit string `json:"goMemLimit,omitempty"`
}

func newResults(cfg config) *results {
	return &results{Started: time.Now(), Settings: settings{
		Pipelines: cfg.n, Steps: cfg.k, Workers: cfg.workers, QPS: cfg.qps, Burst: cfg.burst,
		Creators: cfg.creators, LatencySamples: cfg.latencySamples, IdlePipelines: cfg.idle,
		IdleSeconds: cfg.idleDuration.Seconds(), TriggerObjects: cfg.triggerObjects,
		TriggerConcurrency: cfg.triggerConcurrency, CPUs: runtime.NumCPU(), GoMemLimit: cfg.goMemLimit,
	}}
}

// requestsPerPipeline are the requests of a run per pipeline, by "verb resource": as the
// operator's client counted them (stepwise_api_requests_total), and as the API server did
// (apiserver_request_total for pipelines and events, minus the benchmark's own requests;
// watches left out).
type requestsPerPipeline struct {
	OperatorRequestsPerPipeline     map[string]float64 `json:"operatorRequestsPerPipeline"`
	ServerRequestsPerPipeline       map[string]float64 `json:"serverRequestsPerPipeline"`
	PipelineWritesPerPipeline       float64            `json:"pipelineWritesPerPipeline"`
	EventWritesPerPipeline          float64            `json:"eventWritesPerPipeline"`
	ServerPipelineWritesPerPipeline float64            `json:"serverPipelineWritesPerPipeline"`
}

// perPipelineOf is what d counted over n pipelines.
func perPipelineOf(d delta, n float64) requestsPerPipeline {
	return requestsPerPipeline{
		OperatorRequestsPerPipeline:     perPipeline(d.operator, n),
		ServerRequestsPerPipeline:       perPipeline(d.server, n),
		PipelineWritesPerPipeline:       count(d.operator, onResource("pipelines", isWrite)) / n,
		EventWritesPerPipeline:          count(d.operator, onResource("events", isWrite)) / n,
		ServerPipelineWritesPerPipeline: count(d.server, onResource("pipelines", isWrite)) / n,
	}
}

// pipelineRun is one batch of pipelines created at once and run by the operator.
type pipelineRun struct {
	Name      string `json:"name"`
	Pipelines int    `json:"pipelines"`
	Steps     int    `json:"steps"`
	// WallSeconds runs from the first create to the last pipeline seen Ready.
	WallSeconds     float64 `json:"wallSeconds"`
	PipelinesPerSec float64 `json:"pipelinesPerSecond"`
	// Latency is apply→Ready under this run's load.
	Latency percentiles `json:"latency"`
	requestsPerPipeline
	Conflicts             float64 `json:"conflicts"`
	Reads                 float64 `json:"reads"`
	ReconcilesPerPipeline float64 `json:"reconcilesPerPipeline"`
	ReconcileMeanMs       float64 `json:"reconcileMeanMs"`
	QueueWaitMeanMs       float64 `json:"queueWaitMeanMs"`
	// PipelineWritesPerSec is the operator's pipeline writes over the wall time;
	// RatioToRawLimit divides it by the raw rate with the operator's client settings.
	PipelineWritesPerSec float64 `json:"pipelineWritesPerSecond"`
	RatioToRawLimit      float64 `json:"ratioToRawLimit"`
	// RatioToRawPipelineLimit compares with the raw test of Pipelines (the third raw
	// line): the same writes the operator makes, through the same schema and rules.
	RatioToRawPipelineLimit float64 `json:"ratioToRawPipelineLimit"`
	// WriteLimitPerSec is the fastest this run's pipeline writes could go (writeLimit) and
	// RatioToWriteLimit the run's rate over it: the throughput target.
	WriteLimitPerSec  float64 `json:"writeLimitPerSecond"`
	RatioToWriteLimit float64 `json:"ratioToWriteLimit"`
	CPUSeconds        float64 `json:"cpuSeconds"`
	CPUMsPerPipeline  float64 `json:"cpuMsPerPipeline"`
	// BenchCPUSeconds is the benchmark process' CPU during the run (its creators and tracker).
	BenchCPUSeconds float64 `json:"benchCpuSeconds"`
	RSSMiB          float64 `json:"rssMiB"`
	PeakRSSMiB      float64 `json:"peakRssMiB"`
	// PeakRSSIsPhasePeak is false when the kernel refused to reset VmHWM: the peak is then
	// the process' lifetime peak.
	PeakRSSIsPhasePeak bool `json:"peakRssIsPhasePeak"`
	// HookMeanMicros is the mean duration of a hook call in the operator, by executor.
	HookMeanMicros        map[string]float64 `json:"hookMeanMicros"`
	PluginProcessesBefore []int              `json:"pluginProcessesBefore,omitempty"`
	PluginProcessesAfter  []int              `json:"pluginProcessesAfter,omitempty"`
	PluginRestarts        *int               `json:"pluginRestarts,omitempty"`
	// CPUTop is the top of the operator's CPU profile of CPUProfileSeconds that ended at
	// most as long before the run did.
	CPUProfileSeconds float64  `json:"cpuProfileSeconds,omitempty"`
	CPUTop            []string `json:"cpuTop,omitempty"`
}

// latencyRun is apply→Ready of pipelines created one at a time.
type latencyRun struct {
	Name    string      `json:"name"`
	Samples int         `json:"samples"`
	Steps   int         `json:"steps"`
	Latency percentiles `json:"latency"`
	// HookMeanMicros is the mean duration of a hook call in the operator, by executor.
	HookMeanMicros map[string]float64 `json:"hookMeanMicros"`
}

// idleResult is the operator with many finished pipelines and nothing to do.
type idleResult struct {
	Pipelines        int                `json:"pipelines"`
	Fill             *pipelineRun       `json:"fill,omitempty"`
	Seconds          float64            `json:"seconds"`
	ReconcilesPerSec float64            `json:"reconcilesPerSecond"`
	Requests         map[string]float64 `json:"requests"`
	CPUSeconds       float64            `json:"cpuSeconds"`
	RSSMiB           float64            `json:"rssMiB"`
	PeakRSSMiB       float64            `json:"peakRssMiB"`
	HeapInuseMiB     float64            `json:"heapInuseMiB"`
	// HeapTop is the top of the heap profile taken at the end (go tool pprof -top).
	HeapTop []string `json:"heapTop,omitempty"`
}

// restartResult is a new operator catching up with the finished pipelines.
type restartResult struct {
	ReadySeconds   float64            `json:"readySeconds"`
	SettledSeconds float64            `json:"settledSeconds"`
	Reconciles     float64            `json:"reconciles"`
	Writes         float64            `json:"writes"`
	Requests       map[string]float64 `json:"requests"`
	CPUSeconds     float64            `json:"cpuSeconds"`
	// APIServerCPUSeconds is the API server's CPU from before the old operator stopped
	// until the new one settled: what a restart costs it (the lists above all).
	APIServerCPUSeconds float64  `json:"apiServerCpuSeconds"`
	RSSMiB              float64  `json:"rssMiB"`
	PeakRSSMiB          float64  `json:"peakRssMiB"`
	HeapInuseMiB        float64  `json:"heapInuseMiB"`
	HeapTop             []string `json:"heapTop,omitempty"`
	// CPUTop is the top of the CPU profile of the operator's first CPUProfileSeconds.
	CPUProfileSeconds float64  `json:"cpuProfileSeconds,omitempty"`
	CPUTop            []string `json:"cpuTop,omitempty"`
}

// target is one of the goals and what was measured against it.
type target struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Met  bool   `json:"met"`
}

// evaluate checks the measured figures against the targets.
func (r *results) evaluate() {
	add := func(name, want, got string, met bool) {
		r.Targets = append(r.Targets, target{Name: name, Want: want, Got: got, Met: met})
	}
	k := float64(r.Settings.Steps)
	add("GET/LIST by the operator after its caches synced", "0", fmt.Sprintf("%.0f", r.ReadsAfterSync), r.ReadsAfterSync == 0)
	for _, run := range r.Runs {
		add(fmt.Sprintf("pipeline writes per pipeline (%s)", run.Name), fmt.Sprintf("<= %.0f", k+1),
			fmt.Sprintf("%.2f (+%.2f Event writes)", run.PipelineWritesPerPipeline, run.EventWritesPerPipeline),
			run.PipelineWritesPerPipeline <= k+1)
		add(fmt.Sprintf("Event writes per pipeline (%s)", run.Name), "<= 0.5", fmt.Sprintf("%.2f", run.EventWritesPerPipeline), run.EventWritesPerPipeline <= 0.5)
		add(fmt.Sprintf("pipeline writes/s ÷ write limit (%s)", run.Name), ">= 0.9",
			fmt.Sprintf("%.2f (%.0f of %.0f writes/s)", run.RatioToWriteLimit, run.PipelineWritesPerSec, run.WriteLimitPerSec), run.RatioToWriteLimit >= 0.9)
	}
	for _, l := range r.IdleLatency {
		add(fmt.Sprintf("apply→Ready p50, idle cluster (%s, %d steps)", l.Name, l.Steps), "<= 100 ms",
			fmt.Sprintf("%.1f ms", l.Latency.P50), l.Latency.P50 <= 100)
	}
	if t := r.Trigger; t != nil {
		add("trigger: pipelines unfinished at once", fmt.Sprintf("<= %d (concurrency)", t.Concurrency),
			fmt.Sprintf("%d", t.MaxUnfinished), t.MaxUnfinished <= t.Concurrency)
		if t.IdealDrainSeconds > 0 {
			// At the budget: every place taken while objects wait, unless the client's QPS
			// cannot write that fast (3 pipeline writes each: the trigger's create, with the
			// finalizer, the step waiting, the step done). The last pipelines' creation and
			// status writes come on top; a tenth, and 5 s, are allowed for them.
			const writes = 3
			bound := max(t.IdealDrainSeconds, float64(t.Objects)*writes/r.Settings.QPS)
			want := bound*1.1 + 5
			add("trigger: drain time with steps that take time", fmt.Sprintf("<= %.0f s (max(%d × %.0f s ÷ %d, %d × %d writes ÷ QPS %g), +10%% +5 s)",
				want, t.Objects, t.StepSeconds, t.Concurrency, t.Objects, writes, r.Settings.QPS),
				fmt.Sprintf("%.1f s (mean unfinished %.0f)", t.DrainSeconds, t.MeanUnfinished), t.DrainSeconds <= want)
		}
		if t.StepSeconds == 0 {
			// A step that runs past its first sync has its StepStarted Event: the happy
			// path's bound is for instant steps.
			add("trigger: Event writes per pipeline", "<= 0.5", fmt.Sprintf("%.2f", t.EventWritesPerPipeline), t.EventWritesPerPipeline <= 0.5)
		}
		// The trigger's create comes on top of a pipeline's own writes.
		add("trigger: pipeline writes per pipeline", fmt.Sprintf("<= %.0f", k+2),
			fmt.Sprintf("%.2f (+%.2f Event writes)", t.PipelineWritesPerPipeline, t.EventWritesPerPipeline),
			t.PipelineWritesPerPipeline <= k+2)
	}
	if n := r.Nodes; n != nil {
		add(fmt.Sprintf("a trigger on %d Nodes: RSS above the operator's baseline", n.Nodes), "<= 100 MiB",
			fmt.Sprintf("%.0f MiB (%.0f -> %.0f)", n.LoadedRSSMiB-n.BaselineRSSMiB, n.BaselineRSSMiB, n.LoadedRSSMiB), n.LoadedRSSMiB-n.BaselineRSSMiB <= 100)
	}
	if r.Idle != nil {
		want := rssTarget(r.Idle.Pipelines)
		add(fmt.Sprintf("operator RSS with %d finished pipelines", r.Idle.Pipelines), fmt.Sprintf("<= %.0f MiB", want),
			fmt.Sprintf("%.0f MiB (peak %.0f)", r.Idle.RSSMiB, r.Idle.PeakRSSMiB), r.Idle.RSSMiB <= want)
		// The resync period (10 min by default) may fall in the window; anything else is a bug.
		add("idle reconciles/s", "≈ 0 (< 1)", fmt.Sprintf("%.2f", r.Idle.ReconcilesPerSec), r.Idle.ReconcilesPerSec < 1)
	}
	if r.Restart != nil {
		add("writes by a restarted operator catching up", "0", fmt.Sprintf("%.0f", r.Restart.Writes), r.Restart.Writes == 0)
		want := rssTarget(r.Idle.Pipelines)
		add(fmt.Sprintf("restarted operator RSS with %d finished pipelines", r.Idle.Pipelines), fmt.Sprintf("<= %.0f MiB", want),
			fmt.Sprintf("%.0f MiB (peak %.0f)", r.Restart.RSSMiB, r.Restart.PeakRSSMiB), r.Restart.RSSMiB <= want)
		add(fmt.Sprintf("restarted operator's caches synced, %d pipelines", r.Idle.Pipelines), "<= 5 s",
			fmt.Sprintf("%.1f s (API server CPU %.1f s)", r.Restart.ReadySeconds, r.Restart.APIServerCPUSeconds), r.Restart.ReadySeconds <= 5)
	}
	if f := r.Fairness; f != nil && f.Alone.P99 > 0 {
		add(fmt.Sprintf("tenant B apply→Ready p99 while tenant A's %d hooks hang and %d retry", f.Hanging, f.Slow),
			"<= 2× alone", fmt.Sprintf("%.0f ms (%.1f× alone, %.0f ms)", f.UnderLoad.P99, f.P99Ratio, f.Alone.P99), f.P99Ratio <= 2)
	}
	for _, run := range r.Runs {
		if run.PluginRestarts == nil {
			continue
		}
		// One process per plugin in bin/plugins, the same ones before and after the run.
		same := slices.Equal(run.PluginProcessesBefore, run.PluginProcessesAfter)
		add("plugin processes started once", "same PIDs before and after, 0 restarts",
			fmt.Sprintf("%v → %v, %d restarts", run.PluginProcessesBefore, run.PluginProcessesAfter, *run.PluginRestarts),
			same && len(run.PluginProcessesAfter) > 0 && *run.PluginRestarts == 0)
	}
	// The plugin hook's overhead target (p50 <= 300 µs) is measured without the API server
	// by `go test -bench . ./pkg/plugin/host/`; the tables show the mean the operator saw.
}

// rssTarget is the RSS the operator may have with n finished pipelines: 100 MiB up to
// 10,000, then on a line to 400 MiB at 100,000.
// rssTarget is the history issue's bound on the operator's RSS with n finished pipelines:
// 60 MiB at 10,000, 150 MiB at 100,000, on a line between.
func rssTarget(n int) float64 {
	if n <= 10000 {
		return 60
	}
	return 60 + float64(n-10000)*90/90000
}

func writeJSON(path string, r *results) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("marshal results: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create directory of %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// printTable prints the results for a human.
func printTable(out io.Writer, r *results) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	defer func() { _ = w.Flush() }()
	// A table on stdout: a write error has nowhere better to go.
	pf := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
	s := r.Settings
	limit := "none"
	if s.GoMemLimit != "" {
		limit = s.GoMemLimit
	}
	pf("Stepwise benchmark: N=%d pipelines, K=%d steps, %d workers, QPS %g, burst %d, %d CPUs, operator GOMEMLIMIT %s\n\n",
		s.Pipelines, s.Steps, s.Workers, s.QPS, s.Burst, s.CPUs, limit)

	pf("RAW WRITES\tworkers\tQPS/burst\twrites\tseconds\twrites/s\tbenchmark CPU s\n")
	for _, raw := range r.Raw {
		limit := "unthrottled"
		if raw.QPS > 0 {
			limit = fmt.Sprintf("%g/%d", raw.QPS, raw.Burst)
		}
		pf("%s\t%d\t%s\t%d\t%.2f\t%.0f\t%.1f\n", raw.Label, raw.Workers, limit, raw.Writes, raw.Seconds, raw.WritesPerSec, raw.BenchCPUSeconds)
	}

	runs := r.Runs
	if r.Idle != nil && r.Idle.Fill != nil {
		runs = append(slices.Clone(runs), *r.Idle.Fill)
	}
	if len(runs) > 0 {
		pf("\n")
		pf("PIPELINES")
		for _, run := range runs {
			pf("\t%s", run.Name)
		}
		pf("\n")
		row := func(name string, f func(pipelineRun) string) {
			pf("%s", name)
			for _, run := range runs {
				pf("\t%s", f(run))
			}
			pf("\n")
		}
		row("pipelines × steps", func(p pipelineRun) string { return fmt.Sprintf("%d × %d", p.Pipelines, p.Steps) })
		row("wall time to all Ready (s)", func(p pipelineRun) string { return fmt.Sprintf("%.1f", p.WallSeconds) })
		row("pipelines/s", func(p pipelineRun) string { return fmt.Sprintf("%.1f", p.PipelinesPerSec) })
		row("apply→Ready p50/p90/p99 (ms)", func(p pipelineRun) string {
			return fmt.Sprintf("%.0f / %.0f / %.0f", p.Latency.P50, p.Latency.P90, p.Latency.P99)
		})
		row("pipeline writes/pipeline (client)", func(p pipelineRun) string { return fmt.Sprintf("%.2f", p.PipelineWritesPerPipeline) })
		row("pipeline writes/pipeline (server)", func(p pipelineRun) string { return fmt.Sprintf("%.2f", p.ServerPipelineWritesPerPipeline) })
		row("Event writes/pipeline (client)", func(p pipelineRun) string { return fmt.Sprintf("%.2f", p.EventWritesPerPipeline) })
		row("409 Conflicts", func(p pipelineRun) string { return fmt.Sprintf("%.0f", p.Conflicts) })
		row("GET/LIST", func(p pipelineRun) string { return fmt.Sprintf("%.0f", p.Reads) })
		row("reconciles/pipeline", func(p pipelineRun) string { return fmt.Sprintf("%.2f", p.ReconcilesPerPipeline) })
		row("reconcile mean / queue wait mean (ms)", func(p pipelineRun) string {
			return fmt.Sprintf("%.1f / %.0f", p.ReconcileMeanMs, p.QueueWaitMeanMs)
		})
		row("pipeline writes/s", func(p pipelineRun) string { return fmt.Sprintf("%.0f", p.PipelineWritesPerSec) })
		row("ratio to raw writes/s", func(p pipelineRun) string { return fmt.Sprintf("%.2f", p.RatioToRawLimit) })
		row("ratio to raw Pipeline writes/s", func(p pipelineRun) string { return fmt.Sprintf("%.2f", p.RatioToRawPipelineLimit) })
		row("write limit of the run (writes/s)", func(p pipelineRun) string { return fmt.Sprintf("%.0f", p.WriteLimitPerSec) })
		row("ratio to the write limit", func(p pipelineRun) string { return fmt.Sprintf("%.2f", p.RatioToWriteLimit) })
		row("operator CPU s (ms/pipeline)", func(p pipelineRun) string {
			return fmt.Sprintf("%.1f (%.1f)", p.CPUSeconds, p.CPUMsPerPipeline)
		})
		row("benchmark CPU s", func(p pipelineRun) string { return fmt.Sprintf("%.1f", p.BenchCPUSeconds) })
		row("operator RSS / peak (MiB)", func(p pipelineRun) string { return fmt.Sprintf("%.0f / %.0f", p.RSSMiB, p.PeakRSSMiB) })
		row("hook mean (µs)", func(p pipelineRun) string { return formatMap(p.HookMeanMicros, "%.0f") })
		row("requests/pipeline (client)", func(p pipelineRun) string { return formatMap(p.OperatorRequestsPerPipeline, "%.2f") })
		row("requests/pipeline (server)", func(p pipelineRun) string { return formatMap(p.ServerRequestsPerPipeline, "%.2f") })
		for _, run := range runs {
			printProfileTop(pf, fmt.Sprintf("%s: CPU profile of %.0f s ending at most %.0f s before the run did (go tool pprof -top -cum)",
				run.Name, run.CPUProfileSeconds, run.CPUProfileSeconds), run.CPUTop)
		}
	}

	if len(r.IdleLatency) > 0 {
		pf("\n")
		pf("APPLY→READY, ONE AT A TIME\tsamples\tsteps\tp50 ms\tp90 ms\tp99 ms\tmax ms\thook mean (µs)\n")
		for _, l := range r.IdleLatency {
			pf("%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%s\n", l.Name, l.Samples, l.Steps,
				l.Latency.P50, l.Latency.P90, l.Latency.P99, l.Latency.Max, formatMap(l.HookMeanMicros, "%.0f"))
		}
	}

	if t := r.Trigger; t != nil {
		printTrigger(pf, t)
	}

	if n := r.Nodes; n != nil {
		pf("\n")
		pf("NODES (a suspended trigger on %d Nodes, %d bytes of JSON each)\t\n", n.Nodes, n.NodeJSONBytes)
		pf("trigger counted them all after s\t%.1f\n", n.SeenSeconds)
		pf("trigger syncs\t%.0f\n", n.TriggerReconciles)
		pf("operator RSS / Go heap in use, before (MiB)\t%.0f / %.0f\n", n.BaselineRSSMiB, n.BaselineHeapMiB)
		pf("operator RSS / Go heap in use, with the Nodes (MiB)\t%.0f / %.0f\n", n.LoadedRSSMiB, n.LoadedHeapMiB)
		printHeapTop(pf, n.HeapTop)
	}
	if r.Idle != nil {
		i := r.Idle
		pf("\n")
		pf("IDLE (%d finished pipelines, %.0f s)\t\n", i.Pipelines, i.Seconds)
		pf("reconciles/s\t%.2f\n", i.ReconcilesPerSec)
		pf("API requests\t%s\n", formatMap(i.Requests, "%.0f"))
		pf("operator CPU s\t%.2f\n", i.CPUSeconds)
		pf("operator RSS / peak / Go heap in use (MiB)\t%.0f / %.0f / %.0f\n", i.RSSMiB, i.PeakRSSMiB, i.HeapInuseMiB)
		printHeapTop(pf, i.HeapTop)
	}
	if rr := r.Restart; rr != nil {
		pf("\n")
		pf("RESTART (new operator, same pipelines)\t\n")
		pf("ready (caches synced) after s\t%.1f\n", rr.ReadySeconds)
		pf("settled after s\t%.1f\n", rr.SettledSeconds)
		pf("reconciles / writes\t%.0f / %.0f\n", rr.Reconciles, rr.Writes)
		pf("API requests\t%s\n", formatMap(rr.Requests, "%.0f"))
		pf("operator CPU s\t%.2f\n", rr.CPUSeconds)
		pf("operator RSS / peak / Go heap in use (MiB)\t%.0f / %.0f / %.0f\n", rr.RSSMiB, rr.PeakRSSMiB, rr.HeapInuseMiB)
		printHeapTop(pf, rr.HeapTop)
		printProfileTop(pf, fmt.Sprintf("CPU profile of the first %.0f s (go tool pprof -top -cum)", rr.CPUProfileSeconds), rr.CPUTop)
	}

	if f := r.Fairness; f != nil {
		share := "default"
		if f.Share > 0 {
			share = fmt.Sprintf("%d", f.Share)
		}
		pf("\n")
		pf("FAIRNESS (tenant A: %d hanging, %d slow and retried; --max-workers-per-namespace %s)\tp50 ms\tp90 ms\tp99 ms\tmax ms\n", f.Hanging, f.Slow, share)
		for _, row := range []struct {
			name string
			p    percentiles
		}{{"tenant B alone", f.Alone}, {"tenant B under A's load", f.UnderLoad}} {
			pf("%s\t%.1f\t%.1f\t%.1f\t%.1f\n", row.name, row.p.P50, row.p.P90, row.p.P99, row.p.Max)
		}
		pf("tenant A's hook attempts meanwhile\t%d\n", f.HogAttempts)
	}

	if h := r.History; h != nil && h.Lists > 0 {
		pf("\n")
		pf("HISTORY (%d records over %d namespaces, filled in %.0f s)\tlists\tp50 ms\tp99 ms\tmax ms\tpage 2 p99 ms\n", h.Records, h.Namespaces, h.FillSeconds)
		pf("kubectl get pipelinerecords -n NS --limit 100\t%d\t%.1f\t%.1f\t%.1f\t%.1f\n", h.Lists, h.ListP50Millis, h.ListP99Millis, h.ListMaxMillis, h.PageTwoP99Msec)
	}

	if len(r.Targets) > 0 {
		pf("\n")
		pf("TARGET\twant\tgot\tmet\n")
		for _, t := range r.Targets {
			met := "yes"
			if !t.Met {
				met = "NO"
			}
			pf("%s\t%s\t%s\t%s\n", t.Name, t.Want, t.Got, met)
		}
	}
}

// formatMap prints a map sorted by key, as "key=value, ...".
func formatMap(m map[string]float64, format string) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+fmt.Sprintf(format, m[k]))
	}
	return strings.Join(parts, ", ")
}

// printTrigger prints the trigger phase.
func printTrigger(pf func(string, ...any), t *triggerResult) {
	pf("\n")
	pf("TRIGGER (%d ConfigMaps × %d steps, concurrency %d)\t\n", t.Objects, t.Steps, t.Concurrency)
	if t.StepSeconds > 0 {
		pf("first step: test.wait of (s)\t%.1f\n", t.StepSeconds)
		pf("drain time at the budget: objects × step ÷ concurrency (s)\t%.1f\n", t.IdealDrainSeconds)
	}
	pf("drain time: create → all Succeeded, status caught up (s)\t%.1f\n", t.DrainSeconds)
	pf("first pipeline / last Succeeded / status lag (s)\t%.2f / %.1f / %.2f\n",
		t.FirstPipelineSeconds, t.LastSucceededSeconds, t.StatusLagSeconds)
	pf("pipelines/s\t%.1f\n", t.PipelinesPerSec)
	pf("unfinished at once: max / mean\t%d / %.1f\n", t.MaxUnfinished, t.MeanUnfinished)
	pf("created→Succeeded p50/p90/p99 (ms)\t%.0f / %.0f / %.0f\n", t.Latency.P50, t.Latency.P90, t.Latency.P99)
	pf("pipeline writes/pipeline (client / server)\t%.2f / %.2f\n", t.PipelineWritesPerPipeline, t.ServerPipelineWritesPerPipeline)
	pf("trigger status writes (client / server)\t%.0f / %.0f\n", t.TriggerStatusWrites, t.ServerTriggerStatusWrites)
	pf("Event writes/pipeline (client)\t%.2f\n", t.EventWritesPerPipeline)
	pf("409 Conflicts\t%.0f\n", t.Conflicts)
	pf("GET/LIST\t%s\n", formatMap(t.Reads, "%.0f"))
	pf("reconciles/pipeline / trigger syncs\t%.2f / %.0f\n", t.ReconcilesPerPipeline, t.TriggerReconciles)
	pf("operator CPU s (ms/pipeline)\t%.1f (%.1f)\n", t.CPUSeconds, t.CPUMsPerPipeline)
	pf("operator RSS / peak (MiB)\t%.0f / %.0f\n", t.RSSMiB, t.PeakRSSMiB)
	s := t.Status
	pf("final status: matched/running/waiting/succeeded/failed\t%d / %d / %d / %d / %d\n",
		s.Matched, s.Running, s.Waiting, s.Succeeded, s.Failed)
	pf("requests/pipeline (client)\t%s\n", formatMap(t.OperatorRequestsPerPipeline, "%.2f"))
	pf("requests/pipeline (server)\t%s\n", formatMap(t.ServerRequestsPerPipeline, "%.2f"))
}

// printHeapTop prints the top of a heap profile, indented.
func printHeapTop(pf func(string, ...any), top []string) {
	printProfileTop(pf, "heap profile (go tool pprof -top -sample_index=inuse_space)", top)
}

// printProfileTop prints the top of a profile under its title, indented.
func printProfileTop(pf func(string, ...any), title string, top []string) {
	if len(top) == 0 {
		return
	}
	pf("%s:\n", title)
	for _, line := range top {
		pf("    %s\n", line)
	}
}
