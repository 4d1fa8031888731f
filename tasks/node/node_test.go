package node

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

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
		{"cordon of an empty node name", Cordon{}, map[string]string{"node": ""}, `parameter "node" is empty`, "InvalidParameter"},
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

func TestCordonAndItsTeardown(t *testing.T) {
	tests := []struct {
		name               string
		node               *corev1.Node
		wantWasSchedulable string
		wantUncordoned     bool
	}{
		{"schedulable node is cordoned and uncordoned again", newNode("n1", false, nil), "true", true},
		{"node cordoned by someone else stays cordoned", newNode("n1", true, nil), "false", false},
		{"node this pipeline cordoned on an earlier attempt", newNode("n1", true, map[string]string{CordonedByAnnotation: "uid-1"}), "true", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			tt.node.Spec.ProviderID = "vsphere://4201-n1"
			client := fake.NewClientset(tt.node)
			req := request(t, Cordon{}, client, map[string]string{"node": "n1"})
			res, err := Cordon{}.Create(ctx, req)
			require.NoError(t, err)
			assert.True(t, res.Done)
			assert.Equal(t, tt.wantWasSchedulable, res.Outputs["wasSchedulable"])
			assert.Equal(t, "vsphere://4201-n1", res.Outputs["providerID"])
			n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			require.NoError(t, err)
			assert.True(t, n.Spec.Unschedulable)

			// A second Create changes nothing.
			again, err := Cordon{}.Create(ctx, req)
			require.NoError(t, err)
			assert.Equal(t, tt.wantWasSchedulable, again.Outputs["wasSchedulable"])
			assert.Equal(t, "vsphere://4201-n1", again.Outputs["providerID"])

			_, err = Cordon{}.Delete(ctx, req)
			require.NoError(t, err)
			n, err = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, !tt.wantUncordoned, n.Spec.Unschedulable)
			if tt.wantUncordoned {
				assert.NotContains(t, n.Annotations, CordonedByAnnotation)
			}
		})
	}
}

func TestCordonTeardownOfAGoneNodeIsDone(t *testing.T) {
	res, err := Cordon{}.Delete(context.Background(), request(t, Cordon{}, fake.NewClientset(), map[string]string{"node": "n1"}))
	require.NoError(t, err)
	assert.True(t, res.Done)
}

func TestDeleteNode(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(newNode("n1", true, nil))
	req := request(t, Delete{}, client, map[string]string{"node": "n1"})
	res, err := Delete{}.Create(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, "true", res.Outputs["deleted"])
	_, err = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))

	res, err = Delete{}.Create(ctx, req)
	require.NoError(t, err, "deleting a node that is gone is done")
	assert.Equal(t, "false", res.Outputs["deleted"])
}

func managedPod(name string) *corev1.Pod {
	isController := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs", Controller: &isController,
		}}},
		Spec: corev1.PodSpec{NodeName: "n1"},
	}
}

// evictions records eviction calls; pods in blocked get the API server's PDB refusal.
func evictions(client *fake.Clientset, blocked map[string]bool) *[]string {
	var evicted []string
	client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		eviction := action.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		if blocked[eviction.Name] {
			err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
			err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: "DisruptionBudget",
				Message: "The disruption budget web-pdb needs 2 healthy pods and has 2 currently"}}
			return true, nil, err
		}
		evicted = append(evicted, eviction.Name)
		return true, nil, nil
	})
	return &evicted
}

func TestDrainEvictsWhatItCanAndSaysWhatBlocks(t *testing.T) {
	ctx := context.Background()
	clock := testingclock.NewFakeClock(time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC))
	client := fake.NewClientset(newNode("n1", true, nil), managedPod("web-1"), managedPod("web-2"))
	evicted := evictions(client, map[string]bool{"web-2": true})
	d := Drain{Clock: clock}
	req := request(t, d, client, map[string]string{"node": "n1", "timeout": "10m"})
	req.HookStarted = clock.Now()

	res, err := d.Create(ctx, req)
	require.NoError(t, err)
	assert.False(t, res.Done)
	assert.Equal(t, drainPoll, res.RequeueAfter)
	assert.Equal(t, []string{"web-1"}, *evicted)
	assert.Equal(t, "2 pods left; apps/web-2: The disruption budget web-pdb needs 2 healthy pods and has 2 currently", res.Message)
	assert.Equal(t, map[string]string{OutputPodsEvicted: "1"}, res.Outputs, "no start time in the outputs: the engine keeps it")
	assert.Empty(t, res.State)

	// The engine hands the outputs back, and the hook's start; the deadline counts from it.
	req.Outputs[req.Step] = res.Outputs
	clock.Step(10 * time.Minute)
	res, err = d.Create(ctx, req)
	require.NoError(t, err, "at the deadline: still waiting")
	assert.False(t, res.Done)
	clock.Step(time.Second)
	_, err = d.Create(ctx, req)
	require.Error(t, err)
	assert.True(t, contract.IsPermanent(err))
	assert.Equal(t, "DrainTimeout", executor.ReasonFor(err))
	assert.Contains(t, err.Error(), `node "n1" not drained within 10m0s: 2 pods left`)
}

// TestDrainWithoutAHookStartStartsNow: a request without HookStarted (a caller other
// than the engine) is a first call: its deadline is timeout from now.
func TestDrainWithoutAHookStartStartsNow(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC))
	client := fake.NewClientset(newNode("n1", true, nil), managedPod("web-1"))
	evictions(client, map[string]bool{"web-1": true})
	d := Drain{Clock: clock}
	req := request(t, d, client, map[string]string{"node": "n1", "timeout": "1m"})
	for range 3 {
		res, err := d.Create(context.Background(), req)
		require.NoError(t, err)
		assert.False(t, res.Done)
		req.Outputs[req.Step] = res.Outputs
		clock.Step(time.Hour)
	}
}

func TestDrainForcePolicyDeletesAfterTheDeadline(t *testing.T) {
	ctx := context.Background()
	clock := testingclock.NewFakeClock(time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC))
	client := fake.NewClientset(newNode("n1", true, nil), managedPod("web-1"))
	evictions(client, map[string]bool{"web-1": true})
	d := Drain{Clock: clock}
	req := request(t, d, client, map[string]string{"node": "n1", "timeout": "1m", "policy": "Force"})
	req.HookStarted = clock.Now()

	res, err := d.Create(ctx, req)
	require.NoError(t, err)
	assert.False(t, res.Done)
	req.Outputs[req.Step] = res.Outputs

	clock.Step(2 * time.Minute)
	res, err = d.Create(ctx, req)
	require.NoError(t, err)
	req.Outputs[req.Step] = res.Outputs
	_, err = client.CoreV1().Pods("apps").Get(ctx, "web-1", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the pod the PDB protected is deleted once the deadline passed")

	res, err = d.Create(ctx, req)
	require.NoError(t, err)
	assert.True(t, res.Done)
	assert.Equal(t, "1", res.Outputs[OutputPodsEvicted])
}

// TestDrainGracePeriod: the declared default -1 leaves each pod its own grace period;
// a value given is sent with every eviction.
func TestDrainGracePeriod(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]string
		want   *int64
	}{
		{"default: the pod's own", map[string]string{"node": "n1"}, nil},
		{"given", map[string]string{"node": "n1", "gracePeriodSeconds": "30"}, ptr.To[int64](30)},
		{"zero", map[string]string{"node": "n1", "gracePeriodSeconds": "0"}, ptr.To[int64](0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(newNode("n1", true, nil), managedPod("web-1"))
			var got []*int64
			client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
				if action.GetSubresource() != "eviction" {
					return false, nil, nil
				}
				eviction := action.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
				var grace *int64
				if eviction.DeleteOptions != nil {
					grace = eviction.DeleteOptions.GracePeriodSeconds
				}
				got = append(got, grace)
				return true, nil, nil
			})
			_, err := Drain{}.Create(context.Background(), request(t, Drain{}, client, tt.params))
			require.NoError(t, err)
			require.Len(t, got, 1)
			assert.Equal(t, tt.want, got[0])
		})
	}
}

func TestDrainIgnoresDaemonSetPodsAndRefusesBarePods(t *testing.T) {
	ctx := context.Background()
	isController := true
	daemon := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds", Controller: &isController,
		}}},
		Spec: corev1.PodSpec{NodeName: "n1"},
	}
	client := fake.NewClientset(newNode("n1", true, nil), daemon)
	// kubectl's drain looks the DaemonSet up to know the pod is managed.
	client.PrependReactor("get", "daemonsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil
	})
	res, err := Drain{}.Create(ctx, request(t, Drain{}, client, map[string]string{"node": "n1"}))
	require.NoError(t, err)
	assert.True(t, res.Done, res.Message)

	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "apps"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	client = fake.NewClientset(newNode("n1", true, nil), bare)
	_, err = Drain{}.Create(ctx, request(t, Drain{}, client, map[string]string{"node": "n1"}))
	require.Error(t, err)
	assert.Equal(t, "DrainBlocked", executor.ReasonFor(err))
	assert.Contains(t, err.Error(), "apps/bare")
}
