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
		panics:      definition(SyncPanicsName).counterVec(),
		undecodable: definition(UndecodableName).counterVec(),
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

// PluginRestarts counts plugin processes that died and are started again.
type PluginRestarts struct {
	total *prometheus.CounterVec
}

// NewPluginRestarts creates the counter and registers it with reg.
func NewPluginRestarts(reg prometheus.Registerer) *PluginRestarts {
	r := &PluginRestarts{total: definition(PluginRestartsName).counterVec()}
	reg.MustRegister(r.total)
	return r
}

// PluginRestarted records that plugin died (cause) and will be started again.
func (r *PluginRestarts) PluginRestarted(plugin, cause string) {
	r.total.WithLabelValues(plugin, cause).Inc()
}
