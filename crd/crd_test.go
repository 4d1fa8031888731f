package crd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/yaml"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
)

const crdFile = "stepwise.dev_pipelines.yaml"

// pipelineValidator runs the same checks the API server runs on a Pipeline at admission:
// the OpenAPI schema and the CEL rules of the CRD.
type pipelineValidator struct {
	schema validation.SchemaValidator
	cel    *cel.Validator
}

func loadCRD(t *testing.T) *apiextensions.CustomResourceDefinition {
	t.Helper()
	return loadCRDFile(t, crdFile)
}

func loadCRDFile(t *testing.T, file string) *apiextensions.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	var v1 apiextensionsv1.CustomResourceDefinition
	require.NoError(t, sigsyaml.UnmarshalStrict(data, &v1))
	var internal apiextensions.CustomResourceDefinition
	require.NoError(t, apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&v1, &internal, nil))
	return &internal
}

func newPipelineValidator(t *testing.T) *pipelineValidator {
	t.Helper()
	return newValidator(t, crdFile)
}

// newValidator validates objects against the schema and CEL rules of a CRD file here.
func newValidator(t *testing.T, file string) *pipelineValidator {
	t.Helper()
	crd := loadCRDFile(t, file)
	// The conversion moves a schema that all versions share into spec.validation.
	props := crd.Spec.Validation.OpenAPIV3Schema
	require.NotNil(t, props, "the CRD has no schema")

	schemaValidator, _, err := validation.NewSchemaValidator(props)
	require.NoError(t, err)
	structural, err := structuralschema.NewStructural(props)
	require.NoError(t, err)
	return &pipelineValidator{
		schema: schemaValidator,
		cel:    cel.NewValidator(structural, true, celconfig.PerCallLimit),
	}
}

func (v *pipelineValidator) validate(t *testing.T, obj map[string]any) field.ErrorList {
	t.Helper()
	errs := validation.ValidateCustomResource(nil, obj, v.schema)
	celErrs, _ := v.cel.Validate(context.Background(), nil, nil, obj, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// validateUpdate validates obj as an update of old, transition rules included.
func (v *pipelineValidator) validateUpdate(t *testing.T, obj, old map[string]any) field.ErrorList {
	t.Helper()
	errs := validation.ValidateCustomResource(nil, obj, v.schema)
	celErrs, _ := v.cel.Validate(context.Background(), nil, nil, obj, old, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// TestStartedPipelineStepsAreImmutable: by default an edit of the steps, params or
// ServiceAccount is refused at admission (it would re-run destructive steps against
// whatever now has the name); suspend may change; updatePolicy Rerun allows edits.
func TestStartedPipelineStepsAreImmutable(t *testing.T) {
	v := newPipelineValidator(t)
	tests := []struct {
		name    string
		policy  string // of the old object; "" leaves it unset (the default, Immutable)
		mutate  func(p map[string]any)
		wantErr bool
	}{
		{name: "timeout raised", mutate: func(p map[string]any) { step(p, 1)["timeout"] = "30m" }, wantErr: true},
		{name: "step removed", mutate: func(p map[string]any) { p["spec"].(map[string]any)["steps"] = steps(p)[:1] }, wantErr: true},
		{name: "param changed", mutate: func(p map[string]any) { p["spec"].(map[string]any)["params"] = map[string]any{"node": "n2"} }, wantErr: true},
		{name: "service account changed", mutate: func(p map[string]any) { p["spec"].(map[string]any)["serviceAccountName"] = "admin" }, wantErr: true},
		{name: "suspended", mutate: func(p map[string]any) { p["spec"].(map[string]any)["suspend"] = true }},
		{name: "nothing", mutate: func(map[string]any) {}},
		{name: "explicitly immutable, timeout raised", policy: "Immutable", mutate: func(p map[string]any) { step(p, 1)["timeout"] = "30m" }, wantErr: true},
		{name: "rerun policy, timeout raised", policy: "Rerun", mutate: func(p map[string]any) { step(p, 1)["timeout"] = "30m" }},
		{name: "rerun policy, step removed", policy: "Rerun", mutate: func(p map[string]any) { p["spec"].(map[string]any)["steps"] = steps(p)[:1] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := validPipeline()
			if tt.policy != "" {
				old["spec"].(map[string]any)["updatePolicy"] = tt.policy
			}
			updated := validPipeline()
			if tt.policy != "" {
				updated["spec"].(map[string]any)["updatePolicy"] = tt.policy
			}
			tt.mutate(updated)
			errs := v.validateUpdate(t, updated, old)
			if !tt.wantErr {
				assert.Empty(t, errs)
				return
			}
			require.NotEmpty(t, errs)
			assert.Contains(t, errs.ToAggregate().Error(), "kubectl stepwise rerun")
		})
	}
}

func TestCRDIsValid(t *testing.T) {
	crd := loadCRD(t)
	// The API server fills in storedVersions on create; do the same.
	crd.Status.StoredVersions = []string{"v1alpha1"}
	// Besides structure, this estimates the cost of every CEL rule: a rule the API server
	// would refuse as too expensive fails here.
	errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), crd)
	assert.Empty(t, errs.ToAggregate())

	assert.Equal(t, "pipelines.stepwise.dev", crd.Name)
	assert.Equal(t, []string{"swp"}, crd.Spec.Names.ShortNames)
	assert.Equal(t, []string{"stepwise"}, crd.Spec.Names.Categories)
	assert.Equal(t, apiextensions.NamespaceScoped, crd.Spec.Scope)
	require.NotNil(t, crd.Spec.Subresources)
	assert.NotNil(t, crd.Spec.Subresources.Status, "status subresource")

	var columns []string
	for _, c := range crd.Spec.AdditionalPrinterColumns {
		columns = append(columns, c.Name+"="+c.JSONPath)
	}
	assert.Equal(t, []string{
		"Phase=.status.phase", "Step=.status.currentStep", "Progress=.status.progress", "Age=.metadata.creationTimestamp",
	}, columns)
}

// validPipeline returns a fresh, valid Pipeline as the API server sees it: plain JSON values.
func validPipeline() map[string]any {
	return map[string]any{
		"apiVersion": "stepwise.dev/v1alpha1",
		"kind":       "Pipeline",
		"metadata":   map[string]any{"name": "p", "namespace": "ns"},
		"spec": map[string]any{
			"params": map[string]any{"node": "n1"},
			"steps": []any{
				map[string]any{"name": "cordon", "executor": "node.cordon", "with": map[string]any{"node": "$(params.node)"}},
				map[string]any{"name": "drain", "executor": "node.drain", "timeout": "15m",
					"retry": map[string]any{"limit": int64(5), "backoff": map[string]any{"initial": "2s", "factor": int64(2), "max": "1m30s"}}},
			},
		},
	}
}

func steps(p map[string]any) []any { return p["spec"].(map[string]any)["steps"].([]any) }

func step(p map[string]any, i int) map[string]any { return steps(p)[i].(map[string]any) }

func TestValidationRejectsBadPipelines(t *testing.T) {
	v := newPipelineValidator(t)
	tests := []struct {
		name    string
		mutate  func(p map[string]any)
		wantErr string // a part of the message the user sees
	}{
		{
			name:    "duplicate step names",
			mutate:  func(p map[string]any) { step(p, 1)["name"] = "cordon" },
			wantErr: "step names must be unique",
		},
		{
			name:    "zero steps",
			mutate:  func(p map[string]any) { p["spec"].(map[string]any)["steps"] = []any{} },
			wantErr: "spec.steps in body should have at least 1 items",
		},
		{
			name:    "no steps field",
			mutate:  func(p map[string]any) { delete(p["spec"].(map[string]any), "steps") },
			wantErr: "a pipeline has either steps or a templateRef",
		},
		{
			name: "steps and a templateRef",
			mutate: func(p map[string]any) {
				p["spec"].(map[string]any)["templateRef"] = map[string]any{"name": "retire"}
			},
			wantErr: "a pipeline has either steps or a templateRef",
		},
		{
			name:    "step name with capitals",
			mutate:  func(p map[string]any) { step(p, 0)["name"] = "Cordon" },
			wantErr: `spec.steps[0].name: Invalid value: "Cordon"`,
		},
		{
			name:    "step name too long",
			mutate:  func(p map[string]any) { step(p, 0)["name"] = strings.Repeat("a", 64) },
			wantErr: "spec.steps[0].name: Too long",
		},
		{
			name:    "malformed timeout",
			mutate:  func(p map[string]any) { step(p, 1)["timeout"] = "15 minutes" },
			wantErr: `spec.steps[1].timeout: Invalid value: "15 minutes"`,
		},
		{
			name: "malformed backoff duration",
			mutate: func(p map[string]any) {
				step(p, 1)["retry"].(map[string]any)["backoff"].(map[string]any)["max"] = "1d"
			},
			wantErr: "spec.steps[1].retry.backoff.max",
		},
		{
			name:    "executor name with spaces",
			mutate:  func(p map[string]any) { step(p, 0)["executor"] = "node cordon" },
			wantErr: "spec.steps[0].executor",
		},
		{
			name:    "missing executor",
			mutate:  func(p map[string]any) { delete(step(p, 0), "executor") },
			wantErr: "spec.steps[0].executor: Required value",
		},
		{
			name:    "negative retry limit",
			mutate:  func(p map[string]any) { step(p, 1)["retry"].(map[string]any)["limit"] = int64(-1) },
			wantErr: "spec.steps[1].retry.limit",
		},
		{
			name: "pipeline parameter value too long",
			mutate: func(p map[string]any) {
				p["spec"].(map[string]any)["params"] = map[string]any{"x": strings.Repeat("a", v1alpha1.MaxParamValueLength+1)}
			},
			wantErr: "values at most 65536",
		},
		{
			name: "step parameter value too long",
			mutate: func(p map[string]any) {
				step(p, 0)["with"] = map[string]any{"x": strings.Repeat("€", v1alpha1.MaxParamValueLength+1)}
			},
			wantErr: "spec.steps[0].with: Invalid value",
		},
		{
			name: "step parameter name too long",
			mutate: func(p map[string]any) {
				step(p, 0)["with"] = map[string]any{strings.Repeat("n", v1alpha1.MaxParamNameLength+1): "x"}
			},
			wantErr: "names are at most 253 characters",
		},
		{
			name: "params and with over the spec's bound together",
			mutate: func(p map[string]any) {
				p["spec"].(map[string]any)["params"] = manyValues("p", 3)
				step(p, 0)["with"] = manyValues("w", 1)
			},
			wantErr: "at most 262144 characters together",
		},
		{
			name: "the steps' with over the spec's bound together",
			mutate: func(p map[string]any) {
				for i := range 2 {
					step(p, i)["with"] = manyValues(fmt.Sprint("w", i), 2)
				}
			},
			wantErr: "at most 262144 characters together",
		},
		{
			name: "too many steps",
			mutate: func(p map[string]any) {
				var many []any
				for i := range 51 {
					many = append(many, map[string]any{"name": "s" + strings.Repeat("x", i), "executor": "noop"})
				}
				p["spec"].(map[string]any)["steps"] = many
			},
			wantErr: "spec.steps: Too many",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPipeline()
			require.Empty(t, v.validate(t, p), "the base pipeline must be valid")
			tt.mutate(p)
			errs := v.validate(t, p)
			require.NotEmpty(t, errs, "expected the pipeline to be rejected")
			assert.Contains(t, errs.ToAggregate().Error(), tt.wantErr)
		})
	}
}

// manyValues is n values of the largest size, their names starting with prefix.
func manyValues(prefix string, n int) map[string]any {
	values := map[string]any{}
	for i := range n {
		values[fmt.Sprint(prefix, i)] = strings.Repeat("v", v1alpha1.MaxParamValueLength)
	}
	return values
}

// TestValidationAcceptsValuesUpToTheSpecsBound: params and steps' with of
// MaxSpecValuesLength characters together are admitted, an empty map of params too.
func TestValidationAcceptsValuesUpToTheSpecsBound(t *testing.T) {
	v := newPipelineValidator(t)
	p := validPipeline()
	params := manyValues("p", 2)
	params["p2"] = strings.Repeat("v", v1alpha1.MaxParamValueLength-len("p0")*3-len("w0"))
	p["spec"].(map[string]any)["params"] = params
	step(p, 0)["with"] = manyValues("w", 1)
	assert.Empty(t, v.validate(t, p))

	p = validPipeline()
	p["spec"].(map[string]any)["params"] = map[string]any{}
	assert.Empty(t, v.validate(t, p))
}

func TestValidationAcceptsFiftyUniqueLongNames(t *testing.T) {
	v := newPipelineValidator(t)
	p := validPipeline()
	var many []any
	for i := range 50 {
		name := strings.Repeat("a", 60) + string(rune('a'+i/26)) + string(rune('a'+i%26))
		many = append(many, map[string]any{"name": name, "executor": "noop"})
	}
	p["spec"].(map[string]any)["steps"] = many
	assert.Empty(t, v.validate(t, p))
}

func TestExamplesAreValid(t *testing.T) {
	validators := map[string]*pipelineValidator{
		"Pipeline":         newPipelineValidator(t),
		"PipelineTemplate": newValidator(t, "stepwise.dev_pipelinetemplates.yaml"),
		"PipelineTrigger":  newValidator(t, "stepwise.dev_pipelinetriggers.yaml"),
	}
	files, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	seen := map[string]int{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		decoder := yaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096)
		for {
			var obj map[string]any
			err := decoder.Decode(&obj)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, file)
			kind, _ := obj["kind"].(string)
			v, ok := validators[kind]
			if obj == nil || !ok {
				continue
			}
			seen[kind]++
			t.Run(filepath.Base(file)+"/"+kind+"/"+obj["metadata"].(map[string]any)["name"].(string), func(t *testing.T) {
				assert.Empty(t, v.validate(t, obj))
			})
		}
	}
	for kind := range validators {
		assert.Positive(t, seen[kind], "no %s found in examples/", kind)
	}
}

// TestSchemaLimitsAreTheAPIConstants keeps the limits that kubebuilder markers must spell
// as literals equal to the constants the engine enforces and clients read.
func TestSchemaLimitsAreTheAPIConstants(t *testing.T) {
	root := loadCRD(t).Spec.Validation.OpenAPIV3Schema
	prop := func(path ...string) apiextensions.JSONSchemaProps {
		t.Helper()
		s := *root
		for _, p := range path {
			if p == "[]" {
				require.NotNil(t, s.Items, "%v", path)
				s = *s.Items.Schema
				continue
			}
			next, ok := s.Properties[p]
			require.True(t, ok, "no property %s in %v", p, path)
			s = next
		}
		return s
	}
	limit := func(v *int64) int64 {
		t.Helper()
		require.NotNil(t, v)
		return *v
	}
	assert.Equal(t, int64(v1alpha1.MaxSteps), limit(prop("spec", "steps").MaxItems), "spec.steps")
	assert.Equal(t, int64(v1alpha1.MaxSteps), limit(prop("status", "steps").MaxItems), "status.steps")
	assert.Equal(t, int64(v1alpha1.MaxStepMessageLength), limit(prop("status", "steps", "[]", "message").MaxLength), "a step's message")
	assert.Equal(t, int64(contract.MaxOutputs), limit(prop("status", "steps", "[]", "outputs").MaxProperties), "a step's outputs")
	assert.Equal(t, int64(contract.MaxStateEntries), limit(prop("status", "steps", "[]", "hookState").MaxProperties), "a step's hook state")
	assert.Equal(t, int64(contract.MaxCreatedEntries), limit(prop("status", "steps", "[]", "created").MaxProperties), "a step's created record")
	assert.Equal(t, int64(v1alpha1.MaxStepBlockers), limit(prop("status", "steps", "[]", "blockedBy").MaxItems), "a step's blockers")
	specBound := fmt.Sprintf(") <= %d", v1alpha1.MaxSpecValuesLength)
	assert.True(t, slices.ContainsFunc(prop("spec").XValidations, func(r apiextensions.ValidationRule) bool {
		return strings.HasSuffix(r.Rule, specBound)
	}), "the spec's values are bounded by MaxSpecValuesLength")
	paramRule := fmt.Sprintf("self.all(k, size(k) <= %d && size(self[k]) <= %d)", v1alpha1.MaxParamNameLength, v1alpha1.MaxParamValueLength)
	for _, path := range [][]string{{"spec", "params"}, {"spec", "steps", "[]", "with"}} {
		rules := prop(path...).XValidations
		require.Len(t, rules, 1, "%v", path)
		assert.Equal(t, paramRule, rules[0].Rule, "%v", path)
	}
}

// TestEveryCRDIsValid checks the structure and the cost of the CEL rules of every CRD here:
// approvals, pipelines, templates, triggers, node budgets and drain rules.
func TestEveryCRDIsValid(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	require.NoError(t, err)
	require.Len(t, files, 6)
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			var v1 apiextensionsv1.CustomResourceDefinition
			require.NoError(t, sigsyaml.UnmarshalStrict(data, &v1))
			var crd apiextensions.CustomResourceDefinition
			require.NoError(t, apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&v1, &crd, nil))
			crd.Status.StoredVersions = []string{"v1alpha1"}
			assert.Empty(t, crdvalidation.ValidateCustomResourceDefinition(context.Background(), &crd).ToAggregate())
			assert.Equal(t, []string{"stepwise"}, crd.Spec.Names.Categories)
		})
	}
}

func TestValidationOfTriggerFieldsTaintsBudgetsAndGates(t *testing.T) {
	v := newValidator(t, "stepwise.dev_pipelinetriggers.yaml")
	trigger := func(spec map[string]any) map[string]any {
		base := map[string]any{
			"resource":    map[string]any{"apiVersion": "v1", "kind": "Node"},
			"templateRef": map[string]any{"name": "retire"},
		}
		maps.Copy(base, spec)
		return map[string]any{
			"apiVersion": "stepwise.dev/v1alpha1", "kind": "PipelineTrigger",
			"metadata": map[string]any{"name": "retire", "namespace": "ns"},
			"spec":     base,
		}
	}
	field := func(op string, values ...any) map[string]any {
		r := map[string]any{"field": "spec.unschedulable", "operator": op}
		if values != nil {
			r["values"] = values
		}
		return r
	}
	gate := func(name string, fields map[string]any) map[string]any {
		g := map[string]any{"name": name}
		maps.Copy(g, fields)
		return g
	}
	objectsGate := map[string]any{"resource": map[string]any{"apiVersion": "v1", "kind": "Node"}, "condition": "objects.size() > 0"}
	promGate := map[string]any{"url": "http://prometheus:9090", "query": `ALERTS{alertstate="firing"}`}
	tests := []struct {
		name    string
		spec    map[string]any
		wantErr string
	}{
		{name: "In with values", spec: map[string]any{"matchFields": []any{field("In", "true")}}},
		{name: "Exists", spec: map[string]any{"matchFields": []any{field("Exists"), field("DoesNotExist")}}},
		{name: "In without values", spec: map[string]any{"matchFields": []any{field("In")}},
			wantErr: "values are required for In and NotIn"},
		{name: "Exists with values", spec: map[string]any{"matchFields": []any{field("Exists", "x")}},
			wantErr: "not allowed for Exists and DoesNotExist"},
		{name: "unknown operator", spec: map[string]any{"matchFields": []any{field("Gt", "1")}},
			wantErr: `Unsupported value: "Gt"`},
		{name: "taintWaiting on Nodes", spec: map[string]any{"taintWaiting": true}},
		{name: "taintWaiting on another kind", spec: map[string]any{"taintWaiting": true,
			"resource": map[string]any{"apiVersion": "demo.stepwise.dev/v1alpha1", "kind": "WebApp"}},
			wantErr: "taintWaiting is for triggers on Nodes"},
		{name: "taintWaiting false on another kind", spec: map[string]any{"taintWaiting": false,
			"resource": map[string]any{"apiVersion": "demo.stepwise.dev/v1alpha1", "kind": "WebApp"}}},
		{name: "nodeBudgetRef on Nodes", spec: map[string]any{"nodeBudgetRef": map[string]any{"name": "fleet"}}},
		{name: "nodeBudgetRef on another kind", spec: map[string]any{"nodeBudgetRef": map[string]any{"name": "fleet"},
			"resource": map[string]any{"apiVersion": "demo.stepwise.dev/v1alpha1", "kind": "WebApp"}},
			wantErr: "nodeBudgetRef is for triggers on Nodes"},
		{name: "an objects gate", spec: map[string]any{"gates": []any{gate("ok", map[string]any{"objects": objectsGate, "deadline": "1h"})}}},
		{name: "a gate over Secrets", spec: map[string]any{"gates": []any{gate("peek", map[string]any{"objects": map[string]any{
			"resource": map[string]any{"apiVersion": "v1", "kind": "Secret"}, "condition": "objects.size() > 0"}})}},
			wantErr: "a gate may not read Secrets"},
		{name: "a prometheus gate", spec: map[string]any{"gates": []any{gate("ok", map[string]any{"prometheus": promGate})}}},
		{name: "a gate of both kinds", spec: map[string]any{"gates": []any{gate("both", map[string]any{"objects": objectsGate, "prometheus": promGate})}},
			wantErr: "a gate has exactly one of objects and prometheus"},
		{name: "a gate of neither", spec: map[string]any{"gates": []any{gate("none", nil)}},
			wantErr: "a gate has exactly one of objects and prometheus"},
		{name: "a deadline past a week", spec: map[string]any{"gates": []any{gate("ok", map[string]any{"prometheus": promGate, "deadline": "169h"})}},
			wantErr: "deadline must be more than 0s and at most 168h"},
		{name: "a URL that is not http", spec: map[string]any{"gates": []any{gate("ok", map[string]any{"prometheus": map[string]any{"url": "file:///etc/passwd", "query": "up"}})}},
			wantErr: "spec.gates[0].prometheus.url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := v.validate(t, trigger(tt.spec))
			if tt.wantErr == "" {
				assert.Empty(t, errs)
				return
			}
			assert.Contains(t, errs.ToAggregate().Error(), tt.wantErr)
		})
	}
}

// TestTemplateValuesAreBoundedTogether: a template's parameter defaults and its steps'
// with are bounded together, as a pipeline's params and with are.
func TestTemplateValuesAreBoundedTogether(t *testing.T) {
	v := newValidator(t, "stepwise.dev_pipelinetemplates.yaml")
	template := func(defaults, withs int) map[string]any {
		var params []any
		for i := range defaults {
			params = append(params, map[string]any{"name": fmt.Sprint("p", i), "default": strings.Repeat("v", v1alpha1.MaxParamValueLength)})
		}
		spec := map[string]any{"steps": []any{map[string]any{"name": "a", "executor": "test.noop", "with": manyValues("w", withs)}}}
		if params != nil {
			spec["params"] = params
		}
		return map[string]any{"apiVersion": "stepwise.dev/v1alpha1", "kind": "PipelineTemplate",
			"metadata": map[string]any{"name": "t", "namespace": "ns"}, "spec": spec}
	}
	assert.Empty(t, v.validate(t, template(2, 1)), "three values of 64 KiB")
	errs := v.validate(t, template(3, 1))
	require.NotEmpty(t, errs, "four values of 64 KiB and their names")
	assert.Contains(t, errs.ToAggregate().Error(), "at most 262144 characters together")
	errs = v.validate(t, template(0, 5))
	require.NotEmpty(t, errs, "five step values of 64 KiB")
}
