package plugintest

import (
	"context"
	"maps"
	"testing"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// Remote is the author's view of the remote system a step changes, for Lifecycle and
// CrashReplay: they check effects, not only answers (an executor answering the same twice
// may still have made two tickets).
type Remote struct {
	// Exists tells whether what a step recorded it created (Request.Created) is there
	// and live: the ticket is open, the VM runs.
	Exists func(ctx context.Context, created map[string]string) (bool, error)
	// Count tells how many things the remote system holds that the step made, however
	// they are found (all of them, in a fake). CrashReplay wants one.
	Count func(ctx context.Context) (int, error)
}

// Lifecycle runs a step of the executor as the engine does and checks what is left
// remotely, in the manner of terraform-plugin-testing's CheckDestroy: it drives the
// creation hooks (PreCreate, Create, PostCreate) to done, each with the created record the
// earlier calls made; asks remote.Exists of that record (true, and the record must not be
// empty: teardown would have nothing to go on); drives the teardown hooks (PreDelete,
// Delete, PostDelete) with the record and the step's outputs, as the engine gives them;
// and asks remote.Exists again (false). It returns the record Create made.
func Lifecycle(t testing.TB, r Runner, executor string, params map[string]string, remote Remote, opts ...DriveOption) map[string]string {
	t.Helper()
	ctx := t.Context()
	created, outputs := runHooks(t, r, executor, contract.CreationHooks(), "lifecycle", params, nil, nil, opts...)
	if t.Failed() {
		return created
	}
	if len(created) == 0 {
		t.Errorf("plugintest: %s created nothing its teardown can find: record it with Result.WithCreated", executor)
		return created
	}
	if exists, err := remote.Exists(ctx, created); err != nil || !exists {
		t.Errorf("plugintest: after %s's creation hooks, what it recorded (%v) does not exist (err %v)", executor, created, err)
		return created
	}
	runHooks(t, r, executor, contract.TeardownHooks(), "lifecycle", params, created, outputs, opts...)
	if exists, err := remote.Exists(ctx, created); err != nil || exists {
		t.Errorf("plugintest: after %s's teardown, what it created (%v) still exists (err %v)", executor, created, err)
	}
	return created
}

// CrashReplay checks the crash window: the operator stopped after the Create call that
// made something and before it wrote down what that call recorded, so Create is called
// again for the same step, with the same idempotency key and no record. It drives the
// creation hooks to done, then Create and PostCreate again as the engine would after such
// a crash, and asks remote.Count whether one thing was made, not two; then tears the step
// down with the second record, which must find the one thing.
func CrashReplay(t testing.TB, r Runner, executor string, params map[string]string, remote Remote, opts ...DriveOption) {
	t.Helper()
	ctx := t.Context()
	first, _ := runHooks(t, r, executor, contract.CreationHooks(), "crash-replay", params, nil, nil, opts...)
	if t.Failed() {
		return
	}
	again, outputs := runHooks(t, r, executor, []contract.Hook{contract.HookCreate, contract.HookPostCreate}, "crash-replay", params, nil, nil, opts...)
	if t.Failed() {
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
	runHooks(t, r, executor, contract.TeardownHooks(), "crash-replay", params, again, outputs, opts...)
	if exists, err := remote.Exists(ctx, first); err != nil || exists {
		t.Errorf("plugintest: after the teardown of the repeated run of %s, what the first call created (%v) still exists (err %v)", executor, first, err)
	}
}

// runHooks drives the hooks in order to done for one step of a made-up pipeline (uid),
// each request carrying the created record and the step's outputs so far, and returns
// them at the end. A hook that does not finish fails the test.
func runHooks(t testing.TB, r Runner, executor string, hooks []contract.Hook, uid string, params map[string]string,
	created, outputs map[string]string, opts ...DriveOption) (map[string]string, map[string]string) {
	t.Helper()
	for _, hook := range hooks {
		req := Request(hook, uid, params)
		req.Created = maps.Clone(created)
		if outputs != nil {
			req.Outputs[req.Step] = maps.Clone(outputs)
		}
		out := Drive(t, r, executor, hook, req, opts...)
		if out.Err != nil {
			t.Errorf("plugintest: the %s hook of %s: %v", hook, executor, out.Err)
			return created, outputs
		}
		created, outputs = out.Created, out.Outputs
	}
	return created, outputs
}
