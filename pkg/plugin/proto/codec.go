package proto

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	protobuf "google.golang.org/protobuf/proto"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// This file is the one translation between the contract (pkg/contract) and the protocol:
// the host encodes requests and decodes outcomes, the SDK and plugintest the other way.
// Every string it writes is valid UTF-8 (protobuf refuses to send anything else, and one
// tenant's bad byte must not fail the connection every tenant shares), and every message
// it builds fits MaxMessageSize.

// MaxMessageSize bounds a request and an answer in bytes. Both ends refuse larger ones
// (gRPC's default receive limit, set explicitly by the host and the SDK); the codec turns
// an oversized message into a permanent MessageTooLarge error before it is sent.
const MaxMessageSize = 4 << 20

// MaxGRPCMessageSize is the gRPC message limit both ends set: MaxMessageSize and room for
// gRPC's framing.
const MaxGRPCMessageSize = MaxMessageSize + 64<<10

// MaxErrorMessage bounds the text of an error a plugin returns; the engine keeps less.
const MaxErrorMessage = 16 << 10

// ReasonMessageTooLarge is the (permanent) reason of a hook whose request or answer is over
// the protocol's size limit.
const ReasonMessageTooLarge = "MessageTooLarge"

// hooks maps the protocol's hooks to the contract's.
var hooks = map[Hook]contract.Hook{
	Hook_HOOK_PRE_CREATE:  contract.HookPreCreate,
	Hook_HOOK_CREATE:      contract.HookCreate,
	Hook_HOOK_POST_CREATE: contract.HookPostCreate,
	Hook_HOOK_PRE_DELETE:  contract.HookPreDelete,
	Hook_HOOK_DELETE:      contract.HookDelete,
	Hook_HOOK_POST_DELETE: contract.HookPostDelete,
}

// HookOf is the protocol's name for a contract hook; HOOK_UNSPECIFIED for one it does not
// know, which a plugin refuses as the engine does.
func HookOf(h contract.Hook) Hook {
	for p, c := range hooks {
		if c == h {
			return p
		}
	}
	return Hook_HOOK_UNSPECIFIED
}

// EncodeRequest is the protocol's request to run req's hook of the named executor, or a
// permanent MessageTooLarge error when it would exceed MaxMessageSize (large Secrets).
func EncodeRequest(executor string, req *contract.Request) (*RunHookRequest, error) {
	in := &RunHookRequest{
		Executor: contract.ValidUTF8(executor),
		Hook:     HookOf(req.Hook),
		Pipeline: &PipelineRef{
			Namespace: contract.ValidUTF8(req.Pipeline.Namespace), Name: contract.ValidUTF8(req.Pipeline.Name),
			Uid: contract.ValidUTF8(req.Pipeline.UID), Generation: req.Pipeline.Generation,
		},
		Step:               contract.ValidUTF8(req.Step),
		Params:             validMap(req.Params),
		Attempt:            req.Attempt,
		IdempotencyKey:     contract.ValidUTF8(req.IdempotencyKey),
		Secrets:            validKeys(req.Secrets),
		State:              validMap(req.State),
		ServiceAccountName: contract.ValidUTF8(req.ServiceAccountName),
		Created:            validMap(req.Created),
	}
	if !req.HookStarted.IsZero() {
		in.HookStartedUnixNanos = req.HookStarted.UnixNano()
	}
	if !req.StepStarted.IsZero() {
		in.StepStartedUnixNanos = req.StepStarted.UnixNano()
	}
	if len(req.SecretParams) > 0 {
		in.SecretParams = make(map[string]*SecretData, len(req.SecretParams))
		for param, data := range req.SecretParams {
			in.SecretParams[contract.ValidUTF8(param)] = &SecretData{Data: validKeys(data)}
		}
	}
	if len(req.Outputs) > 0 {
		in.Outputs = make(map[string]*StepOutputs, len(req.Outputs))
		for step, o := range req.Outputs {
			in.Outputs[contract.ValidUTF8(step)] = &StepOutputs{Values: validMap(o)}
		}
	}
	if size := protobuf.Size(in); size > MaxMessageSize {
		return nil, contract.Permanent(ReasonMessageTooLarge, fmt.Errorf(
			"the request to executor %s is %d bytes, larger than the plugin protocol's limit of %d (are the step's Secrets that large?)",
			in.Executor, size, MaxMessageSize))
	}
	return in, nil
}

// DecodeRequest is the contract's request of a protocol request. A hook it does not know
// is a permanent UnknownHook error, as contract.RunHook gives in process; none (a Plan's
// request) is the empty hook.
func DecodeRequest(in *RunHookRequest) (*contract.Request, error) {
	hook, ok := hooks[in.GetHook()]
	if !ok && in.GetHook() != Hook_HOOK_UNSPECIFIED {
		return nil, contract.Permanent(contract.ReasonUnknownHook, fmt.Errorf("unknown hook %v", in.GetHook()))
	}
	req := &contract.Request{
		Step: in.GetStep(), Hook: hook, Params: in.GetParams(), Attempt: in.GetAttempt(),
		IdempotencyKey: in.GetIdempotencyKey(), Secrets: in.GetSecrets(), State: in.GetState(),
		ServiceAccountName: in.GetServiceAccountName(), Created: in.GetCreated(),
		Outputs: make(map[string]map[string]string, len(in.GetOutputs())),
	}
	if ns := in.GetHookStartedUnixNanos(); ns != 0 {
		req.HookStarted = time.Unix(0, ns)
	}
	if ns := in.GetStepStartedUnixNanos(); ns != 0 {
		req.StepStarted = time.Unix(0, ns)
	}
	if len(in.GetSecretParams()) > 0 {
		req.SecretParams = make(map[string]map[string][]byte, len(in.GetSecretParams()))
		for param, data := range in.GetSecretParams() {
			req.SecretParams[param] = data.GetData()
		}
	}
	if p := in.GetPipeline(); p != nil {
		req.Pipeline = contract.PipelineRef{Namespace: p.GetNamespace(), Name: p.GetName(), UID: p.GetUid(), Generation: p.GetGeneration()}
	}
	for step, o := range in.GetOutputs() {
		req.Outputs[step] = o.GetValues()
	}
	return req, nil
}

// EncodeOutcome is the protocol's answer for what a hook returned. A result over
// MaxMessageSize becomes a permanent MessageTooLarge error: retrying gives the same.
func EncodeOutcome(res contract.Result, err error) *RunHookResponse {
	if err != nil {
		return encodeError(err)
	}
	resp := &RunHookResponse{Outcome: &RunHookResponse_Result{Result: &Result{
		Done: res.Done, RequeueAfterNanos: int64(res.RequeueAfter),
		Outputs: validMap(res.Outputs), Message: contract.ValidUTF8(res.Message), State: validMap(res.State),
		BlockedBy: blockersOf(res.BlockedBy), Created: validMap(res.Created),
	}}}
	if size := protobuf.Size(resp); size > MaxMessageSize {
		return encodeError(contract.Permanent(ReasonMessageTooLarge, fmt.Errorf(
			"the hook's result is %d bytes, larger than the plugin protocol's limit of %d (outputs and message must be small)",
			size, MaxMessageSize)))
	}
	return resp
}

// blockersOf is the protocol's form of a result's blockers.
func blockersOf(in []contract.Blocker) []*Blocker {
	if len(in) == 0 {
		return nil
	}
	out := make([]*Blocker, len(in))
	for i, b := range in {
		out[i] = &Blocker{Kind: contract.ValidUTF8(b.Kind), Namespace: contract.ValidUTF8(b.Namespace), Name: contract.ValidUTF8(b.Name)}
	}
	return out
}

// blockersFrom is the contract's form of a result's blockers.
func blockersFrom(in []*Blocker) []contract.Blocker {
	if len(in) == 0 {
		return nil
	}
	out := make([]contract.Blocker, len(in))
	for i, b := range in {
		out[i] = contract.Blocker{Kind: b.GetKind(), Namespace: b.GetNamespace(), Name: b.GetName()}
	}
	return out
}

func encodeError(err error) *RunHookResponse {
	return &RunHookResponse{Outcome: &RunHookResponse_Error{Error: errorOf(err)}}
}

// errorOf is the protocol's error of err: its reason and permanence, its text bounded.
func errorOf(err error) *Error {
	out := &Error{
		Reason:    contract.ReasonHookFailed,
		Message:   contract.Truncate(err.Error(), MaxErrorMessage),
		Permanent: contract.IsPermanent(err),
	}
	if reason := contract.OwnReason(err); reason != "" {
		out.Reason = contract.Truncate(reason, MaxErrorMessage)
	}
	return out
}

// validMap returns m, or a copy with keys and values made valid UTF-8 when one is not.
func validMap(m map[string]string) map[string]string {
	for k, v := range m {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			out := make(map[string]string, len(m))
			for k, v := range m {
				out[contract.ValidUTF8(k)] = contract.ValidUTF8(v)
			}
			return out
		}
	}
	return m
}

// validKeys returns m, or a copy with its keys made valid UTF-8 (values are bytes).
func validKeys(m map[string][]byte) map[string][]byte {
	for k := range m {
		if !utf8.ValidString(k) {
			out := make(map[string][]byte, len(m))
			for k, v := range m {
				out[contract.ValidUTF8(k)] = v
			}
			return out
		}
	}
	return m
}

// ErrNoOutcome is what DecodeOutcome returns for an answer with neither a result nor an
// error.
var ErrNoOutcome = errors.New("the plugin returned neither a result nor an error")

// DecodeOutcome is the contract's result or error of a protocol answer; the error keeps the
// plugin's reason and permanence.
func DecodeOutcome(resp *RunHookResponse) (contract.Result, error) {
	switch out := resp.GetOutcome().(type) {
	case *RunHookResponse_Result:
		r := out.Result
		return contract.Result{
			Done: r.GetDone(), RequeueAfter: time.Duration(r.GetRequeueAfterNanos()),
			Outputs: r.GetOutputs(), Message: r.GetMessage(), State: r.GetState(),
			BlockedBy: blockersFrom(r.GetBlockedBy()), Created: r.GetCreated(),
		}, nil
	case *RunHookResponse_Error:
		return contract.Result{}, errorFrom(out.Error)
	default:
		return contract.Result{}, ErrNoOutcome
	}
}

// errorFrom is the contract's error of a protocol error, keeping its reason and
// permanence.
func errorFrom(e *Error) error {
	reason := e.GetReason()
	if reason == "" {
		reason = contract.ReasonHookFailed
	}
	cause := errors.New(contract.Truncate(e.GetMessage(), MaxErrorMessage))
	if e.GetPermanent() {
		return contract.Permanent(reason, cause)
	}
	return contract.Retryable(reason, cause)
}

// EncodePlanOutcome is the protocol's answer for what Plan returned, bounded as a status
// keeps a plan.
func EncodePlanOutcome(p contract.Plan, err error) *PlanResponse {
	if err != nil {
		return &PlanResponse{Outcome: &PlanResponse_Error{Error: errorOf(err)}}
	}
	p = p.Bounded()
	out := &Plan{Summary: contract.ValidUTF8(p.Summary), Outputs: validMap(p.Outputs)}
	for _, d := range p.Details {
		out.Details = append(out.Details, &PlanItem{Kind: d.Kind, Name: d.Name, Action: d.Action, Note: d.Note})
	}
	out.Warnings = p.Warnings
	resp := &PlanResponse{Outcome: &PlanResponse_Plan{Plan: out}}
	if size := protobuf.Size(resp); size > MaxMessageSize {
		return &PlanResponse{Outcome: &PlanResponse_Error{Error: errorOf(contract.Permanent(ReasonMessageTooLarge, fmt.Errorf(
			"the plan is %d bytes, larger than the plugin protocol's limit of %d", size, MaxMessageSize)))}}
	}
	return resp
}

// DecodePlanOutcome is the contract's plan or error of a protocol answer.
func DecodePlanOutcome(resp *PlanResponse) (contract.Plan, error) {
	switch out := resp.GetOutcome().(type) {
	case *PlanResponse_Plan:
		p := contract.Plan{Summary: out.Plan.GetSummary(), Warnings: out.Plan.GetWarnings(), Outputs: out.Plan.GetOutputs()}
		for _, d := range out.Plan.GetDetails() {
			p.Details = append(p.Details, contract.PlanItem{Kind: d.GetKind(), Name: d.GetName(), Action: d.GetAction(), Note: d.GetNote()})
		}
		return p.Bounded(), nil
	case *PlanResponse_Error:
		return contract.Plan{}, errorFrom(out.Error)
	default:
		return contract.Plan{}, ErrNoOutcome
	}
}

// EncodeDescription is the protocol's description of an executor.
func EncodeDescription(name string, d contract.Description) *ExecutorInfo {
	info := &ExecutorInfo{Name: name, Version: d.Version, Description: d.Description, UpdatesInPlace: d.UpdatesInPlace}
	for _, p := range d.Parameters {
		info.Parameters = append(info.Parameters, &Parameter{
			Name: p.Name, Description: p.Description, Required: p.Required,
			Type: string(p.Type), DefaultValue: p.Default, Values: p.Values,
		})
	}
	return info
}

// DecodeDescription is the contract's description of what a plugin said of an executor.
func DecodeDescription(info *ExecutorInfo) contract.Description {
	d := contract.Description{Version: info.GetVersion(), Description: info.GetDescription(), UpdatesInPlace: info.GetUpdatesInPlace()}
	for _, p := range info.GetParameters() {
		d.Parameters = append(d.Parameters, contract.Parameter{
			Name: p.GetName(), Description: p.GetDescription(), Required: p.GetRequired(),
			Type: contract.ParamType(p.GetType()), Default: p.GetDefaultValue(), Values: p.GetValues(),
		})
	}
	return d
}
