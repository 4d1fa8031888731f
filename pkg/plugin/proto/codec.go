package proto

import (
	"errors"
	"fmt"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// This file is the one translation between the contract (pkg/contract) and the protocol:
// the host encodes requests and decodes outcomes, the SDK and plugintest the other way.

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

// EncodeRequest is the protocol's request to run req's hook of the named executor.
func EncodeRequest(executor string, req *contract.Request) *RunHookRequest {
	in := &RunHookRequest{
		Executor: executor,
		Hook:     HookOf(req.Hook),
		Pipeline: &PipelineRef{
			Namespace: req.Pipeline.Namespace, Name: req.Pipeline.Name,
			Uid: req.Pipeline.UID, Generation: req.Pipeline.Generation,
		},
		Step:           req.Step,
		Params:         req.Params,
		Attempt:        req.Attempt,
		IdempotencyKey: req.IdempotencyKey,
		Secrets:        req.Secrets,
	}
	if len(req.Outputs) > 0 {
		in.Outputs = make(map[string]*StepOutputs, len(req.Outputs))
		for step, o := range req.Outputs {
			in.Outputs[step] = &StepOutputs{Values: o}
		}
	}
	return in
}

// DecodeRequest is the contract's request of a protocol request. A hook it does not know
// is a permanent UnknownHook error, as contract.RunHook gives in process.
func DecodeRequest(in *RunHookRequest) (*contract.Request, error) {
	hook, ok := hooks[in.GetHook()]
	if !ok {
		return nil, contract.Permanent(contract.ReasonUnknownHook, fmt.Errorf("unknown hook %v", in.GetHook()))
	}
	req := &contract.Request{
		Step: in.GetStep(), Hook: hook, Params: in.GetParams(), Attempt: in.GetAttempt(),
		IdempotencyKey: in.GetIdempotencyKey(), Secrets: in.GetSecrets(),
		Outputs: make(map[string]map[string]string, len(in.GetOutputs())),
	}
	if p := in.GetPipeline(); p != nil {
		req.Pipeline = contract.PipelineRef{Namespace: p.GetNamespace(), Name: p.GetName(), UID: p.GetUid(), Generation: p.GetGeneration()}
	}
	for step, o := range in.GetOutputs() {
		req.Outputs[step] = o.GetValues()
	}
	return req, nil
}

// EncodeOutcome is the protocol's answer for what a hook returned.
func EncodeOutcome(res contract.Result, err error) *RunHookResponse {
	if err != nil {
		out := &Error{Reason: contract.ReasonHookFailed, Message: err.Error(), Permanent: contract.IsPermanent(err)}
		if reason := contract.OwnReason(err); reason != "" {
			out.Reason = reason
		}
		return &RunHookResponse{Outcome: &RunHookResponse_Error{Error: out}}
	}
	return &RunHookResponse{Outcome: &RunHookResponse_Result{Result: &Result{
		Done: res.Done, RequeueAfterNanos: int64(res.RequeueAfter), Outputs: res.Outputs, Message: res.Message,
	}}}
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
			Outputs: r.GetOutputs(), Message: r.GetMessage(),
		}, nil
	case *RunHookResponse_Error:
		reason := out.Error.GetReason()
		if reason == "" {
			reason = contract.ReasonHookFailed
		}
		cause := errors.New(out.Error.GetMessage())
		if out.Error.GetPermanent() {
			return contract.Result{}, contract.Permanent(reason, cause)
		}
		return contract.Result{}, contract.Retryable(reason, cause)
	default:
		return contract.Result{}, ErrNoOutcome
	}
}

// EncodeDescription is the protocol's description of an executor.
func EncodeDescription(name string, d contract.Description) *ExecutorInfo {
	info := &ExecutorInfo{Name: name, Version: d.Version, Description: d.Description}
	for _, p := range d.Parameters {
		info.Parameters = append(info.Parameters, &Parameter{Name: p.Name, Description: p.Description, Required: p.Required})
	}
	return info
}

// DecodeDescription is the contract's description of what a plugin said of an executor.
func DecodeDescription(info *ExecutorInfo) contract.Description {
	d := contract.Description{Version: info.GetVersion(), Description: info.GetDescription()}
	for _, p := range info.GetParameters() {
		d.Parameters = append(d.Parameters, contract.Parameter{Name: p.GetName(), Description: p.GetDescription(), Required: p.GetRequired()})
	}
	return d
}
