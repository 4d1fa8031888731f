package crd

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// crdFiles are the generated CRDs of every kind a tenant may create.
var crdFiles = []string{"stepwise.dev_pipelines.yaml", "stepwise.dev_pipelinetemplates.yaml", "stepwise.dev_pipelinetriggers.yaml"}

// TestEveryFieldIsBounded walks the generated schemas: whatever the API server admits must
// be something the operator can decode and handle, so every string has a length (or an
// enum, or a format the API server checks), every list and map a size, every integer a
// range that fits its Go type, and every field whose Go type parses text (a duration) a
// CEL rule that parses it as the operator will. Status is written by the operator only, but
// an operator of another version writes it too: it is held to the same rule.
func TestEveryFieldIsBounded(t *testing.T) {
	for _, file := range crdFiles {
		t.Run(file, func(t *testing.T) {
			crd := loadCRDFile(t, file)
			schema := crd.Spec.Validation.OpenAPIV3Schema
			var problems []string
			for _, part := range []string{"spec", "status"} {
				prop, ok := schema.Properties[part]
				if !ok {
					continue
				}
				problems = append(problems, unbounded("."+part, &prop)...)
			}
			assert.Empty(t, problems, "fields the schema leaves unbounded")
		})
	}
}

// unbounded lists the paths under s that have no bound.
func unbounded(path string, s *apiextensions.JSONSchemaProps) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, path+": "+fmt.Sprintf(format, args...)) }
	switch s.Type {
	case "string":
		switch {
		case len(s.Enum) > 0:
		case s.Format == "date-time":
			// The API server parses it as RFC 3339, as metav1.Time does.
		case s.MaxLength == nil:
			bad("string without maxLength")
		}
		if isDuration(path) && !hasDurationRule(s) {
			bad("duration without a CEL rule that parses it and bounds it")
		}
	case "integer":
		if s.Minimum == nil || s.Maximum == nil {
			// metav1's generation and counts are int64 written by the API server or
			// the operator; a tenant's integers are int32 with a range.
			if s.Format != "int64" || s.Minimum == nil {
				bad("integer without minimum and maximum")
			}
			break
		}
		if s.Format == "int32" && (*s.Minimum < math.MinInt32 || *s.Maximum > math.MaxInt32) {
			bad("int32 range [%v, %v] does not fit int32", *s.Minimum, *s.Maximum)
		}
	case "array":
		if s.MaxItems == nil {
			bad("list without maxItems")
		}
		if s.Items != nil && s.Items.Schema != nil {
			out = append(out, unbounded(path+"[]", s.Items.Schema)...)
		}
	case "object":
		if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
			bad("object that keeps unknown fields")
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			if s.MaxProperties == nil {
				bad("map without maxProperties")
			}
			values := *s.AdditionalProperties.Schema
			if values.Type == "string" && values.MaxLength == nil && boundsMapValues(s) {
				// controller-gen has no marker for a map value's length: the map's CEL
				// rule bounds every key and value.
				values.MaxLength = ptr.To[int64](0)
			}
			out = append(out, unbounded(path+"{}", &values)...)
		}
		names := make([]string, 0, len(s.Properties))
		for name := range s.Properties {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			prop := s.Properties[name]
			out = append(out, unbounded(path+"."+name, &prop)...)
		}
	case "boolean":
	default:
		if s.XIntOrString {
			bad("int-or-string")
		} else {
			bad("field of type %q", s.Type)
		}
	}
	return out
}

// durationFields are the names of the fields whose Go type is a metav1.Duration.
var durationFields = []string{".timeout", ".initial", ".max", ".duration"}

func isDuration(path string) bool {
	return slices.ContainsFunc(durationFields, func(f string) bool { return strings.HasSuffix(path, f) })
}

// boundsMapValues: a CEL rule on the map bounds the size of every key and value.
func boundsMapValues(s *apiextensions.JSONSchemaProps) bool {
	return slices.ContainsFunc(s.XValidations, func(r apiextensions.ValidationRule) bool {
		return strings.Contains(r.Rule, "self.all(k, size(k) <=") && strings.Contains(r.Rule, "size(self[k]) <=")
	})
}

// hasDurationRule: a CEL rule that parses the value as a duration and compares it.
func hasDurationRule(s *apiextensions.JSONSchemaProps) bool {
	return slices.ContainsFunc(s.XValidations, func(r apiextensions.ValidationRule) bool {
		return strings.Contains(r.Rule, "duration(self)") && strings.Contains(r.Rule, "<=")
	})
}

// TestDurationRulesSpellTheBounds: the CEL rules' maxima are the constants the engine
// honours for objects stored before the rules.
func TestDurationRulesSpellTheBounds(t *testing.T) {
	maxOf := func(t *testing.T, file string, path ...string) time.Duration {
		t.Helper()
		s := loadCRDFile(t, file).Spec.Validation.OpenAPIV3Schema
		for _, p := range path {
			if p == "[]" {
				s = s.Items.Schema
				continue
			}
			prop, ok := s.Properties[p]
			require.True(t, ok, "%v: no %s", path, p)
			s = &prop
		}
		for _, r := range s.XValidations {
			if m := ruleMaxRE.FindStringSubmatch(r.Rule); m != nil {
				d, err := time.ParseDuration(m[1])
				require.NoError(t, err)
				return d
			}
		}
		t.Fatalf("%v has no rule with a maximum duration", path)
		return 0
	}
	const pipelines, templates, triggers = "stepwise.dev_pipelines.yaml", "stepwise.dev_pipelinetemplates.yaml", "stepwise.dev_pipelinetriggers.yaml"
	for _, file := range []string{pipelines, templates} {
		assert.Equal(t, v1alpha1.MaxStepTimeout, maxOf(t, file, "spec", "steps", "[]", "timeout"), file)
		assert.Equal(t, v1alpha1.MaxBackoff, maxOf(t, file, "spec", "steps", "[]", "retry", "backoff", "initial"), file)
		assert.Equal(t, v1alpha1.MaxBackoff, maxOf(t, file, "spec", "steps", "[]", "retry", "backoff", "max"), file)
	}
	assert.Equal(t, v1alpha1.MaxWindowDuration, maxOf(t, triggers, "spec", "maintenanceWindow", "duration"))
}

var ruleMaxRE = regexp.MustCompile(`duration\(self\) <= duration\('([^']+)'\)`)

// TestAdmissionRefusesWhatTheOperatorCannotHandle: values that stopped the operator for
// every tenant (a duration metav1.Duration cannot decode, a schedule the cron parser
// panics on) are refused by the schema; their neighbours that work are admitted.
func TestAdmissionRefusesWhatTheOperatorCannotHandle(t *testing.T) {
	pipelines := newPipelineValidator(t)
	templates := newValidator(t, "stepwise.dev_pipelinetemplates.yaml")
	triggers := newValidator(t, "stepwise.dev_pipelinetriggers.yaml")
	template := func() map[string]any {
		return map[string]any{
			"apiVersion": "stepwise.dev/v1alpha1", "kind": "PipelineTemplate",
			"metadata": map[string]any{"name": "t", "namespace": "ns"},
			"spec":     map[string]any{"steps": []any{map[string]any{"name": "a", "executor": "test.noop"}}},
		}
	}
	trigger := func() map[string]any {
		return map[string]any{
			"apiVersion": "stepwise.dev/v1alpha1", "kind": "PipelineTrigger",
			"metadata": map[string]any{"name": "t", "namespace": "ns"},
			"spec": map[string]any{
				"resource":          map[string]any{"apiVersion": "v1", "kind": "Node"},
				"templateRef":       map[string]any{"name": "retire"},
				"maintenanceWindow": map[string]any{"schedule": "0 2 * * 1-5", "duration": "2h"},
			},
		}
	}
	spec := func(o map[string]any) map[string]any { return o["spec"].(map[string]any) }
	window := func(o map[string]any) map[string]any { return spec(o)["maintenanceWindow"].(map[string]any) }
	firstStep := func(o map[string]any) map[string]any { return spec(o)["steps"].([]any)[0].(map[string]any) }
	backoff := func(o map[string]any) map[string]any {
		return step(o, 1)["retry"].(map[string]any)["backoff"].(map[string]any)
	}
	tests := []struct {
		name    string
		v       *pipelineValidator
		obj     func() map[string]any
		mutate  func(o map[string]any)
		wantErr string // "" admits
	}{
		{"timeout that overflows", pipelines, validPipeline, func(o map[string]any) { step(o, 1)["timeout"] = "9999999999h" }, "timeout must be more than 0s and at most 168h"},
		{"timeout past the bound", pipelines, validPipeline, func(o map[string]any) { step(o, 1)["timeout"] = "169h" }, "at most 168h"},
		{"timeout at the bound", pipelines, validPipeline, func(o map[string]any) { step(o, 1)["timeout"] = "168h" }, ""},
		{"timeout of zero", pipelines, validPipeline, func(o map[string]any) { step(o, 1)["timeout"] = "0s" }, "more than 0s"},
		{"timeout in two units", pipelines, validPipeline, func(o map[string]any) { step(o, 1)["timeout"] = "1h30m" }, ""},
		{"timeout in microseconds", pipelines, validPipeline, func(o map[string]any) { step(o, 1)["timeout"] = "50000µs" }, ""},
		{"timeout with a number of six digits", pipelines, validPipeline, func(o map[string]any) { step(o, 1)["timeout"] = "100000s" }, "spec.steps[1].timeout"},
		{"timeout too long a text", pipelines, validPipeline, func(o map[string]any) { step(o, 1)["timeout"] = strings.Repeat("1", 40) + "ns" }, "Too long"},
		{"backoff initial that overflows", pipelines, validPipeline, func(o map[string]any) { backoff(o)["initial"] = "9999999999h" }, "backoff durations are at most 24h"},
		{"backoff max past the bound", pipelines, validPipeline, func(o map[string]any) { backoff(o)["max"] = "25h" }, "at most 24h"},
		{"template step timeout that overflows", templates, template, func(o map[string]any) { firstStep(o)["timeout"] = "9999999999h" }, "at most 168h"},
		{"template step backoff that overflows", templates, template, func(o map[string]any) {
			firstStep(o)["retry"] = map[string]any{"limit": int64(1), "backoff": map[string]any{"max": "9999999999h"}}
		}, "at most 24h"},
		{"window", triggers, trigger, func(map[string]any) {}, ""},
		{"window duration that overflows", triggers, trigger, func(o map[string]any) { window(o)["duration"] = "9999999999h" }, "duration must be more than 0s and at most 168h"},
		{"window of zero", triggers, trigger, func(o map[string]any) { window(o)["duration"] = "0s" }, "more than 0s"},
		{"schedule with TZ=", triggers, trigger, func(o map[string]any) { window(o)["schedule"] = "TZ=UTC" }, "spec.maintenanceWindow.schedule"},
		{"schedule with CRON_TZ= and fields", triggers, trigger, func(o map[string]any) { window(o)["schedule"] = "CRON_TZ=Europe/Paris 0 3 * * *" }, "spec.maintenanceWindow.schedule"},
		{"schedule of six fields", triggers, trigger, func(o map[string]any) { window(o)["schedule"] = "0 0 3 * * *" }, "spec.maintenanceWindow.schedule"},
		{"schedule with a newline", triggers, trigger, func(o map[string]any) { window(o)["schedule"] = "0 3 * * *\n0 4 * * *" }, "spec.maintenanceWindow.schedule"},
		{"schedule @daily", triggers, trigger, func(o map[string]any) { window(o)["schedule"] = "@daily" }, ""},
		{"schedule @every", triggers, trigger, func(o map[string]any) { window(o)["schedule"] = "@every 6h" }, ""},
		{"schedule with names", triggers, trigger, func(o map[string]any) { window(o)["schedule"] = "30 2 * JAN-MAR MON-FRI" }, ""},
		{"time zone", triggers, trigger, func(o map[string]any) { window(o)["timeZone"] = "America/Argentina/Buenos_Aires" }, ""},
		{"time zone of the operator's machine", triggers, trigger, func(o map[string]any) { window(o)["timeZone"] = "Local" }, "Local, the operator's own zone, is not one"},
		{"time zone out of the zoneinfo tree", triggers, trigger, func(o map[string]any) { window(o)["timeZone"] = "../../etc/passwd" }, "spec.maintenanceWindow.timeZone"},
		{"service account that is no name", triggers, trigger, func(o map[string]any) { spec(o)["serviceAccountName"] = "Not A Name" }, "spec.serviceAccountName"},
		{"selector", triggers, trigger, func(o map[string]any) {
			spec(o)["selector"] = map[string]any{"matchLabels": map[string]any{"a": "b"},
				"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"x"}}}}
		}, ""},
		{"selector with an unknown operator", triggers, trigger, func(o map[string]any) {
			spec(o)["selector"] = map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "Gt"}}}
		}, `Unsupported value: "Gt"`},
		{"selector with too many expressions", triggers, trigger, func(o map[string]any) {
			var exprs []any
			for range 33 {
				exprs = append(exprs, map[string]any{"key": "pool", "operator": "Exists"})
			}
			spec(o)["selector"] = map[string]any{"matchExpressions": exprs}
		}, "Too many"},
		{"selector with a long label value", triggers, trigger, func(o map[string]any) {
			spec(o)["selector"] = map[string]any{"matchLabels": map[string]any{"a": strings.Repeat("b", 64)}}
		}, "label keys are at most 317 characters and values at most 63"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := tt.obj()
			tt.mutate(obj)
			errs := tt.v.validate(t, obj)
			if tt.wantErr == "" {
				assert.Empty(t, errs)
				return
			}
			require.NotEmpty(t, errs)
			assert.Contains(t, errs.ToAggregate().Error(), tt.wantErr)
		})
	}
}
