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

// Values of test.record's parameter fail.
const (
	FailPermanent = "permanent"
	FailRetryable = "retryable"
)

// Describe documents test.record for the executor catalogue.
func (Record) Describe() contract.Description {
	return contract.Description{
		Description: "Appends STEP/HOOK to the key calls of a ConfigMap for every hook it runs (tests and demos).",
		Parameters: []contract.Parameter{
			{Name: "configMap", Type: contract.ParamString, Description: "ConfigMap to write (default stepwise-record-PIPELINE)."},
			{Name: "gate", Type: contract.ParamBool, Default: "false", Description: "true: Create waits until the ConfigMap has the key open.STEP."},
			{Name: "fail", Type: contract.ParamEnum, Values: []string{FailPermanent, FailRetryable}, Description: "permanent or retryable: Create fails that way."},
			{Name: "output", Type: contract.ParamString, Description: "A value to report as the output value."},
		},
	}
}

var _ executor.TaskExecutor = Record{}
