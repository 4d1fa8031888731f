package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// drainParams are declarations like node.drain's.
var drainParams = []contract.Parameter{
	{Name: "node", Type: contract.ParamString, Required: true},
	{Name: "timeout", Type: contract.ParamDuration, Default: "10m"},
	{Name: "policy", Type: contract.ParamEnum, Values: []string{"Fail", "Force"}, Default: "Fail"},
}

// TestParametersAreCheckedBeforeAnyHook: a step whose parameters miss a required one, have
// one of the wrong type, outside its enum, or one the executor does not take, fails at
// once with InvalidParameter naming the parameter, and no hook runs.
func TestParametersAreCheckedBeforeAnyHook(t *testing.T) {
	tests := []struct {
		name    string
		with    map[string]string
		wantMsg string
	}{
		{name: "required missing", with: map[string]string{"timeout": "5m"}, wantMsg: `parameter "node" is required`},
		{name: "wrong type", with: map[string]string{"node": "n1", "timeout": "soon"},
			wantMsg: `parameter "timeout" is "soon", not a duration such as 90s or 10m`},
		{name: "outside the enum", with: map[string]string{"node": "n1", "policy": "Forse"},
			wantMsg: `parameter "policy" is "Forse", not one of Fail, Force`},
		{name: "not a parameter", with: map[string]string{"node": "n1", "timout": "5m"},
			wantMsg: `parameter "timout" is not a parameter of the executor, which takes node, timeout, policy`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, newPipeline(v1alpha1.Step{Name: "drain", Executor: "test.record", With: tt.with}))
			f.exec.params = drainParams
			f.syncUntilIdle("p")

			assert.Empty(t, f.exec.Calls(), "no hook ran")
			s := stepStatus(f.get("p"), "drain")
			assert.Equal(t, v1alpha1.StepFailed, s.Phase)
			assert.Equal(t, tt.wantMsg, s.Message)
			assert.Equal(t, contract.ReasonInvalidParameter, readyCondition(s.Conditions).Reason)
			assert.Nil(t, s.Ran, "no Create was called: nothing to tear down")
		})
	}
}

// TestDefaultsReachTheHookAndTheRecord: a parameter the step does not set reaches every
// hook with its declared default, and the run record keeps it.
func TestDefaultsReachTheHookAndTheRecord(t *testing.T) {
	f := newFixture(t, newPipeline(v1alpha1.Step{Name: "drain", Executor: "test.record", With: map[string]string{"node": "n1"}}))
	f.exec.params = drainParams
	f.syncUntilIdle("p")

	want := map[string]string{"node": "n1", "timeout": "10m", "policy": "Fail"}
	for _, req := range f.exec.requests {
		assert.Equal(t, want, req.Params, req.Hook)
		assert.Equal(t, 10*time.Minute, req.Duration("timeout"))
	}
	assert.Equal(t, want, stepStatus(f.get("p"), "drain").Ran.Params)
}

// TestHookKeepsStateAcrossWaits: a hook that waits keeps its state for its next call, with
// the time of its first call; the state is not an output, and is dropped once the hook is
// done.
func TestHookKeepsStateAcrossWaits(t *testing.T) {
	f := newFixture(t, newPipeline(v1alpha1.Step{Name: "vm", Executor: "test.record"}))
	calls := 0
	f.exec.on("vm", v1alpha1.HookCreate, func(_ context.Context, req *executor.Request) (contract.Result, error) {
		calls++
		if calls < 3 {
			return contract.Wait(10*time.Second, "powering off").WithState(map[string]string{"task": "task-7", "calls": strings.Repeat("x", calls)}), nil
		}
		return contract.DoneWithOutputs("destroyed", map[string]string{"instance": "vm-1"}), nil
	})
	f.sync("p")
	s := stepStatus(f.get("p"), "vm")
	assert.Equal(t, map[string]string{"task": "task-7", "calls": "x"}, s.HookState)
	assert.Empty(t, s.Outputs, "state is no output")
	for range 2 {
		f.clock.Step(10 * time.Second)
		f.sync("p")
	}

	var creates []executor.Request
	for _, req := range f.exec.requests {
		if req.Hook == contract.HookCreate {
			creates = append(creates, req)
		}
	}
	require.Len(t, creates, 3)
	assert.Nil(t, creates[0].State)
	assert.Equal(t, map[string]string{"task": "task-7", "calls": "x"}, creates[1].State)
	assert.Equal(t, map[string]string{"task": "task-7", "calls": "xx"}, creates[2].State)
	for _, req := range creates {
		assert.Equal(t, start, req.HookStarted.UTC(), "the first call's time, across waits")
	}
	s = stepStatus(f.get("p"), "vm")
	assert.Equal(t, v1alpha1.StepSucceeded, s.Phase)
	assert.Nil(t, s.HookState, "dropped once the hook is done")
	assert.Equal(t, map[string]string{"instance": "vm-1"}, s.Outputs)
}

func TestStateOverTheBoundFailsTheStep(t *testing.T) {
	f := newFixture(t, newPipeline(v1alpha1.Step{Name: "vm", Executor: "test.record"}))
	f.exec.on("vm", v1alpha1.HookCreate, func(context.Context, *executor.Request) (contract.Result, error) {
		return contract.Wait(time.Second, "").WithState(map[string]string{"blob": strings.Repeat("x", contract.MaxStateSize)}), nil
	})
	f.syncUntilIdle("p")
	s := stepStatus(f.get("p"), "vm")
	assert.Equal(t, v1alpha1.StepFailed, s.Phase)
	assert.Equal(t, "StateTooLarge", readyCondition(s.Conditions).Reason)
	assert.Nil(t, s.HookState)
}

// TestSecretValuesNeverReachTheStatus: whatever an executor returns (a message, outputs,
// an error) is stripped of the values of the step's Secrets before the engine keeps it.
func TestSecretValuesNeverReachTheStatus(t *testing.T) {
	p := newPipeline(
		v1alpha1.Step{Name: "login", Executor: "test.record", With: map[string]string{"credentialsSecret": "creds"}},
		v1alpha1.Step{Name: "call", Executor: "test.record", With: map[string]string{"credentialsSecret": "creds"}},
	)
	p.Spec.Steps[1].Retry = &v1alpha1.RetryPolicy{Limit: 0}
	f := newFixture(t, p)
	f.clients.kube = kubefake.NewClientset(credentials(p.Namespace))
	f.exec.on("login", v1alpha1.HookCreate, func(_ context.Context, req *executor.Request) (contract.Result, error) {
		pw := string(req.Secret("credentialsSecret")["password"])
		return contract.DoneWithOutputs("logged in with "+pw, map[string]string{"echo": pw}), nil
	})
	f.exec.on("call", v1alpha1.HookCreate, func(_ context.Context, req *executor.Request) (contract.Result, error) {
		return contract.Result{}, contract.Permanent("CallFailed", errors.New(`Post "https://admin:`+string(req.Secrets["password"])+`@api.example.com/": EOF`))
	})
	f.syncUntilIdle("p")

	got := f.get("p")
	assert.Equal(t, "logged in with [redacted]", stepStatus(got, "login").Message)
	assert.Equal(t, map[string]string{"echo": "[redacted]"}, stepStatus(got, "login").Outputs)
	call := stepStatus(got, "call")
	assert.Equal(t, v1alpha1.StepFailed, call.Phase)
	assert.Equal(t, "CallFailed", readyCondition(call.Conditions).Reason)
	assert.NotContains(t, call.Message, "s3cret!")
	assert.Contains(t, call.Message, "[redacted]")
	for _, e := range f.eventMessages() {
		assert.NotContains(t, e, "s3cret!")
	}
}

// eventMessages drains the recorded Events, whole.
func (f *fixture) eventMessages() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestValuesOfTwoSecretsWithOneKeyAreBothRemoved: merged by key, the first Secret's value
// of a key the second also has is gone from Request.Secrets; it is removed all the same.
func TestValuesOfTwoSecretsWithOneKeyAreBothRemoved(t *testing.T) {
	p := newPipeline(v1alpha1.Step{Name: "login", Executor: "test.record",
		With: map[string]string{"aSecret": "one", "bSecret": "two"}})
	f := newFixture(t, p)
	f.clients.kube = kubefake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "one"}, Data: map[string][]byte{"token": []byte("first-token")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "two"}, Data: map[string][]byte{"token": []byte("second-token")}},
	)
	f.exec.on("login", v1alpha1.HookCreate, func(_ context.Context, req *executor.Request) (contract.Result, error) {
		return contract.Done(string(req.Secret("aSecret")["token"]) + " " + string(req.Secret("bSecret")["token"])), nil
	})
	f.syncUntilIdle("p")
	assert.Equal(t, "[redacted] [redacted]", stepStatus(f.get("p"), "login").Message)
}
