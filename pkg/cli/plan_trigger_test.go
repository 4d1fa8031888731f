package cli

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops/plantest"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// fakeNode is a Node for the trigger's fake dynamic client.
func fakeNode(name, uid string, created time.Duration, labels map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{
			"name": name, "uid": uid, "labels": labels,
			"creationTimestamp": t0.Add(created).Format(time.RFC3339),
		},
	}}
}

func triggerClients(t *testing.T, trig *v1alpha1.PipelineTrigger, pipelines ...runtime.Object) (*Clients, *fake.Clientset) {
	t.Helper()
	retire := map[string]any{"stepwise.dev/retire": "true", "pool": "blue"}
	nodes := []runtime.Object{
		fakeNode("worker-1", "uid-1", 2*time.Hour, retire),
		fakeNode("worker-2", "uid-2", time.Hour, retire), // has a pipeline
		fakeNode("worker-3", "uid-3", 0, retire),         // the oldest
		fakeNode("worker-4", "uid-4", 3*time.Hour, retire),
		fakeNode("worker-5", "uid-5", 30*time.Minute, map[string]any{"stepwise.dev/retire": "true"}), // no pool label
		fakeNode("worker-0", "uid-0", -time.Hour, map[string]any{"pool": "blue"}),                    // not labelled for retirement
	}
	nodesGVR := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{nodesGVR: "NodeList"}, nodes...)
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{corev1.SchemeGroupVersion})
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Node"), meta.RESTScopeRoot)
	objs := append([]runtime.Object{trig, retireTemplate()}, pipelines...)
	sw := fake.NewSimpleClientset(objs...) //nolint:staticcheck // as fakeClients
	return &Clients{Stepwise: sw, Kube: kubefake.NewClientset(), Dynamic: dyn, Mapper: mapper}, sw
}

func retireTrigger(mutate ...func(*v1alpha1.PipelineTrigger)) *v1alpha1.PipelineTrigger {
	trig := &v1alpha1.PipelineTrigger{
		ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: "demo", UID: "trigger-uid"},
		Spec: v1alpha1.PipelineTriggerSpec{
			Resource:           v1alpha1.TriggerResource{APIVersion: "v1", Kind: "Node"},
			Selector:           &v1alpha1.LabelSelector{MatchLabels: map[string]string{"stepwise.dev/retire": "true"}},
			TemplateRef:        v1alpha1.TemplateRef{Name: "retire-node"},
			Params:             map[string]string{"node": "$(object.metadata.name)", "pool": "$(object.metadata.labels['pool'])"},
			ServiceAccountName: "retirer",
			Concurrency:        2,
		},
	}
	for _, m := range mutate {
		m(trig)
	}
	return trig
}

// worker2Pipeline is the trigger's pipeline of worker-2, running: it holds a place.
func worker2Pipeline() *v1alpha1.Pipeline {
	return &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: rules.PipelineName("retire", "worker-2", "uid-2"), Namespace: "demo",
			Labels: map[string]string{
				v1alpha1.LabelTrigger: "retire", v1alpha1.LabelTriggerUID: "trigger-uid", v1alpha1.LabelObjectUID: "uid-2",
			},
			Annotations: map[string]string{v1alpha1.AnnotationObject: "worker-2"}},
		Spec:   v1alpha1.PipelineSpec{TemplateRef: &v1alpha1.TemplateRef{Name: "retire-node"}},
		Status: v1alpha1.PipelineStatus{Phase: v1alpha1.PipelineRunning},
	}
}

// triggerPlan is the table of answerTemplate for a node.
func triggerPlan(n int, node, when string) []string {
	return []string{
		"",
		fmt.Sprintf("%d. %s (%s): Planned, 2 steps, 1 warning", n, node, when),
		"Params: node=" + node + ", pool=blue",
		"STEP     EXECUTOR      SUMMARY",
		"cordon   node.cordon   cordon node " + node,
		"    KIND   NAME       ACTION   NOTE",
		"    Node   " + node + "   change   spec.unschedulable: false → true",
		"    outputs: node=" + node,
		"drain    node.drain    evict 2 pods from " + node,
		"    KIND   NAME                ACTION   NOTE",
		"    Pod    web/web-1           evict    managed by ReplicaSet web-5d4",
		"    Pod    kube-system/proxy   skip     DaemonSet",
		"    ! the disruption budget web/web-pdb allows 0 disruptions: web/web-1 would wait",
	}
}

func TestPlanTrigger(t *testing.T) {
	header := []string{
		"Trigger demo/retire: v1 Node objects, template retire-node, concurrency 2, 1 pipeline unfinished",
		"Started already: worker-2",
	}
	unresolved := "! worker-5 waits, its params do not resolve: params.pool: $(object.metadata.labels['pool']): the object has no field metadata.labels['pool']"
	concat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	type testCase struct {
		name       string
		trig       *v1alpha1.PipelineTrigger
		pipelines  []runtime.Object
		args       []string
		answer     func(p *v1alpha1.Pipeline)
		wantCode   int
		wantOut    []string
		wantNodes  []string // the nodes planned, in order
		wantErr    string
		wantLeft   int
		checkJSON  func(t *testing.T, r triggerReport)
		noPipeline bool
	}
	// startsNothing is the case of the trigger changed by edit, worker-2's pipeline
	// running: the plan of the first object, worker-3, says that it does not start now, and
	// why the trigger waits (wantBlocked; "" when the plan works it out itself).
	startsNothing := func(name string, edit func(*v1alpha1.PipelineTrigger), wantBlocked string) testCase {
		return testCase{
			name: name, trig: retireTrigger(edit), pipelines: []runtime.Object{worker2Pipeline()}, answer: answerTemplate,
			args: []string{"plan", "--trigger", "retire", "--max", "1", "-o", "json"},
			checkJSON: func(t *testing.T, r triggerReport) {
				assert.Equal(t, wantBlocked, r.Blocked)
				assert.Equal(t, 0, r.StartNow)
				require.Len(t, r.Objects, 1)
				assert.False(t, r.Objects[0].StartsNow)
			},
			wantNodes: []string{"worker-3"},
		}
	}
	tests := []testCase{
		{
			name: "order, binding, skip", trig: retireTrigger(), pipelines: []runtime.Object{worker2Pipeline()},
			args: []string{"plan", "--trigger", "retire", "--max", "2"}, answer: answerTemplate,
			wantOut: concat(header,
				[]string{"Waiting: 3 objects, in the order they would start; 1 would start now"},
				triggerPlan(1, "worker-3", "would start now"),
				triggerPlan(2, "worker-1", "would wait"),
				[]string{"", "1 more would wait, not planned (--max 2): worker-4", unresolved}),
			wantNodes: []string{"worker-3", "worker-1"},
		},
		{
			name: "the default --max plans every waiting object; a finished pipeline holds no place",
			trig: retireTrigger(), answer: answerTemplate, args: []string{"plan", "--trigger", "retire"},
			pipelines: []runtime.Object{func() runtime.Object {
				p := worker2Pipeline()
				p.Status.Phase = v1alpha1.PipelineSucceeded
				return p
			}()},
			wantOut: concat([]string{
				"Trigger demo/retire: v1 Node objects, template retire-node, concurrency 2, 0 pipelines unfinished",
				"Started already: worker-2",
				"Waiting: 3 objects, in the order they would start; 2 would start now",
			},
				triggerPlan(1, "worker-3", "would start now"),
				triggerPlan(2, "worker-1", "would start now"),
				triggerPlan(3, "worker-4", "would wait"),
				[]string{unresolved}),
			wantNodes: []string{"worker-3", "worker-1", "worker-4"},
		},
		startsNothing("suspended: nothing starts now", func(t *v1alpha1.PipelineTrigger) {
			t.Spec.Suspend = true
			t.Status.BlockedBy = []v1alpha1.Blocker{{Kind: v1alpha1.BlockerSuspended, Unblock: "set spec.suspend to false"}}
		}, "the trigger waits (Suspended: set spec.suspend to false)"),
		startsNothing("a health gate does not hold: nothing starts now", func(t *v1alpha1.PipelineTrigger) {
			t.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
				Reason: v1alpha1.TriggerReasonGateClosed, Message: "gate nodes-ready does not hold"}}
			t.Status.BlockedBy = []v1alpha1.Blocker{{Kind: v1alpha1.BlockerGate, Name: "nodes-ready", Unblock: "the gate holds: 2 of 3 nodes Ready"}}
		}, "the trigger waits (Gate nodes-ready: the gate holds: 2 of 3 nodes Ready)"),
		startsNothing("a full concurrency is the plan's to work out: the waiting objects are planned in order", func(t *v1alpha1.PipelineTrigger) {
			t.Spec.Concurrency = 1
			t.Status.BlockedBy = []v1alpha1.Blocker{{Kind: v1alpha1.BlockerConcurrency, Unblock: "one of the 1 running pipelines finishes (spec.concurrency 1)"}}
		}, ""),
		startsNothing("paused, as Ready False says: nothing starts now", func(t *v1alpha1.PipelineTrigger) {
			t.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
				Reason: v1alpha1.TriggerReasonPaused, Message: "paused by alice"}}
			t.Status.BlockedBy = []v1alpha1.Blocker{{Kind: v1alpha1.BlockerPaused, Name: "alice", Unblock: "kubectl stepwise triggers resume retire -n demo"}}
		}, "the trigger waits (Paused alice: kubectl stepwise triggers resume retire -n demo)"),
		startsNothing("not Ready with no blocker (its ServiceAccount may not list the kind): nothing starts now", func(t *v1alpha1.PipelineTrigger) {
			t.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
				Reason: v1alpha1.TriggerReasonForbidden, Message: "may not list nodes"}}
		}, "the trigger is not Ready (Forbidden: may not list nodes)"),
		{
			name: "json", trig: retireTrigger(), pipelines: []runtime.Object{worker2Pipeline()}, answer: answerTemplate,
			args: []string{"plan", "--trigger", "retire", "--max", "2", "-o", "json", "--keep"}, wantLeft: 2,
			checkJSON: func(t *testing.T, r triggerReport) {
				assert.Equal(t, "demo/retire", r.Trigger)
				assert.Equal(t, "retire-node", r.Template)
				assert.Equal(t, 2, r.Concurrency)
				assert.Equal(t, 1, r.Unfinished)
				assert.Equal(t, 1, r.StartNow)
				assert.Equal(t, []string{"worker-2"}, r.Started)
				assert.Equal(t, []string{"worker-4"}, r.NotPlanned)
				assert.Equal(t, []unresolvedObject{{Object: "worker-5",
					Error: "params.pool: $(object.metadata.labels['pool']): the object has no field metadata.labels['pool']"}}, r.Unresolved)
				require.Len(t, r.Objects, 2)
				assert.Equal(t, "worker-3", r.Objects[0].Object)
				assert.True(t, r.Objects[0].StartsNow)
				assert.Equal(t, map[string]string{"node": "worker-3", "pool": "blue"}, r.Objects[0].Params)
				assert.Equal(t, v1alpha1.PipelinePlanned, r.Objects[0].Plan.Phase)
				assert.True(t, r.Objects[0].Plan.Kept)
				assert.Equal(t, "cordon node worker-3", r.Objects[0].Plan.Steps[0].Plan.Summary)
				assert.Equal(t, "worker-1", r.Objects[1].Object)
				assert.False(t, r.Objects[1].StartsNow)
			},
			wantNodes: []string{"worker-3", "worker-1"},
			wantErr:   "kept in demo",
		},
		{
			name: "an earlier trigger's pipeline of the same name holds no place", trig: retireTrigger(), answer: answerTemplate,
			pipelines: []runtime.Object{func() runtime.Object {
				p := worker2Pipeline()
				p.Labels[v1alpha1.LabelTriggerUID] = "old-uid"
				return p
			}()},
			args: []string{"plan", "--trigger", "retire", "--max", "1", "-o", "json"},
			checkJSON: func(t *testing.T, r triggerReport) {
				assert.Equal(t, 0, r.Unfinished)
				assert.Empty(t, r.Started)
				assert.Equal(t, 2, r.StartNow)
				assert.Equal(t, []string{"worker-2", "worker-1", "worker-4"}, r.NotPlanned)
			},
			wantNodes: []string{"worker-3"},
		},
		{
			name: "one plan fails: exit 2", trig: retireTrigger(), pipelines: []runtime.Object{worker2Pipeline()},
			args: []string{"plan", "--trigger", "retire", "--max", "2"}, wantCode: ExitPipelineFailed,
			answer: func(p *v1alpha1.Pipeline) {
				if p.Spec.Params["node"] == "worker-1" {
					failDrain(p)
					return
				}
				answerTemplate(p)
			},
			wantNodes: []string{"worker-3", "worker-1"},
		},
		{
			name: "matchFields narrow the objects", args: []string{"plan", "--trigger", "retire", "--max", "1"}, answer: answerTemplate,
			trig: retireTrigger(func(t *v1alpha1.PipelineTrigger) {
				t.Spec.MatchFields = []v1alpha1.FieldRequirement{{Field: "metadata.name", Operator: v1alpha1.FieldNotIn, Values: []string{"worker-3"}}}
			}),
			wantNodes: []string{"worker-2"}, // no pipeline given: worker-2 waits, the oldest but worker-3
		},
		{
			name: "nothing waits", args: []string{"plan", "--trigger", "retire"},
			trig: retireTrigger(func(t *v1alpha1.PipelineTrigger) {
				t.Spec.Selector = &v1alpha1.LabelSelector{MatchLabels: map[string]string{"none": "x"}}
			}),
			wantOut: []string{
				"Trigger demo/retire: v1 Node objects, template retire-node, concurrency 2, 0 pipelines unfinished",
				"Waiting: none",
			},
			noPipeline: true,
		},
		{
			name: "a trigger's params that do not parse", args: []string{"plan", "--trigger", "retire"}, wantCode: ExitError,
			trig:    retireTrigger(func(t *v1alpha1.PipelineTrigger) { t.Spec.Params = map[string]string{"node": "$(object.metadata.)"} }),
			wantErr: "error: trigger demo/retire: params.node: $(object.metadata.): field name expected at 9", noPipeline: true,
		},
		{
			name: "missing template", args: []string{"plan", "--trigger", "retire"}, wantCode: ExitError,
			trig:    retireTrigger(func(t *v1alpha1.PipelineTrigger) { t.Spec.TemplateRef.Name = "gone" }),
			wantErr: `error: get template demo/gone of trigger retire: pipelinetemplates.stepwise.dev "gone" not found`, noPipeline: true,
		},
		{
			name: "unknown kind", args: []string{"plan", "--trigger", "retire"}, wantCode: ExitError,
			trig:    retireTrigger(func(t *v1alpha1.PipelineTrigger) { t.Spec.Resource.Kind = "Widget" }),
			wantErr: "error: find the resource of v1 Widget", noPipeline: true,
		},
		{
			name: "missing trigger", args: []string{"plan", "--trigger", "nope"}, wantCode: ExitError, trig: retireTrigger(),
			wantErr: `error: get trigger demo/nope`, noPipeline: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, sw := triggerClients(t, tt.trig, tt.pipelines...)
			op := plantest.NewOperator(t, sw, tt.answer)
			code, out, errOut := run(t, c, tt.args...)
			require.Equal(t, tt.wantCode, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			if tt.wantOut != nil {
				assert.Equal(t, tt.wantOut, lines(out))
			}
			if tt.checkJSON != nil {
				var r triggerReport
				require.NoError(t, json.Unmarshal([]byte(out), &r), out)
				tt.checkJSON(t, r)
			}
			if tt.wantErr != "" {
				assert.Contains(t, errOut, tt.wantErr)
			} else {
				assert.Empty(t, errOut)
			}
			if tt.wantCode == ExitPipelineFailed {
				assert.Contains(t, out, "2. worker-1 (would wait): Failed at step drain")
				assert.Contains(t, out, "Failed: StepFailed: step drain cannot be planned: pods is forbidden")
			}
			assert.Len(t, planPipelines(t, sw), tt.wantLeft)
			var nodes []string
			for _, p := range op.Created() {
				nodes = append(nodes, p.Spec.Params["node"])
				assert.Equal(t, "plan-retire-", p.GenerateName)
				assert.Equal(t, map[string]string{pipelineops.PlanLabel: "true"}, p.Labels, "no trigger label: the trigger would count it")
				assert.Equal(t, v1alpha1.PipelineSpec{
					TemplateRef: &v1alpha1.TemplateRef{Name: "retire-node"}, ServiceAccountName: "retirer", DryRun: true,
					Params:       map[string]string{"node": p.Spec.Params["node"], "pool": "blue"},
					UpdatePolicy: v1alpha1.UpdateImmutable, // the trigger's default (retireTrigger sets none)
				}, p.Spec)
			}
			if tt.noPipeline {
				assert.Empty(t, nodes)
			} else {
				assert.Equal(t, tt.wantNodes, nodes, "planned in the trigger's order, params bound to each")
			}
		})
	}
}

// TestPlanTriggerPlansTheTriggersPipeline: what plan --trigger plans is the spec of the
// pipeline the trigger would make, update policy included: a trigger without one makes
// Immutable pipelines, so that is what is planned (plan passed the empty policy through).
func TestPlanTriggerPlansTheTriggersPipeline(t *testing.T) {
	tests := []struct {
		name   string
		policy v1alpha1.UpdatePolicy
		want   v1alpha1.UpdatePolicy
	}{
		{name: "no policy: Immutable, as the trigger makes it", want: v1alpha1.UpdateImmutable},
		{name: "Immutable", policy: v1alpha1.UpdateImmutable, want: v1alpha1.UpdateImmutable},
		{name: "Rerun", policy: v1alpha1.UpdateRerun, want: v1alpha1.UpdateRerun},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trig := retireTrigger(func(tr *v1alpha1.PipelineTrigger) { tr.Spec.UpdatePolicy = tt.policy })
			c, sw := triggerClients(t, trig, worker2Pipeline())
			op := plantest.NewOperator(t, sw, answerTemplate)
			code, out, errOut := run(t, c, "plan", "--trigger", "retire", "--max", "1", "-o", "json")
			require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			created := op.Created()
			require.Len(t, created, 1)
			assert.Equal(t, tt.want, created[0].Spec.UpdatePolicy)
		})
	}
}
