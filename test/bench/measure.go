package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// queueName is the engine's workqueue (controller.ControllerName).
const queueName = "stepwise-operator"

// snapshot is what the counters say at one moment.
type snapshot struct {
	at time.Time
	// operator holds the operator's own counters: its API requests by "verb resource"
	// (client side), reconciles, CPU and memory.
	operator   map[string]float64
	conflicts  float64 // operator requests answered 409 Conflict
	reconciles float64
	workSum    float64 // seconds spent in reconciles
	waitSum    float64 // seconds keys waited in the queue
	waitCount  float64
	depth      float64
	cpuSeconds float64
	rssBytes   float64
	heapBytes  float64
	hookSum    map[string]float64 // stepwise_hook_duration_seconds_sum by executor
	hookCount  map[string]float64
	// server is apiserver_request_total for pipelines and events by "verb resource".
	server map[string]float64
	// serverCPU is the API server's process_cpu_seconds_total.
	serverCPU float64
	// bench is the benchmark's own API requests by "verb resource", to subtract from server.
	bench map[string]float64
}

// probe takes snapshots of the operator, the API server and the benchmark's client.
type probe struct {
	op    *operator
	admin kubernetes.Interface
	bench prometheus.Gatherer
}

func (p *probe) snapshot(ctx context.Context) (snapshot, error) {
	s := snapshot{at: time.Now()}
	om, err := p.op.scrape(ctx)
	if err != nil {
		return s, err
	}
	s.operator = om.by("stepwise_api_requests_total", nil, verbResource)
	s.conflicts = om.sum("stepwise_api_requests_total", map[string]string{"code": "409"})
	queue := map[string]string{"name": queueName}
	s.reconciles = om.sum("workqueue_work_duration_seconds_count", queue)
	s.workSum = om.sum("workqueue_work_duration_seconds_sum", queue)
	s.waitSum = om.sum("workqueue_queue_duration_seconds_sum", queue)
	s.waitCount = om.sum("workqueue_queue_duration_seconds_count", queue)
	s.depth = om.sum("workqueue_depth", queue)
	s.cpuSeconds = om.sum("process_cpu_seconds_total", nil)
	s.rssBytes = om.sum("process_resident_memory_bytes", nil)
	s.heapBytes = om.sum("go_memstats_heap_inuse_bytes", nil)
	byExecutor := func(l map[string]string) string { return l["executor"] }
	s.hookSum = om.by("stepwise_hook_duration_seconds_sum", nil, byExecutor)
	s.hookCount = om.by("stepwise_hook_duration_seconds_count", nil, byExecutor)

	raw, err := p.admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return s, fmt.Errorf("scrape API server metrics: %w", err)
	}
	sm, err := parseMetrics(bytes.NewReader(raw), "apiserver_request_total", "process_cpu_seconds_total")
	if err != nil {
		return s, fmt.Errorf("parse API server metrics: %w", err)
	}
	s.serverCPU = sm.sum("process_cpu_seconds_total", nil)
	s.server = sm.by("apiserver_request_total", nil, func(l map[string]string) string {
		if l["group"] != "stepwise.dev" && (l["group"] != "" || l["resource"] != "events") {
			return ""
		}
		res := l["resource"]
		if l["subresource"] != "" {
			res += "/" + l["subresource"]
		}
		return serverVerb(l["verb"]) + " " + res
	})

	families, err := p.bench.Gather()
	if err != nil {
		return s, fmt.Errorf("gather the benchmark's metrics: %w", err)
	}
	s.bench = map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if k := verbResource(l); k != "" {
				s.bench[k] += m.GetCounter().GetValue()
			}
		}
	}
	return s, nil
}

// serverVerb turns apiserver_request_total's verb (LIST, WATCH and GET for reads, the HTTP
// method for the rest) into the client's names.
func serverVerb(v string) string {
	switch v = strings.ToLower(v); v {
	case "post":
		return "create"
	case "put":
		return "update"
	}
	return v
}

func verbResource(l map[string]string) string {
	if l["resource"] == "" {
		return ""
	}
	return l["verb"] + " " + l["resource"]
}

// settle waits until the operator is quiet: its queue empty, and neither its reconciles nor
// its API requests changing between two scrapes a second apart (Events are written
// asynchronously, after the status). It returns the last snapshot.
func (p *probe) settle(ctx context.Context, timeout time.Duration) (snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	prev, err := p.snapshot(ctx)
	if err != nil {
		return prev, err
	}
	var last snapshot
	err = wait.PollUntilContextCancel(ctx, time.Second, false, func(ctx context.Context) (bool, error) {
		cur, err := p.snapshot(ctx)
		if err != nil {
			return false, err
		}
		quiet := cur.depth == 0 && cur.reconciles == prev.reconciles && sum(diff(prev.operator, cur.operator)) == 0
		prev, last = cur, cur
		return quiet, nil
	})
	if err != nil {
		return last, fmt.Errorf("wait for the operator to settle: %w", err)
	}
	return last, nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func sum(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

// delta is what happened between two snapshots.
type delta struct {
	seconds    float64
	operator   map[string]float64 // client-side, by "verb resource"
	server     map[string]float64 // server-side minus the benchmark's own requests
	conflicts  float64
	reconciles float64
	// reconcileMs and queueWaitMs are the mean duration of a reconcile and the mean time a
	// key waited in the queue for a worker.
	reconcileMs float64
	queueWaitMs float64
	cpuSeconds  float64
	hookMean    map[string]float64 // mean hook duration by executor, in µs
}

func between(a, b snapshot) delta {
	server := diff(a.server, b.server)
	for k, v := range diff(a.bench, b.bench) {
		// Watches are counted by the server when they end, by the client when they start:
		// the benchmark's own are left out on both sides.
		if strings.HasPrefix(k, "watch ") {
			continue
		}
		if server[k] -= v; server[k] == 0 {
			delete(server, k)
		}
	}
	for k := range server {
		if strings.HasPrefix(k, "watch ") {
			delete(server, k)
		}
	}
	hookMean := map[string]float64{}
	counts := diff(a.hookCount, b.hookCount)
	for exec, d := range diff(a.hookSum, b.hookSum) {
		if counts[exec] > 0 {
			hookMean[exec] = d / counts[exec] * 1e6
		}
	}
	return delta{
		seconds:     b.at.Sub(a.at).Seconds(),
		operator:    diff(a.operator, b.operator),
		server:      server,
		conflicts:   b.conflicts - a.conflicts,
		reconciles:  b.reconciles - a.reconciles,
		reconcileMs: ratio(b.workSum-a.workSum, b.reconciles-a.reconciles) * 1000,
		queueWaitMs: ratio(b.waitSum-a.waitSum, b.waitCount-a.waitCount) * 1000,
		cpuSeconds:  b.cpuSeconds - a.cpuSeconds,
		hookMean:    hookMean,
	}
}

// isWrite tells whether a "verb resource" key is a write.
func isWrite(key string) bool {
	verb, _, _ := strings.Cut(key, " ")
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection", "apply":
		return true
	}
	return false
}

// isRead tells whether a "verb resource" key is a GET or LIST, which an operator reading
// from its informers' caches should not need once they synced.
func isRead(key string) bool {
	verb, _, _ := strings.Cut(key, " ")
	return verb == "get" || verb == "list"
}

// count adds the requests whose key passes keep.
func count(m map[string]float64, keep func(string) bool) float64 {
	t := 0.0
	for k, v := range m {
		if keep(k) {
			t += v
		}
	}
	return t
}

func onResource(resource string, keep func(string) bool) func(string) bool {
	return func(k string) bool {
		_, res, _ := strings.Cut(k, " ")
		return strings.Split(res, "/")[0] == resource && keep(k)
	}
}
