// Package sdk is what a Stepwise plugin author imports: implement Executor (embed Base
// for the hooks you do not need) and call Serve from main. It depends only on the
// protocol package (pkg/plugin/proto), go-plugin and gRPC, never on the operator.
//
//	func main() { sdk.Serve(greeter{}) }
package sdk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
)

// Hook names one of the six hooks.
type Hook string

// The six hooks, named as in the Pipeline status.
const (
	HookPreCreate  Hook = "PreCreate"
	HookCreate     Hook = "Create"
	HookPostCreate Hook = "PostCreate"
	HookPreDelete  Hook = "PreDelete"
	HookDelete     Hook = "Delete"
	HookPostDelete Hook = "PostDelete"
)

// PipelineRef identifies the Pipeline a hook runs for.
type PipelineRef struct {
	Namespace  string
	Name       string
	UID        string
	Generation int64
}

// Request is what a hook gets, as the operator's executors do.
type Request struct {
	Pipeline PipelineRef
	Step     string
	Hook     Hook
	// Params are the step's resolved parameters.
	Params map[string]string
	// Outputs are the outputs of earlier steps and of this step, by step name.
	Outputs map[string]map[string]string
	// Attempt counts the attempts of this hook, from 1.
	Attempt int32
	// IdempotencyKey is stable across the attempts of a hook: pipeline UID/step/hook.
	IdempotencyKey string
	// Secrets holds the data of the Secrets named by parameters ending in "Secret"
	// (e.g. credentialsSecret), by key, read by the operator as the pipeline's service
	// account. Never log them or put them in outputs or messages.
	Secrets map[string][]byte
}

// Result says whether a hook is done, when to look again if not, its outputs and a short
// message for the status.
type Result struct {
	Done         bool
	RequeueAfter time.Duration
	Outputs      map[string]string
	Message      string
}

// Done is a finished hook.
func Done(message string) Result { return Result{Done: true, Message: message} }

// DoneWithOutputs is a finished hook with outputs for later steps.
func DoneWithOutputs(message string, outputs map[string]string) Result {
	return Result{Done: true, Message: message, Outputs: outputs}
}

// Wait asks to run the hook again after a while: long work never blocks.
func Wait(after time.Duration, message string) Result {
	return Result{RequeueAfter: after, Message: message}
}

// Error is an error with a reason (CamelCase) and whether retrying can help.
type Error struct {
	Reason    string
	Permanent bool
	Err       error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Permanent fails the step at once (bad parameters, a thing that will never exist).
func Permanent(reason string, err error) error {
	return &Error{Reason: reason, Permanent: true, Err: err}
}

// Retryable is retried with backoff up to the step's retry limit. A plain error is
// retryable too, with reason HookFailed.
func Retryable(reason string, err error) error { return &Error{Reason: reason, Err: err} }

// Parameter documents one parameter of an executor.
type Parameter struct {
	Name        string
	Description string
	Required    bool
}

// Description is what the operator learns about an executor when it starts the plugin.
type Description struct {
	Version     string
	Description string
	Parameters  []Parameter
}

// Executor is the plugin side of a TaskExecutor. Hooks are run at least once: make them
// idempotent. Every hook gets a context with the attempt's deadline.
type Executor interface {
	Name() string
	Describe() Description
	PreCreate(ctx context.Context, req *Request) (Result, error)
	Create(ctx context.Context, req *Request) (Result, error)
	PostCreate(ctx context.Context, req *Request) (Result, error)
	PreDelete(ctx context.Context, req *Request) (Result, error)
	Delete(ctx context.Context, req *Request) (Result, error)
	PostDelete(ctx context.Context, req *Request) (Result, error)
}

// Base implements every hook as "done, nothing to do" and an empty description; embed it.
type Base struct{}

// Describe returns an empty description.
func (Base) Describe() Description { return Description{} }

// PreCreate does nothing.
func (Base) PreCreate(context.Context, *Request) (Result, error) { return Done(""), nil }

// Create does nothing.
func (Base) Create(context.Context, *Request) (Result, error) { return Done(""), nil }

// PostCreate does nothing.
func (Base) PostCreate(context.Context, *Request) (Result, error) { return Done(""), nil }

// PreDelete does nothing.
func (Base) PreDelete(context.Context, *Request) (Result, error) { return Done(""), nil }

// Delete does nothing.
func (Base) Delete(context.Context, *Request) (Result, error) { return Done(""), nil }

// PostDelete does nothing.
func (Base) PostDelete(context.Context, *Request) (Result, error) { return Done(""), nil }

// Serve serves the executors over go-plugin (gRPC, mutual TLS) until the operator stops
// the plugin. Call it from main; it does not return.
func Serve(executors ...Executor) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: proto.Handshake,
		Plugins:         proto.PluginSet(NewServer(executors...)),
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}

// NewServer returns the gRPC implementation of the protocol for the executors (Serve and
// plugintest use it).
func NewServer(executors ...Executor) proto.ExecutorServer {
	s := &server{executors: map[string]Executor{}}
	for _, e := range executors {
		s.names = append(s.names, e.Name())
		s.executors[e.Name()] = e
	}
	return s
}

type server struct {
	proto.UnimplementedExecutorServer
	names     []string
	executors map[string]Executor
}

func (s *server) Describe(context.Context, *proto.DescribeRequest) (*proto.DescribeResponse, error) {
	resp := &proto.DescribeResponse{}
	for _, name := range s.names {
		d := s.executors[name].Describe()
		info := &proto.ExecutorInfo{Name: name, Version: d.Version, Description: d.Description}
		for _, p := range d.Parameters {
			info.Parameters = append(info.Parameters, &proto.Parameter{Name: p.Name, Description: p.Description, Required: p.Required})
		}
		resp.Executors = append(resp.Executors, info)
	}
	return resp, nil
}

var hooks = map[proto.Hook]Hook{
	proto.Hook_HOOK_PRE_CREATE:  HookPreCreate,
	proto.Hook_HOOK_CREATE:      HookCreate,
	proto.Hook_HOOK_POST_CREATE: HookPostCreate,
	proto.Hook_HOOK_PRE_DELETE:  HookPreDelete,
	proto.Hook_HOOK_DELETE:      HookDelete,
	proto.Hook_HOOK_POST_DELETE: HookPostDelete,
}

func (s *server) RunHook(ctx context.Context, in *proto.RunHookRequest) (*proto.RunHookResponse, error) {
	e, ok := s.executors[in.GetExecutor()]
	if !ok {
		return errorResponse(Permanent("UnknownExecutor", fmt.Errorf("this plugin serves no executor %q", in.GetExecutor()))), nil
	}
	hook, ok := hooks[in.GetHook()]
	if !ok {
		return errorResponse(Permanent("UnknownHook", fmt.Errorf("unknown hook %v", in.GetHook()))), nil
	}
	req := &Request{
		Step: in.GetStep(), Hook: hook, Params: in.GetParams(), Attempt: in.GetAttempt(),
		IdempotencyKey: in.GetIdempotencyKey(), Secrets: in.GetSecrets(),
		Outputs: make(map[string]map[string]string, len(in.GetOutputs())),
	}
	if p := in.GetPipeline(); p != nil {
		req.Pipeline = PipelineRef{Namespace: p.GetNamespace(), Name: p.GetName(), UID: p.GetUid(), Generation: p.GetGeneration()}
	}
	for step, o := range in.GetOutputs() {
		req.Outputs[step] = o.GetValues()
	}
	res, err := RunHook(ctx, e, req)
	if err != nil {
		return errorResponse(err), nil
	}
	return &proto.RunHookResponse{Outcome: &proto.RunHookResponse_Result{Result: &proto.Result{
		Done: res.Done, RequeueAfterNanos: int64(res.RequeueAfter), Outputs: res.Outputs, Message: res.Message,
	}}}, nil
}

// RunHook calls the hook of e that req.Hook names, turning a panic into an error (Serve
// and plugintest use it).
func RunHook(ctx context.Context, e Executor, req *Request) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = Result{}, fmt.Errorf("executor %s panicked: %v", e.Name(), p)
		}
	}()
	switch req.Hook {
	case HookPreCreate:
		return e.PreCreate(ctx, req)
	case HookCreate:
		return e.Create(ctx, req)
	case HookPostCreate:
		return e.PostCreate(ctx, req)
	case HookPreDelete:
		return e.PreDelete(ctx, req)
	case HookDelete:
		return e.Delete(ctx, req)
	default:
		return e.PostDelete(ctx, req)
	}
}

func errorResponse(err error) *proto.RunHookResponse {
	out := &proto.Error{Reason: "HookFailed", Message: err.Error()}
	var e *Error
	switch {
	case errors.As(err, &e):
		out.Permanent = e.Permanent
		if e.Reason != "" {
			out.Reason = e.Reason
		}
	case errors.Is(err, context.DeadlineExceeded):
		out.Reason = "Timeout"
	}
	return &proto.RunHookResponse{Outcome: &proto.RunHookResponse_Error{Error: out}}
}
