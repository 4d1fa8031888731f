package k8s

import (
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

var (
	deploymentsGVR  = appsv1.SchemeGroupVersion.WithResource("deployments")
	statefulSetsGVR = appsv1.SchemeGroupVersion.WithResource("statefulsets")
)

// newKube is a fake clientset holding objs that also serves the scale subresource of
// Deployments and StatefulSets.
//
// The fake's object tracker ignores subresources: a get of deployments/scale would return
// the Deployment, which the typed client cannot take for a Scale. Two reactors stand in for
// the API server: a get of scale reads the workload's spec.replicas (and status.replicas),
// an update of scale sets spec.replicas and, as the API server does for a change of the
// spec, bumps metadata.generation.
func newKube(t *testing.T, objs ...runtime.Object) *kubefake.Clientset {
	t.Helper()
	client := kubefake.NewClientset(objs...)
	tracker := client.Tracker()
	client.PrependReactor("get", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		get, ok := action.(clienttesting.GetAction)
		if !ok || action.GetSubresource() != "scale" {
			return false, nil, nil
		}
		obj, err := tracker.Get(action.GetResource(), action.GetNamespace(), get.GetName())
		if err != nil {
			return true, nil, err
		}
		return true, scaleOf(t, obj), nil
	})
	client.PrependReactor("update", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		update, ok := action.(clienttesting.UpdateAction)
		if !ok || action.GetSubresource() != "scale" {
			return false, nil, nil
		}
		scale, ok := update.GetObject().(*autoscalingv1.Scale)
		require.True(t, ok, "%T", update.GetObject())
		gvr, ns := action.GetResource(), action.GetNamespace()
		obj, err := tracker.Get(gvr, ns, scale.Name)
		if err != nil {
			return true, nil, err
		}
		switch w := obj.DeepCopyObject().(type) {
		case *appsv1.Deployment:
			if w.Spec.Replicas == nil || *w.Spec.Replicas != scale.Spec.Replicas {
				w.Generation++
			}
			w.Spec.Replicas = ptr.To(scale.Spec.Replicas)
			obj = w
		case *appsv1.StatefulSet:
			if w.Spec.Replicas == nil || *w.Spec.Replicas != scale.Spec.Replicas {
				w.Generation++
			}
			w.Spec.Replicas = ptr.To(scale.Spec.Replicas)
			obj = w
		default:
			return true, nil, fmt.Errorf("no scale subresource for %T", obj)
		}
		if err := tracker.Update(gvr, obj, ns); err != nil {
			return true, nil, err
		}
		return true, scaleOf(t, obj), nil
	})
	return client
}

// scaleOf is the scale subresource of a Deployment or StatefulSet.
func scaleOf(t *testing.T, obj runtime.Object) *autoscalingv1.Scale {
	t.Helper()
	var meta metav1.ObjectMeta
	var spec *int32
	var status int32
	switch w := obj.(type) {
	case *appsv1.Deployment:
		meta, spec, status = w.ObjectMeta, w.Spec.Replicas, w.Status.Replicas
	case *appsv1.StatefulSet:
		meta, spec, status = w.ObjectMeta, w.Spec.Replicas, w.Status.Replicas
	default:
		t.Fatalf("no scale subresource for %T", obj)
	}
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: meta.Name, Namespace: meta.Namespace, UID: meta.UID, ResourceVersion: meta.ResourceVersion},
		Spec:       autoscalingv1.ScaleSpec{Replicas: ptr.Deref(spec, 1)},
		Status:     autoscalingv1.ScaleStatus{Replicas: status},
	}
}

// readyDeployment is Deployment shop/web at generation 1 with replicas pods, all ready.
func readyDeployment(replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: pipelineNS, Name: "web", Generation: 1},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: 1, Replicas: replicas,
			UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas,
		},
	}
}

// readyStatefulSet is StatefulSet shop/db at generation 1 with replicas pods, all ready
// at revision db-1.
func readyStatefulSet(replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: pipelineNS, Name: "db", Generation: 1},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To(replicas)},
		Status: appsv1.StatefulSetStatus{
			ObservedGeneration: 1, Replicas: replicas, ReadyReplicas: replicas, UpdatedReplicas: replicas,
			CurrentReplicas: replicas, CurrentRevision: "db-1", UpdateRevision: "db-1",
		},
	}
}

// reconcile plays the workload's controller for one round: it observes the current
// generation and moves the pods one closer to spec.replicas, all of them up to date and
// ready. obj names the workload; its own fields are not used.
func reconcile(t *testing.T, client *kubefake.Clientset, obj runtime.Object) {
	t.Helper()
	tracker := client.Tracker()
	step := func(have, want int32) int32 {
		switch {
		case have < want:
			return have + 1
		case have > want:
			return have - 1
		}
		return have
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		got, err := tracker.Get(deploymentsGVR, o.Namespace, o.Name)
		require.NoError(t, err)
		d := got.(*appsv1.Deployment).DeepCopy()
		n := step(d.Status.ReadyReplicas, *d.Spec.Replicas)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
		require.NoError(t, tracker.Update(deploymentsGVR, d, d.Namespace))
	case *appsv1.StatefulSet:
		got, err := tracker.Get(statefulSetsGVR, o.Namespace, o.Name)
		require.NoError(t, err)
		s := got.(*appsv1.StatefulSet).DeepCopy()
		n := step(s.Status.ReadyReplicas, *s.Spec.Replicas)
		s.Status.ObservedGeneration, s.Status.Replicas, s.Status.ReadyReplicas = s.Generation, n, n
		s.Status.UpdatedReplicas, s.Status.CurrentReplicas = n, n
		require.NoError(t, tracker.Update(statefulSetsGVR, s, s.Namespace))
	default:
		t.Fatalf("cannot reconcile %T", obj)
	}
}

// scaleWith is a valid set of k8s.scale parameters with the changes given (an empty
// value removes the parameter).
func scaleWith(changes map[string]string) map[string]string {
	return withChanges(map[string]string{"name": "web", "replicas": "5"}, changes)
}

// scaleRequest is a request for a hook of k8s.scale with the parameters as the engine
// hands them over (checked against its declarations, with their defaults) and the step's
// outputs so far.
func scaleRequest(t *testing.T, client *kubefake.Clientset, hook contract.Hook, params, outputs map[string]string) *executor.Request {
	t.Helper()
	req := &executor.Request{
		Request: contract.Request{
			Pipeline: contract.PipelineRef{Namespace: pipelineNS, Name: pipelineName, UID: pipelineUID, Generation: 1},
			Step:     stepName,
			Hook:     hook,
			Params:   plugintest.Checked(t, Scale{}.Describe(), params),
			Outputs:  map[string]map[string]string{stepName: maps.Clone(outputs)},
		},
		Clients: &executor.Clients{Kube: client},
	}
	if req.Outputs[stepName] == nil {
		req.Outputs[stepName] = map[string]string{}
	}
	return req
}

// call runs the request's hook and, as the engine does, merges its outputs into the step's.
func call(t *testing.T, s Scale, req *executor.Request) (contract.Result, error) {
	t.Helper()
	res, err := executor.RunHook(t.Context(), s, req)
	if err == nil {
		maps.Copy(req.Outputs[req.Step], res.Outputs)
	}
	return res, err
}

// scaleWrites lists the scale updates the fake saw, as "RESOURCE NAMESPACE/NAME=REPLICAS".
// Every one must be unconditional (no resourceVersion: a Deployment's status changes all
// the time) and made as field manager stepwise-scale.
func scaleWrites(t *testing.T, client *kubefake.Clientset) []string {
	t.Helper()
	var out []string
	for _, a := range client.Actions() {
		update, ok := a.(clienttesting.UpdateActionImpl)
		if !ok {
			continue
		}
		require.Equal(t, "scale", update.GetSubresource(), "only the scale subresource is written")
		scale := update.GetObject().(*autoscalingv1.Scale)
		assert.Empty(t, scale.ResourceVersion, "unconditional")
		assert.Equal(t, ScaleFieldManager, update.UpdateOptions.FieldManager)
		out = append(out, fmt.Sprintf("%s %s/%s=%d", update.GetResource().Resource, update.GetNamespace(), scale.Name, scale.Spec.Replicas))
	}
	return out
}

// TestScaleParametersTheEngineRefuses: what the declarations say (required, types, the
// kind's values, no other parameter) the engine checks before any hook.
func TestScaleParametersTheEngineRefuses(t *testing.T) {
	plugintest.AssertRefusals(t, Scale{}.Describe(), []plugintest.Refusal{
		{Name: "no name", Params: scaleWith(map[string]string{"name": ""}), Want: `parameter "name" is required`},
		{Name: "no replicas", Params: scaleWith(map[string]string{"replicas": ""}), Want: `parameter "replicas" is required`},
		{Name: "unknown kind", Params: scaleWith(map[string]string{"kind": "DaemonSet"}), Want: `parameter "kind" is "DaemonSet", not one of Deployment, StatefulSet`},
		{Name: "kind in lower case", Params: scaleWith(map[string]string{"kind": "statefulset"}), Want: `parameter "kind" is "statefulset", not one of Deployment, StatefulSet`},
		{Name: "replicas not a number", Params: scaleWith(map[string]string{"replicas": "many"}), Want: `parameter "replicas" is "many", not a whole number`},
		{Name: "replicas a fraction", Params: scaleWith(map[string]string{"replicas": "1.5"}), Want: `parameter "replicas" is "1.5", not a whole number`},
		{Name: "replicas with spaces", Params: scaleWith(map[string]string{"replicas": " 0 "}), Want: `parameter "replicas" is " 0 ", not a whole number`},
		{Name: "bad timeout", Params: scaleWith(map[string]string{"timeout": "soon"}), Want: `parameter "timeout" is "soon", not a duration`},
		{Name: "a parameter of k8s.wait", Params: scaleWith(map[string]string{"condition": "Available"}), Want: `parameter "condition" is not a parameter of the executor`},
	})
}

// TestScaleRejectsBadParameters: what the types cannot say, the hooks check, failing the
// step at PreCreate, its first hook, before anything is read.
func TestScaleRejectsBadParameters(t *testing.T) {
	tests := []plugintest.Refusal{
		{Name: "blank name", Params: scaleWith(map[string]string{"name": " "}), Want: `parameter "name": is empty`},
		{Name: "bad name", Params: scaleWith(map[string]string{"name": "Web_1"}), Want: `parameter "name": "Web_1" is not a valid name`},
		{Name: "bad namespace", Params: scaleWith(map[string]string{"namespace": "a.b"}), Want: `parameter "namespace": "a.b" is not a valid namespace`},
		{Name: "negative replicas", Params: scaleWith(map[string]string{"replicas": "-1"}), Want: `parameter "replicas": "-1" must be 0 or more`},
		{Name: "replicas beyond int32", Params: scaleWith(map[string]string{"replicas": "3000000000"}), Want: `parameter "replicas": "3000000000" is more than 2147483647`},
		{Name: "timeout zero", Params: scaleWith(map[string]string{"timeout": "0s"}), Want: `parameter "timeout": "0s" must be positive`},
		{Name: "negative timeout", Params: scaleWith(map[string]string{"timeout": "-1m"}), Want: `parameter "timeout": "-1m" must be positive`},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			client := newKube(t, readyDeployment(2))
			for _, hook := range []contract.Hook{contract.HookPreCreate, contract.HookCreate} {
				_, err := call(t, Scale{}, scaleRequest(t, client, hook, tc.Params, nil))
				requirePermanent(t, err, ReasonInvalidParameter, tc.Want)
			}
			assert.Empty(t, client.Actions(), "nothing is read or written")
		})
	}
}

func TestScaleAcceptsParameters(t *testing.T) {
	tests := []struct {
		name    string
		changes map[string]string
		want    scaleParams
	}{
		{"defaults", nil, scaleParams{kind: KindDeployment, name: "web", replicas: 5, timeout: 10 * time.Minute}},
		{"StatefulSet, in another namespace", map[string]string{"kind": "StatefulSet", "namespace": "other", "timeout": "90s"},
			scaleParams{kind: KindStatefulSet, name: "web", namespace: "other", replicas: 5, timeout: 90 * time.Second}},
		{"zero replicas, Deployment given", map[string]string{"replicas": "0", "kind": "Deployment"}, scaleParams{kind: KindDeployment, name: "web", replicas: 0, timeout: 10 * time.Minute}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newKube(t)
			req := scaleRequest(t, client, contract.HookPreCreate, scaleWith(tc.changes), nil)
			got, err := parseScaleParams(req)
			require.NoError(t, err)
			assert.Equal(t, tc.want, *got)

			res, err := call(t, Scale{}, req)
			require.NoError(t, err)
			assert.True(t, res.Done)
			assert.Empty(t, client.Actions(), "PreCreate only checks the parameters")
		})
	}
}

// TestScaleCreateScalesAndWaits: the first call records the count found, the next scales
// and waits, polling, until the controller made the workload ready at the new count.
func TestScaleCreateScalesAndWaits(t *testing.T) {
	tests := []struct {
		name         string
		obj          runtime.Object
		params       map[string]string
		wantFirst    string
		wantMessages []string
		wantWrite    string
		wantDone     string
	}{
		{
			name:      "Deployment up",
			obj:       readyDeployment(2),
			params:    scaleWith(nil),
			wantFirst: "Deployment web: found 2 replicas, scaling to 5",
			wantMessages: []string{
				"Deployment web: 2/5 replicas ready (2 updated, 2 available; the controller has not observed generation 2 yet)",
				"Deployment web: 3/5 replicas ready (3 updated, 3 available)",
				"Deployment web: 4/5 replicas ready (4 updated, 4 available)",
			},
			wantWrite: "deployments shop/web=5",
			wantDone:  "Deployment web: scaled from 2 to 5 replicas, 5/5 ready",
		},
		{
			name:      "Deployment down to zero",
			obj:       readyDeployment(2),
			params:    scaleWith(map[string]string{"replicas": "0"}),
			wantFirst: "Deployment web: found 2 replicas, scaling to 0",
			wantMessages: []string{
				"Deployment web: 2/0 replicas ready (2 updated, 2 available; the controller has not observed generation 2 yet)",
				"Deployment web: 1/0 replicas ready (1 updated, 1 available)",
			},
			wantWrite: "deployments shop/web=0",
			wantDone:  "Deployment web: scaled from 2 to 0 replicas, 0/0 ready",
		},
		{
			name:      "StatefulSet up",
			obj:       readyStatefulSet(1),
			params:    scaleWith(map[string]string{"kind": "StatefulSet", "name": "db", "replicas": "3"}),
			wantFirst: "StatefulSet db: found 1 replicas, scaling to 3",
			wantMessages: []string{
				"StatefulSet db: 1/3 replicas ready (the controller has not observed generation 2 yet)",
				"StatefulSet db: 2/3 replicas ready",
			},
			wantWrite: "statefulsets shop/db=3",
			wantDone:  "StatefulSet db: scaled from 1 to 3 replicas, 3/3 ready",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newKube(t, tc.obj)
			clock := testingclock.NewFakePassiveClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
			s := Scale{Clock: clock}
			req := scaleRequest(t, client, contract.HookCreate, tc.params, nil)
			req.HookStarted = clock.Now()

			// Recorded before anything changes, so that no crash can lose the count.
			res, err := call(t, s, req)
			require.NoError(t, err)
			assert.False(t, res.Done)
			assert.Equal(t, tc.wantFirst, res.Message)
			assert.Equal(t, 100*time.Millisecond, res.RequeueAfter)
			assert.Equal(t, map[string]string{PreviousReplicasOutput: fmt.Sprint(scaleOf(t, tc.obj).Spec.Replicas)}, res.Outputs)
			assert.Empty(t, scaleWrites(t, client), "nothing is scaled before the count is recorded")

			for i, want := range tc.wantMessages {
				res, err = call(t, s, req)
				require.NoError(t, err, "poll %d", i)
				assert.False(t, res.Done, "poll %d", i)
				assert.Equal(t, want, res.Message, "poll %d", i)
				assert.Equal(t, 2*time.Second, res.RequeueAfter)
				assert.Equal(t, map[string]string{}, res.Outputs, "the engine keeps when the hook started, not the outputs")
				reconcile(t, client, tc.obj)
				clock.SetTime(clock.Now().Add(time.Minute))
			}
			res, err = call(t, s, req)
			require.NoError(t, err)
			assert.True(t, res.Done)
			assert.Equal(t, tc.wantDone, res.Message)
			assert.Equal(t, []string{tc.wantWrite}, scaleWrites(t, client), "scaled once")
			assert.Equal(t, map[string]string{
				PreviousReplicasOutput: fmt.Sprint(scaleOf(t, tc.obj).Spec.Replicas),
				ReplicasOutput:         tc.params["replicas"],
			}, req.Outputs[stepName])
		})
	}
}

// TestScaleCreateAtTheCountAlready: nothing to scale, so the count is recorded with the
// first look, and a workload ready at it is done at once.
func TestScaleCreateAtTheCountAlready(t *testing.T) {
	client := newKube(t, readyDeployment(5))
	req := scaleRequest(t, client, contract.HookCreate, scaleWith(nil), nil)
	res, err := call(t, Scale{}, req)
	require.NoError(t, err)
	assert.True(t, res.Done)
	assert.Equal(t, "Deployment web: already at 5 replicas, 5/5 ready", res.Message)
	assert.Equal(t, map[string]string{PreviousReplicasOutput: "5", ReplicasOutput: "5"}, res.Outputs)
	assert.Empty(t, scaleWrites(t, client))
}

// TestScaleRerunKeepsTheFirstCount: a hook runs at least once, and a step may be run again
// (a retry); previousReplicas stays what the first run found, not what it set itself.
func TestScaleRerunKeepsTheFirstCount(t *testing.T) {
	tests := []struct {
		name      string
		replicas  string
		wantWrite []string
		wantDone  string
	}{
		{"the same count, already set", "5", nil, "Deployment web: scaled from 2 to 5 replicas, 5/5 ready"},
		{"another count", "7", []string{"deployments shop/web=7"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newKube(t, readyDeployment(5)) // scaled from 2 by the first run
			req := scaleRequest(t, client, contract.HookCreate, scaleWith(map[string]string{"replicas": tc.replicas}),
				map[string]string{PreviousReplicasOutput: "2", ReplicasOutput: "5"})
			res, err := call(t, Scale{}, req)
			require.NoError(t, err)
			if v, ok := res.Outputs[PreviousReplicasOutput]; ok {
				assert.Equal(t, "2", v, "never the count the step set itself")
			}
			assert.Equal(t, "2", req.Outputs[stepName][PreviousReplicasOutput], "the first count stays")
			assert.Equal(t, tc.wantWrite, scaleWrites(t, client), "no extra call to record anything")
			if tc.wantDone != "" {
				assert.True(t, res.Done)
				assert.Equal(t, tc.wantDone, res.Message)
				assert.Equal(t, tc.replicas, req.Outputs[stepName][ReplicasOutput])
			} else {
				assert.False(t, res.Done)
				assert.Equal(t, "Deployment web: 5/7 replicas ready (5 updated, 5 available; the controller has not observed generation 2 yet)", res.Message)
			}
		})
	}
}

// TestScaleReSetsTheCount: while it waits, the step holds the count: one changed by someone
// else is set again.
func TestScaleReSetsTheCount(t *testing.T) {
	d := readyDeployment(3) // someone set 3 after the step set 5
	client := newKube(t, d)
	req := scaleRequest(t, client, contract.HookCreate, scaleWith(nil), map[string]string{PreviousReplicasOutput: "2"})
	res, err := call(t, Scale{}, req)
	require.NoError(t, err)
	assert.False(t, res.Done)
	assert.Equal(t, []string{"deployments shop/web=5"}, scaleWrites(t, client))
}

func TestScaleProgress(t *testing.T) {
	deploymentWith := func(generation int64, status appsv1.DeploymentStatus) *appsv1.Deployment {
		d := readyDeployment(3)
		d.Generation, d.Status = generation, status
		return d
	}
	statefulSetWith := func(generation int64, change func(*appsv1.StatefulSetStatus)) *appsv1.StatefulSet {
		s := readyStatefulSet(3)
		s.Generation = generation
		change(&s.Status)
		return s
	}
	tests := []struct {
		name      string
		obj       runtime.Object
		want      int32
		wantReady bool
		wantState string
	}{
		{"Deployment ready", readyDeployment(3), 3, true, "3/3 ready"},
		{"Deployment of another count", readyDeployment(3), 4, false, "3/4 replicas ready (3 updated, 3 available; spec.replicas is 3)"},
		{"Deployment status of an older generation", deploymentWith(2, readyDeployment(3).Status), 3, false,
			"3/3 replicas ready (3 updated, 3 available; the controller has not observed generation 2 yet)"},
		{"Deployment not all available", deploymentWith(1, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 2}), 3, false,
			"3/3 replicas ready (3 updated, 2 available)"},
		{"Deployment rolling out", deploymentWith(1, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 4, UpdatedReplicas: 1, ReadyReplicas: 3, AvailableReplicas: 3}), 3, false,
			"3/3 replicas ready (1 updated, 3 available)"},
		{"Deployment surging", deploymentWith(1, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 4, UpdatedReplicas: 3, ReadyReplicas: 4, AvailableReplicas: 4}), 3, false,
			"4/3 replicas ready (3 updated, 4 available)"},
		{"Deployment of default replicas", &appsv1.Deployment{Status: appsv1.DeploymentStatus{UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}}, 1, true, "1/1 ready"},
		{"StatefulSet ready", readyStatefulSet(3), 3, true, "3/3 ready"},
		{"StatefulSet not all ready", statefulSetWith(1, func(s *appsv1.StatefulSetStatus) { s.ReadyReplicas = 2 }), 3, false, "2/3 replicas ready"},
		{"StatefulSet status of an older generation", statefulSetWith(2, func(*appsv1.StatefulSetStatus) {}), 3, false,
			"3/3 replicas ready (the controller has not observed generation 2 yet)"},
		{"StatefulSet rolling out", statefulSetWith(1, func(s *appsv1.StatefulSetStatus) { s.UpdateRevision, s.UpdatedReplicas = "db-2", 1 }), 3, false,
			"3/3 replicas ready (1 updated to revision db-2)"},
		{"StatefulSet all updated, revision not yet current", statefulSetWith(1, func(s *appsv1.StatefulSetStatus) { s.UpdateRevision = "db-2" }), 3, true, "3/3 ready"},
		{"StatefulSet of another count", readyStatefulSet(3), 2, false, "3/2 replicas ready (spec.replicas is 3)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ready bool
			var state string
			switch o := tc.obj.(type) {
			case *appsv1.Deployment:
				ready, state = deploymentProgress(o, tc.want)
			case *appsv1.StatefulSet:
				ready, state = statefulSetProgress(o, tc.want)
			}
			assert.Equal(t, tc.wantReady, ready)
			assert.Equal(t, tc.wantState, state)
		})
	}
}

// TestScaleTeardownRestores: Delete sets the count Create found and waits until the
// workload is ready at it; then the record is spent, so that a later run records afresh.
func TestScaleTeardownRestores(t *testing.T) {
	tests := []struct {
		name         string
		obj          runtime.Object
		params       map[string]string
		outputs      map[string]string
		wantWrite    string
		wantMessages []string
		wantDone     string
	}{
		{
			name:      "Deployment",
			obj:       readyDeployment(5),
			params:    scaleWith(nil),
			outputs:   map[string]string{PreviousReplicasOutput: "3", ReplicasOutput: "5"},
			wantWrite: "deployments shop/web=3",
			wantMessages: []string{
				"Deployment web: restoring 3 replicas: 5/3 replicas ready (5 updated, 5 available; the controller has not observed generation 2 yet)",
				"Deployment web: restoring 3 replicas: 4/3 replicas ready (4 updated, 4 available)",
			},
			wantDone: "Deployment web: restored 3 replicas, 3/3 ready",
		},
		{
			name:      "StatefulSet scaled to zero",
			obj:       readyStatefulSet(0),
			params:    scaleWith(map[string]string{"kind": "StatefulSet", "name": "db", "replicas": "0"}),
			outputs:   map[string]string{PreviousReplicasOutput: "1", ReplicasOutput: "0"},
			wantWrite: "statefulsets shop/db=1",
			wantMessages: []string{
				"StatefulSet db: restoring 1 replicas: 0/1 replicas ready (the controller has not observed generation 2 yet)",
			},
			wantDone: "StatefulSet db: restored 1 replicas, 1/1 ready",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newKube(t, tc.obj)
			clock := testingclock.NewFakePassiveClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
			s := Scale{Clock: clock}
			req := scaleRequest(t, client, contract.HookDelete, tc.params, tc.outputs)
			req.HookStarted = clock.Now()
			for i, want := range tc.wantMessages {
				res, err := call(t, s, req)
				require.NoError(t, err, "poll %d", i)
				assert.False(t, res.Done)
				assert.Equal(t, want, res.Message, "poll %d", i)
				assert.Equal(t, 2*time.Second, res.RequeueAfter)
				assert.Empty(t, res.Outputs, "the engine keeps when the hook started, not the outputs")
				reconcile(t, client, tc.obj)
				clock.SetTime(clock.Now().Add(time.Minute))
			}
			res, err := call(t, s, req)
			require.NoError(t, err)
			assert.True(t, res.Done)
			assert.Equal(t, tc.wantDone, res.Message)
			assert.Equal(t, []string{tc.wantWrite}, scaleWrites(t, client), "restored once")
			assert.Empty(t, req.Outputs[stepName][PreviousReplicasOutput], "spent")
			assert.Equal(t, tc.outputs[ReplicasOutput], req.Outputs[stepName][ReplicasOutput])

			// Called again (a hook runs at least once): nothing left to restore.
			res, err = call(t, s, req)
			require.NoError(t, err)
			assert.True(t, res.Done)
			assert.Len(t, scaleWrites(t, client), 1)
		})
	}
}

func TestScaleTeardownWithNothingToRestore(t *testing.T) {
	tests := []struct {
		name    string
		outputs map[string]string
	}{
		{"no outputs", nil},
		// An earlier version recorded when its wait started in the outputs.
		{"Create of an earlier version failed before it recorded a count", map[string]string{"scaleStarted": "2030-01-02T03:04:05Z"}},
		{"spent by an earlier teardown", map[string]string{PreviousReplicasOutput: "", ReplicasOutput: "5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newKube(t, readyDeployment(5))
			res, err := call(t, Scale{}, scaleRequest(t, client, contract.HookDelete, scaleWith(nil), tc.outputs))
			require.NoError(t, err)
			assert.True(t, res.Done)
			assert.Equal(t, "nothing to restore: no replica count was recorded", res.Message)
			assert.Empty(t, client.Actions())
		})
	}
}

// TestScaleWorkloadGone: a workload that does not exist is an API error like any other
// for Create, retried with reason NotFound; for the teardown there is nothing left to
// restore.
func TestScaleWorkloadGone(t *testing.T) {
	client := newKube(t)
	_, err := call(t, Scale{}, scaleRequest(t, client, contract.HookCreate, scaleWith(nil), nil))
	require.Error(t, err)
	assert.False(t, contract.IsPermanent(err))
	assert.Equal(t, "NotFound", executor.ReasonFor(err))
	assert.Contains(t, err.Error(), "scale Deployment shop/web: get scale: ")

	for _, kind := range []string{"Deployment", "StatefulSet"} {
		client = newKube(t)
		req := scaleRequest(t, client, contract.HookDelete, scaleWith(map[string]string{"kind": kind}), map[string]string{PreviousReplicasOutput: "3"})
		res, err := call(t, Scale{}, req)
		require.NoError(t, err)
		assert.True(t, res.Done)
		assert.Equal(t, kind+" web is gone: nothing to restore", res.Message)
		assert.Empty(t, req.Outputs[stepName][PreviousReplicasOutput], "spent")
	}

	// Gone between the read of its scale and the read of its status.
	client = newKube(t, readyDeployment(5))
	client.PrependReactor("get", "deployments", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web")
	})
	res, err := call(t, Scale{}, scaleRequest(t, client, contract.HookDelete, scaleWith(nil), map[string]string{PreviousReplicasOutput: "3"}))
	require.NoError(t, err)
	assert.True(t, res.Done)
	assert.Equal(t, "Deployment web is gone: nothing to restore", res.Message)
}

// TestScaleAPIErrors: the ServiceAccount's lack of RBAC is an API error the engine
// retries with reason Forbidden, for every call and in both directions; an invalid
// request is permanent.
func TestScaleAPIErrors(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments/scale"}, "web", errors.New("no RBAC"))
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "autoscaling", Kind: "Scale"}, "web", field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), 5, "too many")})
	tests := []struct {
		name          string
		hook          contract.Hook
		verb          string
		subresource   string
		err           error
		wantReason    string
		wantPermanent bool
		wantMessage   string
	}{
		{"Create: get scale", contract.HookCreate, "get", "scale", forbidden, "Forbidden", false, "scale Deployment shop/web: get scale: "},
		{"Create: update scale", contract.HookCreate, "update", "scale", forbidden, "Forbidden", false, "scale Deployment shop/web: update scale: "},
		{"Create: get status", contract.HookCreate, "get", "", forbidden, "Forbidden", false, "scale Deployment shop/web: get: "},
		{"Create: invalid", contract.HookCreate, "update", "scale", invalid, "Invalid", true, "scale Deployment shop/web: update scale: "},
		{"Delete: get scale", contract.HookDelete, "get", "scale", forbidden, "Forbidden", false, "restore Deployment shop/web: get scale: "},
		{"Delete: update scale", contract.HookDelete, "update", "scale", forbidden, "Forbidden", false, "restore Deployment shop/web: update scale: "},
		{"Delete: get status", contract.HookDelete, "get", "", forbidden, "Forbidden", false, "restore Deployment shop/web: get: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newKube(t, readyDeployment(3))
			client.PrependReactor(tc.verb, "deployments", func(a clienttesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != tc.subresource {
					return false, nil, nil
				}
				return true, nil, tc.err
			})
			// The count 3 is recorded already, so that each call gets as far as it can.
			_, err := call(t, Scale{}, scaleRequest(t, client, tc.hook, scaleWith(nil), map[string]string{PreviousReplicasOutput: "2"}))
			require.Error(t, err)
			assert.Equal(t, tc.wantPermanent, contract.IsPermanent(err), "%v", err)
			assert.Equal(t, tc.wantReason, executor.ReasonFor(err))
			assert.Contains(t, err.Error(), tc.wantMessage)
		})
	}
}

// TestScaleTimesOut: a workload that is not ready within timeout of the wait's start fails
// the step, naming the replicas seen; one that is ready, even late, is done.
func TestScaleTimesOut(t *testing.T) {
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name    string
		hook    contract.Hook
		params  map[string]string
		outputs map[string]string
		within  time.Duration
		want    string
	}{
		{"Create, default timeout", contract.HookCreate, scaleWith(nil), map[string]string{PreviousReplicasOutput: "2"},
			10 * time.Minute, "Deployment web: not ready at 5 replicas within 10m0s (2/5 replicas ready (2 updated, 2 available"},
		{"Create, timeout given", contract.HookCreate, scaleWith(map[string]string{"timeout": "30s"}), map[string]string{PreviousReplicasOutput: "2"},
			30 * time.Second, "Deployment web: not ready at 5 replicas within 30s (2/5 replicas ready"},
		{"Delete", contract.HookDelete, scaleWith(nil), map[string]string{PreviousReplicasOutput: "4"},
			10 * time.Minute, "Deployment web: not ready at 4 replicas within 10m0s (2/4 replicas ready"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newKube(t, readyDeployment(2))
			clock := testingclock.NewFakePassiveClock(start)
			s := Scale{Clock: clock}
			req := scaleRequest(t, client, tc.hook, tc.params, tc.outputs)
			req.HookStarted = start

			res, err := call(t, s, req) // scales, and the wait starts
			require.NoError(t, err)
			assert.False(t, res.Done)
			clock.SetTime(start.Add(tc.within)) // at the limit: still waiting
			res, err = call(t, s, req)
			require.NoError(t, err)
			assert.False(t, res.Done)

			clock.SetTime(start.Add(tc.within + time.Second))
			_, err = call(t, s, req)
			requirePermanent(t, err, contract.ReasonTimeout, tc.want)

			// Ready, even late: done.
			for range 5 {
				reconcile(t, client, readyDeployment(2))
			}
			res, err = call(t, s, req)
			require.NoError(t, err)
			assert.True(t, res.Done, res.Message)
		})
	}
}

// TestScaleWithoutAHookStartStartsNow: a request without HookStarted (from a caller other
// than the engine) is a first call, never past its timeout.
func TestScaleWithoutAHookStartStartsNow(t *testing.T) {
	for _, hook := range []contract.Hook{contract.HookCreate, contract.HookDelete} {
		t.Run(string(hook), func(t *testing.T) {
			client := newKube(t, readyDeployment(2))
			clock := testingclock.NewFakePassiveClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
			s := Scale{Clock: clock}
			req := scaleRequest(t, client, hook, scaleWith(map[string]string{"timeout": "1s"}), map[string]string{PreviousReplicasOutput: "4"})
			for range 3 {
				res, err := call(t, s, req)
				require.NoError(t, err)
				assert.False(t, res.Done)
				clock.SetTime(clock.Now().Add(time.Hour))
			}
		})
	}
}

func TestScaleRefusesMalformedRecord(t *testing.T) {
	for _, hook := range []contract.Hook{contract.HookCreate, contract.HookDelete} {
		t.Run(string(hook), func(t *testing.T) {
			client := newKube(t, readyDeployment(5))
			_, err := call(t, Scale{}, scaleRequest(t, client, hook, scaleWith(nil), map[string]string{PreviousReplicasOutput: "five"}))
			requirePermanent(t, err, "InvalidOutput", `output "previousReplicas" of step deploy: "five" is not a replica count`)
			assert.Empty(t, scaleWrites(t, client))
		})
	}
}

func TestScaleWithoutClient(t *testing.T) {
	req := scaleRequest(t, nil, contract.HookCreate, scaleWith(nil), nil)
	req.Clients = nil
	_, err := call(t, Scale{}, req)
	requirePermanent(t, err, "NoClient")
}
