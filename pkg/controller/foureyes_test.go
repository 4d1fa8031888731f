package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// The operator's ServiceAccount, which creates a trigger's pipelines.
const operatorUser = "system:serviceaccount:stepwise-system:stepwise-operator"

// approvalTemplate is template "retire" (created by creator, its spec changed by editors as
// the install's admission policies record them), whose step "terminate" needs approval
// under four eyes, after a step "cordon".
func approvalTemplate(creator string, editors ...string) *v1alpha1.PipelineTemplate {
	steps := stepsOf("cordon", "terminate")
	steps[1].Approval = &v1alpha1.ApprovalPolicy{FourEyes: true}
	tpl := &v1alpha1.PipelineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: "ns", UID: "tpl-uid", Generation: 1,
			Annotations: authored(creator, editors...)},
		Spec: v1alpha1.PipelineTemplateSpec{Steps: steps},
	}
	if len(editors) > 0 {
		tpl.Generation = 2
	}
	return tpl
}

// authored are the annotations the admission policies write: who created an object, and
// who changed its spec since (one a line).
func authored(creator string, editors ...string) map[string]string {
	a := map[string]string{}
	if creator != "" {
		a[v1alpha1.AnnotationCreatedBy] = creator
	}
	if len(editors) > 0 {
		a[v1alpha1.AnnotationEditedBy] = joinLines(editors)
	}
	return a
}

func joinLines(lines []string) string {
	out := ""
	for i, l := range lines {
		if i > 0 {
			out += "\n"
		}
		out += l
	}
	return out
}

// retireTrigger is trigger "retire" of UID t-uid, created by creator and changed by editors.
func retireTrigger(creator string, editors ...string) *v1alpha1.PipelineTrigger {
	t := &v1alpha1.PipelineTrigger{ObjectMeta: metav1.ObjectMeta{
		Name: "retire", Namespace: "ns", UID: "t-uid", Generation: 1, Annotations: authored(creator, editors...),
	}}
	if len(editors) > 0 {
		t.Generation = 2
	}
	return t
}

// ofTrigger makes p a pipeline the trigger retire (t-uid) created, as the trigger labels it.
func ofTrigger(p *v1alpha1.Pipeline) {
	p.Labels = map[string]string{v1alpha1.LabelTrigger: "retire", v1alpha1.LabelTriggerUID: "t-uid"}
	p.Annotations = map[string]string{v1alpha1.AnnotationCreatedBy: operatorUser}
}

// controlledByTrigger makes p a pipeline whose controller is the trigger retire (t-uid).
func controlledByTrigger(p *v1alpha1.Pipeline) {
	p.Annotations = map[string]string{v1alpha1.AnnotationCreatedBy: operatorUser}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "PipelineTrigger",
		Name: "retire", UID: "t-uid", Controller: ptr(true)}}
}

// TestFourEyesRefusesWhoeverShapedTheRun: under four eyes, an approval does not count when
// its user created or changed the pipeline, the template the run took, or the trigger that
// created the pipeline, as the API server recorded them; nor when one of those does not
// record everyone who did.
func TestFourEyesRefusesWhoeverShapedTheRun(t *testing.T) {
	tests := []struct {
		name     string
		pipeline func(p *v1alpha1.Pipeline) // after alice created it from the template
		template *v1alpha1.PipelineTemplate
		trigger  *v1alpha1.PipelineTrigger
		user     string
		ignored  string // "" when it counts
	}{
		{name: "the pipeline's creator", template: approvalTemplate("carol"), user: "alice",
			ignored: "four eyes: alice created the pipeline"},
		{name: "who changed the pipeline's spec", template: approvalTemplate("carol"),
			pipeline: func(p *v1alpha1.Pipeline) {
				p.Generation = 3
				p.Annotations[v1alpha1.AnnotationEditedBy] = "dave\nbob"
			},
			user: "bob", ignored: "four eyes: bob changed the pipeline"},
		{name: "the template's creator", template: approvalTemplate("carol"), user: "carol",
			ignored: "four eyes: carol created template retire, which the run took"},
		{name: "who changed the template", template: approvalTemplate("carol", "dave", "bob"), user: "bob",
			ignored: "four eyes: bob changed template retire, which the run took"},
		{name: "someone else", template: approvalTemplate("carol", "dave"), user: "bob"},
		{name: "the trigger's creator", template: approvalTemplate("carol"), trigger: retireTrigger("erin"), pipeline: ofTrigger,
			user: "erin", ignored: "four eyes: erin created trigger retire, which created the pipeline"},
		{name: "who changed the trigger", template: approvalTemplate("carol"), trigger: retireTrigger("erin", "bob"),
			pipeline: ofTrigger, user: "bob", ignored: "four eyes: bob changed trigger retire, which created the pipeline"},
		{name: "who changed the trigger that controls the pipeline", template: approvalTemplate("carol"),
			trigger: retireTrigger("erin", "bob"), pipeline: controlledByTrigger,
			user: "bob", ignored: "four eyes: bob changed trigger retire, which created the pipeline"},
		{name: "someone else than the trigger's", template: approvalTemplate("carol"), trigger: retireTrigger("erin", "dave"),
			pipeline: ofTrigger, user: "bob"},
		{name: "a template that does not record its creator", template: approvalTemplate(""), user: "bob",
			ignored: "four eyes: template retire does not record who created it (the stepwise.dev/created-by annotation the install's admission policy stamps)"},
		{name: "a template changed before its changes were recorded",
			template: func() *v1alpha1.PipelineTemplate { tpl := approvalTemplate("carol"); tpl.Generation = 4; return tpl }(),
			user:     "bob",
			ignored:  "four eyes: template retire does not record everyone who changed it (the stepwise.dev/edited-by annotation: changed before the install recorded changes, or by more users than it keeps)"},
		{name: "a template changed by more users than recorded", template: approvalTemplate("carol", "dave", ""), user: "bob",
			ignored: "four eyes: template retire does not record everyone who changed it (the stepwise.dev/edited-by annotation: changed before the install recorded changes, or by more users than it keeps)"},
		{name: "a pipeline changed before its changes were recorded", template: approvalTemplate("carol"),
			pipeline: func(p *v1alpha1.Pipeline) { p.Generation = 2 }, user: "bob",
			ignored: "four eyes: the pipeline does not record everyone who changed it (the stepwise.dev/edited-by annotation: changed before the install recorded changes, or by more users than it keeps)"},
		{name: "a trigger that does not record its creator", template: approvalTemplate("carol"), trigger: retireTrigger(""),
			pipeline: ofTrigger, user: "bob",
			ignored: "four eyes: trigger retire does not record who created it (the stepwise.dev/created-by annotation the install's admission policy stamps)"},
		{name: "a trigger that is gone", template: approvalTemplate("carol"), pipeline: ofTrigger, user: "bob",
			ignored: "four eyes: trigger retire, which created the pipeline, was gone when the operator looked for who made it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := templatePipeline(nil)
			p.Annotations = map[string]string{v1alpha1.AnnotationCreatedBy: "alice"}
			if tt.pipeline != nil {
				tt.pipeline(p)
			}
			f := newFixture(t, p)
			f.addTemplate(tt.template)
			if tt.trigger != nil {
				require.NoError(t, f.triggers.Add(tt.trigger))
			}
			f.access.allow(tt.user)
			f.syncUntilIdle("p")
			f.decide(tt.user, v1alpha1.ApprovalApprove, "")
			f.syncUntilIdle("p")

			s := stepStatus(f.get("p"), "terminate")
			require.Len(t, s.Approval.Decisions, 1)
			assert.Equal(t, tt.ignored, s.Approval.Decisions[0].Ignored)
			if tt.ignored == "" {
				assert.True(t, s.Approval.Decisions[0].Counted)
				assert.Equal(t, v1alpha1.StepSucceeded, s.Phase)
				return
			}
			assert.False(t, s.Approval.Decisions[0].Counted)
			assert.Equal(t, v1alpha1.StepAwaitingApproval, s.Phase)
			assert.Contains(t, f.events(), "Warning "+v1alpha1.ReasonApprovalIgnored)
		})
	}
}

// TestWhoShapedARunIsKeptWithIt: who made the template and the trigger is taken with the
// template; a template or trigger deleted since, or made again by someone else under the
// same name, launders no one.
func TestWhoShapedARunIsKeptWithIt(t *testing.T) {
	p := templatePipeline(nil)
	ofTrigger(p)
	f := newFixture(t, p)
	f.addTemplate(approvalTemplate("carol", "dave"))
	require.NoError(t, f.triggers.Add(retireTrigger("erin", "bob")))
	f.access.allow("bob", "dave", "frank")
	f.syncUntilIdle("p")
	snap := f.get("p").Status.Template
	require.NotNil(t, snap)
	assert.Equal(t, []v1alpha1.Authorship{
		{Kind: "PipelineTemplate", Name: "retire", UID: "tpl-uid", CreatedBy: "carol", EditedBy: []string{"dave"}},
		{Kind: "PipelineTrigger", Name: "retire", UID: "t-uid", CreatedBy: "erin", EditedBy: []string{"bob"}},
	}, snap.Authors)

	// Both made again, by mallory, under their names.
	require.NoError(t, f.templates.Delete(approvalTemplate("carol")))
	again := approvalTemplate("mallory")
	again.UID = "tpl-uid-2"
	f.addTemplate(again)
	require.NoError(t, f.triggers.Delete(retireTrigger("erin")))
	trig := retireTrigger("mallory")
	trig.UID = "t-uid-2"
	require.NoError(t, f.triggers.Add(trig))

	f.decide("dave", v1alpha1.ApprovalApprove, "")
	f.decide("bob", v1alpha1.ApprovalApprove, "")
	f.syncUntilIdle("p")
	s := stepStatus(f.get("p"), "terminate")
	require.Len(t, s.Approval.Decisions, 2)
	assert.Equal(t, "four eyes: dave changed template retire, which the run took", s.Approval.Decisions[0].Ignored)
	assert.Equal(t, "four eyes: bob changed trigger retire, which created the pipeline", s.Approval.Decisions[1].Ignored)
	assert.Equal(t, v1alpha1.StepAwaitingApproval, s.Phase)

	f.decide("frank", v1alpha1.ApprovalApprove, "")
	f.syncUntilIdle("p")
	assert.Equal(t, v1alpha1.StepSucceeded, stepStatus(f.get("p"), "terminate").Phase)
}

// TestARunTakenBeforeAuthorsWereRecordedLearnsThem: a run whose template copy does not say
// who made it (an operator before this one took it) reads them from the template of the
// same UID when an approval comes: whoever changed it since is among them, which only
// refuses more.
func TestARunTakenBeforeAuthorsWereRecordedLearnsThem(t *testing.T) {
	p := templatePipeline(nil)
	p.Annotations = map[string]string{v1alpha1.AnnotationCreatedBy: "alice"}
	f := newFixture(t, p)
	f.addTemplate(approvalTemplate("carol", "dave"))
	f.access.allow("dave", "frank")
	f.syncUntilIdle("p")
	f.update("p", func(p *v1alpha1.Pipeline) { p.Status.Template.Authors = nil })
	f.decide("dave", v1alpha1.ApprovalApprove, "")
	f.syncUntilIdle("p")
	got := f.get("p")
	s := stepStatus(got, "terminate")
	require.Len(t, s.Approval.Decisions, 1)
	assert.Equal(t, "four eyes: dave changed template retire, which the run took", s.Approval.Decisions[0].Ignored)
	require.NotEmpty(t, got.Status.Template.Authors, "recorded now")

	// Of a template gone since, nothing can be learnt: no approval counts.
	f.update("p", func(p *v1alpha1.Pipeline) { p.Status.Template.Authors = nil })
	require.NoError(t, f.templates.Delete(approvalTemplate("carol")))
	f.decide("frank", v1alpha1.ApprovalApprove, "")
	f.syncUntilIdle("p")
	s = stepStatus(f.get("p"), "terminate")
	require.Len(t, s.Approval.Decisions, 2)
	assert.Equal(t, "four eyes: template retire, which the run took, was gone when the operator looked for who made it",
		s.Approval.Decisions[1].Ignored)
}
