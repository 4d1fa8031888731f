package chaos

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	historyv1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/history/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/archive"
)

// archivePipeline is a pipeline of instant steps: phase 6 makes many, as a busy cluster
// finishes them, so that kills fall between a record's write and the status that says so.
func archivePipeline(ns, name string) *v1alpha1.Pipeline {
	return &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.PipelineSpec{ServiceAccountName: runnerSA, Steps: []v1alpha1.Step{
			{Name: "first", Executor: "test.noop"}, {Name: "second", Executor: "test.noop"},
		}},
	}
}

// archiveUnderKills is phase 6: cfg.archivePipelines pipelines of instant steps are
// created, run and deleted while the leader is SIGKILLed every cfg.archiveKillEvery and
// the archive's PostgreSQL is restarted, once while they run and once while they are
// deleted. The archive must then hold, of each, exactly one Succeeded and one Deleted
// record: none lost (a deletion waits for its record), none twice.
func (s *suite) archiveUnderKills(ctx context.Context, cfg config) row {
	t, f := s.t, s.fleet
	begin, before := time.Now(), f.counters()
	ns := tenant(t)
	chaos, stop := context.WithCancel(ctx)
	var killer sync.WaitGroup
	killer.Go(func() {
		for sleep(chaos, f.between(cfg.archiveKillEvery)) {
			if i, _ := f.leader(chaos); i >= 0 {
				if _, err := f.kill(i, false); err != nil {
					t.Errorf("kill the leader: %v", err)
				}
			}
		}
	})
	defer func() { stop(); killer.Wait() }()

	uids := make(map[string]string, cfg.archivePipelines) // name → UID
	for i := range cfg.archivePipelines {
		name := fmt.Sprintf("archived-%03d", i)
		var created *v1alpha1.Pipeline
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			created, err = s.client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, archivePipeline(ns, name), metav1.CreateOptions{})
			return err == nil, nil
		})
		require.NoError(t, err, "create pipeline %s/%s", ns, name)
		uids[name] = string(created.UID)
		if i == cfg.archivePipelines/2 {
			cluster.Archive().Server.Restart(t)
		}
	}
	s.waitArchived(ctx, ns, uids, cfg.readyTimeout)

	for name := range uids {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			err := s.client.StepwiseV1alpha1().Pipelines(ns).Delete(ctx, name, metav1.DeleteOptions{})
			return err == nil, nil
		})
		require.NoError(t, err, "delete pipeline %s/%s", ns, name)
	}
	cluster.Archive().Server.Restart(t)
	err := wait.PollUntilContextTimeout(ctx, time.Second, cfg.readyTimeout, true, func(ctx context.Context) (bool, error) {
		left, err := s.client.StepwiseV1alpha1().Pipelines(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(left.Items) == 0, nil
	})
	require.NoError(t, err, "the pipelines of phase 6 are not all gone (a finalizer waits for its record?)\n%s", f.grepLogs("rchive", 20))
	stop()
	killer.Wait()

	// Every pipeline's records, read from the archive itself.
	store, err := archive.Open(ctx, cluster.Archive().Server.DSN)
	require.NoError(t, err)
	defer store.Close()
	want := []v1alpha1.ArchiveState{v1alpha1.ArchiveSucceeded, v1alpha1.ArchiveDeleted}
	total := 0
	for o := (archive.ListOptions{Namespace: ns, Limit: 500}); ; {
		page, err := store.List(ctx, o)
		require.NoError(t, err)
		total += len(page.Records)
		if page.Continue == "" {
			break
		}
		o.Continue = page.Continue
	}
	for name, uid := range uids {
		page, err := store.List(ctx, archive.ListOptions{Namespace: ns, Fields: map[string]string{historyv1alpha1.FieldPipelineUID: uid}})
		require.NoError(t, err)
		var got []v1alpha1.ArchiveState
		for _, r := range page.Records {
			got = append(got, r.State)
		}
		slices.Sort(got)
		sorted := slices.Clone(want)
		slices.Sort(sorted)
		if !slices.Equal(sorted, got) {
			t.Errorf("pipeline %s/%s: the archive has %v, want exactly %v", ns, name, got, want)
		}
	}
	if total != len(want)*len(uids) {
		t.Errorf("the archive holds %d records of the phase's %d pipelines, want %d", total, len(uids), len(want)*len(uids))
	}
	return row{
		phase: "6 archive: leader SIGKILL loop, PostgreSQL restarted twice", pipelines: len(uids),
		n: f.counters().minus(before), wall: time.Since(begin),
		notes: []string{fmt.Sprintf("phase 6: %d records archived, %d per pipeline", total, len(want))},
	}
}

// waitArchived waits until every pipeline of uids in ns says the archive has its finished
// state.
func (s *suite) waitArchived(ctx context.Context, ns string, uids map[string]string, timeout time.Duration) {
	var left []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := s.client.StepwiseV1alpha1().Pipelines(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // the API server may be busy: look again
		}
		left = left[:0]
		for _, p := range list.Items {
			if a := p.Status.Archived; a == nil || a.State != v1alpha1.ArchiveSucceeded {
				left = append(left, p.Name)
			}
		}
		return len(list.Items) == len(uids) && len(left) == 0, nil
	})
	require.NoError(s.t, err, "pipelines of phase 6 not archived as Succeeded: %v\n%s", left, s.fleet.grepLogs("rchive", 20))
}
