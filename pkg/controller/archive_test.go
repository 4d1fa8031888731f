package controller

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/archive"
)

// memoryArchive keeps records as the archive's Put does: one per UID, generation and state.
type memoryArchive struct {
	mu      sync.Mutex
	records []archive.Record
	// down makes every Put fail, as a database that does not answer.
	down bool
	puts int
}

func (a *memoryArchive) Put(_ context.Context, r archive.Record) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.puts++
	if a.down {
		return false, errors.New("connection refused")
	}
	for _, have := range a.records {
		if have.UID == r.UID && have.Generation == r.Generation && have.State == r.State {
			return false, nil
		}
	}
	a.records = append(a.records, r)
	return true, nil
}

// states lists the records' states in the order they were written.
func (a *memoryArchive) states() []v1alpha1.ArchiveState {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []v1alpha1.ArchiveState
	for _, r := range a.records {
		out = append(out, r.State)
	}
	return out
}

func archivedFixture(t *testing.T, p *v1alpha1.Pipeline) (*fixture, *memoryArchive) {
	f := newFixture(t, p)
	a := &memoryArchive{}
	f.c.archive = a
	return f, a
}

func TestAFinishedPipelineIsArchivedOnceInTheWriteThatFinishesIt(t *testing.T) {
	p := newPipeline(stepsOf("a", "b")...)
	p.Labels = map[string]string{"team": "a", v1alpha1.LabelTrigger: "retire"}
	p.Annotations = map[string]string{v1alpha1.AnnotationObject: "node-1"}
	f, a := archivedFixture(t, p)

	f.syncUntilIdle("p")

	assert.Equal(t, []string{"update pipelines/status"}, f.writes(), "archiving costs the API server no write")
	require.Equal(t, []v1alpha1.ArchiveState{v1alpha1.ArchiveSucceeded}, a.states())
	r := a.records[0]
	assert.Equal(t, "p.uid1.1.succeeded", r.Name)
	assert.Equal(t, "retire", r.Trigger)
	assert.Equal(t, "node-1", r.Object)
	assert.Equal(t, string(v1alpha1.PipelineSucceeded), r.Phase)
	var body v1alpha1.Pipeline
	require.NoError(t, json.Unmarshal(r.Body, &body))
	assert.Equal(t, v1alpha1.PipelineSucceeded, body.Status.Phase, "the record holds the status that finished it")
	assert.Len(t, body.Status.Steps, 2)
	got := f.get("p").Status.Archived
	require.NotNil(t, got)
	assert.Equal(t, v1alpha1.ArchiveSucceeded, got.State)
	assert.Equal(t, int64(1), got.Generation)

	f.client.ClearActions()
	f.sync("p") // a resync
	assert.Empty(t, f.writes())
	assert.Equal(t, 1, a.puts, "an archived state is not written again")
}

func TestAnArchiveThatDoesNotAnswerIsTriedAgainAndLosesNothing(t *testing.T) {
	f, a := archivedFixture(t, newPipeline(stepsOf("a")...))
	a.down = true

	_, err := f.c.syncHandler(f.ctx, cache.ObjectName{Namespace: "ns", Name: "p"})
	require.ErrorContains(t, err, "connection refused", "the error queues the pipeline again with backoff")
	f.refresh("p")
	got := f.get("p")
	assert.Equal(t, v1alpha1.PipelineSucceeded, got.Status.Phase, "the run's status is written all the same")
	assert.Nil(t, got.Status.Archived)

	a.down = false
	f.sync("p")
	assert.Equal(t, []v1alpha1.ArchiveState{v1alpha1.ArchiveSucceeded}, a.states())
	assert.NotNil(t, f.get("p").Status.Archived)
}

func TestAFinishedPipelineWhoseValuesTheCacheLeftOutIsArchivedAfterARestart(t *testing.T) {
	f, a := archivedFixture(t, newPipeline(stepsOf("a")...))
	a.down = true
	_, err := f.c.syncHandler(f.ctx, cache.ObjectName{Namespace: "ns", Name: "p"})
	require.Error(t, err)
	f.refresh("p")

	g := f.restart()
	g.trimmed = true
	g.refresh("p")
	g.c.archive = a
	a.down = false
	cached, _, _ := g.indexer.GetByKey("ns/p")
	cached.(*v1alpha1.Pipeline).Elided = &v1alpha1.ElidedValues{SpecHash: specHash(&cached.(*v1alpha1.Pipeline).Spec)}
	g.sync("p")
	assert.Equal(t, []v1alpha1.ArchiveState{v1alpha1.ArchiveSucceeded}, a.states(),
		"a finished pipeline at rest is still read whole while its record is missing")
}

func TestAFailedPipelineIsArchivedAsFailedAndARetryThatSucceedsAgain(t *testing.T) {
	step := v1alpha1.Step{Name: "a", Executor: "test.record", Retry: &v1alpha1.RetryPolicy{Limit: 0}}
	f, a := archivedFixture(t, newPipeline(step))
	f.exec.on("a", v1alpha1.HookCreate, failWith(errors.New("boom")))
	f.syncUntilIdle("p")
	assert.Equal(t, []v1alpha1.ArchiveState{v1alpha1.ArchiveFailed}, a.states())

	f.exec.on("a", v1alpha1.HookCreate, done)
	f.update("p", func(p *v1alpha1.Pipeline) { p.Annotations = map[string]string{v1alpha1.RetryAnnotation: ""} })
	f.syncUntilIdle("p")
	assert.Equal(t, []v1alpha1.ArchiveState{v1alpha1.ArchiveFailed, v1alpha1.ArchiveSucceeded}, a.states())
}

func TestADeletedPipelineKeepsItsFinalizerUntilTheArchiveHasIt(t *testing.T) {
	f, a := archivedFixture(t, newPipeline(stepsOf("a")...))
	f.syncUntilIdle("p")
	f.delete("p")
	a.down = true

	_, err := f.c.syncHandler(f.ctx, cache.ObjectName{Namespace: "ns", Name: "p"})
	require.ErrorContains(t, err, "connection refused")
	f.refresh("p")
	got := f.get("p")
	assert.Contains(t, got.Finalizers, v1alpha1.Finalizer, "no record is lost: the deletion waits for the archive")
	ready := readyCondition(got.Status.Conditions)
	assert.Equal(t, v1alpha1.ReasonArchivePending, ready.Reason)
	assert.Contains(t, ready.Message, "connection refused", "it says what it waits for")
	require.Len(t, got.Status.BlockedBy, 1)
	assert.Equal(t, v1alpha1.BlockerArchive, got.Status.BlockedBy[0].Kind)
	assert.Contains(t, got.Status.BlockedBy[0].Unblock, "remove the finalizer stepwise.dev/teardown", "and how to get out")
	assert.Equal(t, v1alpha1.StepDeleted, stepStatus(got, "a").Phase, "the teardown is written down, not run again")
	f.exec.reset()

	a.down = false
	f.syncUntilIdle("p")
	assert.Empty(t, f.exec.Calls(), "the teardown that finished does not run again")
	assert.Equal(t, []v1alpha1.ArchiveState{v1alpha1.ArchiveSucceeded, v1alpha1.ArchiveDeleted}, a.states())
	assert.NotContains(t, f.get("p").Finalizers, v1alpha1.Finalizer)
}

func TestAnOrphanedPipelineIsArchivedAsOrphaned(t *testing.T) {
	f, a := archivedFixture(t, newPipeline(stepsOf("a")...))
	f.syncUntilIdle("p")
	f.exec.reset()
	f.update("p", func(p *v1alpha1.Pipeline) {
		p.Annotations = map[string]string{v1alpha1.TeardownPolicyAnnotation: v1alpha1.TeardownOrphan}
	})
	f.delete("p")
	f.syncUntilIdle("p")
	assert.Equal(t, []v1alpha1.ArchiveState{v1alpha1.ArchiveSucceeded, v1alpha1.ArchiveOrphaned}, a.states())
	assert.Empty(t, f.exec.Calls(), "nothing torn down")
	assert.NotContains(t, f.get("p").Finalizers, v1alpha1.Finalizer)
}

func TestWithoutAnArchiveNothingIsArchived(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("a")...))
	f.syncUntilIdle("p")
	assert.Nil(t, f.get("p").Status.Archived)
}
