// Package contract is what the Stepwise engine and every executor, built in or plugin,
// exchange: the six hooks and the one dispatcher over them, a hook's Request and Result,
// its errors with their reasons, and how an executor describes itself. It imports nothing
// but the standard library, so the operator (through pkg/executor) and plugin authors
// (through pkg/sdk) share one definition without a plugin ever pulling in the operator.
package contract

import (
	"context"
	"fmt"
)

// Hook names one of the six hooks, as the Pipeline status shows them.
type Hook string

// The six hooks: creation runs the first three in order, teardown the last three.
const (
	HookPreCreate  Hook = "PreCreate"
	HookCreate     Hook = "Create"
	HookPostCreate Hook = "PostCreate"
	HookPreDelete  Hook = "PreDelete"
	HookDelete     Hook = "Delete"
	HookPostDelete Hook = "PostDelete"
)

// CreationHooks are the hooks that create a step's work, in the order they run. A function,
// not a variable: a caller may change the slice it gets without changing anyone else's.
func CreationHooks() []Hook { return []Hook{HookPreCreate, HookCreate, HookPostCreate} }

// TeardownHooks are the hooks that tear a step's work down, in the order they run.
func TeardownHooks() []Hook { return []Hook{HookPreDelete, HookDelete, HookPostDelete} }

// AllHooks are the six hooks in the order a pipeline runs them: creation, then teardown.
func AllHooks() []Hook { return append(CreationHooks(), TeardownHooks()...) }

// Hooks is what an executor implements, for a request of type R (the engine's carries
// Kubernetes clients, a plugin's does not). Every hook runs at least once, so each must be
// idempotent: a second Create of a finished thing succeeds and changes nothing, a Delete of
// something never created succeeds. A hook that starts long work returns a Result that is
// not done, with the time after which it wants to be asked again; it never blocks.
type Hooks[R any] interface {
	PreCreate(ctx context.Context, req R) (Result, error)
	Create(ctx context.Context, req R) (Result, error)
	PostCreate(ctx context.Context, req R) (Result, error)
	PreDelete(ctx context.Context, req R) (Result, error)
	Delete(ctx context.Context, req R) (Result, error)
	PostDelete(ctx context.Context, req R) (Result, error)
}

// RunHook calls the hook of h that hook names; a hook it does not know fails for good with
// reason UnknownHook. It is the one place a hook name becomes a method call, in the
// operator and in every plugin.
func RunHook[R any](ctx context.Context, h Hooks[R], hook Hook, req R) (Result, error) {
	switch hook {
	case HookPreCreate:
		return h.PreCreate(ctx, req)
	case HookCreate:
		return h.Create(ctx, req)
	case HookPostCreate:
		return h.PostCreate(ctx, req)
	case HookPreDelete:
		return h.PreDelete(ctx, req)
	case HookDelete:
		return h.Delete(ctx, req)
	case HookPostDelete:
		return h.PostDelete(ctx, req)
	default:
		return Result{}, Permanent(ReasonUnknownHook, fmt.Errorf("unknown hook %q", hook))
	}
}

// Base implements every hook as done at once, with no message. Embed it and override only
// the hooks an executor needs.
type Base[R any] struct{}

func (Base[R]) PreCreate(context.Context, R) (Result, error)  { return Result{Done: true}, nil }
func (Base[R]) Create(context.Context, R) (Result, error)     { return Result{Done: true}, nil }
func (Base[R]) PostCreate(context.Context, R) (Result, error) { return Result{Done: true}, nil }
func (Base[R]) PreDelete(context.Context, R) (Result, error)  { return Result{Done: true}, nil }
func (Base[R]) Delete(context.Context, R) (Result, error)     { return Result{Done: true}, nil }
func (Base[R]) PostDelete(context.Context, R) (Result, error) { return Result{Done: true}, nil }
