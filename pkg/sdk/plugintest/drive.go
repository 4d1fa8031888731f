package plugintest

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// DefaultMaxPolls bounds the calls Drive makes of a hook that is never done.
const DefaultMaxPolls = 1000

// callTimeout bounds one call of a hook, as an attempt's deadline would.
const callTimeout = 30 * time.Second

// DriveResult is how a driven hook ended.
type DriveResult struct {
	// Result is what the last call answered.
	Result sdk.Result
	// Err is the last call's error, or why Drive stopped calling: the bound on polls, a
	// state over its bounds.
	Err error
	// Polls counts the calls made, the first included.
	Polls int
	// Waited is the time the hook asked to wait, in all: how far the fake clock moved.
	Waited time.Duration
	// Outputs are the step's own outputs at the end, every call's merged as the engine
	// merges them.
	Outputs map[string]string
	// Created is the step's created record at the end (Request.Created with what every call
	// recorded merged in), as the engine keeps it for the step's teardown.
	Created map[string]string
}

// DriveOption tunes Drive.
type DriveOption func(*driver)

type driver struct {
	maxPolls int
	onCall   func(poll int, res sdk.Result, err error)
	// atFirstWait sees the drive at the hook's first answer that is not done, and stops it
	// there when it returns true: what Lifecycle does to a step deleted, or failed, during
	// its first wait.
	atFirstWait func(DriveResult) (stop bool)
}

// atFirstWait has f see the drive at the hook's first answer that is not done (its State
// carried, its wait counted in DriveResult.Waited), and stops it there when f returns true.
func atFirstWait(f func(DriveResult) (stop bool)) DriveOption {
	return func(d *driver) { d.atFirstWait = f }
}

// MaxPolls bounds the calls Drive makes (DefaultMaxPolls when n < 1).
func MaxPolls(n int) DriveOption {
	return func(d *driver) {
		if n >= 1 {
			d.maxPolls = n
		}
	}
}

// OnCall has f see what every call answered, polls counted from 1.
func OnCall(f func(poll int, res sdk.Result, err error)) DriveOption {
	return func(d *driver) { d.onCall = f }
}

// Drive runs a hook to its end the way the engine does, without sleeping: it calls the
// hook and, while it is not done, calls it again with the State of its last Result
// (Request.State) and the step's outputs merged with those it returned, in the same
// attempt. Time is faked: Request.HookStarted (req's, or now when it has none) is moved
// back by each RequeueAfter, so that a hook computing time.Since(req.HookStarted) sees the
// time it waited; Request.StepStarted (req's, or the hook's start) moves with it. What a
// call records it created is merged into Request.Created for the next, as the engine
// does (DriveResult.Created). Drive stops at done, at an error, at a State over sdk.MaxStateEntries or
// sdk.MaxStateSize (which the engine cannot keep), or after MaxPolls calls. A Result that
// is neither done nor waiting (RequeueAfter 0) is called again at once.
func Drive(t testing.TB, r Runner, executor string, hook sdk.Hook, req *sdk.Request, opts ...DriveOption) DriveResult {
	t.Helper()
	d := driver{maxPolls: DefaultMaxPolls}
	for _, o := range opts {
		o(&d)
	}
	return d.drive(t.Context(), r, executor, hook, req)
}

func (d driver) drive(ctx context.Context, r Runner, executor string, hook sdk.Hook, req *sdk.Request) DriveResult {
	start := req.HookStarted
	if start.IsZero() {
		start = time.Now()
	}
	stepStart := req.StepStarted
	if stepStart.IsZero() {
		stepStart = start
	}
	call := *req
	call.Hook = hook
	call.Created = maps.Clone(req.Created)
	call.Outputs = make(map[string]map[string]string, len(req.Outputs)+1)
	for step, o := range req.Outputs {
		call.Outputs[step] = maps.Clone(o)
	}
	out := DriveResult{Outputs: maps.Clone(req.Outputs[req.Step]), Created: maps.Clone(req.Created)}
	for out.Polls < d.maxPolls {
		call.HookStarted, call.StepStarted = start.Add(-out.Waited), stepStart.Add(-out.Waited)
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		out.Result, out.Err = r.Run(callCtx, executor, hook, &call)
		cancel()
		out.Polls++
		if d.onCall != nil {
			d.onCall(out.Polls, out.Result, out.Err)
		}
		if out.Err != nil {
			return out
		}
		if len(out.Result.Outputs) > 0 {
			if out.Outputs == nil {
				out.Outputs = map[string]string{}
			}
			maps.Copy(out.Outputs, out.Result.Outputs)
			call.Outputs[call.Step] = maps.Clone(out.Outputs)
		}
		if err := checkCreated(out.Created, out.Result.Created); err != nil {
			out.Err = fmt.Errorf("plugintest: call %d of the %s hook of %s: %w", out.Polls, hook, executor, err)
			return out
		}
		if len(out.Result.Created) > 0 {
			if out.Created == nil {
				out.Created = map[string]string{}
			}
			maps.Copy(out.Created, out.Result.Created)
			call.Created = maps.Clone(out.Created)
		}
		if out.Result.Done {
			return out
		}
		if err := contract.CheckState(out.Result.State); err != nil {
			out.Err = fmt.Errorf("plugintest: call %d of the %s hook of %s returned %w", out.Polls, hook, executor, err)
			return out
		}
		call.State = out.Result.State
		out.Waited += max(out.Result.RequeueAfter, 0)
		if first := d.atFirstWait; first != nil {
			d.atFirstWait = nil // d is this drive's copy
			if first(out) {
				return out
			}
		}
	}
	out.Err = fmt.Errorf("plugintest: the %s hook of %s is not done after %d calls (%s waited); last message %q",
		hook, executor, out.Polls, out.Waited, out.Result.Message)
	return out
}

// checkCreated checks a step's created record, with what a call added, against the bounds
// of what the engine keeps.
func checkCreated(record, added map[string]string) error {
	merged := maps.Clone(record)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, added)
	if err := contract.CheckCreated(merged); err != nil {
		return fmt.Errorf("the hooks returned %w", err)
	}
	return nil
}
