package rules

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
)

func TestConcurrency(t *testing.T) {
	tests := []struct {
		name        string
		concurrency int32
		unfinished  int
		want, free  int
	}{
		{name: "unset: the default", concurrency: 0, want: DefaultConcurrency, free: 1},
		{name: "below 1: at least 1", concurrency: -3, want: 1, free: 1},
		{name: "room for two", concurrency: 3, unfinished: 1, want: 3, free: 2},
		{name: "full", concurrency: 2, unfinished: 2, want: 2, free: 0},
		{name: "over (concurrency lowered since)", concurrency: 2, unfinished: 5, want: 2, free: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trig := triggertest.Trigger()
			trig.Spec.Concurrency = tt.concurrency
			assert.Equal(t, tt.want, Concurrency(trig))
			assert.Equal(t, tt.free, Free(trig, tt.unfinished))
		})
	}
}

// TestUnfinished counts the pipelines that are not Finished.
func TestUnfinished(t *testing.T) {
	phase := func(ph v1alpha1.PipelinePhase) *v1alpha1.Pipeline {
		return &v1alpha1.Pipeline{Status: v1alpha1.PipelineStatus{Phase: ph}}
	}
	tests := []struct {
		name      string
		pipelines []*v1alpha1.Pipeline
		want      int
	}{
		{name: "none"},
		{name: "running and pending", pipelines: []*v1alpha1.Pipeline{phase(v1alpha1.PipelineRunning), phase(v1alpha1.PipelinePending)}, want: 2},
		{name: "succeeded holds no place", pipelines: []*v1alpha1.Pipeline{phase(v1alpha1.PipelineSucceeded), phase(v1alpha1.PipelineFailed)}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Unfinished(tt.pipelines))
		})
	}
}
