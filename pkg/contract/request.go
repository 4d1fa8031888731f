package contract

import (
	"fmt"
	"strings"
	"time"
)

// PipelineRef identifies the pipeline a hook runs for.
type PipelineRef struct {
	Namespace  string
	Name       string
	UID        string
	Generation int64
}

// Request is what a hook is given.
type Request struct {
	Pipeline PipelineRef
	// ServiceAccountName is the ServiceAccount the step acts as.
	ServiceAccountName string
	Step               string
	Hook               Hook
	// Params are the step's parameters with every $(...) reference resolved.
	Params map[string]string
	// Outputs are the outputs of the steps before this one, and this step's own so far, by
	// step name.
	Outputs map[string]map[string]string
	// Attempt counts the attempts of this hook, from 1.
	Attempt int32
	// IdempotencyKey is the same for every attempt of one hook of one step of one
	// pipeline, so that a remote system can recognise a repeated call.
	IdempotencyKey string
	// Secrets holds the data of the Secrets named by the parameters ending in "Secret"
	// (e.g. credentialsSecret), merged by key, read by the engine as the pipeline's
	// ServiceAccount. Never log them nor put them in outputs or messages: the engine and
	// the SDK remove their values from whatever a hook returns (Redactor), but a hook that
	// hands them to a log or a remote system is on its own.
	Secrets map[string][]byte
	// SecretParams holds the same Secrets by the parameter that named each: read them with
	// Secret("credentialsSecret").
	SecretParams map[string]map[string][]byte
	// State is what this hook kept, with the Result of its last call that waited
	// (Result.WithState), for its next call; private to the hook (later steps do not see
	// it) and dropped once the hook is done.
	State map[string]string
	// HookStarted is when the first call of this attempt of this hook was made; the step's
	// timeout runs from it, across the hook's waits. A retry after a failure restarts it.
	HookStarted time.Time
	// StepStarted is when this run of the step started (its first hook's first call): a
	// deadline of your own across every attempt and every hook of the step, such as an
	// approval window that a retry must not restart, counts from it.
	StepStarted time.Time
	// Created is what the step's hooks recorded they created (Result.WithCreated), merged
	// across its hooks and calls, kept until its teardown finished: teardown hooks get it
	// to remove what Create made. Private to the step (later steps do not see it).
	Created map[string]string
}

// SecretSuffix marks the parameters that name a Secret: credentialsSecret, tokenSecret…
const SecretSuffix = "Secret"

// NamesSecret tells whether the parameter name, declared of type t (empty: undeclared or
// untyped), names a Secret the engine reads for the hook: its name ends in SecretSuffix,
// or it is declared of type secret.
func NamesSecret(name string, t ParamType) bool {
	return strings.HasSuffix(name, SecretSuffix) || t == ParamSecret
}

// IdempotencyKey is the key of a hook of a step of the pipeline with the given UID.
func IdempotencyKey(uid, step string, hook Hook) string {
	return fmt.Sprintf("%s/%s/%s", uid, step, hook)
}
