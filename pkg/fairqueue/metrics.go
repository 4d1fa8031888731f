package fairqueue

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// queueMetrics are the series client-go's own queue reports (depth, adds, queue and work
// durations, unfinished work), under the queue's name, so that dashboards and the
// benchmark read a fair queue as they read any workqueue. Every method is called with the
// queue's lock held.
type queueMetrics[T comparable] struct {
	clock                   clock.Clock
	depth                   workqueue.GaugeMetric
	adds                    workqueue.CounterMetric
	latency                 workqueue.HistogramMetric
	workDuration            workqueue.HistogramMetric
	unfinishedWorkSeconds   workqueue.SettableGaugeMetric
	longestRunningProcessor workqueue.SettableGaugeMetric
	addTimes                map[T]time.Time
	processingStartTimes    map[T]time.Time
}

// newQueueMetrics returns nil, which records nothing, for a queue without a name or a
// provider, as client-go does.
func newQueueMetrics[T comparable](name string, provider workqueue.MetricsProvider, clk clock.Clock) *queueMetrics[T] {
	if name == "" || provider == nil {
		return nil
	}
	return &queueMetrics[T]{
		clock:                   clk,
		depth:                   provider.NewDepthMetric(name),
		adds:                    provider.NewAddsMetric(name),
		latency:                 provider.NewLatencyMetric(name),
		workDuration:            provider.NewWorkDurationMetric(name),
		unfinishedWorkSeconds:   provider.NewUnfinishedWorkSecondsMetric(name),
		longestRunningProcessor: provider.NewLongestRunningProcessorSecondsMetric(name),
		addTimes:                map[T]time.Time{},
		processingStartTimes:    map[T]time.Time{},
	}
}

func (m *queueMetrics[T]) add(item T) {
	if m == nil {
		return
	}
	m.adds.Inc()
	m.depth.Inc()
	if _, ok := m.addTimes[item]; !ok {
		m.addTimes[item] = m.clock.Now()
	}
}

func (m *queueMetrics[T]) get(item T) {
	if m == nil {
		return
	}
	m.depth.Dec()
	m.processingStartTimes[item] = m.clock.Now()
	if start, ok := m.addTimes[item]; ok {
		m.latency.Observe(m.clock.Since(start).Seconds())
		delete(m.addTimes, item)
		m.addTimes = shrunk(m.addTimes)
	}
}

func (m *queueMetrics[T]) done(item T) {
	if m == nil {
		return
	}
	if start, ok := m.processingStartTimes[item]; ok {
		m.workDuration.Observe(m.clock.Since(start).Seconds())
		delete(m.processingStartTimes, item)
		m.processingStartTimes = shrunk(m.processingStartTimes)
	}
}

func (m *queueMetrics[T]) updateUnfinishedWork() {
	if m == nil {
		return
	}
	var total, oldest float64
	for _, start := range m.processingStartTimes {
		age := m.clock.Since(start).Seconds()
		total += age
		oldest = max(oldest, age)
	}
	m.unfinishedWorkSeconds.Set(total)
	m.longestRunningProcessor.Set(oldest)
}
