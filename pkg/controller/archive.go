package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/archive"
)

// Archiver keeps a record of each state of a pipeline; *archive.Store is one. Put writes
// a record unless one of its UID, generation and state exists, so writing again after a
// crash between Put and the status that says it was written keeps one record.
type Archiver interface {
	Put(ctx context.Context, r archive.Record) (inserted bool, err error)
}

// archiveCallTimeout bounds one write to the archive, so that a slow database holds a
// worker no longer than a hook call would.
const archiveCallTimeout = 10 * time.Second

// finishedState is the state a finished pipeline is archived in.
func finishedState(st *v1alpha1.PipelineStatus) v1alpha1.ArchiveState {
	failed := st.Failure != nil || slices.ContainsFunc(st.Steps, func(s v1alpha1.StepStatus) bool {
		return s.Phase == v1alpha1.StepFailed
	})
	if failed {
		return v1alpha1.ArchiveFailed
	}
	return v1alpha1.ArchiveSucceeded
}

// archivedAsFinished tells whether the archive has p's finished state, as p's status says.
func archivedAsFinished(p *v1alpha1.Pipeline) bool {
	a := p.Status.Archived
	return a != nil && a.Generation == p.Generation && a.State == finishedState(&p.Status)
}

// archiveFinished writes the record of a pipeline the sync leaves finished, once per
// generation and state, and says so in the status the sync writes next (in the same
// write as the status that finished it: archiving costs the API server no write). A
// failed write leaves the status without it, so the next sync, which the returned error
// queues with backoff, writes it again.
func (ps *pipelineSync) archiveFinished(ctx context.Context) error {
	if ps.env.archive == nil || ps.ranSpec == "" || ps.status.SpecHash != ps.ranSpec || ps.held != nil ||
		runModeOf(&ps.p.Spec, ps.status, ps.ranSpec) != modeFinished {
		return nil
	}
	state := finishedState(ps.status)
	if a := ps.status.Archived; a != nil && a.Generation == ps.p.Generation && a.State == state {
		return nil
	}
	finished := ps.now()
	if t := ps.status.CompletionTime; t != nil && state == v1alpha1.ArchiveSucceeded {
		finished = t.Time
	}
	if err := ps.put(ctx, state, finished); err != nil {
		return err
	}
	ps.status.Archived = &v1alpha1.ArchivedState{Generation: ps.p.Generation, State: state, Time: metav1.NewTime(ps.now())}
	return nil
}

// archiveGone writes the record of a pipeline that goes away (deleted after its teardown,
// or orphaned): its finalizer stays until the archive has it, so no record is lost.
func (ps *pipelineSync) archiveGone(ctx context.Context, state v1alpha1.ArchiveState) error {
	if ps.env.archive == nil {
		return nil
	}
	return ps.put(ctx, state, ps.now())
}

// put writes the record of the sync's pipeline, with the status as the sync leaves it.
func (ps *pipelineSync) put(ctx context.Context, state v1alpha1.ArchiveState, finished time.Time) error {
	p := ps.p.DeepCopy()
	p.Status = *ps.status.DeepCopy()
	r, err := archive.RecordOf(p, state, finished)
	if err != nil {
		return fmt.Errorf("archive pipeline %s/%s as %s: %w", p.Namespace, p.Name, state, err)
	}
	ctx, cancel := context.WithTimeout(ctx, archiveCallTimeout)
	defer cancel()
	inserted, err := ps.env.archive.Put(ctx, r)
	ps.env.metrics.ObserveArchiveWrite(err)
	if err != nil {
		return fmt.Errorf("archive pipeline %s/%s as %s: %w", p.Namespace, p.Name, state, err)
	}
	klog.FromContext(ctx).V(4).Info("Archived pipeline", "pipeline", klog.KObj(p), "state", state,
		"generation", p.Generation, "inserted", inserted)
	return nil
}
