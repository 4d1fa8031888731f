package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/internal/apitest"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
)

func TestAFinishedPipelineRestsInTheWriteThatFinishesIt(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*v1alpha1.Pipeline)
		setup   func(*fixture)
		archive func(*memoryArchive)
		want    v1alpha1.PipelinePhase
	}{
		{name: "succeeded", want: v1alpha1.PipelineSucceeded},
		{name: "failed", setup: func(f *fixture) {
			f.exec.on("b", v1alpha1.HookCreate, failWith(contract.Permanent("Bad", errBoom)))
		}, want: v1alpha1.PipelineFailed},
		{name: "edited before it finished: its cached metadata could not tell an edit",
			edit: func(p *v1alpha1.Pipeline) { p.Generation = 2 }},
		{name: "a trigger's: the trigger reads its status",
			edit: func(p *v1alpha1.Pipeline) { p.Labels = map[string]string{v1alpha1.LabelTrigger: "retire"} }},
		{name: "archived", archive: func(*memoryArchive) {}, want: v1alpha1.PipelineSucceeded},
		{name: "not archived yet", archive: func(a *memoryArchive) { a.down = true }},
		{name: "retention to wait for", archive: func(*memoryArchive) {},
			edit: func(p *v1alpha1.Pipeline) {
				p.Spec.Retention = &v1alpha1.Retention{AfterFinished: metav1.Duration{Duration: time.Hour}}
			}},
		{name: "retention without an archive removes nothing",
			edit: func(p *v1alpha1.Pipeline) {
				p.Spec.Retention = &v1alpha1.Retention{AfterFinished: metav1.Duration{Duration: time.Hour}}
			},
			want: v1alpha1.PipelineSucceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPipeline(stepsOf("a", "b")...)
			if tt.edit != nil {
				tt.edit(p)
			}
			f := newFixture(t, p)
			if tt.archive != nil {
				a := &memoryArchive{}
				tt.archive(a)
				f.c.archive = a
			}
			if tt.setup != nil {
				tt.setup(f)
			}
			for range 5 {
				_, _ = f.c.syncHandler(f.ctx, cache.ObjectName{Namespace: "ns", Name: "p"})
				f.refresh("p")
			}
			got := f.get("p").Status
			require.Contains(t, []v1alpha1.PipelinePhase{v1alpha1.PipelineSucceeded, v1alpha1.PipelineFailed}, got.Phase)
			assert.Equal(t, tt.want, got.Resting)
		})
	}
}

func TestARestingPipelineCostsNoRequest(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("a")...))
	f.standIns = true
	f.syncUntilIdle("p")
	cached := cachedCopy(t, f)
	require.True(t, cached.MetadataOnly, "the cache holds its metadata alone")
	assert.Empty(t, cached.Status.Steps)
	assert.Equal(t, v1alpha1.PipelineSucceeded, cached.Status.Phase)

	f.client.ClearActions()
	f.exec.reset()
	f.sync("p") // a resync
	assert.Empty(t, f.client.Actions(), "nothing read, nothing written")
	assert.Empty(t, f.exec.Calls())
}

func TestARestingPipelineIsReadWholeWhenItMustAct(t *testing.T) {
	tests := []struct {
		name   string
		fail   bool
		change func(f *fixture)
		want   []string
	}{
		{name: "retried: the failed step runs again", fail: true, change: func(f *fixture) {
			f.exec.on("b", v1alpha1.HookCreate, done)
			f.update("p", func(p *v1alpha1.Pipeline) { p.Annotations = map[string]string{v1alpha1.RetryAnnotation: ""} })
		}, want: []string{"b/PreCreate#1", "b/Create#1", "b/PostCreate#1"}},
		{name: "deleted: its teardown runs from its run record", change: func(f *fixture) { f.delete("p") },
			want: []string{"b/PreDelete#1", "b/Delete#1", "b/PostDelete#1", "a/PreDelete#1", "a/Delete#1", "a/PostDelete#1"}},
		{name: "edited: the new spec runs", change: func(f *fixture) {
			f.update("p", func(p *v1alpha1.Pipeline) {
				p.Spec.UpdatePolicy = v1alpha1.UpdateRerun
				p.Spec.Steps[0].With = map[string]string{"k": "v"}
				p.Generation++
			})
		}, want: []string{"a/PreDelete#1", "a/Delete#1", "a/PostDelete#1", "a/PreCreate#1", "a/Create#1", "a/PostCreate#1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, newPipeline(stepsOf("a", "b")...))
			f.standIns = true
			if tt.fail {
				f.exec.on("b", v1alpha1.HookCreate, failWith(contract.Permanent("Bad", errBoom)))
			}
			f.syncUntilIdle("p")
			require.True(t, cachedCopy(t, f).MetadataOnly)
			f.exec.reset()
			f.client.ClearActions()

			tt.change(f)
			f.sync("p")
			assert.Equal(t, []string{"get pipelines"}, apitest.Reads(f.client)[:1], "read whole once")
			f.syncUntilIdle("p")
			assert.Subset(t, f.exec.Calls(), tt.want)
		})
	}
}

func TestASweepWakesWhatChangedAtRest(t *testing.T) {
	now := metav1.NewTime(start)
	resting := func(name string, change func(*v1alpha1.Pipeline)) *v1alpha1.Pipeline {
		p := newPipeline(stepsOf("a")...)
		p.Name, p.UID, p.ResourceVersion = name, types.UID("uid-"+name), "7"
		p.Status = v1alpha1.PipelineStatus{ObservedGeneration: 1, Phase: v1alpha1.PipelineSucceeded, Resting: v1alpha1.PipelineSucceeded}
		if change != nil {
			change(p)
		}
		return p
	}
	pipelines := []*v1alpha1.Pipeline{
		resting("untouched", nil),
		resting("deleted", func(p *v1alpha1.Pipeline) { p.DeletionTimestamp = &now }),
		resting("edited", func(p *v1alpha1.Pipeline) { p.Generation = 2 }),
		resting("retried", func(p *v1alpha1.Pipeline) { p.Annotations = map[string]string{v1alpha1.RetryAnnotation: ""} }),
		resting("unfinalized", func(p *v1alpha1.Pipeline) { p.Finalizers = nil }),
	}
	f := newFixture(t, pipelines...)
	var pages int
	pager := func(_ context.Context, page func([]metav1.PartialObjectMetadata) error) error {
		for _, batch := range [][]*v1alpha1.Pipeline{pipelines[:2], pipelines[2:]} { // two pages
			var items []metav1.PartialObjectMetadata
			for _, p := range batch {
				items = append(items, metav1.PartialObjectMetadata{ObjectMeta: p.ObjectMeta})
			}
			pages++
			if err := page(items); err != nil {
				return err
			}
		}
		return nil
	}

	woken, err := f.c.SweepResting(f.ctx, pager, 0)
	require.NoError(t, err)
	assert.Equal(t, 4, woken)
	assert.Equal(t, 2, pages)
	assert.Equal(t, []string{"patch pipelines/status", "patch pipelines/status", "patch pipelines/status", "patch pipelines/status"}, f.writes())
	for _, p := range pipelines {
		got, err := f.client.StepwiseV1alpha1().Pipelines("ns").Get(f.ctx, p.Name, metav1.GetOptions{})
		require.NoError(t, err)
		if p.Name == "untouched" {
			assert.Equal(t, v1alpha1.PipelineSucceeded, got.Status.Resting, "left at rest")
			continue
		}
		assert.Empty(t, got.Status.Resting, "%s woken: it comes whole into the cache", p.Name)
	}
}
