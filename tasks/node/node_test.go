package node

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

// request is a request for a hook of e with the parameters as the engine hands them over:
// checked against e's declarations, with their defaults.
func request(t *testing.T, e executor.TaskExecutor, client *fake.Clientset, params map[string]string) *executor.Request {
	t.Helper()
	return &executor.Request{
		Request: contract.Request{
			Pipeline: contract.PipelineRef{Namespace: "ops", Name: "retire", UID: "uid-1"},
			Step:     "step",
			Params:   plugintest.Checked(t, executor.Describe(e), params),
			Outputs:  map[string]map[string]string{},
		},
		Clients: &executor.Clients{Kube: client},
	}
}

// grants answers the ServiceAccount's access reviews as the API server would: get of a
// resource ("pods", "poddisruptionbudgets") in a namespace is allowed when grants holds
// "RESOURCE NAMESPACE" or "RESOURCE *". It returns the reviews asked.
func grants(client *fake.Clientset, allowed ...string) *[]authorizationv1.ResourceAttributes {
	var asked []authorizationv1.ResourceAttributes
	client.PrependReactor("create", "selfsubjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		attrs := *review.Spec.ResourceAttributes
		asked = append(asked, attrs)
		review.Status.Allowed = attrs.Verb == "get" &&
			(slices.Contains(allowed, attrs.Resource+" "+attrs.Namespace) || slices.Contains(allowed, attrs.Resource+" *"))
		return true, review, nil
	})
	return &asked
}

// readsEverything lets the ServiceAccount read pods and PodDisruptionBudgets everywhere:
// a drain names them all.
func readsEverything(client *fake.Clientset) {
	grants(client, "pods *", "poddisruptionbudgets *", "deployments *")
}

func newNode(name string, unschedulable bool, annotations map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec:       corev1.NodeSpec{Unschedulable: unschedulable},
	}
}

// TestParametersTheEngineRefuses: what the declarations say (required, types, the
// policy's values, no other parameter) the engine checks before any hook.
func TestParametersTheEngineRefuses(t *testing.T) {
	tests := []struct {
		name   string
		exec   executor.TaskExecutor
		params map[string]string
		want   string
	}{
		{"cordon without node", Cordon{}, nil, `parameter "node" is required`},
		{"drain without node", Drain{}, map[string]string{}, `parameter "node" is required`},
		{"delete without node", Delete{}, nil, `parameter "node" is required`},
		{"drain bad timeout", Drain{}, map[string]string{"node": "n1", "timeout": "soon"}, `parameter "timeout" is "soon", not a duration`},
		{"drain bad policy", Drain{}, map[string]string{"node": "n1", "policy": "Maybe"}, `parameter "policy" is "Maybe", not one of Fail, Force`},
		{"drain bad grace", Drain{}, map[string]string{"node": "n1", "gracePeriodSeconds": "x"}, `parameter "gracePeriodSeconds" is "x", not a whole number`},
		{"drain bad deleteEmptyDirData", Drain{}, map[string]string{"node": "n1", "deleteEmptyDirData": "yes please"}, `parameter "deleteEmptyDirData" is "yes please", not true or false`},
		{"cordon with a parameter of drain", Cordon{}, map[string]string{"node": "n1", "timeout": "1m"}, `parameter "timeout" is not a parameter of the executor, which takes node`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plugintest.AssertRefused(t, executor.Describe(tt.exec), tt.params, tt.want)
		})
	}
}

// TestParametersTheExecutorRefuses: what the types cannot say, the hook checks, failing
// the step at once.
func TestParametersTheExecutorRefuses(t *testing.T) {
	tests := []struct {
		name    string
		exec    executor.TaskExecutor
		params  map[string]string
		wantErr string
		reason  string
	}{
		{"drain of a node name that is no DNS name", Drain{}, map[string]string{"node": "Node_1"}, `parameter "node" is "Node_1", not a Node name`, "InvalidParameter"},
		{"delete of a node name with a slash", Delete{}, map[string]string{"node": "a/b"}, `parameter "node" is "a/b", not a Node name`, "InvalidParameter"},
		{"cordon of a missing node", Cordon{}, map[string]string{"node": "n9"}, `node "n9" not found`, "NodeNotFound"},
		{"drain of a missing node", Drain{}, map[string]string{"node": "n9"}, `node "n9" not found`, "NodeNotFound"},
		{"drain timeout zero", Drain{}, map[string]string{"node": "n1", "timeout": "0s"}, `parameter "timeout" is "0s", not a positive duration`, "InvalidParameter"},
		{"drain negative timeout", Drain{}, map[string]string{"node": "n1", "timeout": "-1m"}, `parameter "timeout" is "-1m", not a positive duration`, "InvalidParameter"},
		{"drain bad selector", Drain{}, map[string]string{"node": "n1", "podSelector": "a in (("}, `parameter "podSelector" is not a label selector`, "InvalidParameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(newNode("n1", false, nil))
			_, err := tt.exec.Create(context.Background(), request(t, tt.exec, client, tt.params))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.True(t, contract.IsPermanent(err))
			assert.Equal(t, tt.reason, executor.ReasonFor(err))
			if tt.reason == "InvalidParameter" {
				assert.Empty(t, client.Actions(), "nothing is read")
			}
		})
	}
}
