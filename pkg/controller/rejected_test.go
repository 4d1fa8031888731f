package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// validateStatusWrites makes the fake API refuse status writes as the real one does with
// the CRD's schema: condition reasons must be CamelCase words. A step message containing
// refuse is refused too, standing for any rule the engine cannot foresee.
func validateStatusWrites(f *fixture, refuse string) {
	f.client.PrependReactor("update", "pipelines", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" {
			return false, nil, nil
		}
		p := action.(clienttesting.UpdateAction).GetObject().(*v1alpha1.Pipeline)
		status := field.NewPath("status")
		errs := metav1validation.ValidateConditions(p.Status.Conditions, status.Child("conditions"))
		for i, s := range p.Status.Steps {
			path := status.Child("steps").Index(i)
			errs = append(errs, metav1validation.ValidateConditions(s.Conditions, path.Child("conditions"))...)
			if refuse != "" && strings.Contains(s.Message, refuse) {
				errs = append(errs, field.Invalid(path.Child("message"), s.Message, "refused"))
			}
		}
		if len(errs) > 0 {
			return true, nil, apierrors.NewInvalid(v1alpha1.Kind("Pipeline"), p.Name, errs)
		}
		return false, nil, nil
	})
}

// syncIgnoringErrors drives n syncs as the work queue would, the clock moving past any
// backoff between them, whatever each sync returns.
func syncIgnoringErrors(f *fixture, n int) {
	for range n {
		_, _ = f.c.syncHandler(f.ctx, cache.ObjectName{Namespace: "ns", Name: "p"})
		f.refresh("p")
		f.clock.Step(2 * time.Minute)
	}
}

func countCalls(f *fixture, call string) int {
	n := 0
	for _, c := range f.exec.Calls() {
		if strings.HasPrefix(c, call+"#") {
			n++
		}
	}
	return n
}

// TestMalformedReasonIsNormalised: a reason the CRD refuses ("rate limited") would make
// every status write fail, so that the attempt counter never advanced and the retry limit
// never applied: the hook ran at every sync. Reasons are made CamelCase words.
func TestMalformedReasonIsNormalised(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("only")...))
	validateStatusWrites(f, "")
	f.exec.on("only", v1alpha1.HookCreate, func(context.Context, *executor.Request) (contract.Result, error) {
		return contract.Result{}, contract.Retryable("rate limited", errors.New("slow down"))
	})
	syncIgnoringErrors(f, 20)

	s := stepStatus(f.get("p"), "only")
	assert.Equal(t, v1alpha1.StepFailed, s.Phase)
	assert.Equal(t, "RateLimited", readyCondition(s.Conditions).Reason)
	limit := int(newPipeline(stepsOf("only")...).Spec.Steps[0].EffectiveRetry().Limit)
	assert.Equal(t, limit+1, countCalls(f, "only/Create"), "the retry limit applies")
}

// TestRefusedStatusWriteDoesNotRepeatTheHook: when the API server refuses the status a
// hook produced, the step fails with reason StatusRejected instead of running the hook
// again at every sync.
func TestRefusedStatusWriteDoesNotRepeatTheHook(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("only", "next")...))
	validateStatusWrites(f, "UNWRITABLE")
	f.exec.on("only", v1alpha1.HookCreate, func(context.Context, *executor.Request) (contract.Result, error) {
		return contract.Wait(time.Second, "UNWRITABLE progress"), nil
	})
	syncIgnoringErrors(f, 10)

	p := f.get("p")
	s := stepStatus(p, "only")
	assert.Equal(t, v1alpha1.StepFailed, s.Phase)
	assert.Equal(t, v1alpha1.ReasonStatusRejected, readyCondition(s.Conditions).Reason)
	assert.Contains(t, s.Message, "refused the status")
	assert.NotContains(t, s.Message, "UNWRITABLE", "the refused text is not written again")
	assert.Equal(t, 1, countCalls(f, "only/Create"), "the hook ran once")
	assert.Equal(t, v1alpha1.PipelineFailed, p.Status.Phase)
	require.NotContains(t, f.exec.Calls(), "next/PreCreate#1")
}
