package main

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

// Short enough for a test of a few seconds, with the ratios of the defaults (15s/10s/2s).
const (
	testLeaseDuration = time.Second
	testRenewDeadline = 500 * time.Millisecond
	testRetryPeriod   = 100 * time.Millisecond

	// testTimeout bounds every wait; nothing in these tests should take nearly as long.
	testTimeout = 5 * time.Second

	testLeaseNamespace = "stepwise-system"
	testLeaseName      = "stepwise-operator"
)

// A leader told to stop (SIGTERM) keeps its Lease until the hook it has in flight has
// ended: the standby, which keeps trying to take the Lease, starts no hook next to it.
func TestShutdownReleasesLeaseAfterHooksInFlight(t *testing.T) {
	kube := fake.NewClientset()
	a := startReplica(t, kube, "a")
	waitUntil(t, "a runs a hook", func() bool { return len(a.hooks()) == 1 })
	b := startReplica(t, kube, "b")

	a.sigterm()
	// Give b several chances to take the Lease while a's hook runs on.
	tries := b.lock.gets.Load()
	waitUntil(t, "b tries to take the Lease", func() bool { return b.lock.gets.Load() >= tries+3 || len(b.hooks()) > 0 })
	assert.Empty(t, b.hooks(), "b started a hook while a's was in flight")

	a.releaseHooks()
	require.NoError(t, a.wait(t))
	waitUntil(t, "b runs a hook", func() bool { return len(b.hooks()) == 1 })
	assertNoOverlap(t, a, b)
	// a released its Lease: b did not have to wait for it to expire.
	assert.Less(t, b.hooks()[0].start.Sub(a.hooks()[0].end), testLeaseDuration, "b waited for a's Lease to expire")

	b.sigterm()
	b.releaseHooks()
	assert.NoError(t, b.wait(t))
}

// A standby told to stop leaves at once; the leader goes on.
func TestStandbyStops(t *testing.T) {
	kube := fake.NewClientset()
	a := startReplica(t, kube, "a")
	waitUntil(t, "a runs a hook", func() bool { return len(a.hooks()) == 1 })
	b := startReplica(t, kube, "b")
	waitUntil(t, "b stands by", func() bool { return b.lock.gets.Load() > 0 })

	b.sigterm()
	assert.NoError(t, b.wait(t))
	assert.Empty(t, b.hooks())
	assert.True(t, a.hooks()[0].end.IsZero(), "a's hook ended")
}

// A leader whose hook ignores cancellation overruns its grace period: run gives up, but
// does not release the Lease under that hook; it is left to expire once the process has
// exited.
func TestStuckEngineLeavesLeaseToExpire(t *testing.T) {
	kube := fake.NewClientset()
	a := startReplica(t, kube, "a", ignoringCancellation, withGrace(100*time.Millisecond))
	waitUntil(t, "a runs a hook", func() bool { return len(a.hooks()) == 1 })

	a.sigterm()
	assert.ErrorIs(t, a.wait(t), errEngineStuck)
	lease, err := kube.CoordinationV1().Leases(testLeaseNamespace).Get(t.Context(), testLeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "a", ptr.Deref(lease.Spec.HolderIdentity, ""), "the Lease was released under a running hook")
}

// A leader that loses its Lease cancels the hook it has in flight within a lease duration
// of its last renewal, before a standby may take over, and exits (run returns an error).
func TestLostLeaseCancelsHooksInFlight(t *testing.T) {
	for _, tt := range []struct {
		name string
		cut  func(refuse *atomic.Bool, a *replica)
	}{{
		name: "renewals refused",
		cut:  func(refuse *atomic.Bool, _ *replica) { refuse.Store(true) },
	}, {
		// Calls hang until their deadline: client-go then also takes a renew deadline
		// trying to release the Lease before it cancels the leader's context.
		name: "API server unreachable",
		cut:  func(_ *atomic.Bool, a *replica) { a.lock.unreachable.Store(true) },
	}} {
		t.Run(tt.name, func(t *testing.T) {
			kube := fake.NewClientset()
			// Installed before any client call: reactors cannot be added while the fake
			// is in use.
			var refuse atomic.Bool
			kube.PrependReactor("update", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
				lease := action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
				if h := lease.Spec.HolderIdentity; refuse.Load() && h != nil && *h == "a" {
					return true, nil, apierrors.NewServiceUnavailable("storage unavailable")
				}
				return false, nil, nil
			})
			a := startReplica(t, kube, "a")
			waitUntil(t, "a runs a hook", func() bool { return len(a.hooks()) == 1 })
			b := startReplica(t, kube, "b")

			cut := time.Now()
			tt.cut(&refuse, a)
			waitUntil(t, "a's hook ends", func() bool { return !a.hooks()[0].end.IsZero() })
			hook := a.hooks()[0]
			assert.True(t, hook.cancelled, "a's hook ended but was not cancelled")
			assert.Less(t, hook.end.Sub(cut), testLeaseDuration, "a's hook outlived the Lease")
			assert.ErrorIs(t, a.wait(t), errLostLease)

			waitUntil(t, "b takes over and runs a hook", func() bool { return len(b.hooks()) == 1 })
			assertNoOverlap(t, a, b)
		})
	}
}

// replica is one operator replica: the leader election plumbing of main around a fake
// engine, which runs one hook, as a worker would, and takes no more work.
type replica struct {
	// ignoreCancel makes hooks run on when their context ends.
	ignoreCancel bool

	lock    *testLock
	cancel  context.CancelFunc // SIGTERM
	done    chan error         // what run returned
	release chan struct{}      // closed to let hooks finish

	mu    sync.Mutex
	calls []hookCall

	waitMu sync.Mutex // not mu: hooks must be able to end while the test waits for run
	result error
	ended  bool
}

// hookCall is one hook run by a replica; end is zero while it runs.
type hookCall struct {
	start, end time.Time
	cancelled  bool // its context ended before the test let it finish
}

// replicaOption changes a replica, or its election, before it starts.
type replicaOption func(*replica, *leaderElection)

func ignoringCancellation(r *replica, _ *leaderElection) { r.ignoreCancel = true }

func withGrace(d time.Duration) replicaOption {
	return func(_ *replica, l *leaderElection) { l.shutdownGrace, l.stopTimeout = d, d }
}

func startReplica(t *testing.T, kube kubernetes.Interface, name string, opts ...replicaOption) *replica {
	t.Helper()
	r := &replica{
		lock: &testLock{Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: testLeaseNamespace, Name: testLeaseName},
			Client:     kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: name},
		}},
		done:    make(chan error, 1),
		release: make(chan struct{}),
	}
	election := &leaderElection{
		lock:          r.lock,
		name:          testLeaseName,
		leaseDuration: testLeaseDuration,
		renewDeadline: testRenewDeadline,
		retryPeriod:   testRetryPeriod,
		shutdownGrace: testTimeout,
		stopTimeout:   testTimeout,
	}
	for _, opt := range opts {
		opt(r, election)
	}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2))).WithName(name)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	r.cancel = cancel
	go func() { r.done <- election.run(ctx, r.engine) }()
	t.Cleanup(func() {
		r.sigterm()
		r.releaseHooks()
		_ = r.wait(t)
	})
	return r
}

// engine stands for the operator's engine: its one hook runs on lead; once ctx ends it
// takes no more work, and returns when the hook in flight is over.
func (r *replica) engine(ctx, lead context.Context) error {
	r.hook(lead)
	select {
	case <-ctx.Done():
	case <-lead.Done():
	}
	return nil
}

// hook blocks until the test releases it or ctx ends.
func (r *replica) hook(ctx context.Context) {
	r.mu.Lock()
	r.calls = append(r.calls, hookCall{start: time.Now()})
	i := len(r.calls) - 1
	r.mu.Unlock()
	cancelled, done := false, ctx.Done()
	if r.ignoreCancel {
		done = nil
	}
	select {
	case <-r.release:
	case <-done:
		cancelled = true
	}
	r.mu.Lock()
	r.calls[i].end, r.calls[i].cancelled = time.Now(), cancelled
	r.mu.Unlock()
}

func (r *replica) hooks() []hookCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hookCall(nil), r.calls...)
}

func (r *replica) sigterm() { r.cancel() }

func (r *replica) releaseHooks() {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.release:
	default:
		close(r.release)
	}
}

// wait returns what run returned, failing the test if it does not return in time.
func (r *replica) wait(t *testing.T) error {
	t.Helper()
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	if !r.ended {
		select {
		case r.result = <-r.done:
			r.ended = true
		case <-time.After(testTimeout):
			t.Error("the replica did not stop")
			return nil
		}
	}
	return r.result
}

// testLock is a replica's Lease lock, counting its reads, and able to make the API server
// unreachable: calls then hang until their deadline, as behind a network partition.
type testLock struct {
	resourcelock.Interface
	gets        atomic.Int64
	unreachable atomic.Bool
}

func (l *testLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.gets.Add(1)
	if err := l.reach(ctx); err != nil {
		return nil, nil, err
	}
	return l.Interface.Get(ctx)
}

func (l *testLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if err := l.reach(ctx); err != nil {
		return err
	}
	return l.Interface.Create(ctx, rec)
}

func (l *testLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if err := l.reach(ctx); err != nil {
		return err
	}
	return l.Interface.Update(ctx, rec)
}

func (l *testLock) reach(ctx context.Context) error {
	if !l.unreachable.Load() {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

// assertNoOverlap checks that no hook of a ran at the same time as a hook of b; a hook still
// running counts as running until now.
func assertNoOverlap(t *testing.T, a, b *replica) {
	t.Helper()
	now := time.Now()
	end := func(h hookCall) time.Time {
		if h.end.IsZero() {
			return now
		}
		return h.end
	}
	for _, x := range a.hooks() {
		for _, y := range b.hooks() {
			if x.start.Before(end(y)) && y.start.Before(end(x)) {
				t.Errorf("hooks overlap: b's started %s after a's, which ran %s (ended: %t)",
					y.start.Sub(x.start), end(x).Sub(x.start), !x.end.IsZero())
			}
		}
	}
}

// waitUntil polls cond until it holds, failing the test at testTimeout.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, testTimeout, 5*time.Millisecond, "waiting until %s", what)
}
