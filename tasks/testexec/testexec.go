// Package testexec holds executors for tests, demos and benchmarks, registered only when
// the operator runs with --enable-test-executors:
//
//   - test.noop does nothing, at once, in every hook.
//   - test.record appends "STEP/HOOK" to the "calls" key of a ConfigMap in the pipeline's
//     namespace, acting as the pipeline's ServiceAccount, so a test can observe the order
//     of hooks and the engine's impersonation. Parameters: configMap (default
//     "stepwise-record-PIPELINE"); gate (true: Create waits until the ConfigMap has the key
//     "open.STEP"); fail ("permanent" or "retryable": Create fails); output (a value to
//     report as the output "value"). The engine checks them against Describe before any
//     hook.
//   - test.sleep's Create sleeps for its parameter duration (or until its call is
//     cancelled), then succeeds or fails as its parameter fail asks: a tenant whose hooks
//     are slow or hang.
//
// test.noop declares no parameter, so it takes any: tests and benchmarks give it what they
// need to exercise the engine.
package testexec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// Executors returns the test executors.
func Executors() []executor.TaskExecutor {
	return []executor.TaskExecutor{Noop{}, Record{}, Sleep{}}
}

// Noop is test.noop.
type Noop struct{ executor.Base }

func (Noop) Name() string { return "test.noop" }

// Record is test.record.
type Record struct{}

func (Record) Name() string { return "test.record" }

// gatePoll is how often a gated Create looks at its gate again.
const gatePoll = 500 * time.Millisecond

func (e Record) PreCreate(ctx context.Context, req *executor.Request) (contract.Result, error) {
	return e.record(ctx, req)
}

func (e Record) Create(ctx context.Context, req *executor.Request) (contract.Result, error) {
	cm, err := e.recordCall(ctx, req)
	if err != nil {
		return contract.Result{}, err
	}
	switch req.String("fail") {
	case FailPermanent:
		return contract.Result{}, contract.Permanent("TestFailure", errors.New("asked to fail permanently"))
	case FailRetryable:
		return contract.Result{}, errors.New("asked to fail")
	}
	if req.Bool("gate") {
		if _, open := cm.Data["open."+req.Step]; !open {
			return contract.Wait(gatePoll, fmt.Sprintf("waiting for key open.%s in ConfigMap %s", req.Step, cm.Name)), nil
		}
	}
	// An output set to nothing is reported too: a test may pass an empty value on.
	var outputs map[string]string
	if v, ok := req.Params["output"]; ok {
		outputs = map[string]string{"value": v}
	}
	return contract.DoneWithOutputs("recorded", outputs), nil
}

func (e Record) PostCreate(ctx context.Context, req *executor.Request) (contract.Result, error) {
	return e.record(ctx, req)
}

func (e Record) PreDelete(ctx context.Context, req *executor.Request) (contract.Result, error) {
	return e.record(ctx, req)
}

func (e Record) Delete(ctx context.Context, req *executor.Request) (contract.Result, error) {
	return e.record(ctx, req)
}

func (e Record) PostDelete(ctx context.Context, req *executor.Request) (contract.Result, error) {
	return e.record(ctx, req)
}

func (e Record) record(ctx context.Context, req *executor.Request) (contract.Result, error) {
	if _, err := e.recordCall(ctx, req); err != nil {
		return contract.Result{}, err
	}
	return contract.Done("recorded"), nil
}

// recordCall appends the call to the ConfigMap, creating it when needed, and returns it.
func (Record) recordCall(ctx context.Context, req *executor.Request) (*corev1.ConfigMap, error) {
	if req.Clients == nil || req.Clients.Kube == nil {
		return nil, contract.Permanent("NoClient", errors.New("test.record needs a Kubernetes client"))
	}
	// The default names the pipeline, which a declared default cannot.
	name := req.String("configMap")
	if name == "" {
		name = "stepwise-record-" + req.Pipeline.Name
	}
	line := req.Step + "/" + string(req.Hook)
	configMaps := req.Clients.Kube.CoreV1().ConfigMaps(req.Pipeline.Namespace)

	var out *corev1.ConfigMap
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := configMaps.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"calls": line}}
			out, err = configMaps.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data["calls"] = strings.TrimPrefix(cm.Data["calls"]+"\n"+line, "\n")
		out, err = configMaps.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("record %s in ConfigMap %s/%s: %w", line, req.Pipeline.Namespace, name, err)
	}
	return out, nil
}

var _ executor.TaskExecutor = Record{}
