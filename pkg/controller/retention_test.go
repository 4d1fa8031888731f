package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

func retained(after time.Duration) *v1alpha1.Retention {
	return &v1alpha1.Retention{AfterFinished: metav1.Duration{Duration: after}}
}

func TestRetentionRemovesAnArchivedPipelineWithoutATeardown(t *testing.T) {
	p := newPipeline(stepsOf("a", "b")...)
	p.Spec.Retention = retained(time.Hour)
	f, a := archivedFixture(t, p)

	requeue := f.sync("p")
	assert.Equal(t, time.Hour, requeue, "the sync that finishes it looks again when retention is due")
	assert.Equal(t, []v1alpha1.ArchiveState{v1alpha1.ArchiveSucceeded}, a.states())
	f.exec.reset()

	f.clock.Step(30 * time.Minute)
	assert.Equal(t, 30*time.Minute, f.sync("p"), "not due yet: nothing happens")
	assert.Equal(t, []v1alpha1.ArchiveState{v1alpha1.ArchiveSucceeded}, a.states())

	f.clock.Step(30 * time.Minute)
	f.client.ClearActions()
	f.sync("p")
	assert.Equal(t, []v1alpha1.ArchiveState{v1alpha1.ArchiveSucceeded, v1alpha1.ArchiveRemoved}, a.states(),
		"the removal is archived before the pipeline goes")
	assert.Equal(t, []string{"update pipelines/status", "delete pipelines"}, f.writes())
	assert.Contains(t, f.events(), "Normal RemovedByRetention")

}

func TestAPipelineRetentionDeletedGoesWithoutATeardown(t *testing.T) {
	f, a := archivedFixture(t, newPipeline(stepsOf("a", "b")...))
	f.syncUntilIdle("p")
	f.exec.reset()
	// As the API server holds it after retention's delete: marked deleted, the finalizer
	// on, the status saying Removed.
	f.update("p", func(p *v1alpha1.Pipeline) {
		p.Status.Archived = &v1alpha1.ArchivedState{Generation: 1, State: v1alpha1.ArchiveRemoved, Time: metav1.NewTime(f.clock.Now())}
		now := metav1.NewTime(f.clock.Now())
		p.DeletionTimestamp = &now
	})
	f.client.ClearActions()
	f.syncUntilIdle("p")
	assert.Empty(t, f.exec.Calls(), "no teardown: what its steps made is left in place")
	assert.Equal(t, []string{"patch pipelines"}, f.writes(), "the finalizer comes off")
	assert.NotContains(t, f.get("p").Finalizers, v1alpha1.Finalizer)
	assert.Equal(t, []v1alpha1.ArchiveState{v1alpha1.ArchiveSucceeded}, a.states(),
		"no Deleted record: it was removed, and the removal is archived already")
}

func TestRetentionResumesAfterACrashBetweenItsSteps(t *testing.T) {
	p := newPipeline(stepsOf("a")...)
	p.Spec.Retention = retained(0)
	f, a := archivedFixture(t, p)
	f.sync("p")
	// The status says Removed, but the delete never went out (the operator was killed).
	f.update("p", func(p *v1alpha1.Pipeline) {
		p.Status.Archived = &v1alpha1.ArchivedState{Generation: 1, State: v1alpha1.ArchiveRemoved, Time: metav1.NewTime(f.clock.Now())}
	})
	f.client.ClearActions()
	f.sync("p")
	assert.Equal(t, []string{"delete pipelines"}, f.writes(), "the sync of a pipeline marked Removed asks for its deletion again")
	assert.Equal(t, []v1alpha1.ArchiveState{v1alpha1.ArchiveSucceeded}, a.states(), "the fixture's archive was not asked again")
}

func TestRetentionComesFromThePipelineThenTheTemplateThenTheDefault(t *testing.T) {
	created := []v1alpha1.StepStatus{{Name: "a", Created: map[string]string{"vm": "i-1"}}}
	tests := []struct {
		name     string
		spec     *v1alpha1.Retention
		template *v1alpha1.Retention
		steps    []v1alpha1.StepStatus
		def      time.Duration
		want     time.Duration
		wantOK   bool
	}{
		{name: "none"},
		{name: "its own", spec: retained(time.Hour), template: retained(2 * time.Hour), def: 3 * time.Hour, want: time.Hour, wantOK: true},
		{name: "its template's", template: retained(2 * time.Hour), def: 3 * time.Hour, want: 2 * time.Hour, wantOK: true},
		{name: "the default, for one that made nothing", def: 3 * time.Hour, want: 3 * time.Hour, wantOK: true},
		{name: "never the default for one that owns what it made", steps: created, def: 3 * time.Hour},
		{name: "its own, even when it owns what it made", spec: retained(time.Hour), steps: created, def: 3 * time.Hour, want: time.Hour, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &v1alpha1.Pipeline{Spec: v1alpha1.PipelineSpec{Retention: tt.spec}, Status: v1alpha1.PipelineStatus{Steps: tt.steps}}
			if tt.template != nil {
				p.Status.Template = &v1alpha1.TemplateSnapshot{Retention: tt.template}
			}
			got, ok := retentionOf(p, tt.def)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestRetentionNeedsTheArchive(t *testing.T) {
	p := newPipeline(stepsOf("a")...)
	p.Spec.Retention = retained(0)
	f := newFixture(t, p)
	f.syncUntilIdle("p")
	f.clock.Step(time.Hour)
	f.client.ClearActions()
	f.sync("p")
	assert.Empty(t, f.writes(), "without an archive nothing is removed: its record would be lost")
}

func TestEditingRetentionRunsNothingAgain(t *testing.T) {
	p := newPipeline(stepsOf("a")...)
	f, _ := archivedFixture(t, p)
	f.syncUntilIdle("p")
	f.exec.reset()
	f.update("p", func(p *v1alpha1.Pipeline) {
		p.Spec.Retention = retained(time.Hour)
		p.Generation++
	})
	f.syncUntilIdle("p")
	assert.Empty(t, f.exec.Calls())
}
