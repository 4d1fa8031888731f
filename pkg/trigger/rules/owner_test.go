package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
)

func TestOwnershipOf(t *testing.T) {
	node := triggertest.Node("n1", 0, retiring)
	webApp := triggertest.WebApp("ns", "wiki", 0, nil)
	trig := triggertest.RecreatedTrigger()
	tests := []struct {
		name   string
		trig   func(*v1alpha1.PipelineTrigger)
		change func(*v1alpha1.Pipeline)
		// unknownOperator: the operator does not know the user it acts as.
		unknownOperator bool
		want            Ownership
	}{
		{name: "made by the trigger", want: Owned},
		{name: "of a namespaced object", change: func(p *v1alpha1.Pipeline) {
			*p = *existingPipeline(webApp, "trigger-uid", start.Add(time.Minute))
		}, want: Owned},
		{name: "made by an earlier trigger of the same name", change: func(p *v1alpha1.Pipeline) {
			p.Labels[v1alpha1.LabelTriggerUID] = "old-uid"
		}, want: NotOwned},
		{name: "with an empty trigger UID", change: func(p *v1alpha1.Pipeline) { p.Labels[v1alpha1.LabelTriggerUID] = "" }, want: NotOwned},
		{name: "of another trigger", change: func(p *v1alpha1.Pipeline) { p.Labels[v1alpha1.LabelTrigger] = "other" }, want: NotOwned},
		{name: "without the trigger label", change: func(p *v1alpha1.Pipeline) { delete(p.Labels, v1alpha1.LabelTrigger) }, want: NotOwned},
		{name: "in another namespace", change: func(p *v1alpha1.Pipeline) { p.Namespace = "other" }, want: NotOwned},
		{name: "a copy that kept the labels (an older kubectl stepwise rerun)", change: func(p *v1alpha1.Pipeline) {
			p.Name += "-x7k2q"
		}, want: NotOwned},
		{name: "whose object annotation was changed", change: func(p *v1alpha1.Pipeline) {
			p.Annotations[v1alpha1.AnnotationObject] = "n2"
		}, want: NotOwned},
		{name: "an old version's, created after the trigger", change: func(p *v1alpha1.Pipeline) {
			delete(p.Labels, v1alpha1.LabelTriggerUID)
		}, want: Adoptable},
		{name: "an old version's, created in the trigger's second", change: func(p *v1alpha1.Pipeline) {
			delete(p.Labels, v1alpha1.LabelTriggerUID)
			p.CreationTimestamp = metav1.NewTime(start)
		}, want: Adoptable},
		{name: "like an old version's, made by an editor of the namespace", change: func(p *v1alpha1.Pipeline) {
			delete(p.Labels, v1alpha1.LabelTriggerUID)
			p.Annotations[v1alpha1.AnnotationCreatedBy] = "alice"
		}, want: NotOwned},
		{name: "like an old version's, no creator recorded", change: func(p *v1alpha1.Pipeline) {
			delete(p.Labels, v1alpha1.LabelTriggerUID)
			delete(p.Annotations, v1alpha1.AnnotationCreatedBy)
		}, want: NotOwned},
		{name: "an old version's, its labels or spec changed by an editor since", change: func(p *v1alpha1.Pipeline) {
			delete(p.Labels, v1alpha1.LabelTriggerUID)
			p.Annotations[v1alpha1.AnnotationEditedBy] = "alice"
		}, want: NotOwned},
		{name: "an old version's, created before the trigger: an earlier trigger's", change: func(p *v1alpha1.Pipeline) {
			delete(p.Labels, v1alpha1.LabelTriggerUID)
			p.CreationTimestamp = metav1.NewTime(start.Add(-time.Second))
		}, want: NotOwned},
		{name: "an older rerun's copy of an old version's", change: func(p *v1alpha1.Pipeline) {
			delete(p.Labels, v1alpha1.LabelTriggerUID)
			p.Name += "-x7k2q"
		}, want: NotOwned},
		{name: "an operator that does not know who it is adopts nothing", unknownOperator: true,
			change: func(p *v1alpha1.Pipeline) { delete(p.Labels, v1alpha1.LabelTriggerUID) }, want: NotOwned},
		{name: "a trigger with no UID owns nothing", trig: func(tr *v1alpha1.PipelineTrigger) { tr.UID = "" },
			change: func(p *v1alpha1.Pipeline) { p.Labels[v1alpha1.LabelTriggerUID] = "" }, want: NotOwned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := trig.DeepCopy()
			if tt.trig != nil {
				tt.trig(tr)
			}
			p := existingPipeline(node, "trigger-uid", start.Add(time.Minute))
			if tt.change != nil {
				tt.change(p)
			}
			operator := triggertest.OperatorUser
			if tt.unknownOperator {
				operator = ""
			}
			assert.Equal(t, tt.want, OwnershipOf(tr, p, operator))
		})
	}
}
