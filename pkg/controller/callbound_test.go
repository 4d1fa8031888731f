package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// TestAHookCallIsBounded: a hook that does not answer (an endpoint that accepts the
// connection and never replies) holds its worker for the engine's bound on one call, not
// for the step's timeout: the call fails retryably with reason HookCallTimeout and the
// worker is free. The step's timeout still bounds the attempt across calls.
func TestAHookCallIsBounded(t *testing.T) {
	f := newFixture(t, newPipeline(v1alpha1.Step{Name: "vm", Executor: "test.record",
		Timeout: &metav1.Duration{Duration: time.Hour}, Retry: &v1alpha1.RetryPolicy{Limit: 3}}))
	f.clock.SetTime(time.Now()) // the call's context runs on real time
	f.c.hookCallTimeout = 100 * time.Millisecond
	f.exec.on("vm", v1alpha1.HookCreate, func(ctx context.Context, _ *executor.Request) (contract.Result, error) {
		select {
		case <-ctx.Done():
			return contract.Result{}, ctx.Err()
		case <-time.After(time.Minute):
			return contract.Done("answered at last"), nil
		}
	})

	done := make(chan struct{})
	go func() {
		defer close(done)
		f.sync("p")
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the sync still holds its worker after 30s")
	}
	s := stepStatus(f.get("p"), "vm")
	assert.Equal(t, v1alpha1.StepWaiting, s.Phase, "retried later, as any retryable failure")
	ready := readyCondition(s.Conditions)
	assert.Equal(t, contract.ReasonHookCallTimeout, ready.Reason)
	assert.Contains(t, s.Message, "--hook-call-timeout")
}
