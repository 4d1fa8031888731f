package node

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// assertReadOnly checks that a plan only read: every call it made is a get, a list or an
// access review (which changes nothing).
func assertReadOnly(t *testing.T, client *fake.Clientset) {
	t.Helper()
	for _, a := range client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "selfsubjectaccessreviews" {
			continue
		}
		assert.Contains(t, []string{"get", "list"}, a.GetVerb(), "a plan %ss %s", a.GetVerb(), a.GetResource().Resource)
	}
}

// forbidden makes client refuse verb on resource, as the API server refuses a
// ServiceAccount without the right.
func forbidden(client *fake.Clientset, verb, resource string) {
	client.PrependReactor(verb, resource, func(action k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(action.GetResource().GroupResource(), "",
			errors.New(`User "system:serviceaccount:ops:retire" cannot `+verb+" it"))
	})
}

// runningPod is a Running, Ready pod on n1, controlled by a controller of the given kind
// ("" for none), changed by each option.
func runningPod(namespace, name, controller string, labels map[string]string, options ...func(*corev1.Pod)) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	if controller != "" {
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: controller, Name: name + "-owner", UID: "owner",
			Controller: ptr.To(true)}}
	}
	for _, o := range options {
		o(pod)
	}
	return pod
}

func webPod(name string, options ...func(*corev1.Pod)) *corev1.Pod {
	return runningPod("apps", name, "ReplicaSet", map[string]string{"app": "web"}, options...)
}

func apiPod(name string) *corev1.Pod {
	return runningPod("apps", name, "ReplicaSet", map[string]string{"app": "api"})
}

func withEmptyDir(pod *corev1.Pod) {
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "scratch",
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
}

func unready(pod *corev1.Pod) { pod.Status.Conditions = nil }

func deleting(pod *corev1.Pod) {
	pod.DeletionTimestamp = ptr.To(metav1.Now())
	pod.Finalizers = []string{"example.com/hold"}
}

// daemonSetPod is a DaemonSet's pod, with its DaemonSet, which kubectl's drain looks up.
func daemonSetPod() []runtime.Object {
	pod := runningPod("kube-system", "agent", "DaemonSet", nil)
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: pod.OwnerReferences[0].Name, Namespace: "kube-system"}}
	return []runtime.Object{pod, ds}
}

// mirrorPod is the API's copy of a static pod, which the kubelet runs.
func mirrorPod() *corev1.Pod {
	pod := runningPod("kube-system", "etcd-n1", "", nil)
	pod.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "n1", Controller: ptr.To(true)}}
	return pod
}

// budget is a PodDisruptionBudget in apps over the pods labelled app=app, allowing the
// given number of disruptions now.
func budget(name, app string, allowed int32, options ...func(*policyv1.PodDisruptionBudget)) *policyv1.PodDisruptionBudget {
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed, CurrentHealthy: 2, DesiredHealthy: 2},
	}
	for _, o := range options {
		o(pdb)
	}
	return pdb
}

func objects(groups ...[]runtime.Object) []runtime.Object {
	all := []runtime.Object{newNode("n1", false, nil)}
	for _, g := range groups {
		all = append(all, g...)
	}
	return all
}

func one(objs ...runtime.Object) []runtime.Object { return objs }

func TestDrainPlan(t *testing.T) {
	const failNote = "; the step fails if still blocked after 10m0s"
	tests := []struct {
		name    string
		objects []runtime.Object
		params  map[string]string
		react   func(*fake.Clientset)
		want    contract.Plan
	}{
		{
			name: "a budget allowing one of its two pods, a pod without budget, a DaemonSet pod and a mirror pod",
			objects: objects(one(webPod("web-1"), webPod("web-2"), apiPod("api-1"), mirrorPod(), budget("web-pdb", "web", 1)),
				daemonSetPod()),
			want: contract.Plan{
				Summary: "evict 3 pods from node n1 (1 DaemonSet pod, 1 mirror pod stay); 1 blocked by PodDisruptionBudget apps/web-pdb",
				Details: []contract.PlanItem{
					{Kind: "Pod", Name: "apps/api-1", Action: "evict"},
					{Kind: "Pod", Name: "apps/web-1", Action: "evict"},
					{Kind: "Pod", Name: "apps/web-2", Action: "evict", Note: "blocked now by PodDisruptionBudget apps/web-pdb" + failNote},
					{Kind: "Pod", Name: "kube-system/agent", Action: "skip", Note: "ignoring DaemonSet-managed Pods"},
					{Kind: "Pod", Name: "kube-system/etcd-n1", Action: "skip", Note: "mirror pod: the kubelet runs it, not the API"},
					{Kind: "PodDisruptionBudget", Name: "apps/web-pdb", Action: "blocks", Note: "2 of its pods on this node; disruptionsAllowed 1"},
				},
				Warnings: []string{"pod apps/web-2: PodDisruptionBudget apps/web-pdb allows 1 disruption now, taken by the pods evicted before it"},
				Outputs:  map[string]string{OutputPodsEvicted: "3"},
			},
		},
		{
			name:    "a budget allowing no disruption",
			objects: objects(one(webPod("web-1"), apiPod("api-1"), budget("web-pdb", "web", 0))),
			want: contract.Plan{
				Summary: "evict 2 pods from node n1; 1 blocked by PodDisruptionBudget apps/web-pdb",
				Details: []contract.PlanItem{
					{Kind: "Pod", Name: "apps/api-1", Action: "evict"},
					{Kind: "Pod", Name: "apps/web-1", Action: "evict", Note: "blocked now by PodDisruptionBudget apps/web-pdb" + failNote},
					{Kind: "PodDisruptionBudget", Name: "apps/web-pdb", Action: "blocks", Note: "1 of its pods on this node; disruptionsAllowed 0"},
				},
				Warnings: []string{"pod apps/web-1: PodDisruptionBudget apps/web-pdb allows 0 disruptions now"},
				Outputs:  map[string]string{OutputPodsEvicted: "2"},
			},
		},
		{
			name:    "under policy Force, a blocked pod is deleted at the timeout",
			objects: objects(one(webPod("web-1"), budget("web-pdb", "web", 0))),
			params:  map[string]string{"policy": "Force", "timeout": "5m"},
			want: contract.Plan{
				Summary: "evict 1 pod from node n1; 1 blocked by PodDisruptionBudget apps/web-pdb",
				Details: []contract.PlanItem{
					{Kind: "Pod", Name: "apps/web-1", Action: "evict",
						Note: "blocked now by PodDisruptionBudget apps/web-pdb; policy Force deletes it if still blocked after 5m0s"},
					{Kind: "PodDisruptionBudget", Name: "apps/web-pdb", Action: "blocks", Note: "1 of its pods on this node; disruptionsAllowed 0"},
				},
				Warnings: []string{"pod apps/web-1: PodDisruptionBudget apps/web-pdb allows 0 disruptions now"},
				Outputs:  map[string]string{OutputPodsEvicted: "1"},
			},
		},
		{
			name:    "a budget allowing enough",
			objects: objects(one(webPod("web-1"), webPod("web-2"), budget("web-pdb", "web", 3))),
			want: contract.Plan{
				Summary: "evict 2 pods from node n1",
				Details: []contract.PlanItem{
					{Kind: "Pod", Name: "apps/web-1", Action: "evict"},
					{Kind: "Pod", Name: "apps/web-2", Action: "evict"},
					{Kind: "PodDisruptionBudget", Name: "apps/web-pdb", Action: "allows 3", Note: "2 of its pods on this node; disruptionsAllowed 3"},
				},
				Outputs: map[string]string{OutputPodsEvicted: "2"},
			},
		},
		{
			name: "unready pods the Eviction API lets go without a disruption",
			objects: objects(one(webPod("web-1", unready), runningPod("apps", "db-0", "StatefulSet", map[string]string{"app": "db"}, unready),
				budget("web-pdb", "web", 0, func(b *policyv1.PodDisruptionBudget) {
					b.Spec.UnhealthyPodEvictionPolicy = ptr.To(policyv1.AlwaysAllow)
				}),
				budget("db-pdb", "db", 0))), // IfHealthyBudget, with the healthy pods it wants
			want: contract.Plan{
				Summary: "evict 2 pods from node n1",
				Details: []contract.PlanItem{
					{Kind: "Pod", Name: "apps/db-0", Action: "evict"},
					{Kind: "Pod", Name: "apps/web-1", Action: "evict"},
				},
				Outputs: map[string]string{OutputPodsEvicted: "2"},
			},
		},
		{
			name:    "a pod under two budgets",
			objects: objects(one(webPod("web-1"), budget("web-pdb", "web", 1), budget("all-web", "web", 1))),
			want: contract.Plan{
				Summary: "evict 1 pod from node n1; 1 blocked by PodDisruptionBudgets apps/all-web, apps/web-pdb",
				Details: []contract.PlanItem{
					{Kind: "Pod", Name: "apps/web-1", Action: "evict", Note: "blocked now by PodDisruptionBudgets apps/all-web, apps/web-pdb" + failNote},
				},
				Warnings: []string{"pod apps/web-1: the Eviction API refuses a pod with more than one PodDisruptionBudget (apps/all-web, apps/web-pdb)"},
				Outputs:  map[string]string{OutputPodsEvicted: "1"},
			},
		},
		{
			name:    "budgets the ServiceAccount may not read",
			objects: objects(one(webPod("web-1"), budget("web-pdb", "web", 0))),
			react:   func(c *fake.Clientset) { forbidden(c, "list", "poddisruptionbudgets") },
			want: contract.Plan{
				Summary: "evict 1 pod from node n1",
				Details: []contract.PlanItem{{Kind: "Pod", Name: "apps/web-1", Action: "evict"}},
				Warnings: []string{`cannot read PodDisruptionBudgets in apps: poddisruptionbudgets.policy is forbidden: ` +
					`User "system:serviceaccount:ops:retire" cannot list it`},
				Outputs: map[string]string{OutputPodsEvicted: "1"},
			},
		},
		{
			name:    "a pod with emptyDir data, which the drain refuses without deleteEmptyDirData",
			objects: objects(one(webPod("web-1", withEmptyDir), apiPod("api-1"), budget("web-pdb", "web", 0))),
			want: contract.Plan{
				Summary: "drain of node n1 would fail: 1 pod refused",
				Details: []contract.PlanItem{
					{Kind: "Pod", Name: "apps/api-1", Action: "evict"},
					{Kind: "Pod", Name: "apps/web-1", Action: "skip",
						Note: "cannot delete Pods with local storage (set deleteEmptyDirData: true to override)"},
				},
				Warnings: []string{"the drain would fail: cannot delete Pods with local storage (set deleteEmptyDirData: true to override): apps/web-1"},
			},
		},
		{
			name:    "a pod with emptyDir data and deleteEmptyDirData",
			objects: objects(one(webPod("web-1", withEmptyDir))),
			params:  map[string]string{"deleteEmptyDirData": "true"},
			want: contract.Plan{
				Summary: "evict 1 pod from node n1",
				Details: []contract.PlanItem{{Kind: "Pod", Name: "apps/web-1", Action: "evict"}},
				Outputs: map[string]string{OutputPodsEvicted: "1"},
			},
		},
		{
			name:    "a pod without a controller under policy Fail",
			objects: objects(one(runningPod("apps", "bare", "", nil))),
			want: contract.Plan{
				Summary: "drain of node n1 would fail: 1 pod refused",
				Details: []contract.PlanItem{{Kind: "Pod", Name: "apps/bare", Action: "skip",
					Note: "cannot delete Pods that declare no controller (set policy: Force to override)"}},
				Warnings: []string{"the drain would fail: cannot delete Pods that declare no controller (set policy: Force to override): apps/bare"},
			},
		},
		{
			name:    "a pod without a controller under policy Force",
			objects: objects(one(runningPod("apps", "bare", "", nil))),
			params:  map[string]string{"policy": "Force"},
			want: contract.Plan{
				Summary: "evict 1 pod from node n1",
				Details: []contract.PlanItem{{Kind: "Pod", Name: "apps/bare", Action: "evict", Note: "deleting Pods that declare no controller"}},
				Outputs: map[string]string{OutputPodsEvicted: "1"},
			},
		},
		{
			name:    "podSelector",
			objects: objects(one(webPod("web-1"), apiPod("api-1"))),
			params:  map[string]string{"podSelector": "app=web"},
			want: contract.Plan{
				Summary: "evict 1 pod from node n1",
				Details: []contract.PlanItem{{Kind: "Pod", Name: "apps/web-1", Action: "evict"}},
				Outputs: map[string]string{OutputPodsEvicted: "1"},
			},
		},
		{
			name:    "a pod being deleted and a DaemonSet pod",
			objects: objects(one(webPod("web-1", deleting)), daemonSetPod()),
			want: contract.Plan{
				Summary: "no pod to evict from node n1, wait for 1 being deleted (1 DaemonSet pod stays)",
				Details: []contract.PlanItem{
					{Kind: "Pod", Name: "apps/web-1", Action: "wait", Note: "being deleted already"},
					{Kind: "Pod", Name: "kube-system/agent", Action: "skip", Note: "ignoring DaemonSet-managed Pods"},
				},
				Outputs: map[string]string{OutputPodsEvicted: "0"},
			},
		},
		{
			name:    "an empty node",
			objects: objects(),
			want: contract.Plan{
				Summary: "no pod to evict from node n1",
				Outputs: map[string]string{OutputPodsEvicted: "0"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.objects...)
			readsEverything(client)
			if tt.react != nil {
				tt.react(client)
			}
			params := map[string]string{"node": "n1"}
			for k, v := range tt.params {
				params[k] = v
			}
			plan, err := Drain{}.Plan(context.Background(), request(t, Drain{}, client, params))
			require.NoError(t, err)
			assert.Equal(t, tt.want, plan)
			assertReadOnly(t, client)
		})
	}
}

func inNamespace(namespace string) func(*policyv1.PodDisruptionBudget) {
	return func(b *policyv1.PodDisruptionBudget) { b.Namespace = namespace }
}

// TestDrainPlanNamesOnlyWhatTheServiceAccountMayRead: whoever reads the pipeline (ops)
// learns the names of pods and PodDisruptionBudgets of another namespace only where the
// pipeline's ServiceAccount may read them; the others are counted. Those of ops are always
// named.
func TestDrainPlanNamesOnlyWhatTheServiceAccountMayRead(t *testing.T) {
	const failNote = "; the step fails if still blocked after 10m0s"
	jobRow := contract.PlanItem{Kind: "Pod", Name: "ops/job-1", Action: "evict", Note: "blocked now by PodDisruptionBudget ops/job-pdb" + failNote}
	jobBudgetRow := contract.PlanItem{Kind: "PodDisruptionBudget", Name: "ops/job-pdb", Action: "blocks", Note: "1 of its pods on this node; disruptionsAllowed 0"}
	jobWarning := "pod ops/job-1: PodDisruptionBudget ops/job-pdb allows 0 disruptions now"
	drainable := objects(one(
		runningPod("ops", "job-1", "ReplicaSet", map[string]string{"app": "job"}), budget("job-pdb", "job", 0, inNamespace("ops")),
		webPod("web-1"), webPod("web-2"), budget("web-pdb", "web", 1),
		runningPod("team", "api-1", "ReplicaSet", map[string]string{"app": "api"}),
	), daemonSetPod())
	refused := objects(one(runningPod("ops", "bare-1", "", nil), runningPod("apps", "bare-2", "", nil), runningPod("team", "bare-3", "", nil)))
	const refusal = "cannot delete Pods that declare no controller (set policy: Force to override)"

	tests := []struct {
		name    string
		objects []runtime.Object
		grants  []string
		react   func(*fake.Clientset)
		want    contract.Plan
	}{
		{
			name:    "it may read both everywhere: every one named",
			objects: drainable,
			grants:  []string{"pods *", "poddisruptionbudgets *"},
			want: contract.Plan{
				Summary: "evict 4 pods from node n1 (1 DaemonSet pod stays); 2 blocked by PodDisruptionBudgets apps/web-pdb, ops/job-pdb",
				Details: []contract.PlanItem{
					{Kind: "Pod", Name: "apps/web-1", Action: "evict"},
					{Kind: "Pod", Name: "apps/web-2", Action: "evict", Note: "blocked now by PodDisruptionBudget apps/web-pdb" + failNote},
					{Kind: "Pod", Name: "kube-system/agent", Action: "skip", Note: "ignoring DaemonSet-managed Pods"},
					jobRow,
					{Kind: "Pod", Name: "team/api-1", Action: "evict"},
					{Kind: "PodDisruptionBudget", Name: "apps/web-pdb", Action: "blocks", Note: "2 of its pods on this node; disruptionsAllowed 1"},
					jobBudgetRow,
				},
				Warnings: []string{
					"pod apps/web-2: PodDisruptionBudget apps/web-pdb allows 1 disruption now, taken by the pods evicted before it",
					jobWarning,
				},
				Outputs: map[string]string{OutputPodsEvicted: "4"},
			},
		},
		{
			name:    "it may read neither: the pipeline's namespace named, the others counted",
			objects: drainable,
			want: contract.Plan{
				Summary: "evict 4 pods from node n1 (1 DaemonSet pod stays); 2 blocked by PodDisruptionBudget ops/job-pdb and 1 PodDisruptionBudget in another namespace",
				Details: []contract.PlanItem{
					jobRow,
					{Kind: "Pod", Name: "…", Action: "evict", Note: "3 pods in 2 other namespaces, not named"},
					{Kind: "Pod", Name: "…", Action: "skip", Note: "1 pod in another namespace, not named"},
					jobBudgetRow,
					{Kind: "PodDisruptionBudget", Name: "…", Action: "blocks", Note: "1 PodDisruptionBudget in another namespace, not named"},
				},
				Warnings: []string{jobWarning, "PodDisruptionBudgets would hold back 1 pod in another namespace now"},
				Outputs:  map[string]string{OutputPodsEvicted: "4"},
			},
		},
		{
			name:    "it may read pods, not budgets",
			objects: drainable,
			grants:  []string{"pods *"},
			want: contract.Plan{
				Summary: "evict 4 pods from node n1 (1 DaemonSet pod stays); 2 blocked by PodDisruptionBudget ops/job-pdb and 1 PodDisruptionBudget in another namespace",
				Details: []contract.PlanItem{
					{Kind: "Pod", Name: "apps/web-1", Action: "evict"},
					{Kind: "Pod", Name: "apps/web-2", Action: "evict", Note: "blocked now by 1 PodDisruptionBudget in another namespace" + failNote},
					{Kind: "Pod", Name: "kube-system/agent", Action: "skip", Note: "ignoring DaemonSet-managed Pods"},
					jobRow,
					{Kind: "Pod", Name: "team/api-1", Action: "evict"},
					jobBudgetRow,
					{Kind: "PodDisruptionBudget", Name: "…", Action: "blocks", Note: "1 PodDisruptionBudget in another namespace, not named"},
				},
				Warnings: []string{
					"pod apps/web-2: its PodDisruptionBudget allows 1 disruption now, taken by the pods evicted before it",
					jobWarning,
				},
				Outputs: map[string]string{OutputPodsEvicted: "4"},
			},
		},
		{
			name:    "it may read both in one namespace",
			objects: drainable,
			grants:  []string{"pods apps", "poddisruptionbudgets apps"},
			want: contract.Plan{
				Summary: "evict 4 pods from node n1 (1 DaemonSet pod stays); 2 blocked by PodDisruptionBudgets apps/web-pdb, ops/job-pdb",
				Details: []contract.PlanItem{
					{Kind: "Pod", Name: "apps/web-1", Action: "evict"},
					{Kind: "Pod", Name: "apps/web-2", Action: "evict", Note: "blocked now by PodDisruptionBudget apps/web-pdb" + failNote},
					jobRow,
					{Kind: "Pod", Name: "…", Action: "evict", Note: "1 pod in another namespace, not named"},
					{Kind: "Pod", Name: "…", Action: "skip", Note: "1 pod in another namespace, not named"},
					{Kind: "PodDisruptionBudget", Name: "apps/web-pdb", Action: "blocks", Note: "2 of its pods on this node; disruptionsAllowed 1"},
					jobBudgetRow,
				},
				Warnings: []string{
					"pod apps/web-2: PodDisruptionBudget apps/web-pdb allows 1 disruption now, taken by the pods evicted before it",
					jobWarning,
				},
				Outputs: map[string]string{OutputPodsEvicted: "4"},
			},
		},
		{
			name:    "budgets it may neither list nor name",
			objects: objects(one(webPod("web-1"), budget("web-pdb", "web", 0))),
			react:   func(c *fake.Clientset) { forbidden(c, "list", "poddisruptionbudgets") },
			want: contract.Plan{
				Summary:  "evict 1 pod from node n1",
				Details:  []contract.PlanItem{{Kind: "Pod", Name: "…", Action: "evict", Note: "1 pod in another namespace, not named"}},
				Warnings: []string{"cannot read the PodDisruptionBudgets of another namespace"},
				Outputs:  map[string]string{OutputPodsEvicted: "1"},
			},
		},
		{
			name:    "pods the drain refuses, named and counted",
			objects: refused,
			want: contract.Plan{
				Summary: "drain of node n1 would fail: 3 pods refused",
				Details: []contract.PlanItem{
					{Kind: "Pod", Name: "ops/bare-1", Action: "skip", Note: refusal},
					{Kind: "Pod", Name: "…", Action: "skip", Note: "2 pods in 2 other namespaces, not named"},
				},
				Warnings: []string{"the drain would fail: " + refusal + ": ops/bare-1 and 2 pods in 2 other namespaces"},
			},
		},
		{
			name:    "pods the drain refuses, all named",
			objects: refused,
			grants:  []string{"pods *"},
			want: contract.Plan{
				Summary: "drain of node n1 would fail: 3 pods refused",
				Details: []contract.PlanItem{
					{Kind: "Pod", Name: "apps/bare-2", Action: "skip", Note: refusal},
					{Kind: "Pod", Name: "ops/bare-1", Action: "skip", Note: refusal},
					{Kind: "Pod", Name: "team/bare-3", Action: "skip", Note: refusal},
				},
				Warnings: []string{"the drain would fail: " + refusal + ": apps/bare-2, ops/bare-1, team/bare-3"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.objects...)
			asked := grants(client, tt.grants...)
			if tt.react != nil {
				tt.react(client)
			}
			plan, err := Drain{}.Plan(context.Background(), request(t, Drain{}, client, map[string]string{"node": "n1"}))
			require.NoError(t, err)
			assert.Equal(t, tt.want, plan)
			assertReadOnly(t, client)
			for _, a := range *asked {
				assert.NotEqual(t, "ops", a.Namespace, "the pipeline's own namespace needs no review")
				assert.Equal(t, "get", a.Verb)
			}
		})
	}
}

// TestDrainPlanFailsAsTheDrainWould: what fails a drain fails its plan, with the same
// error.
func TestDrainPlanFailsAsTheDrainWould(t *testing.T) {
	tests := []struct {
		name      string
		node      string
		react     func(*fake.Clientset)
		wantErr   string
		permanent bool
	}{
		{"a node the ServiceAccount may not read", "n1", func(c *fake.Clientset) { forbidden(c, "get", "nodes") },
			`get node "n1": nodes is forbidden`, false},
		{"pods the ServiceAccount may not list", "n1", func(c *fake.Clientset) { forbidden(c, "list", "pods") },
			`list pods of node "n1"`, false},
		{"a missing node", "n9", nil, `node "n9" not found`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(newNode("n1", false, nil), webPod("web-1"))
			if tt.react != nil {
				tt.react(client)
			}
			req := request(t, Drain{}, client, map[string]string{"node": tt.node})
			_, planErr := Drain{}.Plan(context.Background(), req)
			require.Error(t, planErr)
			assert.Contains(t, planErr.Error(), tt.wantErr)
			assert.Equal(t, tt.permanent, contract.IsPermanent(planErr))
			assertReadOnly(t, client)

			_, runErr := Drain{}.Create(context.Background(), req)
			require.Error(t, runErr)
			assert.Equal(t, runErr.Error(), planErr.Error())
		})
	}
}

func TestCordonPlan(t *testing.T) {
	tests := []struct {
		name string
		node *corev1.Node
		want contract.Plan
	}{
		{
			"a schedulable node", newNode("n1", false, nil),
			contract.Plan{
				Summary: "cordon node n1",
				Details: []contract.PlanItem{{Kind: "Node", Name: "n1", Action: "cordon", Note: "teardown uncordons it"}},
				Outputs: map[string]string{"wasSchedulable": "true", "providerID": "vsphere://4201-n1"},
			},
		},
		{
			"a node someone else cordoned", newNode("n1", true, nil),
			contract.Plan{
				Summary: "node n1 is already cordoned",
				Details: []contract.PlanItem{{Kind: "Node", Name: "n1", Action: "unchanged",
					Note: "cordoned by someone else: teardown leaves it cordoned"}},
				Outputs: map[string]string{"wasSchedulable": "false", "providerID": "vsphere://4201-n1"},
			},
		},
		{
			"a node this pipeline cordoned", newNode("n1", true, map[string]string{CordonedByAnnotation: "uid-1"}),
			contract.Plan{
				Summary: "node n1 is already cordoned",
				Details: []contract.PlanItem{{Kind: "Node", Name: "n1", Action: "unchanged", Note: "cordoned by this pipeline already"}},
				Outputs: map[string]string{"wasSchedulable": "true", "providerID": "vsphere://4201-n1"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.node.Spec.ProviderID = "vsphere://4201-n1"
			client := fake.NewClientset(tt.node)
			req := request(t, Cordon{}, client, map[string]string{"node": "n1"})
			plan, err := Cordon{}.Plan(context.Background(), req)
			require.NoError(t, err)
			assert.Equal(t, tt.want, plan)
			assertReadOnly(t, client)

			res, err := Cordon{}.Create(context.Background(), req)
			require.NoError(t, err)
			assert.Equal(t, res.Outputs, plan.Outputs, "the plan's outputs are those of the run")
		})
	}
}

func TestCordonPlanFailsAsTheCordonWould(t *testing.T) {
	client := fake.NewClientset(newNode("n1", false, nil))
	forbidden(client, "get", "nodes")
	_, err := Cordon{}.Plan(context.Background(), request(t, Cordon{}, client, map[string]string{"node": "n1"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `get node "n1": nodes is forbidden`)
	assert.False(t, contract.IsPermanent(err))
	assertReadOnly(t, client)

	client = fake.NewClientset()
	_, err = Cordon{}.Plan(context.Background(), request(t, Cordon{}, client, map[string]string{"node": "n1"}))
	require.Error(t, err)
	assert.Equal(t, "NodeNotFound", executor.ReasonFor(err))
}

func TestDeletePlan(t *testing.T) {
	tests := []struct {
		name    string
		objects []runtime.Object
		react   func(*fake.Clientset)
		want    contract.Plan
	}{
		{
			"a node", objects(), nil,
			contract.Plan{
				Summary: "delete node n1",
				Details: []contract.PlanItem{{Kind: "Node", Name: "n1", Action: "delete"}},
				Outputs: map[string]string{"deleted": "true"},
			},
		},
		{
			"a node already gone", nil, nil,
			contract.Plan{
				Summary: "node n1 is already gone",
				Details: []contract.PlanItem{{Kind: "Node", Name: "n1", Action: "unchanged", Note: "already gone"}},
				Outputs: map[string]string{"deleted": "false"},
			},
		},
		{
			// The delete needs no right to read it: the plan says what it cannot know.
			"a node the ServiceAccount may not read", objects(), func(c *fake.Clientset) { forbidden(c, "get", "nodes") },
			contract.Plan{
				Summary:  "delete node n1",
				Details:  []contract.PlanItem{{Kind: "Node", Name: "n1", Action: "delete", Note: "not read: it may be gone already"}},
				Warnings: []string{`cannot read node n1: nodes is forbidden: User "system:serviceaccount:ops:retire" cannot get it`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.objects...)
			if tt.react != nil {
				tt.react(client)
			}
			plan, err := Delete{}.Plan(context.Background(), request(t, Delete{}, client, map[string]string{"node": "n1"}))
			require.NoError(t, err)
			assert.Equal(t, tt.want, plan)
			assertReadOnly(t, client)
		})
	}
}

// TestPlansRefuseWhatTheHooksRefuse: a parameter the hook would refuse fails the plan
// the same way, before any read.
func TestPlansRefuseWhatTheHooksRefuse(t *testing.T) {
	for _, e := range []executor.Planner{Cordon{}, Drain{}, Delete{}} {
		client := fake.NewClientset()
		_, err := e.Plan(context.Background(), request(t, e.(executor.TaskExecutor), client, map[string]string{"node": "Node_1"}))
		require.Error(t, err)
		assert.Equal(t, "InvalidParameter", executor.ReasonFor(err))
		assert.Empty(t, client.Actions())
	}
}
