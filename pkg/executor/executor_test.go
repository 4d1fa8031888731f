package executor

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

type named struct {
	Base
	name string
}

func (n named) Name() string { return n.name }

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	require.NoError(t, r.Register(named{name: "b.two"}, named{name: "a.one"}))
	assert.Equal(t, []string{"a.one", "b.two"}, r.Names())

	e, ok := r.Get("a.one")
	require.True(t, ok)
	assert.Equal(t, "a.one", e.Name())
	_, ok = r.Get("missing")
	assert.False(t, ok)

	err := r.Register(named{name: "c.three"}, named{name: "a.one"})
	require.ErrorContains(t, err, `register executor "a.one": the name is already registered`)
	_, ok = r.Get("c.three")
	assert.False(t, ok, "a failed registration adds nothing")

	assert.Error(t, NewRegistry().Register(named{name: "x"}, named{name: "x"}), "duplicates within one call")
}

func TestReasonForAndPermanence(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n", errors.New("no"))
	tests := []struct {
		name          string
		err           error
		wantReason    string
		wantPermanent bool
	}{
		{"plain error", errors.New("x"), contract.ReasonHookFailed, false},
		{"permanent with reason", contract.Permanent("InvalidParameter", errors.New("x")), "InvalidParameter", true},
		{"wrapped permanent", fmt.Errorf("create: %w", contract.Permanent("NotFound", errors.New("x"))), "NotFound", true},
		{"retryable with reason", contract.Retryable("CloudBusy", errors.New("x")), "CloudBusy", false},
		{"API error", fmt.Errorf("cordon: %w", forbidden), "Forbidden", false},
		{"deadline", fmt.Errorf("call: %w", context.DeadlineExceeded), contract.ReasonTimeout, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantReason, ReasonFor(tt.err))
			assert.Equal(t, tt.wantPermanent, contract.IsPermanent(tt.err))
		})
	}
}

func TestRunHookDispatchesEveryHook(t *testing.T) {
	for _, h := range contract.AllHooks() {
		res, err := RunHook(context.Background(), named{name: "x"}, &Request{Request: contract.Request{Hook: h}})
		require.NoError(t, err, h)
		assert.True(t, res.Done, h)
	}
	_, err := RunHook(context.Background(), named{name: "x"}, &Request{Request: contract.Request{Hook: "Frobnicate"}})
	assert.True(t, contract.IsPermanent(err))
	assert.Equal(t, contract.ReasonUnknownHook, ReasonFor(err))
}

func TestFuncRunsOneFunctionForEveryHook(t *testing.T) {
	var seen []contract.Hook
	f := Func{ExecutorName: "x.fake", Run: func(_ context.Context, req *Request) (contract.Result, error) {
		seen = append(seen, req.Hook)
		return contract.Done(string(req.Hook)), nil
	}}
	hooks := contract.AllHooks()
	for _, h := range hooks {
		res, err := RunHook(context.Background(), f, &Request{Request: contract.Request{Hook: h}})
		require.NoError(t, err)
		assert.Equal(t, string(h), res.Message)
	}
	assert.Equal(t, hooks, seen)
	assert.Equal(t, "x.fake", f.Name())
}
