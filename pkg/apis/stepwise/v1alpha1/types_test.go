package v1alpha1

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func fullPipeline() *Pipeline {
	// metav1.Time decodes into the local zone, so build it there to compare with Equal.
	now := metav1.NewTime(time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC).Local())
	return &Pipeline{
		TypeMeta:   metav1.TypeMeta{APIVersion: SchemeGroupVersion.String(), Kind: "Pipeline"},
		ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: "ops", Generation: 2},
		Spec: PipelineSpec{
			ServiceAccountName: "node-retirer",
			Params:             map[string]string{"node": "k8s-node-3"},
			Suspend:            true,
			Steps: []Step{{
				Name:     "drain",
				Executor: "node.drain",
				With:     map[string]string{"node": "$(params.node)"},
				Timeout:  &metav1.Duration{Duration: 15 * time.Minute},
				Retry: &RetryPolicy{Limit: 5, Backoff: &Backoff{
					Initial: &metav1.Duration{Duration: 2 * time.Second},
					Factor:  3,
					Max:     &metav1.Duration{Duration: 2 * time.Minute},
				}},
			}},
		},
		Status: PipelineStatus{
			ObservedGeneration: 2,
			Phase:              PipelineRunning,
			CurrentStep:        "drain",
			Progress:           "0/1",
			StartTime:          &now,
			Conditions: []metav1.Condition{{
				Type: ConditionReady, Status: metav1.ConditionFalse, Reason: "StepRunning",
				Message: "drain: 3 pods left", LastTransitionTime: now, ObservedGeneration: 2,
			}},
			Steps: []StepStatus{{
				Name: "drain", Executor: "node.drain", Phase: StepRunning, Hook: HookCreate,
				ObservedGeneration: 2, Attempts: 1, StartTime: &now, HookStartTime: &now,
				NextAttemptTime: &now, Outputs: map[string]string{"evicted": "2"}, Message: "3 pods left",
				Conditions: []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionFalse,
					Reason: "HookRunning", LastTransitionTime: now}},
			}},
		},
	}
}

func TestPipelineJSONRoundTrip(t *testing.T) {
	in := fullPipeline()
	data, err := json.Marshal(in)
	require.NoError(t, err)

	var out Pipeline
	require.NoError(t, json.Unmarshal(data, &out))
	assert.Equal(t, in, &out)

	// The wire names are the ones users write in YAML.
	var raw map[string]any
	require.NoError(t, json.Unmarshal(data, &raw))
	step := raw["spec"].(map[string]any)["steps"].([]any)[0].(map[string]any)
	assert.Equal(t, "15m0s", step["timeout"])
	assert.Equal(t, map[string]any{"node": "$(params.node)"}, step["with"])
	assert.Equal(t, "2s", step["retry"].(map[string]any)["backoff"].(map[string]any)["initial"])
}

func TestPipelineJSONOmitsEmptyOptionalFields(t *testing.T) {
	p := &Pipeline{Spec: PipelineSpec{Steps: []Step{{Name: "a", Executor: "x"}}}}
	data, err := json.Marshal(p)
	require.NoError(t, err)
	assert.JSONEq(t, `{"metadata":{},"spec":{"steps":[{"name":"a","executor":"x"}]},"status":{}}`, string(data))
}

func TestDeepCopyIsDeep(t *testing.T) {
	in := fullPipeline()
	out := in.DeepCopy()
	require.Equal(t, in, out)

	// Change everything reachable through a pointer, map or slice in the copy.
	out.Spec.Params["node"] = "other"
	out.Spec.Steps[0].With["node"] = "other"
	out.Spec.Steps[0].Timeout.Duration = time.Second
	out.Spec.Steps[0].Retry.Backoff.Initial.Duration = time.Hour
	out.Status.StartTime.Time = time.Time{}
	out.Status.Conditions[0].Message = "changed"
	out.Status.Steps[0].Outputs["evicted"] = "9"
	out.Status.Steps[0].Conditions[0].Reason = "Changed"
	out.Status.Steps[0].HookStartTime.Time = time.Time{}

	assert.Equal(t, fullPipeline(), in, "mutating the copy changed the original")

	list := &PipelineList{Items: []Pipeline{*in}}
	listCopy := list.DeepCopyObject().(*PipelineList)
	listCopy.Items[0].Spec.Steps[0].Name = "changed"
	assert.Equal(t, "drain", list.Items[0].Spec.Steps[0].Name)
}

func TestEffectiveDefaults(t *testing.T) {
	d := func(s string) *metav1.Duration {
		v, err := time.ParseDuration(s)
		require.NoError(t, err)
		return &metav1.Duration{Duration: v}
	}
	tests := []struct {
		name        string
		step        Step
		wantTimeout time.Duration
		wantLimit   int32
		wantDelays  []time.Duration // for retries 1, 2, 3, ...
	}{
		{
			name:        "all defaults",
			step:        Step{},
			wantTimeout: time.Hour,
			wantLimit:   3,
			wantDelays:  []time.Duration{time.Second, 2 * time.Second, 4 * time.Second},
		},
		{
			name:        "limit zero is kept, backoff defaulted",
			step:        Step{Retry: &RetryPolicy{Limit: 0}, Timeout: d("30s")},
			wantTimeout: 30 * time.Second,
			wantLimit:   0,
			wantDelays:  []time.Duration{time.Second},
		},
		{
			name: "custom backoff is capped at max",
			step: Step{Retry: &RetryPolicy{Limit: 5, Backoff: &Backoff{
				Initial: d("2s"), Factor: 3, Max: d("10s")}}},
			wantTimeout: time.Hour,
			wantLimit:   5,
			wantDelays:  []time.Duration{2 * time.Second, 6 * time.Second, 10 * time.Second, 10 * time.Second},
		},
		{
			// Stored before the schema bounded them: the engine honours the bounds.
			name: "durations past the schema's bounds are cut to them",
			step: Step{Timeout: d("9000h"), Retry: &RetryPolicy{Limit: 2, Backoff: &Backoff{
				Initial: d("100h"), Factor: 2, Max: d("200h")}}},
			wantTimeout: MaxStepTimeout,
			wantLimit:   2,
			wantDelays:  []time.Duration{MaxBackoff, MaxBackoff},
		},
		{
			name:        "partial backoff keeps other defaults",
			step:        Step{Retry: &RetryPolicy{Limit: 2, Backoff: &Backoff{Max: d("90s")}}},
			wantTimeout: time.Hour,
			wantLimit:   2,
			wantDelays:  []time.Duration{time.Second, 2 * time.Second, 4 * time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantTimeout, tt.step.EffectiveTimeout())
			r := tt.step.EffectiveRetry()
			assert.Equal(t, tt.wantLimit, r.Limit)
			for i, want := range tt.wantDelays {
				assert.Equal(t, want, r.Backoff.Delay(int32(i+1)), "retry %d", i+1)
			}
		})
	}
}

func TestEffectiveRetryDoesNotAliasSpec(t *testing.T) {
	step := Step{Retry: &RetryPolicy{Limit: 1, Backoff: &Backoff{Initial: &metav1.Duration{Duration: time.Second}}}}
	r := step.EffectiveRetry()
	r.Backoff.Initial.Duration = time.Hour
	assert.Equal(t, time.Second, step.Retry.Backoff.Initial.Duration)
}
