// Package sdk is what a Stepwise plugin author imports: implement Executor (embed Base
// for the hooks you do not need) and call Serve from main. Its types are the executor
// contract's (pkg/contract), which the operator's built-in executors use too; it depends
// only on the contract, the protocol package (pkg/plugin/proto), go-plugin and gRPC,
// never on the operator.
//
//	func main() { sdk.Serve(greeter{}) }
//
// What the SDK does around every hook, as the engine does for its built-in executors:
//
//   - Parameters: it checks the step's parameters against Describe's declarations
//     (contract.CheckParams) before a creation hook runs: a required one missing, a value
//     not of its Type (ParamInt, ParamDuration, ParamURL, ParamEnum...), or, when every
//     declaration has a type, a parameter not declared, is a permanent InvalidParameter
//     error (`parameter "count" is "x", not a whole number`) and the hook is not called.
//     Teardown hooks are not refused (what was created under older declarations is torn
//     down all the same). Every hook sees the parameters with the defaults of those not
//     set; read them with req.Int, req.Duration, req.URL, req.Secret...
//   - Secrets: it removes the value of every Secret given to the call (Request.Secrets and
//     Request.SecretParams), as it is, URL-encoded, and the parts of a URL (user info, path,
//     query values), from what the hook returns: message, outputs, state and error text
//     (Redactor). A hook that returns net/http's error for a URL kept in a Secret leaks
//     nothing. What a hook sends elsewhere (a remote system, its own files) is on its own.
//   - What a step created: a hook that creates something remote records it,
//     Result.WithCreated(map[string]string{"ticket": id}), as soon as it knows it (on the
//     call that created it, done or waiting). The engine keeps the record in the step's
//     status and gives it, as Request.Created, to every later hook of the step and to its
//     teardown (Delete reads req.Created["ticket"]); later steps do not see it. A crash
//     between the creating call and the status write repeats that call with the same
//     Request.IdempotencyKey and without the record: send the key to the remote API as its
//     idempotency key (or look the thing up by it) so the repeat finds what the first call
//     made instead of making a second. plugintest.Lifecycle tests the record (a teardown
//     after the step is done, at Create's first wait and after a failure that follows it,
//     each run twice) and plugintest.CrashReplay the key.
//   - State: a hook that waits may keep a little state for its next call
//     (Result.WithState, read back in Request.State), dropped once the hook is done: never
//     keep what teardown needs there. Request.HookStarted is when the first call of this
//     attempt was made (a retry restarts it), so time.Since(req.HookStarted) is how long
//     the hook has been waiting; Request.StepStarted is when the step's run started, for a
//     deadline across attempts.
//   - Logs: Logger(ctx) is a *slog.Logger whose lines reach the operator's log at their
//     level, tagged with the plugin, the pipeline, the step, the executor and the hook, with
//     the call's Secrets removed. The standard log package (and slog's default logger)
//     writes to the plugin's original standard error too, whose plain lines the operator
//     logs as they are. Once serving, go-plugin points os.Stderr and os.Stdout at streams
//     of its own: what a hook prints there reaches the operator only if it copies them.
//   - Tenants: TenantFrom(ctx) is the namespace of the pipeline the hook runs for. One
//     plugin process serves every namespace: what it shares among hooks is kept apart by
//     it, as TenantLimiter keeps a rate limit per namespace and host.
//   - Panics: a panicking hook is a retryable error, its stack logged.
//
// Started as `stepwise-plugin-NAME install DIR`, Serve copies the plugin's executable into
// DIR and exits, serving nothing: how a plugin shipped as its own image (its binary alone)
// is copied out of it by hand (the chart never runs it: it copies the file with a tool of
// the operator's image, so that nothing of a plugin runs before it is verified).
//
// With STEPWISE_PLUGIN_DEBUG=1 in its environment, Serve does not wait for the operator to
// start it: run the plugin by hand (under a debugger), and it prints one line
// STEPWISE_PLUGIN_REATTACH={...} for the operator to connect to it (DebugEnv).
package sdk

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
	"github.com/stepwise-dev/stepwise/pkg/tracing"
)

// The contract's types under the names plugin authors know; each is the contract's own.
type (
	// Hook names one of the six hooks.
	Hook = contract.Hook
	// PipelineRef identifies the Pipeline a hook runs for.
	PipelineRef = contract.PipelineRef
	// Request is what a hook gets, as the operator's executors do.
	Request = contract.Request
	// Result says whether a hook is done, when to look again if not, its outputs, a short
	// message for the status, the state kept for its next call and what blocks it.
	Result = contract.Result
	// Blocker names an object a waiting hook waits on (Result.Blocked).
	Blocker = contract.Blocker
	// Error is an error with a reason (CamelCase) and whether retrying can help.
	Error = contract.Error
	// Parameter declares one parameter of an executor: its type, default and values.
	Parameter = contract.Parameter
	// ParamType is the type of a parameter's value.
	ParamType = contract.ParamType
	// Description is what the operator learns about an executor when it starts the plugin.
	Description = contract.Description
	// Redactor removes Secret values from text; the SDK applies one to every hook's answer.
	Redactor = contract.Redactor
)

// The six hooks, named as in the Pipeline status.
const (
	HookPreCreate  = contract.HookPreCreate
	HookCreate     = contract.HookCreate
	HookPostCreate = contract.HookPostCreate
	HookPreDelete  = contract.HookPreDelete
	HookDelete     = contract.HookDelete
	HookPostDelete = contract.HookPostDelete
)

// The types of a parameter (Parameter.Type); see the contract for each.
const (
	ParamString   = contract.ParamString
	ParamInt      = contract.ParamInt
	ParamBool     = contract.ParamBool
	ParamDuration = contract.ParamDuration
	ParamURL      = contract.ParamURL
	ParamEnum     = contract.ParamEnum
	ParamSecret   = contract.ParamSecret
	ParamYAML     = contract.ParamYAML
)

// Bounds of what a step's status keeps of a hook's Result: its outputs (from all the
// step's hooks), the state a hook keeps across its waits (Result.WithState).
const (
	MaxOutputs      = contract.MaxOutputs
	MaxOutputsSize  = contract.MaxOutputsSize
	MaxStateEntries = contract.MaxStateEntries
	MaxStateSize    = contract.MaxStateSize
)

// Bounds of a step's created record (Result.WithCreated).
const (
	MaxCreatedEntries = contract.MaxCreatedEntries
	MaxCreatedSize    = contract.MaxCreatedSize
)

// ReasonInvalidParameter is the reason of a step whose parameters cannot be used, the one
// the SDK gives when a parameter does not match its declaration.
const ReasonInvalidParameter = contract.ReasonInvalidParameter

// Done is a finished hook.
func Done(message string) Result { return contract.Done(message) }

// DoneWithOutputs is a finished hook with outputs for later steps.
func DoneWithOutputs(message string, outputs map[string]string) Result {
	return contract.DoneWithOutputs(message, outputs)
}

// Wait asks to run the hook again after a while: long work never blocks. Keep what the
// next call needs with Result.WithState.
func Wait(after time.Duration, message string) Result { return contract.Wait(after, message) }

// Permanent fails the step at once (bad parameters, a thing that will never exist).
func Permanent(reason string, err error) error { return contract.Permanent(reason, err) }

// Retryable is retried with backoff up to the step's retry limit. A plain error is
// retryable too, with reason HookFailed.
func Retryable(reason string, err error) error { return contract.Retryable(reason, err) }

// NewRedactor is the Redactor of the given Secret data, for text a hook sends elsewhere
// than its answer (which the SDK redacts itself).
func NewRedactor(secrets ...map[string][]byte) Redactor { return contract.NewRedactor(secrets...) }

// Executor is the plugin side of a TaskExecutor. Hooks are run at least once: make them
// idempotent. Every hook gets a context with the attempt's deadline and a Logger.
type Executor interface {
	Name() string
	Describe() Description
	contract.Hooks[*Request]
}

// Base implements every hook as "done, nothing to do" and an empty description; embed it.
type Base struct {
	contract.Base[*Request]
}

// Describe returns an empty description.
func (Base) Describe() Description { return Description{} }

// Serve serves the executors over go-plugin (gRPC, mutual TLS) until the operator stops
// the plugin. Call it from main; it does not return. With DebugEnv set to "1" it serves in
// debug mode instead (serveDebug), until interrupted.
//
// Started with the arguments `install DIR` (exactly those), it serves nothing: it copies
// its own executable into DIR under its name, mode 0755, through a temporary file renamed
// once complete, prints "installed NAME (sha256 HEX) into DIR" and exits 0 (1 with the
// error on standard error): a plugin shipped as its own image, the binary alone with no
// shell, copies itself out of it (docker run IMAGE install DIR).
func Serve(executors ...Executor) {
	if len(os.Args) > 0 {
		if dir, ok := installArgs(os.Args[1:]); ok {
			os.Exit(installSelf(dir, os.Stdout, stderr))
		}
	}
	if os.Getenv(DebugEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := serveDebug(ctx, os.Stdout, stderr, executors...); err != nil {
			_, _ = fmt.Fprintf(stderr, "stepwise plugin in debug mode: %v\n", err)
			os.Exit(1)
		}
		return
	}
	// The operator passes its OTLP endpoint when it traces (tracing.Env).
	var tp trace.TracerProvider
	if o := tracing.FromEnv(os.Getenv, filepath.Base(os.Args[0])); o.Endpoint != "" {
		provider, shutdown, err := tracing.NewProvider(context.Background(), o)
		if err != nil {
			// Traces are never worth not serving: the plugin serves untraced.
			_, _ = fmt.Fprintf(stderr, "stepwise plugin: tracing off: %v\n", err)
		} else {
			tp = provider
			defer func() { _ = shutdown(context.Background()) }()
		}
	}
	plugin.Serve(serveConfig(NewServerWithLogs(stderr, executors...), tp))
}

// serveConfig is go-plugin's configuration of a plugin serving server; tp, when set,
// continues the operator's traces in the calls.
func serveConfig(server proto.ExecutorServer, tp trace.TracerProvider) *plugin.ServeConfig {
	return &plugin.ServeConfig{
		HandshakeConfig:  proto.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{proto.Latest: proto.PluginSet(server)},
		GRPCServer:       func(opts []grpc.ServerOption) *grpc.Server { return newGRPCServer(opts, tp) },
		// go-plugin's own chatter at DEBUG (its address, mTLS) is of no use in the
		// operator's log, where the plugin's lines show at the default level.
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: stderr, JSONFormat: true}),
	}
}

// newGRPCServer bounds what the plugin receives and sends to the protocol's limit, which
// the codec keeps every answer under, and with tp makes each call a span of the caller's
// trace.
func newGRPCServer(opts []grpc.ServerOption, tp trace.TracerProvider) *grpc.Server {
	opts = append(opts,
		grpc.MaxRecvMsgSize(proto.MaxGRPCMessageSize),
		grpc.MaxSendMsgSize(proto.MaxGRPCMessageSize),
	)
	if tp != nil {
		opts = append(opts, grpc.StatsHandler(otelgrpc.NewServerHandler(
			otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(tracing.Propagator()))))
	}
	return grpc.NewServer(opts...)
}

// NewServer returns the gRPC implementation of the protocol for the executors, whose
// hooks' Logger writes to the process's standard error, where the operator reads it.
func NewServer(executors ...Executor) proto.ExecutorServer {
	return NewServerWithLogs(stderr, executors...)
}

// NewServerWithLogs is NewServer with the hooks' Logger writing to logs (plugintest gives
// the test's log).
func NewServerWithLogs(logs io.Writer, executors ...Executor) proto.ExecutorServer {
	s := &server{executors: map[string]Executor{}, logs: newSyncWriter(logs)}
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
	// logs receives the hooks' log lines, one Write a line, from concurrent hooks.
	logs io.Writer
}

func (s *server) Describe(context.Context, *proto.DescribeRequest) (*proto.DescribeResponse, error) {
	resp := &proto.DescribeResponse{}
	for _, name := range s.names {
		resp.Executors = append(resp.Executors, proto.EncodeDescription(name, s.executors[name].Describe()))
	}
	return resp, nil
}

func (s *server) RunHook(ctx context.Context, in *proto.RunHookRequest) (*proto.RunHookResponse, error) {
	e, ok := s.executors[in.GetExecutor()]
	if !ok {
		return proto.EncodeOutcome(Result{}, Permanent(contract.ReasonUnknownExecutor,
			fmt.Errorf("this plugin serves no executor %q", in.GetExecutor()))), nil
	}
	req, err := proto.DecodeRequest(in)
	if err != nil {
		return proto.EncodeOutcome(Result{}, err), nil
	}
	return proto.EncodeOutcome(runHook(ctx, e, req, s.logs)), nil
}

func (s *server) Plan(ctx context.Context, in *proto.RunHookRequest) (*proto.PlanResponse, error) {
	e, ok := s.executors[in.GetExecutor()]
	if !ok {
		return proto.EncodePlanOutcome(Plan{}, Permanent(contract.ReasonUnknownExecutor,
			fmt.Errorf("this plugin serves no executor %q", in.GetExecutor()))), nil
	}
	req, err := proto.DecodeRequest(in)
	if err != nil {
		return proto.EncodePlanOutcome(Plan{}, err), nil
	}
	return proto.EncodePlanOutcome(runPlan(ctx, e, req, s.logs)), nil
}

// RunHook runs the hook of e that req.Hook names as a plugin's server does (runHook): the
// parameters checked against e's declarations, a Logger writing to the process's standard
// error, a panic turned into an error and the call's Secrets removed from the answer.
func RunHook(ctx context.Context, e Executor, req *Request) (Result, error) {
	return runHook(ctx, e, req, stderr)
}

// The plan types: an executor that implements Planner tells what its creation hooks
// would do, without doing it (a Pipeline with spec.dryRun, kubectl stepwise plan).
type (
	// Plan is what a step would do.
	Plan = contract.Plan
	// PlanItem is one thing a step would touch.
	PlanItem = contract.PlanItem
	// Planner is implemented by an executor that can plan.
	Planner = contract.Planner[*Request]
)
