package metrics

import "github.com/prometheus/client_golang/prometheus"

// Faults counts what the operator contained instead of failing as a whole: syncs that
// panicked and objects that could not be decoded. A nil *Faults records nothing.
type Faults struct {
	panics      *prometheus.CounterVec
	undecodable *prometheus.CounterVec
}

// NewFaults creates the fault counters and registers them with reg.
func NewFaults(reg prometheus.Registerer) *Faults {
	f := &Faults{
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "stepwise",
			Name:      "sync_panics_total",
			Help:      "Syncs that panicked and were recovered (the object is retried with backoff), by kind (pipeline, trigger).",
		}, []string{"kind"}),
		undecodable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "stepwise",
			Name:      "undecodable_objects_total",
			Help:      "Objects read from the API server that could not be decoded and were kept aside, by resource.",
		}, []string{"resource"}),
	}
	reg.MustRegister(f.panics, f.undecodable)
	return f
}

// SyncPanicked records a recovered panic in a sync of kind.
func (f *Faults) SyncPanicked(kind string) {
	if f == nil {
		return
	}
	f.panics.WithLabelValues(kind).Inc()
}

// Undecodable records an object of resource that could not be decoded.
func (f *Faults) Undecodable(resource string) {
	if f == nil {
		return
	}
	f.undecodable.WithLabelValues(resource).Inc()
}
