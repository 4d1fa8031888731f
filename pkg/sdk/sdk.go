// Package sdk is what a Stepwise plugin author imports: implement Executor (embed Base
// for the hooks you do not need) and call Serve from main. Its types are the executor
// contract's (pkg/contract), which the operator's built-in executors use too; it depends
// only on the contract, the protocol package (pkg/plugin/proto), go-plugin and gRPC,
// never on the operator.
//
//	func main() { sdk.Serve(greeter{}) }
package sdk

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
)

// The contract's types under the names plugin authors know; each is the contract's own.
type (
	// Hook names one of the six hooks.
	Hook = contract.Hook
	// PipelineRef identifies the Pipeline a hook runs for.
	PipelineRef = contract.PipelineRef
	// Request is what a hook gets, as the operator's executors do.
	Request = contract.Request
	// Result says whether a hook is done, when to look again if not, its outputs and a
	// short message for the status.
	Result = contract.Result
	// Error is an error with a reason (CamelCase) and whether retrying can help.
	Error = contract.Error
	// Parameter documents one parameter of an executor.
	Parameter = contract.Parameter
	// Description is what the operator learns about an executor when it starts the plugin.
	Description = contract.Description
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

// Done is a finished hook.
func Done(message string) Result { return contract.Done(message) }

// DoneWithOutputs is a finished hook with outputs for later steps.
func DoneWithOutputs(message string, outputs map[string]string) Result {
	return contract.DoneWithOutputs(message, outputs)
}

// Wait asks to run the hook again after a while: long work never blocks.
func Wait(after time.Duration, message string) Result { return contract.Wait(after, message) }

// Permanent fails the step at once (bad parameters, a thing that will never exist).
func Permanent(reason string, err error) error { return contract.Permanent(reason, err) }

// Retryable is retried with backoff up to the step's retry limit. A plain error is
// retryable too, with reason HookFailed.
func Retryable(reason string, err error) error { return contract.Retryable(reason, err) }

// Executor is the plugin side of a TaskExecutor. Hooks are run at least once: make them
// idempotent. Every hook gets a context with the attempt's deadline.
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
// the plugin. Call it from main; it does not return.
func Serve(executors ...Executor) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  proto.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{proto.Latest: proto.PluginSet(NewServer(executors...))},
		GRPCServer:       newGRPCServer,
	})
}

// newGRPCServer bounds what the plugin receives and sends to the protocol's limit, which
// the codec keeps every answer under.
func newGRPCServer(opts []grpc.ServerOption) *grpc.Server {
	return grpc.NewServer(append(opts,
		grpc.MaxRecvMsgSize(proto.MaxMessageSize+messageOverhead),
		grpc.MaxSendMsgSize(proto.MaxMessageSize+messageOverhead),
	)...)
}

// messageOverhead is room for gRPC's framing above the codec's MaxMessageSize.
const messageOverhead = 64 << 10

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
	return proto.EncodeOutcome(RunHook(ctx, e, req)), nil
}

// RunHook calls the hook of e that req.Hook names (contract.RunHook), turning a panic into
// an error (Serve and plugintest use it).
func RunHook(ctx context.Context, e Executor, req *Request) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = Result{}, fmt.Errorf("executor %s panicked: %v", e.Name(), p)
		}
	}()
	return contract.RunHook[*Request](ctx, e, req.Hook, req)
}
