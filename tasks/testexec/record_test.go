package testexec

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

func TestRecordParametersTheEngineRefuses(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]string
		want   string
	}{
		{"gate not a bool", map[string]string{"gate": "open"}, `parameter "gate" is "open", not true or false`},
		{"fail of another kind", map[string]string{"fail": "sometimes"}, `parameter "fail" is "sometimes", not one of permanent, retryable`},
		{"a parameter it does not take", map[string]string{"outputs": "x"}, `parameter "outputs" is not a parameter of the executor`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plugintest.AssertRefused(t, Record{}.Describe(), tt.params, tt.want)
		})
	}
}

func TestRecordCreate(t *testing.T) {
	open := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gates"}, Data: map[string]string{"open.step": ""}}
	tests := []struct {
		name          string
		params        map[string]string
		wantConfigMap string
		wantDone      bool
		wantOutputs   map[string]string
		wantReason    string // of an error; empty: none
		wantPermanent bool
	}{
		{"defaults", nil, "stepwise-record-p", true, nil, "", false},
		{"output, even empty", map[string]string{"output": ""}, "stepwise-record-p", true, map[string]string{"value": ""}, "", false},
		{"closed gate", map[string]string{"gate": "true"}, "stepwise-record-p", false, nil, "", false},
		{"open gate", map[string]string{"gate": "true", "configMap": "gates", "output": "v"}, "gates", true, map[string]string{"value": "v"}, "", false},
		{"fail permanent", map[string]string{"fail": FailPermanent}, "stepwise-record-p", false, nil, "TestFailure", true},
		{"fail retryable", map[string]string{"fail": FailRetryable}, "stepwise-record-p", false, nil, contract.ReasonHookFailed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(open.DeepCopy())
			req := &executor.Request{
				Request: contract.Request{
					Pipeline: contract.PipelineRef{Namespace: "ns", Name: "p"},
					Step:     "step",
					Hook:     contract.HookCreate,
					Params:   plugintest.Checked(t, Record{}.Describe(), tt.params),
				},
				Clients: &executor.Clients{Kube: client},
			}
			res, err := Record{}.Create(context.Background(), req)
			cm, getErr := client.CoreV1().ConfigMaps("ns").Get(context.Background(), tt.wantConfigMap, metav1.GetOptions{})
			require.NoError(t, getErr)
			assert.Equal(t, "step/Create", cm.Data["calls"], "recorded before anything else")
			if tt.wantReason != "" {
				require.Error(t, err)
				assert.Equal(t, tt.wantReason, executor.ReasonFor(err))
				assert.Equal(t, tt.wantPermanent, contract.IsPermanent(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantDone, res.Done)
			assert.Equal(t, tt.wantOutputs, res.Outputs)
		})
	}
}
