package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

func TestFailedAt(t *testing.T) {
	created := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(created.Add(d)); return &t }
	tests := []struct {
		name   string
		status v1alpha1.PipelineStatus
		want   time.Time
	}{
		{"its failure record", v1alpha1.PipelineStatus{Failure: &v1alpha1.FailureRecord{Since: *at(3 * time.Minute)},
			Steps: []v1alpha1.StepStatus{{Phase: v1alpha1.StepFailed, CompletionTime: at(2 * time.Minute)}}}, created.Add(3 * time.Minute)},
		{"its failed step's end", v1alpha1.PipelineStatus{Steps: []v1alpha1.StepStatus{
			{Phase: v1alpha1.StepSucceeded, CompletionTime: at(time.Minute)}, {Phase: v1alpha1.StepFailed, CompletionTime: at(2 * time.Minute)}}},
			created.Add(2 * time.Minute)},
		{"neither: its creation", v1alpha1.PipelineStatus{Phase: v1alpha1.PipelineFailed}, created},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}, Status: tt.status}
			assert.Equal(t, tt.want, FailedAt(p))
		})
	}
}

func TestFailureBudget(t *testing.T) {
	for _, tt := range []struct{ spec, want int32 }{{0, 1}, {1, 1}, {5, 5}} {
		trig := &v1alpha1.PipelineTrigger{Spec: v1alpha1.PipelineTriggerSpec{FailureBudget: tt.spec}}
		assert.Equal(t, tt.want, FailureBudget(trig), "spec %d", tt.spec)
	}
}
