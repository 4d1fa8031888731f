package node

import (
	"context"
	"errors"
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

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// TestDrainReadsWhatItDeclares: what the engine hands over, given or defaulted, reaches
// the drain as declared.
func TestDrainReadsWhatItDeclares(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]string
		want   drainParams
	}{
		{
			"every parameter",
			map[string]string{"node": "n1", "timeout": "1m", "policy": "Force", "replacement": "None", "handoffTimeout": "30s", "podSelector": "app=web", "gracePeriodSeconds": "30", "deleteEmptyDirData": "true"},
			drainParams{node: "n1", timeout: time.Minute, policy: PolicyForce, replacement: ReplacementNone, handoffTimeout: 30 * time.Second, podSelector: "app=web", gracePeriodSeconds: 30, deleteEmptyDirData: true},
		},
		{
			"the defaults",
			map[string]string{"node": "n1"},
			drainParams{node: "n1", timeout: 10 * time.Minute, policy: PolicyFail, replacement: ReplacementSurge, handoffTimeout: 5 * time.Minute, gracePeriodSeconds: -1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseDrainParams(request(t, Drain{}, nil, tt.params))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}

	// Without the engine's defaults, a grace period of 0, which kills at once, is never
	// taken for an unset one.
	req := request(t, Drain{}, nil, map[string]string{"node": "n1"})
	req.Params = map[string]string{"node": "n1", "timeout": "1m"}
	got, err := parseDrainParams(req)
	require.NoError(t, err)
	assert.Equal(t, -1, got.gracePeriodSeconds)
	assert.Equal(t, defaultHandoffTimeout, got.handoffTimeout)
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
	readsEverything(client)
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
	readsEverything(client)
	_, err = Drain{}.Create(ctx, request(t, Drain{}, client, map[string]string{"node": "n1"}))
	require.Error(t, err)
	assert.Equal(t, "DrainBlocked", executor.ReasonFor(err))
	assert.Contains(t, err.Error(), "apps/bare")
}

// TestARefusedEvictionNamesItsBudget: the drain says which PodDisruptionBudgets hold it
// back as data (BlockedBy), each once, from the API server's refusals (the texts are the
// API server's, pkg/registry/core/pod/storage/eviction.go).
func TestARefusedEvictionNamesItsBudget(t *testing.T) {
	refusal := func(causes ...metav1.StatusCause) error {
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		err.ErrStatus.Details.Causes = causes
		return err
	}
	budgetCause := func(msg string) metav1.StatusCause {
		return metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: msg}
	}
	pdb := func(name string) contract.Blocker {
		return contract.Blocker{Kind: v1alpha1.KindPodDisruptionBudget, Namespace: "apps", Name: name}
	}
	tests := []struct {
		name       string
		refusals   map[string]error
		wantBlocks []contract.Blocker
	}{
		{
			name: "each budget once, in the pods' order",
			refusals: map[string]error{
				"web-1": refusal(budgetCause("The disruption budget web-pdb needs 2 healthy pods and has 2 currently")),
				"web-2": refusal(budgetCause("The disruption budget web-pdb needs 2 healthy pods and has 2 currently")),
				"web-3": refusal(budgetCause("The disruption budget db.pdb-1 is still being processed by the server")),
			},
			wantBlocks: []contract.Blocker{pdb("web-pdb"), pdb("db.pdb-1")},
		},
		{name: "nothing refused, nothing named"},
		{name: "a refusal without a cause names none", refusals: map[string]error{"web-1": refusal()}},
		{
			name: "causes of other types name none",
			refusals: map[string]error{"web-1": refusal(metav1.StatusCause{Type: "Other",
				Message: "The disruption budget web-pdb needs 2 healthy pods and has 2 currently"})},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(newNode("n1", true, nil), managedPod("web-1"), managedPod("web-2"), managedPod("web-3"))
			readsEverything(client)
			client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
				if action.GetSubresource() != "eviction" {
					return false, nil, nil
				}
				return true, nil, tt.refusals[action.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction).Name]
			})
			d := Drain{Clock: testingclock.NewFakeClock(time.Now())}
			res, err := d.Create(context.Background(), request(t, d, client, map[string]string{"node": "n1"}))
			require.NoError(t, err)
			assert.False(t, res.Done)
			assert.Equal(t, tt.wantBlocks, res.BlockedBy)
		})
	}
}

// refusals answers evictions as the API server does: a pod named in budgets is refused by
// that PodDisruptionBudget of its namespace, one in failures fails with that error, and
// the others go.
func refusals(client *fake.Clientset, budgets map[string]string, failures map[string]error) {
	client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		name := action.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction).Name
		if pdb, ok := budgets[name]; ok {
			err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
			err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause,
				Message: "The disruption budget " + pdb + " needs 2 healthy pods and has 2 currently"}}
			return true, nil, err
		}
		return true, nil, failures[name]
	})
}

func podIn(namespace, name string) *corev1.Pod {
	pod := managedPod(name)
	pod.Namespace = namespace
	return pod
}

// TestABlockedDrainNamesOnlyWhatTheServiceAccountMayRead: the step's message and
// blockedBy, which whoever reads the pipeline (ops) sees, name the pods and
// PodDisruptionBudgets of another namespace only where the pipeline's ServiceAccount may
// read them, and count the others; those of ops are always named.
func TestABlockedDrainNamesOnlyWhatTheServiceAccountMayRead(t *testing.T) {
	const (
		webRefusal = "The disruption budget web-pdb needs 2 healthy pods and has 2 currently"
		jobRefusal = "The disruption budget job-pdb needs 2 healthy pods and has 2 currently"
	)
	jobBudget := contract.Blocker{Kind: v1alpha1.KindPodDisruptionBudget, Namespace: "ops", Name: "job-pdb"}
	tests := []struct {
		name        string
		grants      []string
		wantMessage string
		wantBlocks  []contract.Blocker
	}{
		{
			name:        "it may read both",
			grants:      []string{"pods *", "poddisruptionbudgets *"},
			wantMessage: "3 pods left; apps/web-1: " + webRefusal + "; ops/job-1: " + jobRefusal,
			wantBlocks:  []contract.Blocker{{Kind: v1alpha1.KindPodDisruptionBudget, Namespace: "apps", Name: "web-pdb"}, jobBudget},
		},
		{
			name:        "it may read neither",
			wantMessage: "3 pods left; ops/job-1: " + jobRefusal + "; evictions refused for 1 pod in another namespace",
			wantBlocks:  []contract.Blocker{jobBudget},
		},
		{
			name:        "it may read pods, not budgets",
			grants:      []string{"pods apps"},
			wantMessage: "3 pods left; apps/web-1: eviction refused by a PodDisruptionBudget; ops/job-1: " + jobRefusal,
			wantBlocks:  []contract.Blocker{jobBudget},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(newNode("n1", true, nil), podIn("ops", "job-1"), podIn("apps", "web-1"), podIn("apps", "web-2"))
			asked := grants(client, tt.grants...)
			refusals(client, map[string]string{"job-1": "job-pdb", "web-1": "web-pdb"}, nil)
			d := Drain{Clock: testingclock.NewFakeClock(time.Now())}
			res, err := d.Create(context.Background(), request(t, d, client, map[string]string{"node": "n1"}))
			require.NoError(t, err)
			assert.False(t, res.Done)
			assert.Equal(t, tt.wantMessage, res.Message)
			assert.Equal(t, tt.wantBlocks, res.BlockedBy)
			assert.Equal(t, "1", res.Outputs[OutputPodsEvicted])
			for _, a := range *asked {
				assert.NotEqual(t, "ops", a.Namespace, "the pipeline's own namespace needs no review")
			}
		})
	}
}

// TestADrainsErrorsNameOnlyWhatTheServiceAccountMayRead: a failed eviction and pods the
// drain refuses are said without the names the ServiceAccount may not read, and a failure
// keeps its API error for the engine.
func TestADrainsErrorsNameOnlyWhatTheServiceAccountMayRead(t *testing.T) {
	forbiddenEviction := apierrors.NewForbidden(corev1.Resource("pods"), "web-1",
		errors.New(`User "system:serviceaccount:ops:retire" cannot create resource "pods/eviction" in the namespace "apps"`))
	const refusal = "cannot delete Pods that declare no controller (set policy: Force to override)"
	tests := []struct {
		name      string
		pods      []runtime.Object
		grants    []string
		wantErr   string
		permanent bool
	}{
		{
			name:    "a failed eviction, named",
			pods:    []runtime.Object{podIn("apps", "web-1")},
			grants:  []string{"pods *"},
			wantErr: `evict pod apps/web-1: pods "web-1" is forbidden: User "system:serviceaccount:ops:retire" cannot create resource "pods/eviction" in the namespace "apps"`,
		},
		{
			name:    "a failed eviction, not named",
			pods:    []runtime.Object{podIn("apps", "web-1")},
			wantErr: "evict a pod in another namespace: Forbidden",
		},
		{
			name:      "pods the drain refuses, named and counted",
			pods:      []runtime.Object{bare("ops", "bare-1"), bare("apps", "bare-2"), bare("team", "bare-3")},
			grants:    []string{"pods apps"},
			wantErr:   `cannot drain node "n1": ` + refusal + ": apps/bare-2, ops/bare-1 and 1 pod in another namespace",
			permanent: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(append(tt.pods, newNode("n1", true, nil))...)
			grants(client, tt.grants...)
			refusals(client, nil, map[string]error{"web-1": forbiddenEviction})
			_, err := Drain{}.Create(context.Background(), request(t, Drain{}, client, map[string]string{"node": "n1"}))
			require.Error(t, err)
			assert.Equal(t, tt.wantErr, err.Error())
			assert.Equal(t, tt.permanent, contract.IsPermanent(err))
			if !tt.permanent {
				assert.True(t, apierrors.IsForbidden(err), "the engine still sees the API's error")
			}
		})
	}
}

func bare(namespace, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: corev1.PodSpec{NodeName: "n1"}}
}
