// Package k8s holds the built-in executors that work on arbitrary Kubernetes objects:
//
//   - k8s.apply server-side applies the YAML documents of its "manifest" parameter and lists
//     them in its inventory; a re-run prunes what the manifest no longer has, and teardown
//     deletes what it applied, last object first, waiting until it is gone. It never takes
//     over, prunes or deletes an object whose owner labels name someone else, unless told
//     to take it over (parameter force).
//   - k8s.wait waits until an object has a condition, or a JSONPath of it has a value.
//   - k8s.scale scales a Deployment or StatefulSet through its scale subresource, waits
//     until it is ready at that count, and its teardown restores the count it found.
//
// They act only through the clients of the Request (dynamic, typed, RESTMapper), which
// impersonate the pipeline's ServiceAccount: what a pipeline may touch is what its
// ServiceAccount's RBAC allows. None blocks: long waits return contract.Wait and are
// called again.
package k8s

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// Executors returns the k8s executors.
func Executors() []executor.TaskExecutor {
	return []executor.TaskExecutor{Apply{}, Wait{}, Scale{}}
}

// Labels that k8s.apply sets on every object it applies: they say which step owns it, and
// all three must name the step for it to prune or delete the object. The names are what
// people read; the pipeline's UID tells a Pipeline from one deleted and created again under
// the same name, or one of the same name in another namespace. The UID is a label rather
// than an annotation so that one pipeline's objects can be selected by it.
const (
	PipelineLabel    = "stepwise.dev/pipeline"
	PipelineUIDLabel = "stepwise.dev/pipeline-uid"
	StepLabel        = "stepwise.dev/step"
)

// FieldManager is the server-side apply field manager of k8s.apply.
const FieldManager = "stepwise"

// ReasonInvalidParameter is the reason of a step that fails on bad input.
const ReasonInvalidParameter = "InvalidParameter"

// invalidParam is the permanent error of a bad parameter, naming it.
func invalidParam(param, format string, args ...any) error {
	return contract.Permanent(ReasonInvalidParameter,
		fmt.Errorf("parameter %q: %s", param, fmt.Sprintf(format, args...)))
}

// nonEmpty refuses a parameter set to nothing but spaces (say, a reference to an empty
// output): the engine makes sure a required parameter is set, not that it says anything.
func nonEmpty(req *executor.Request, names ...string) error {
	for _, name := range names {
		if strings.TrimSpace(req.String(name)) == "" {
			return invalidParam(name, "is empty")
		}
	}
	return nil
}

// clients returns the dynamic client and the mapper of the request.
func clients(req *executor.Request) (dynamic.Interface, meta.RESTMapper, error) {
	if req.Clients == nil || req.Clients.Dynamic == nil || req.Clients.Mapper == nil {
		return nil, nil, contract.Permanent("NoClient", errors.New("no dynamic client or RESTMapper was given to the executor"))
	}
	return req.Clients.Dynamic, req.Clients.Mapper, nil
}

// mapper looks kinds up, resetting a resettable mapper once (per hook call) on a miss: the
// miss may come from a stale discovery cache, e.g. for a CRD installed a moment ago.
type mapper struct {
	m     meta.RESTMapper
	reset bool
}

// mapping returns how to reach objects of gvk. A kind the API server does not serve is
// an error for which meta.IsNoMatchError holds.
func (m *mapper) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	mapping, err := m.m.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil && meta.IsNoMatchError(err) && !m.reset {
		if r, ok := m.m.(meta.ResettableRESTMapper); ok {
			m.reset = true
			r.Reset()
			mapping, err = m.m.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
	}
	return mapping, err
}

// resourceFor returns the client of the object's resource: namespaced in ns when the
// resource is namespaced, cluster-wide otherwise.
func resourceFor(client dynamic.Interface, mapping *meta.RESTMapping, ns string) dynamic.ResourceInterface {
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return client.Resource(mapping.Resource).Namespace(ns)
	}
	return client.Resource(mapping.Resource)
}

// kindName is "Kind name" or "Kind namespace/name", for messages.
func kindName(kind, ns, name string) string {
	if ns == "" {
		return kind + " " + name
	}
	return kind + " " + ns + "/" + name
}
