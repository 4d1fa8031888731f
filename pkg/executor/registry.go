package executor

import (
	"fmt"
	"slices"
	"sync"
)

// Registry maps executor names to executors. Built-ins register at start; plugins register
// the executors they serve when they are started, so lookups and registrations may race.
type Registry struct {
	mu        sync.RWMutex
	executors map[string]TaskExecutor
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{executors: map[string]TaskExecutor{}}
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
