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
}

// New creates the engine's metrics and registers them with reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		hookDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "stepwise",
			Name:      "hook_duration_seconds",
			Help:      "Duration of one call of an executor's hook, by executor, hook and result (done, wait, error).",
			Buckets:   prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"executor", "hook", "result"}),
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "stepwise",
			Name:      "step_duration_seconds",
			Help:      "Time from a step's start to its success or failure, by executor and result (succeeded, failed).",
			Buckets:   prometheus.ExponentialBuckets(0.01, 4, 10),
		}, []string{"executor", "result"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "stepwise",
			Name:      "hook_retries_total",
			Help:      "Retries scheduled after a hook failed, by executor and hook.",
		}, []string{"executor", "hook"}),
	}
	reg.MustRegister(m.hookDuration, m.stepDuration, m.retries)
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
