package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// WorkqueueProvider exports client-go workqueue metrics to a Prometheus registry, with the
// names and labels Kubernetes' own components use (workqueue_depth{name=...} and so on).
// It is passed to one queue's config rather than set globally.
type WorkqueueProvider struct {
	depth          *prometheus.GaugeVec
	adds           *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	workDuration   *prometheus.HistogramVec
	unfinished     *prometheus.GaugeVec
	longestRunning *prometheus.GaugeVec
	retries        *prometheus.CounterVec
}

var _ workqueue.MetricsProvider = (*WorkqueueProvider)(nil)

// NewWorkqueueProvider creates the workqueue metrics and registers them with reg.
func NewWorkqueueProvider(reg prometheus.Registerer) *WorkqueueProvider {
	p := &WorkqueueProvider{
		depth:          definition(WorkqueueDepthName).gaugeVec(),
		adds:           definition(WorkqueueAddsName).counterVec(),
		latency:        definition(WorkqueueLatencyName).histogramVec(),
		workDuration:   definition(WorkqueueWorkName).histogramVec(),
		unfinished:     definition(WorkqueueUnfinished).gaugeVec(),
		longestRunning: definition(WorkqueueLongestName).gaugeVec(),
		retries:        definition(WorkqueueRetriesName).counterVec(),
	}
	reg.MustRegister(p.depth, p.adds, p.latency, p.workDuration, p.unfinished, p.longestRunning, p.retries)
	return p
}

func (p *WorkqueueProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.depth.WithLabelValues(name)
}

func (p *WorkqueueProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.adds.WithLabelValues(name)
}

func (p *WorkqueueProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.latency.WithLabelValues(name)
}

func (p *WorkqueueProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.workDuration.WithLabelValues(name)
}

func (p *WorkqueueProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.unfinished.WithLabelValues(name)
}

func (p *WorkqueueProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.longestRunning.WithLabelValues(name)
}

func (p *WorkqueueProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.retries.WithLabelValues(name)
}
