package executor

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/plugin/layout"
)

// Registry maps executor names to executors. Built-ins register at start; plugins register
// the executors they serve when they are started, so lookups and registrations may race.
type Registry struct {
	mu        sync.RWMutex
	executors map[string]TaskExecutor
	// refused holds, by plugin executable, why its executors could not be registered.
	refused map[string]Refusal
}

// Refusal is a plugin the operator refused to start, and why.
type Refusal struct {
	// Plugin is the executable's name, stepwise-plugin-NAME.
	Plugin string `json:"plugin"`
	// Reason is typed: what did not verify, or that it did not start.
	Reason v1alpha1.PluginRefusalReason `json:"reason"`
	// Message says what did not match, for a person.
	Message string `json:"message"`
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{executors: map[string]TaskExecutor{}, refused: map[string]Refusal{}}
}

// Refuse records that a plugin was refused and why, so that a step naming an executor it
// would have served waits on it saying so, and the catalogue lists it.
func (r *Registry) Refuse(refusal Refusal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused[refusal.Plugin] = refusal
}

// Refusals are the plugins refused, sorted by name.
func (r *Registry) Refusals() []Refusal {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Refusal, 0, len(r.refused))
	for _, name := range slices.Sorted(maps.Keys(r.refused)) {
		out = append(out, r.refused[name])
	}
	return out
}

// RefusalFor is the refusal of the plugin that would serve executor, by the naming
// convention of plugins (layout.ServingExecutor), when that plugin was refused.
func (r *Registry) RefusalFor(executor string) (Refusal, bool) {
	plugin := layout.ServingExecutor(executor)
	if plugin == "" {
		return Refusal{}, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	refusal, ok := r.refused[plugin]
	return refusal, ok
}

// Missing explains why no executor of that name is registered.
func (r *Registry) Missing(name string) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	msg := fmt.Sprintf("no executor named %q is registered (built in or served by a plugin)", name)
	if len(r.refused) == 0 {
		return errors.New(msg)
	}
	sources := slices.Sorted(maps.Keys(r.refused))
	parts := make([]string, 0, len(sources))
	for _, s := range sources {
		parts = append(parts, s+": "+r.refused[s].Message)
	}
	return fmt.Errorf("%s; plugins refused at start: %s", msg, strings.Join(parts, "; "))
}

// Register adds executors; a name already taken is an error and nothing is added.
func (r *Registry) Register(executors ...TaskExecutor) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for _, e := range executors {
		name := e.Name()
		if _, taken := r.executors[name]; taken || seen[name] {
			return fmt.Errorf("register executor %q: the name is already registered", name)
		}
		seen[name] = true
	}
	for _, e := range executors {
		r.executors[e.Name()] = e
	}
	return nil
}

// Get returns the executor with the given name.
func (r *Registry) Get(name string) (TaskExecutor, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.executors[name]
	return e, ok
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.executors))
	for name := range r.executors {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
