// Package executor is the contract between the Stepwise engine and the code that does a
// step's work: the TaskExecutor interface, what a hook is given (Request) and what it
// answers (Result), and the registry that maps executor names to implementations.
package executor

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// TaskExecutor does the work of a step. Every hook runs at least once, so each must be
// idempotent: a second Create of a finished thing succeeds and changes nothing, a Delete
// of something never created succeeds.
//
// A hook that starts long work returns a Result that is not done, with the time after
// which it wants to be asked again; it never blocks until the work ends.
type TaskExecutor interface {
	// Name is the name steps use in spec.steps[].executor, e.g. "node.cordon".
	Name() string
	PreCreate(ctx context.Context, req *Request) (Result, error)
	Create(ctx context.Context, req *Request) (Result, error)
	PostCreate(ctx context.Context, req *Request) (Result, error)
	PreDelete(ctx context.Context, req *Request) (Result, error)
	Delete(ctx context.Context, req *Request) (Result, error)
	PostDelete(ctx context.Context, req *Request) (Result, error)
}

// PipelineRef identifies the pipeline a hook runs for.
type PipelineRef struct {
	Namespace  string
	Name       string
	UID        types.UID
	Generation int64
}

// Clients act as the pipeline's ServiceAccount, never as the operator.
type Clients struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Mapper maps kinds to resources; discovery data is the same for every identity.
	Mapper meta.RESTMapper
}

// Request is what a hook is given.
type Request struct {
	Pipeline PipelineRef
	// ServiceAccountName is the ServiceAccount the Clients act as.
	ServiceAccountName string
	Step               string
	Hook               v1alpha1.Hook
	// Params are the step's parameters with every $(...) reference resolved.
	Params map[string]string
	// Outputs are the outputs of the steps before this one, by step name.
	Outputs map[string]map[string]string
	// Attempt counts the attempts of this hook, from 1.
	Attempt int32
	// IdempotencyKey is the same for every attempt of one hook of one step of one
	// pipeline, so that a remote system can recognise a repeated call.
	IdempotencyKey string
	// Clients is set for built-in executors; plugins get what they need from the host.
	Clients *Clients
}

// IdempotencyKey is the key of a hook of a step of the pipeline with the given UID.
func IdempotencyKey(uid types.UID, step string, hook v1alpha1.Hook) string {
	return fmt.Sprintf("%s/%s/%s", uid, step, hook)
}

// Result is what a hook answers when it did not fail.
type Result struct {
	// Done is true once the hook's work is finished.
	Done bool
	// RequeueAfter is when to call the hook again when it is not done.
	RequeueAfter time.Duration
	// Outputs are merged into the step's outputs, for later steps and for the status.
	Outputs map[string]string
	// Message is a short line for the step's status, such as "3 pods left".
	Message string
}

// Done is the Result of a finished hook.
func Done(message string) Result { return Result{Done: true, Message: message} }

// DoneWithOutputs is the Result of a finished hook that reports outputs.
func DoneWithOutputs(message string, outputs map[string]string) Result {
	return Result{Done: true, Message: message, Outputs: outputs}
}

// Wait is the Result of a hook whose work goes on: ask again after the given time.
func Wait(after time.Duration, message string) Result {
	return Result{RequeueAfter: after, Message: message}
}

// RunHook calls the hook of e that h names.
func RunHook(ctx context.Context, e TaskExecutor, h v1alpha1.Hook, req *Request) (Result, error) {
	switch h {
	case v1alpha1.HookPreCreate:
		return e.PreCreate(ctx, req)
	case v1alpha1.HookCreate:
		return e.Create(ctx, req)
	case v1alpha1.HookPostCreate:
		return e.PostCreate(ctx, req)
	case v1alpha1.HookPreDelete:
		return e.PreDelete(ctx, req)
	case v1alpha1.HookDelete:
		return e.Delete(ctx, req)
	case v1alpha1.HookPostDelete:
		return e.PostDelete(ctx, req)
	default:
		return Result{}, Permanent("UnknownHook", fmt.Errorf("unknown hook %q", h))
	}
}

// Base implements every hook as done at once. Embed it and override only the hooks an
// executor needs.
type Base struct{}

func (Base) PreCreate(context.Context, *Request) (Result, error)  { return Result{Done: true}, nil }
func (Base) Create(context.Context, *Request) (Result, error)     { return Result{Done: true}, nil }
func (Base) PostCreate(context.Context, *Request) (Result, error) { return Result{Done: true}, nil }
func (Base) PreDelete(context.Context, *Request) (Result, error)  { return Result{Done: true}, nil }
func (Base) Delete(context.Context, *Request) (Result, error)     { return Result{Done: true}, nil }
func (Base) PostDelete(context.Context, *Request) (Result, error) { return Result{Done: true}, nil }
