package objectref

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

func TestParsePath(t *testing.T) {
	tests := []struct {
		path    string
		want    []string
		wantErr string
	}{
		{path: "metadata.name", want: []string{"metadata", "name"}},
		{path: "spec.providerID", want: []string{"spec", "providerID"}},
		{path: "status.x.y", want: []string{"status", "x", "y"}},
		{path: "metadata.labels['stepwise.dev/pool']", want: []string{"metadata", "labels", "stepwise.dev/pool"}},
		{path: `metadata.labels["stepwise.dev/pool"]`, want: []string{"metadata", "labels", "stepwise.dev/pool"}},
		{path: `metadata.annotations['a"b']`, want: []string{"metadata", "annotations", `a"b`}},
		{path: `metadata.annotations["it's"]`, want: []string{"metadata", "annotations", "it's"}},
		{path: "metadata.annotations['a)b.c[d]']", want: []string{"metadata", "annotations", "a)b.c[d]"}},
		{path: "spec['template'].spec", want: []string{"spec", "template", "spec"}},
		{path: "data['x']['y']", want: []string{"data", "x", "y"}},
		{path: "spec.under_score-dash9", want: []string{"spec", "under_score-dash9"}},
		{path: "", wantErr: "empty"},
		{path: ".name", wantErr: "field name expected at 0"},
		{path: "metadata.", wantErr: "field name expected at 9"},
		{path: "metadata..name", wantErr: "field name expected at 9"},
		{path: "metadata.labels['pool'", wantErr: "] expected at 22"},
		{path: "metadata.labels['pool", wantErr: "unterminated key"},
		{path: "metadata.labels[pool]", wantErr: "quote expected at 16"},
		{path: "metadata.labels['']", wantErr: "empty key"},
		{path: "metadata.name x", wantErr: `unexpected " " at 13`},
		{path: "spec.items[0]", wantErr: "quote expected at 11"},
		{path: "['metadata']", wantErr: "field name expected at 0"},
		{path: "metadata.na$me", wantErr: `unexpected "$" at 11`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, err := ParsePath(tt.path)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseParamValue(t *testing.T) {
	tests := []struct {
		name      string
		value     string
		wantParts []string // literal text, or {PATH|SEPARATED|BY|BARS} for a reference
		wantErr   string
	}{
		{name: "literal", value: "plain", wantParts: []string{"plain"}},
		{name: "empty", value: "", wantParts: nil},
		{name: "one reference", value: "$(object.metadata.name)", wantParts: []string{"{metadata|name}"}},
		{name: "references and text", value: "node=$(object.metadata.name), pool=$(object.metadata.labels['stepwise.dev/pool'])!",
			wantParts: []string{"node=", "{metadata|name}", ", pool=", "{metadata|labels|stepwise.dev/pool}", "!"}},
		{name: "a close paren inside a key", value: "$(object.metadata.annotations['a)b'])x",
			wantParts: []string{"{metadata|annotations|a)b}", "x"}},
		{name: "other references are left to the engine", value: "$(params.x) $(steps.a.outputs.b)",
			wantParts: []string{"$(params.x) $(steps.a.outputs.b)"}},
		{name: "a dollar alone", value: "cost: $5 (or $(objects)", wantParts: []string{"cost: $5 (or $(objects)"}},
		{name: "unterminated", value: "$(object.metadata.name", wantErr: "$(object.metadata.name: ) expected at 13"},
		{name: "bad path", value: "a $(object.metadata..name)", wantErr: "$(object.metadata..name): field name expected at 9"},
		{name: "bad path with text", value: "$(object.spec.x y)", wantErr: `unexpected " " at 6`},
		{name: "nothing after object", value: "$(object.)", wantErr: "field name expected at 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseParamValue(tt.value)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			var parts []string
			for _, p := range got.parts {
				if p.ref != nil {
					parts = append(parts, "{"+strings.Join(p.ref.path, "|")+"}")
				} else {
					parts = append(parts, p.literal)
				}
			}
			assert.Equal(t, tt.wantParts, parts)
		})
	}
}

func TestParseParamsNamesTheParameter(t *testing.T) {
	_, err := Parse(map[string]string{"ok": "$(object.metadata.name)", "bad": "$(object.spec.)"})
	require.Error(t, err)
	assert.Equal(t, `params.bad: $(object.spec.): field name expected at 5`, err.Error())

	parsed, err := Parse(nil)
	require.NoError(t, err)
	assert.Empty(t, parsed)
}

func node() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{
			"name":   "node-1",
			"labels": map[string]any{"stepwise.dev/pool": "blue", "empty": ""},
		},
		"spec": map[string]any{
			"providerID":    "vsphere://42",
			"unschedulable": true,
			"taints":        []any{map[string]any{"key": "k"}},
		},
		"status": map[string]any{
			"capacity": map[string]any{"pods": int64(110), "ratio": 0.5, "big": 1e21},
			"nothing":  nil,
		},
	}}
}

func TestBindParams(t *testing.T) {
	tests := []struct {
		name    string
		params  map[string]string
		want    map[string]string
		wantErr string
	}{
		{name: "no params", params: nil, want: nil},
		{name: "strings", params: map[string]string{
			"node": "$(object.metadata.name)", "pool": "$(object.metadata.labels['stepwise.dev/pool'])",
			"id": "id=$(object.spec.providerID)", "fixed": "literal", "empty": "$(object.metadata.labels[\"empty\"])",
		}, want: map[string]string{"node": "node-1", "pool": "blue", "id": "id=vsphere://42", "fixed": "literal", "empty": ""}},
		{name: "numbers and bools", params: map[string]string{
			"pods": "$(object.status.capacity.pods)", "ratio": "$(object.status.capacity.ratio)",
			"big": "$(object.status.capacity.big)", "cordoned": "$(object.spec.unschedulable)",
		}, want: map[string]string{"pods": "110", "ratio": "0.5", "big": "1e+21", "cordoned": "true"}},
		{name: "missing field", params: map[string]string{"id": "$(object.spec.missing)"},
			wantErr: "params.id: $(object.spec.missing): the object has no field spec.missing"},
		{name: "missing label", params: map[string]string{"a": "$(object.metadata.labels['absent'])"},
			wantErr: "params.a: $(object.metadata.labels['absent']): the object has no field metadata.labels['absent']"},
		{name: "through a string", params: map[string]string{"a": "$(object.metadata.name.first)"},
			wantErr: "params.a: $(object.metadata.name.first): the object has no field metadata.name.first"},
		{name: "a map", params: map[string]string{"a": "$(object.metadata.labels)"},
			wantErr: "params.a: $(object.metadata.labels): metadata.labels is an object, not a string, number or bool"},
		{name: "a list", params: map[string]string{"a": "$(object.spec.taints)"},
			wantErr: "is a list, not a string, number or bool"},
		{name: "null", params: map[string]string{"a": "$(object.status.nothing)"},
			wantErr: "is null, not a string, number or bool"},
		{name: "the first failing parameter in name order", params: map[string]string{"b": "$(object.spec.b)", "a": "$(object.spec.a)"},
			wantErr: "params.a:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parsed, err := Parse(tt.params)
			require.NoError(t, err)
			got, err := parsed.Bind(node())
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestBindParamsBoundsTheValue(t *testing.T) {
	obj := node()
	obj.Object["spec"].(map[string]any)["providerID"] = strings.Repeat("x", v1alpha1.MaxParamValueLength/2+1)
	parsed, err := Parse(map[string]string{"twice": "$(object.spec.providerID)$(object.spec.providerID)"})
	require.NoError(t, err)
	_, err = parsed.Bind(obj)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "params.twice: resolves to more than 65536 characters")
}
