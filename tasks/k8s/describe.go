package k8s

import "github.com/stepwise-dev/stepwise/pkg/contract"

// Describe documents k8s.apply for the executor catalogue. The engine checks a step's
// parameters against what each executor declares here before any hook: the declarations
// are complete (every one typed), so a parameter not declared is refused.
func (Apply) Describe() contract.Description {
	return contract.Description{
		Description: "Server-side applies YAML documents (field manager stepwise) and lists them in the output objects; " +
			"a re-run prunes the listed objects the manifest no longer has, and teardown deletes the listed objects, " +
			"last first. Both delete only objects whose labels still name the step (stepwise.dev/pipeline, " +
			"stepwise.dev/pipeline-uid, stepwise.dev/step) and leave the others.",
		// A re-run applies the new manifest over the last run's objects and prunes the
		// rest (see Apply): there is no need to tear the last run down first.
		UpdatesInPlace: true,
		Parameters: []contract.Parameter{
			{
				Name:        "manifest",
				Description: "One or more YAML documents; namespaced objects without a namespace go to the pipeline's namespace. References such as $(steps.s.outputs.k) are substituted inside its values, never as YAML.",
				Required:    true,
				Type:        contract.ParamYAML,
			},
			{
				Name:    "force",
				Type:    contract.ParamBool,
				Default: "false",
				Description: "\"true\" to take over objects of the manifest that exist and are not this step's " +
					"(another pipeline's, or made by hand), and fields another field manager owns; teardown then deletes " +
					"those objects. Default false: such an object fails the step with reason NotOwned, such a field with " +
					"reason Conflict.",
			},
		},
	}
}

// Describe documents k8s.wait for the executor catalogue.
func (Wait) Describe() contract.Description {
	return contract.Description{
		Description: "Waits until an object has a condition that is True, or a JSONPath of it has a value.",
		Parameters: []contract.Parameter{
			{Name: "apiVersion", Type: contract.ParamString, Description: "API version of the object, e.g. apps/v1.", Required: true},
			{Name: "kind", Type: contract.ParamString, Description: "Kind of the object, e.g. Deployment; not Secret.", Required: true},
			{Name: "name", Type: contract.ParamString, Description: "Name of the object.", Required: true},
			// No default: the pipeline's namespace is known only at run time.
			{Name: "namespace", Type: contract.ParamString, Description: "Namespace of the object (default: the pipeline's)."},
			{Name: "condition", Type: contract.ParamString, Description: "Condition type that must be True, e.g. Available; or give jsonPath and value."},
			{Name: "jsonPath", Type: contract.ParamString, Description: "JSONPath template, e.g. {.status.readyReplicas}; goes with value."},
			{Name: "value", Type: contract.ParamString, Description: "What jsonPath must print."},
			{Name: "timeout", Type: contract.ParamDuration, Default: "5m", Description: "How long to wait, counted from the first call."},
		},
	}
}

// Describe documents k8s.scale for the executor catalogue.
func (Scale) Describe() contract.Description {
	return contract.Description{
		Description: "Scales a Deployment or StatefulSet through its scale subresource and waits until it is ready at that count; " +
			"outputs previousReplicas, the count its first run found (a re-run keeps it), and replicas. " +
			"Teardown restores previousReplicas and waits until the workload is ready again; a workload that is gone is fine.",
		Parameters: []contract.Parameter{
			{Name: "kind", Type: contract.ParamEnum, Values: []string{KindDeployment, KindStatefulSet}, Default: KindDeployment,
				Description: "Deployment (the default) or StatefulSet."},
			{Name: "name", Type: contract.ParamString, Description: "Name of the Deployment or StatefulSet.", Required: true},
			{Name: "namespace", Type: contract.ParamString, Description: "Namespace of the workload (default: the pipeline's)."},
			{Name: "replicas", Type: contract.ParamInt, Description: "The number of replicas to scale to, 0 or more.", Required: true},
			{Name: "timeout", Type: contract.ParamDuration, Default: "10m",
				Description: "How long to wait for the workload to be ready, in Create and in the teardown; past it the step fails with reason Timeout."},
		},
	}
}
