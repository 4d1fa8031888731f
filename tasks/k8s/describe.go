package k8s

import "github.com/stepwise-dev/stepwise/pkg/contract"

// Describe documents k8s.apply for the executor catalogue.
func (Apply) Describe() contract.Description {
	return contract.Description{
		Description: "Server-side applies YAML documents (field manager stepwise); teardown deletes " +
			"exactly what it applied, last object first.",
		Parameters: []contract.Parameter{{
			Name:        "manifest",
			Description: "One or more YAML documents; namespaced objects without a namespace go to the pipeline's namespace. References such as $(steps.s.outputs.k) are substituted inside its values, never as YAML.",
			Required:    true,
			Type:        contract.ParamYAML,
		}},
	}
}

// Describe documents k8s.wait for the executor catalogue.
func (Wait) Describe() contract.Description {
	return contract.Description{
		Description: "Waits until an object has a condition that is True, or a JSONPath of it has a value.",
		Parameters: []contract.Parameter{
			{Name: "apiVersion", Description: "API version of the object, e.g. apps/v1.", Required: true},
			{Name: "kind", Description: "Kind of the object, e.g. Deployment; not Secret.", Required: true},
			{Name: "name", Description: "Name of the object.", Required: true},
			{Name: "namespace", Description: "Namespace of the object (default: the pipeline's)."},
			{Name: "condition", Description: "Condition type that must be True, e.g. Available; or give jsonPath and value."},
			{Name: "jsonPath", Description: "JSONPath template, e.g. {.status.readyReplicas}; goes with value."},
			{Name: "value", Description: "What jsonPath must print."},
			{Name: "timeout", Description: "How long to wait, a Go duration (default 5m)."},
		},
	}
}
