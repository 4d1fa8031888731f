// Package metrics defines the operator's Prometheus metrics: step and hook durations,
// retries, and the workqueue's own metrics.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Results a hook call can have, the "result" label of HookDuration.
const (
	HookDone  = "done"
	HookWait  = "wait"
	HookError = "error"
)

// Metrics are the engine's metrics. A nil *Metrics records nothing, so tests need none.
type Metrics struct {
	hookDuration *prometheus.HistogramVec
	stepDuration *prometheus.HistogramVec
	retries      *prometheus.CounterVec
	archived     *prometheus.CounterVec
}

// New creates the engine's metrics and registers them with reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		hookDuration: definition(HookDurationName).histogramVec(),
		stepDuration: definition(StepDurationName).histogramVec(),
		retries:      definition(HookRetriesName).counterVec(),
		archived:     definition(ArchiveWritesName).counterVec(),
	}
	reg.MustRegister(m.hookDuration, m.stepDuration, m.retries, m.archived)
	return m
}

// ObserveHook records one hook call.
func (m *Metrics) ObserveHook(executor, hook, result string, d time.Duration) {
	if m == nil {
		return
	}
	m.hookDuration.WithLabelValues(executor, hook, result).Observe(d.Seconds())
}

// ObserveStep records a step that succeeded or failed.
func (m *Metrics) ObserveStep(executor, result string, d time.Duration) {
	if m == nil {
		return
	}
	m.stepDuration.WithLabelValues(executor, result).Observe(d.Seconds())
}

// Retry records a retry scheduled for a hook.
func (m *Metrics) Retry(executor, hook string) {
	if m == nil {
		return
	}
	m.retries.WithLabelValues(executor, hook).Inc()
}

// ObserveArchiveWrite records one write of a record to the archive and whether it failed.
func (m *Metrics) ObserveArchiveWrite(err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.archived.WithLabelValues(result).Inc()
}
