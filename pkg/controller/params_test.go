package controller

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// hostileParams is a spec of about 130 KiB whose references expand a thousandfold: the
// review turned such a spec into a 625 MiB parameter and 4 GiB of allocations in one sync.
func hostileParams() (params, with map[string]string) {
	params = map[string]string{"x": strings.Repeat("A", 64<<10)}
	with = map[string]string{"blob": strings.Repeat("$(params.x)", 5900)}
	return params, with
}

// TestParameterExpansionIsBounded: what substitution may produce is bounded; past the
// bound the step fails at once with InvalidParameter, and no hook runs.
func TestParameterExpansionIsBounded(t *testing.T) {
	p := newPipeline(v1alpha1.Step{Name: "uses", Executor: "test.record"})
	p.Spec.Params, p.Spec.Steps[0].With = hostileParams()
	f := newFixture(t, p)
	f.syncUntilIdle("p")

	s := stepStatus(f.get("p"), "uses")
	assert.Equal(t, v1alpha1.StepFailed, s.Phase)
	assert.Equal(t, contract.ReasonInvalidParameter, readyCondition(s.Conditions).Reason)
	assert.Contains(t, s.Message, `parameter "blob"`)
	assert.Contains(t, s.Message, fmt.Sprintf("more than %d bytes", v1alpha1.MaxResolvedParamsSize))
	assert.Empty(t, f.exec.Calls(), "no hook runs")
}

func TestResolveWithinTheBound(t *testing.T) {
	tests := []struct {
		name    string
		with    map[string]string
		want    map[string]string
		wantErr string
	}{
		{name: "many references that fit", with: map[string]string{"a": strings.Repeat("$(params.small)", 1000)},
			want: map[string]string{"a": strings.Repeat("abc", 1000)}},
		{name: "one value over the bound", with: map[string]string{"a": strings.Repeat("$(params.big)", 5)},
			wantErr: `parameter "a": its references expand to more than`},
		{name: "values that together pass the bound", with: map[string]string{"a": "$(params.big)$(params.big)", "b": "$(params.big)$(params.big)"},
			wantErr: `parameter "b": its references expand to more than`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &resolver{params: map[string]string{"small": "abc", "big": strings.Repeat("B", v1alpha1.MaxResolvedParamsSize/4)}}
			got, err := r.resolveParams(tt.with, nil)
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

// BenchmarkResolveHostileParameters measures what refusing the hostile spec costs: the
// bytes per op are the allocation bound of one step's substitution.
func BenchmarkResolveHostileParameters(b *testing.B) {
	params, with := hostileParams()
	b.ReportAllocs()
	for b.Loop() {
		r := &resolver{params: params}
		if _, err := r.resolveParams(with, nil); err == nil {
			b.Fatal("the hostile parameters resolved")
		}
	}
}

// TestYAMLParametersTakeReferencesAsValues: a reference in a YAML parameter (k8s.apply's
// manifest) becomes one scalar where it stands. Substituted as text, an output such as
// "x\n---\nkind: Secret" added a document to what the step applies.
func TestYAMLParametersTakeReferencesAsValues(t *testing.T) {
	injected := "web\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: stolen}"
	manifest := `# the web app
apiVersion: apps/v1
kind: Deployment
metadata:
  name: $(params.name)
  labels: {app: "$(params.name)-x", plain: $(params.name)}
spec:
  replicas: $(params.replicas)
  paused: $(params.paused)
  template:
    spec:
      containers:
      - name: web
        args: ["--mode=$(params.mode)"]
        command:
        - $(params.mode)
---
apiVersion: v1
kind: Service
metadata:
  name: $(params.name)
`
	r := &resolver{params: map[string]string{"name": injected, "replicas": "3", "paused": "false", "mode": "a: b"}}
	got, err := r.resolveParams(map[string]string{"manifest": manifest, "note": "$(params.name)"},
		map[string]contract.ParamType{"manifest": contract.ParamYAML})
	require.NoError(t, err)
	assert.Equal(t, injected, got["note"], "a string parameter is substituted as text")

	var docs []map[string]any
	dec := yaml.NewDecoder(strings.NewReader(got["manifest"]))
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
		docs = append(docs, doc)
	}
	require.Len(t, docs, 2, "no document added:\n%s", got["manifest"])
	meta := docs[0]["metadata"].(map[string]any)
	assert.Equal(t, injected, meta["name"])
	assert.Equal(t, map[string]any{"app": injected + "-x", "plain": injected}, meta["labels"])
	spec := docs[0]["spec"].(map[string]any)
	assert.Equal(t, 3, spec["replicas"], "a whole-value reference to a number stays a number")
	assert.Equal(t, false, spec["paused"])
	container := spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	assert.Equal(t, []any{"--mode=a: b"}, container["args"])
	assert.Equal(t, []any{"a: b"}, container["command"])
	assert.Equal(t, injected, docs[1]["metadata"].(map[string]any)["name"])
	assert.Contains(t, got["manifest"], "# the web app", "comments are kept")
}

func TestYAMLParameterErrors(t *testing.T) {
	r := &resolver{params: map[string]string{"big": strings.Repeat("B", v1alpha1.MaxResolvedParamsSize/2)}}
	types := map[string]contract.ParamType{"manifest": contract.ParamYAML}
	tests := []struct {
		name, manifest, wantErr string
	}{
		{name: "not YAML", manifest: "a: [$(params.big)", wantErr: `parameter "manifest": not YAML`},
		{name: "unknown reference", manifest: "a: $(params.nope)", wantErr: `the pipeline has no parameter "nope"`},
		{name: "over the bound", manifest: "a: $(params.big)\nb: $(params.big)\nc: $(params.big)", wantErr: "expand to more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.resolveParams(map[string]string{"manifest": tt.manifest}, types)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

// TestEngineSubstitutesIntoTheValuesOfYAMLParameters: the engine reads the executor's
// parameter types; an earlier step's output lands in the manifest as one value.
func TestEngineSubstitutesIntoTheValuesOfYAMLParameters(t *testing.T) {
	p := newPipeline(
		v1alpha1.Step{Name: "first", Executor: "test.record"},
		v1alpha1.Step{Name: "apply", Executor: "test.record", With: map[string]string{
			"manifest": "kind: ConfigMap\nmetadata:\n  name: $(steps.first.outputs.name)\n",
		}},
	)
	f := newFixture(t, p)
	injected := "x\n---\nkind: Secret"
	f.exec.on("first", v1alpha1.HookCreate, func(context.Context, *executor.Request) (contract.Result, error) {
		return contract.DoneWithOutputs("", map[string]string{"name": injected}), nil
	})
	f.syncUntilIdle("p")
	require.Equal(t, v1alpha1.PipelineSucceeded, f.get("p").Status.Phase)

	var manifest string
	for _, r := range f.exec.requests {
		if r.Step == "apply" {
			manifest = r.Params["manifest"]
		}
	}
	var doc map[string]any
	dec := yaml.NewDecoder(strings.NewReader(manifest))
	require.NoError(t, dec.Decode(&doc))
	assert.Equal(t, map[string]any{"kind": "ConfigMap", "metadata": map[string]any{"name": injected}}, doc)
	require.ErrorIs(t, dec.Decode(&doc), io.EOF, "one document:\n%s", manifest)
}
