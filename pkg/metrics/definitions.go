package metrics

import (
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Kind is a metric's Prometheus type.
type Kind string

// The kinds of metric the operator exports.
const (
	Counter   Kind = "counter"
	Gauge     Kind = "gauge"
	Histogram Kind = "histogram"
)

// Definition is one metric the operator exports: the collectors are made from it, and
// docs/reference/metrics.md is generated from it (hack/gen-reference), so the two agree.
// Labels are bounded: no pipeline, step or object name is one (see each Help).
type Definition struct {
	Name    string
	Kind    Kind
	Help    string
	Labels  []string
	Buckets []float64
}

// The names of the metrics, as the alert rules and the dashboard use them.
const (
	HookDurationName      = "stepwise_hook_duration_seconds"
	StepDurationName      = "stepwise_step_duration_seconds"
	HookRetriesName       = "stepwise_hook_retries_total"
	ArchiveWritesName     = "stepwise_archive_writes_total"
	APIRequestsName       = "stepwise_api_requests_total"
	SyncPanicsName        = "stepwise_sync_panics_total"
	UndecodableName       = "stepwise_undecodable_objects_total"
	PluginRestartsName    = "stepwise_plugin_restarts_total"
	PipelinesName         = "stepwise_pipelines"
	StepsName             = "stepwise_steps"
	PipelinesBlockedName  = "stepwise_pipelines_blocked"
	BlockedSecondsName    = "stepwise_pipelines_blocked_seconds_max"
	TriggerObjectsName    = "stepwise_trigger_objects"
	TriggerBudgetLeftName = "stepwise_trigger_failure_budget_left"
	TriggerBlockedName    = "stepwise_trigger_blocked_seconds"
	WorkqueueDepthName    = "workqueue_depth"
	WorkqueueAddsName     = "workqueue_adds_total"
	WorkqueueLatencyName  = "workqueue_queue_duration_seconds"
	WorkqueueWorkName     = "workqueue_work_duration_seconds"
	WorkqueueUnfinished   = "workqueue_unfinished_work_seconds"
	WorkqueueLongestName  = "workqueue_longest_running_processor_seconds"
	WorkqueueRetriesName  = "workqueue_retries_total"
)

// Definitions are every metric the operator exports besides Go's and the process's, in
// the order the reference lists them.
func Definitions() []Definition {
	workqueueBuckets := prometheus.ExponentialBuckets(10e-9, 10, 12)
	name := []string{"name"}
	return []Definition{
		{Name: PipelinesName, Kind: Gauge, Labels: []string{"namespace", "phase"},
			Help: "Pipelines by namespace and phase (Pending, Running, Succeeded, Failed, Suspended, Deleting, Planned), from the leader's cache at each scrape; the cache leaves out resting pipelines (status.resting), so finished ones count until they rest."},
		{Name: StepsName, Kind: Gauge, Labels: []string{"executor", "phase"},
			Help: "Steps of all pipelines by executor and phase; an executor no one offers counts as \"unknown\"."},
		{Name: PipelinesBlockedName, Kind: Gauge, Labels: []string{"namespace", "kind"},
			Help: "Pipelines held back, by namespace and the kind of what holds them (status.blockedBy: PodDisruptionBudget, Approval, StepFailed, Retry, Teardown, Suspended, PipelineTemplate; Other for a kind an executor names)."},
		{Name: BlockedSecondsName, Kind: Gauge, Labels: []string{"namespace", "kind"},
			Help: "How long the longest-held pipeline of the namespace has been held back by that kind of thing, in seconds."},
		{Name: TriggerObjectsName, Kind: Gauge, Labels: []string{"namespace", "trigger", "state"},
			Help: "A trigger's objects and pipelines by state: matched, running, waiting, awaiting_approval, succeeded, failed."},
		{Name: TriggerBudgetLeftName, Kind: Gauge, Labels: []string{"namespace", "trigger"},
			Help: "Failures a trigger may still have before it starts nothing new."},
		{Name: TriggerBlockedName, Kind: Gauge, Labels: []string{"namespace", "trigger", "kind"},
			Help: "How long a trigger has been kept from starting pipelines, by the kind of what keeps it (Paused, FailureBudget, Gate, NodeBudget, MaintenanceWindow, CoolDown, Concurrency, PodDisruptionBudget, Suspended, PipelineTemplate), in seconds; absent when nothing does."},
		{Name: HookDurationName, Kind: Histogram, Labels: []string{"executor", "hook", "result"}, Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
			Help: "Duration of one call of an executor's hook, by executor, hook and result (done, wait, error)."},
		{Name: StepDurationName, Kind: Histogram, Labels: []string{"executor", "result"}, Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
			Help: "Time from a step's start to its success or failure, by executor and result (succeeded, failed)."},
		{Name: HookRetriesName, Kind: Counter, Labels: []string{"executor", "hook"},
			Help: "Retries scheduled after a hook failed, by executor and hook."},
		{Name: ArchiveWritesName, Kind: Counter, Labels: []string{"result"},
			Help: "Writes of pipelines' records to the archive (PostgreSQL), by result (ok, error); a failed write is tried again with backoff, and a deleted pipeline waits for it."},
		{Name: PluginRestartsName, Kind: Counter, Labels: []string{"plugin", "cause"},
			Help: "Plugin processes that died and were started again, by plugin and cause (exited, out_of_memory)."},
		{Name: APIRequestsName, Kind: Counter, Labels: []string{"verb", "resource", "code"},
			Help: "Requests to the Kubernetes API server by verb (get, list, watch, create, update, patch, " +
				"delete, deletecollection), resource (with its subresource, e.g. pipelines/status) and HTTP code."},
		{Name: SyncPanicsName, Kind: Counter, Labels: []string{"kind"},
			Help: "Syncs that panicked and were recovered (the object is retried with backoff), by kind (pipeline, trigger)."},
		{Name: UndecodableName, Kind: Counter, Labels: []string{"resource"},
			Help: "Objects read from the API server that could not be decoded and were kept aside, by resource."},
		{Name: WorkqueueDepthName, Kind: Gauge, Labels: name, Help: "Current depth of the workqueue."},
		{Name: WorkqueueAddsName, Kind: Counter, Labels: name, Help: "Adds handled by the workqueue."},
		{Name: WorkqueueLatencyName, Kind: Histogram, Labels: name, Buckets: workqueueBuckets,
			Help: "Seconds an item stays in the workqueue before being requested."},
		{Name: WorkqueueWorkName, Kind: Histogram, Labels: name, Buckets: workqueueBuckets,
			Help: "Seconds processing an item from the workqueue takes."},
		{Name: WorkqueueUnfinished, Kind: Gauge, Labels: name,
			Help: "Seconds of work in progress that has not been observed by work_duration."},
		{Name: WorkqueueLongestName, Kind: Gauge, Labels: name,
			Help: "Seconds the longest running processor of the workqueue has been running."},
		{Name: WorkqueueRetriesName, Kind: Counter, Labels: name, Help: "Retries handled by the workqueue."},
	}
}

// definition is the Definition named name; a name not in Definitions is a bug.
func definition(name string) Definition {
	defs := Definitions()
	i := slices.IndexFunc(defs, func(d Definition) bool { return d.Name == name })
	if i < 0 {
		panic(fmt.Sprintf("metric %s is not defined", name))
	}
	return defs[i]
}

func (d Definition) counterVec() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: d.Name, Help: d.Help}, d.Labels)
}

func (d Definition) gaugeVec() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: d.Name, Help: d.Help}, d.Labels)
}

func (d Definition) histogramVec() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: d.Name, Help: d.Help, Buckets: d.Buckets}, d.Labels)
}

func (d Definition) desc() *prometheus.Desc {
	return prometheus.NewDesc(d.Name, d.Help, d.Labels, nil)
}
