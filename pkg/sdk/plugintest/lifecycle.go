package plugintest

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// Remote is the author's view of the remote system a step changes, for Lifecycle and
// CrashReplay: they check effects, not only answers (an executor answering the same twice
// may still have made two tickets).
type Remote struct {
	// Exists tells whether what a step recorded it created (Request.Created) is there
	// and live: the ticket is open, the VM runs.
	Exists func(ctx context.Context, created map[string]string) (bool, error)
	// Count tells how many things the remote system holds that the step made, however
	// they are found (all of them, in a fake), closed or deleted ones included if it still
	// lists them. CrashReplay wants one; Lifecycle compares it before and after Create's
	// first wait, to see a thing made and not recorded.
	Count func(ctx context.Context) (int, error)
	// Fail, when set, makes the remote system fail from now on what a step waits on (the
	// ticket is rejected, the VM goes to error), so that Create ends in an error:
	// Lifecycle calls it at Create's first wait, last, and then tears the failed step down.
	// Without it, Lifecycle checks that teardown only as the one of a step deleted at
	// Create's first wait, which the engine gives the same inputs.
	Fail func(ctx context.Context) error
}

// The pipelines (UIDs) of Lifecycle's runs of a step: each its own idempotency keys, so
// that one run does not find what another made.
const (
	lifecycleUID   = "lifecycle"
	deletedUID     = "lifecycle-deleted-at-first-wait"
	failedUID      = "lifecycle-failed-after-first-wait"
	crashReplayUID = "crash-replay"
)

// Lifecycle runs a step of the executor as the engine does and checks what is left
// remotely, in the manner of terraform-plugin-testing's CheckDestroy, in three runs of
// the step, each torn down as the engine tears a step down: with the created record merged
// from every call that answered (an error's answer is lost) and the step's outputs, never
// a hook's State (the engine drops it when the teardown starts, whether the pipeline was
// deleted or the step failed or timed out mid-wait). Every teardown is run twice with the
// same inputs, as after a crash between its remote calls and the status write (hooks run
// at least once): the second must be done without an error ("already gone", a 404 or a
// 409, is done), and what the record names must not exist after either.
//
//   - To done: the creation hooks (PreCreate, Create, PostCreate) driven to done;
//     remote.Exists of the record (true, and the record must not be empty: teardown would
//     have nothing to go on); the teardown hooks (PreDelete, Delete, PostDelete); Exists
//     again (false).
//   - Deleted at Create's first wait (or timed out then, which the engine tears down the
//     same): PreCreate to done, Create to its first answer that is not done, the teardown.
//     If remote.Count went up meanwhile and the record is empty, what Create made is left
//     for good: it had to record it on the call that made it, not once it was done.
//   - Failed after Create's first wait, with remote.Fail: Fail at that wait, Create driven
//     on to its end (an error: Fail must make it fail), the same checks and teardown.
//
// It returns the record the run to done made.
func Lifecycle(t testing.TB, r Runner, executor string, params map[string]string, remote Remote, opts ...DriveOption) map[string]string {
	t.Helper()
	if remote.Exists == nil || remote.Count == nil {
		t.Errorf("plugintest: Lifecycle needs Remote.Exists and Remote.Count")
		return nil
	}
	s := stepRun{t: t, r: r, executor: executor, params: params, remote: remote, opts: opts}
	created := s.toDone()
	s.atFirstWait(deletedUID, "deleted at Create's first wait", nil)
	if remote.Fail == nil {
		t.Logf("plugintest: Remote.Fail is not set: the teardown of a step whose Create failed after a wait is checked " +
			"as the one of a step deleted at that wait, which gets the same inputs")
		return created
	}
	s.atFirstWait(failedUID, "Create failed after its first wait (Remote.Fail)", remote.Fail)
	return created
}

// stepRun runs one step of a made-up pipeline of Lifecycle's.
type stepRun struct {
	t        testing.TB
	r        Runner
	executor string
	params   map[string]string
	remote   Remote
	opts     []DriveOption
}

// toDone is Lifecycle's run of the creation hooks to done; it returns their record.
func (s stepRun) toDone() map[string]string {
	t := s.t
	t.Helper()
	ctx := t.Context()
	created, outputs, err := runHooks(t, s.r, s.executor, contract.CreationHooks(), lifecycleUID, s.params, nil, nil, s.opts...)
	switch {
	case err != nil:
		t.Errorf("plugintest: %v", err)
		return created
	case len(created) == 0:
		t.Errorf("plugintest: %s created nothing its teardown can find: record it with Result.WithCreated", s.executor)
		return created
	}
	if exists, err := s.remote.Exists(ctx, created); err != nil || !exists {
		t.Errorf("plugintest: after %s's creation hooks, what it recorded (%v) does not exist (err %v)", s.executor, created, err)
		return created
	}
	s.tearDown(lifecycleUID, "", created, outputs)
	return created
}

// atFirstWait is Lifecycle's run of a step whose Create is stopped at its first wait, by a
// deletion of the pipeline (fail nil), or driven on to the error fail provokes.
func (s stepRun) atFirstWait(uid, what string, fail func(context.Context) error) {
	t := s.t
	t.Helper()
	ctx := t.Context()
	before, err := s.remote.Count(ctx)
	if err != nil {
		t.Errorf("plugintest: %s: count what %s made: %v", what, s.executor, err)
		return
	}
	created, outputs, err := runHooks(t, s.r, s.executor, []contract.Hook{contract.HookPreCreate}, uid, s.params, nil, nil, s.opts...)
	if err != nil {
		t.Errorf("plugintest: %s: %v", what, err)
		return
	}
	req := Request(sdk.HookCreate, uid, s.params)
	req.Created = created
	if outputs != nil {
		req.Outputs[req.Step] = outputs
	}
	var (
		waited bool
		failed error // Remote.Fail's own
	)
	d := Drive(t, s.r, s.executor, sdk.HookCreate, req, append(s.opts, atFirstWait(func(DriveResult) bool {
		waited = true
		if fail == nil {
			return true
		}
		if failed = fail(ctx); failed != nil {
			return true
		}
		return false
	}))...)
	switch {
	case !waited && d.Err != nil:
		t.Errorf("plugintest: %s: the %s hook of %s: %v", what, sdk.HookCreate, s.executor, d.Err)
	case !waited:
		// Done at its first call, as the run to done checked: no wait to stop it in.
		t.Logf("plugintest: %s: Create of %s does not wait: nothing more to check", what, s.executor)
	case failed != nil:
		t.Errorf("plugintest: %s: Remote.Fail: %v", what, failed)
	case fail != nil && d.Err == nil:
		t.Errorf("plugintest: %s: Create of %s is done after Remote.Fail: Fail must make what it waits on fail", what, s.executor)
	case fail == nil && d.Err != nil:
		t.Errorf("plugintest: %s: the %s hook of %s: %v", what, sdk.HookCreate, s.executor, d.Err)
	}
	if after, err := s.remote.Count(ctx); err != nil {
		t.Errorf("plugintest: %s: count what %s made: %v", what, s.executor, err)
	} else if after > before && len(d.Created) == 0 {
		t.Errorf("plugintest: %s: Create made %d thing(s) (Remote.Count %d, then %d) and %s recorded nothing: its teardown, "+
			"which gets the created record and never State, cannot find them. Record what a call makes with "+
			"Result.WithCreated on that call, a wait included, not once the hook is done",
			what, after-before, before, after, s.executor)
	}
	s.tearDown(uid, what+": ", d.Created, d.Outputs)
}

// tearDown drives the teardown hooks with what the engine gives them, checks that what
// created names is gone, and does it all again with the same inputs, as after a crash
// between the teardown's remote calls and the status write.
func (s stepRun) tearDown(uid, what string, created, outputs map[string]string) {
	t := s.t
	t.Helper()
	ctx := t.Context()
	if _, _, err := runHooks(t, s.r, s.executor, contract.TeardownHooks(), uid, s.params, created, outputs, s.opts...); err != nil {
		t.Errorf("plugintest: %s%v", what, err)
		return
	}
	if exists, err := s.remote.Exists(ctx, created); err != nil || exists {
		t.Errorf("plugintest: %safter %s's teardown, what it created (%v) still exists (err %v)", what, s.executor, created, err)
		return
	}
	if _, _, err := runHooks(t, s.r, s.executor, contract.TeardownHooks(), uid, s.params, created, outputs, s.opts...); err != nil {
		t.Errorf("plugintest: %sthe teardown run again with the same record, as after a crash before the status write "+
			"(Delete twice is harmless): %v. Hooks run at least once: what is already gone (404, 409) is done, "+
			"or the teardown fails for good and the pipeline keeps its finalizer", what, err)
		return
	}
	if exists, err := s.remote.Exists(ctx, created); err != nil || exists {
		t.Errorf("plugintest: %safter %s's teardown run again, what it created (%v) exists (err %v)", what, s.executor, created, err)
	}
}

// CrashReplay checks the crash window: the operator stopped after the Create call that
// made something and before it wrote down what that call recorded, so Create is called
// again for the same step, with the same idempotency key and no record. It drives the
// creation hooks to done, then Create and PostCreate again as the engine would after such
// a crash, and asks remote.Count whether one thing was made, not two; then tears the step
// down with the second record, which must name something and find the one thing.
func CrashReplay(t testing.TB, r Runner, executor string, params map[string]string, remote Remote, opts ...DriveOption) {
	t.Helper()
	ctx := t.Context()
	first, _, err := runHooks(t, r, executor, contract.CreationHooks(), crashReplayUID, params, nil, nil, opts...)
	if err != nil {
		t.Errorf("plugintest: %v", err)
		return
	}
	again, outputs, err := runHooks(t, r, executor, []contract.Hook{contract.HookCreate, contract.HookPostCreate}, crashReplayUID, params, nil, nil, opts...)
	if err != nil {
		t.Errorf("plugintest: %v", err)
		return
	}
	n, err := remote.Count(ctx)
	switch {
	case err != nil:
		t.Errorf("plugintest: count what %s made: %v", executor, err)
	case n != 1:
		t.Errorf("plugintest: Create of %s, called again with the same idempotency key after a crash, made %d things, not 1: "+
			"send Request.IdempotencyKey to the remote API (or find the thing by it) so a repeat finds what the first call made", executor, n)
	}
	if !maps.Equal(first, again) {
		t.Logf("plugintest: the repeated Create of %s recorded %v, the first %v", executor, again, first)
	}
	// An empty record would make the check after the teardown pass for nothing.
	if len(first) == 0 || len(again) == 0 {
		t.Errorf("plugintest: %s created nothing its teardown can find (records %v, then %v): record it with Result.WithCreated",
			executor, first, again)
		return
	}
	if _, _, err := runHooks(t, r, executor, contract.TeardownHooks(), crashReplayUID, params, again, outputs, opts...); err != nil {
		t.Errorf("plugintest: %v", err)
		return
	}
	if exists, err := remote.Exists(ctx, first); err != nil || exists {
		t.Errorf("plugintest: after the teardown of the repeated run of %s, what the first call created (%v) still exists (err %v)", executor, first, err)
	}
}

// runHooks drives the hooks in order to done for one step of a made-up pipeline (uid),
// each request carrying the created record and the step's outputs so far, as the engine
// gives them (no State: a hook's own), and returns them at the end, or at the first hook
// that fails or does not finish, with its error.
func runHooks(t testing.TB, r Runner, executor string, hooks []contract.Hook, uid string, params map[string]string,
	created, outputs map[string]string, opts ...DriveOption) (map[string]string, map[string]string, error) {
	t.Helper()
	for _, hook := range hooks {
		req := Request(hook, uid, params)
		req.Created = maps.Clone(created)
		if outputs != nil {
			req.Outputs[req.Step] = maps.Clone(outputs)
		}
		out := Drive(t, r, executor, hook, req, opts...)
		created, outputs = out.Created, out.Outputs
		if out.Err != nil {
			return created, outputs, fmt.Errorf("the %s hook of %s: %w", hook, executor, out.Err)
		}
	}
	return created, outputs, nil
}
