package trigger

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stepwise-dev/stepwise/pkg/trigger/objectref"
)

// The $(object.PATH) references of a trigger's params, and the paths of its matchFields,
// live in package objectref, which kubectl-stepwise shares (plan --trigger binds params
// exactly as the trigger does). These names keep the trigger's code as it reads.

// boundParams are a trigger's params, parsed: what bind turns into a pipeline's params.
type boundParams struct{ params objectref.Params }

// parseParams parses every value of a trigger's params; the error names the parameter.
func parseParams(params map[string]string) (boundParams, error) {
	p, err := objectref.Parse(params)
	return boundParams{params: p}, err
}

// bind resolves the params against obj. The error names the first parameter, in name
// order, that cannot be resolved, and the reference.
func (b boundParams) bind(obj *unstructured.Unstructured) (map[string]string, error) {
	return b.params.Bind(obj)
}

// paths are the fields the params refer to.
func (b boundParams) paths() [][]string { return b.params.Paths() }
