package controller

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// decodeErrs says that the pipelines it names could not be decoded.
type decodeErrs map[string]error

func (d decodeErrs) Err(obj metav1.Object) error { return d[obj.GetName()] }

type rawPatch struct {
	name, subresource string
	body              map[string]any
}

// recordingPatcher records the raw patches the engine sends.
type recordingPatcher struct{ patches []rawPatch }

func (r *recordingPatcher) Patch(_ context.Context, _, name string, patch []byte, sub ...string) error {
	var body map[string]any
	if err := json.Unmarshal(patch, &body); err != nil {
		return err
	}
	p := rawPatch{name: name, body: body}
	if len(sub) > 0 {
		p.subresource = sub[0]
	}
	r.patches = append(r.patches, p)
	return nil
}

// TestUndecodablePipelineFailsAlone: a pipeline the informer could not decode (its
// stand-in has no spec) runs nothing and says why on the object, while another pipeline
// runs; deleted, it lets go at once when nothing of it ran or when orphaned, and otherwise
// says how to get out.
func TestUndecodablePipelineFailsAlone(t *testing.T) {
	decodeErr := errors.New(`time: invalid duration "9999999999h"`)
	tests := []struct {
		name             string
		change           func(p *v1alpha1.Pipeline)
		wantFinalizerOff bool
		wantStatus       string // in the Ready message; "" when no status is written
		wantEvents       []string
	}{
		{name: "not deleted", wantStatus: "cannot decode this pipeline (time: invalid duration", wantEvents: []string{"Warning Undecodable"}},
		{name: "deleted, nothing ran", change: deleted, wantFinalizerOff: true},
		{name: "deleted, a step ran", change: func(p *v1alpha1.Pipeline) {
			deleted(p)
			p.Status.Steps = []v1alpha1.StepStatus{{Name: "a", Ran: &v1alpha1.StepRun{Executor: "test.record", StepHash: "h"}}}
		}, wantStatus: "its teardown waits; fix the spec, or annotate stepwise.dev/teardown-policy=Orphan", wantEvents: []string{"Warning Undecodable"}},
		{name: "deleted, a step ran, orphaned", change: func(p *v1alpha1.Pipeline) {
			deleted(p)
			p.Annotations = map[string]string{v1alpha1.TeardownPolicyAnnotation: v1alpha1.TeardownOrphan}
			p.Status.Steps = []v1alpha1.StepStatus{{Name: "a", Ran: &v1alpha1.StepRun{Executor: "test.record", StepHash: "h"}}}
		}, wantFinalizerOff: true, wantEvents: []string{"Warning TeardownOrphaned"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			poison := newPipeline() // the stand-in: identity and status, no spec
			poison.Name, poison.UID = "poison", types.UID("uid-poison")
			if tt.change != nil {
				tt.change(poison)
			}
			f := newFixture(t, poison, newPipeline(v1alpha1.Step{Name: "a", Executor: "test.record"}))
			raw := &recordingPatcher{}
			f.c.undecodable, f.c.raw = decodeErrs{"poison": decodeErr}, raw

			f.sync("poison")
			assert.Empty(t, f.exec.Calls(), "nothing of it runs")
			assert.Empty(t, f.writes(), "no typed write: its answer could not be decoded")
			var finalizerOff bool
			var ready map[string]any
			for _, p := range raw.patches {
				require.Equal(t, "poison", p.name)
				if p.subresource == "status" {
					status := p.body["status"].(map[string]any)
					assert.Equal(t, "Failed", status["phase"])
					ready = status["conditions"].([]any)[0].(map[string]any)
				} else {
					finalizerOff = true
					assert.Empty(t, p.body["metadata"].(map[string]any)["finalizers"])
				}
			}
			assert.Equal(t, tt.wantFinalizerOff, finalizerOff)
			if tt.wantStatus == "" {
				assert.Nil(t, ready)
			} else {
				require.NotNil(t, ready)
				assert.Equal(t, "False", ready["status"])
				assert.Equal(t, v1alpha1.ReasonUndecodable, ready["reason"])
				assert.Contains(t, ready["message"], tt.wantStatus)
			}
			assert.Equal(t, tt.wantEvents, f.events())

			f.syncUntilIdle("p")
			assert.Equal(t, v1alpha1.PipelineSucceeded, f.get("p").Status.Phase, "another tenant's pipeline is served")
		})
	}
}

func deleted(p *v1alpha1.Pipeline) {
	now := metav1.Now()
	p.DeletionTimestamp = &now
}
