package controller

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// hostileParams is a spec of about 130 KiB whose references expand a thousandfold: the
// review turned such a spec into a 625 MiB parameter and 4 GiB of allocations in one sync.
func hostileParams() (params, with map[string]string) {
	params = map[string]string{"x": strings.Repeat("A", 64<<10)}
	with = map[string]string{"blob": strings.Repeat("$(params.x)", 6000)}
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
			got, err := r.resolveParams(tt.with)
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
		if _, err := r.resolveParams(with); err == nil {
			b.Fatal("the hostile parameters resolved")
		}
	}
}
