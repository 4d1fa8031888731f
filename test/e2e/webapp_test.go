package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// webappExampleNamespace is the namespace examples/webapp.yaml is written for.
const webappExampleNamespace = "webapp-demo"

var (
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	servicesGVR    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
)

// webappExample reads examples/webapp.yaml and moves its objects into ns: every namespaced
// object and the RoleBinding's subject. The Namespace document is left out (the test has
// its own). One more change keeps tests apart: the Deployment's Pods, which select any
// kwok node, are pinned to the given node, so that they never land on the nodes other tests
// cordon and drain.
func webappExample(t *testing.T, ns, node string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "webapp.yaml"))
	require.NoError(t, err)
	decoder := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var raw json.RawMessage
		err := decoder.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if string(raw) == "null" {
			continue
		}
		obj := &unstructured.Unstructured{}
		require.NoError(t, obj.UnmarshalJSON(raw))
		switch obj.GetKind() {
		case "Namespace":
			require.Equal(t, webappExampleNamespace, obj.GetName())
			continue
		case "RoleBinding":
			subjects, _, err := unstructured.NestedSlice(obj.Object, "subjects")
			require.NoError(t, err)
			for _, s := range subjects {
				s.(map[string]any)["namespace"] = ns
			}
			require.NoError(t, unstructured.SetNestedSlice(obj.Object, subjects, "subjects"))
		case "Pipeline":
			pinDeploymentStep(t, obj, node)
		}
		require.Equal(t, webappExampleNamespace, obj.GetNamespace(), "%s %s", obj.GetKind(), obj.GetName())
		obj.SetNamespace(ns)
		objs = append(objs, obj)
	}
	require.Len(t, objs, 4, "ServiceAccount, Role, RoleBinding, Pipeline")
	return objs
}

// pinDeploymentStep adds kubernetes.io/hostname=node to the nodeSelector of the Deployment
// in the manifest of the pipeline's "deployment" step.
func pinDeploymentStep(t *testing.T, pipeline *unstructured.Unstructured, node string) {
	t.Helper()
	steps, _, err := unstructured.NestedSlice(pipeline.Object, "spec", "steps")
	require.NoError(t, err)
	for _, s := range steps {
		step := s.(map[string]any)
		if step["name"] != "deployment" {
			continue
		}
		with := step["with"].(map[string]any)
		var deployment map[string]any
		require.NoError(t, sigsyaml.Unmarshal([]byte(with["manifest"].(string)), &deployment))
		selector, _, err := unstructured.NestedStringMap(deployment, "spec", "template", "spec", "nodeSelector")
		require.NoError(t, err)
		require.Equal(t, "kwok", selector["type"], "the example selects kwok nodes")
		selector[corev1.LabelHostname] = node
		require.NoError(t, unstructured.SetNestedStringMap(deployment, selector, "spec", "template", "spec", "nodeSelector"))
		manifest, err := sigsyaml.Marshal(deployment)
		require.NoError(t, err)
		with["manifest"] = string(manifest)
		require.NoError(t, unstructured.SetNestedSlice(pipeline.Object, steps, "spec", "steps"))
		return
	}
	t.Fatal(`the example has no step "deployment"`)
}

// createAll creates objects as the cluster admin, as `kubectl apply -f` would.
func createAll(t *testing.T, dyn dynamic.Interface, objs []*unstructured.Unstructured) {
	t.Helper()
	groups, err := restmapper.GetAPIGroupResources(cluster.Client.Discovery())
	require.NoError(t, err)
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err)
		_, err = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace()).Create(t.Context(), obj, metav1.CreateOptions{})
		require.NoError(t, err, "create %s %s", gvk.Kind, obj.GetName())
	}
}

func webappNode(t *testing.T) string {
	t.Helper()
	node, err := cluster.CreateFakeNode(t.Context(), "webapp-"+rand.String(5))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cluster.Client.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{})
	})
	return node.Name
}

// deletion is what a watch saw of an object's deletion, as resource versions: when it
// started (deletionTimestamp set, or deleted at once) and when the object was gone. The
// API server's resource versions are etcd revisions, which grow across every resource,
// so they order events of a Service and of a Deployment.
type deletion struct{ started, gone uint64 }

// watchDeletion watches the named object from now on and returns a function that waits
// for its deletion and tells what was seen.
func watchDeletion(t *testing.T, resource dynamic.ResourceInterface, name string) func() deletion {
	t.Helper()
	ctx := t.Context()
	opts := metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	list, err := resource.List(ctx, opts)
	require.NoError(t, err)
	require.Len(t, list.Items, 1, "%s is there before the pipeline is deleted", name)
	opts.ResourceVersion = list.GetResourceVersion()
	w, err := resource.Watch(ctx, opts)
	require.NoError(t, err)
	seen := make(chan deletion, 1)
	go func() {
		defer w.Stop()
		var d deletion
		defer func() { seen <- d }()
		for ev := range w.ResultChan() {
			obj, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue // an error or a bookmark
			}
			rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
			if err != nil {
				return
			}
			if d.started == 0 && (ev.Type == watch.Deleted || obj.GetDeletionTimestamp() != nil) {
				d.started = rv
			}
			if ev.Type == watch.Deleted {
				d.gone = rv
				return
			}
		}
	}()
	return func() deletion {
		t.Helper()
		select {
		case d := <-seen:
			return d
		case <-time.After(30 * time.Second):
			t.Fatalf("no deletion of %s was seen", name)
			return deletion{}
		}
	}
}

func TestWebappExampleDeploysAndTearsDownInReverse(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	node := webappNode(t)
	dyn, err := dynamic.NewForConfig(cluster.Config)
	require.NoError(t, err)

	createAll(t, dyn, webappExample(t, ns, node))

	got := waitPipeline(t, ns, "webapp", 2*time.Minute, func(p *v1alpha1.Pipeline) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady)
	})
	assert.Equal(t, v1alpha1.PipelineSucceeded, got.Status.Phase)
	require.Len(t, got.Status.Steps, 3)
	assert.Equal(t, map[string]string{"objects": "apps/v1/Deployment/" + ns + "/web"}, got.Status.Steps[0].Outputs)
	assert.Equal(t, map[string]string{"objects": "/v1/Service/" + ns + "/web"}, got.Status.Steps[1].Outputs)
	assert.Equal(t, "True", got.Status.Steps[2].Outputs["observed"])

	deploy, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, deploymentAvailable(deploy), "the pipeline is Ready once the Deployment is Available: %+v", deploy.Status)
	assert.Equal(t, int32(2), deploy.Status.AvailableReplicas)
	svc, err := cluster.Client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type)

	// Applied by the pipeline's steps, server-side, labelled with pipeline, its UID and step.
	for step, obj := range map[string]metav1.Object{"deployment": deploy, "service": svc} {
		assert.Equal(t, map[string]string{
			"app": "web", "stepwise.dev/pipeline": "webapp", "stepwise.dev/pipeline-uid": string(got.UID), "stepwise.dev/step": step,
		}, obj.GetLabels(), step)
		var managers []string
		for _, f := range obj.GetManagedFields() {
			if f.Operation == metav1.ManagedFieldsOperationApply {
				managers = append(managers, f.Manager)
			}
		}
		assert.Equal(t, []string{"stepwise"}, managers, step)
	}
	pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 2)
	for _, p := range pods.Items {
		assert.Equal(t, node, p.Spec.NodeName, "pod %s", p.Name)
	}

	// Delete: the teardown deletes the Service, waits until it is gone, then deletes the
	// Deployment and waits until it (and, foreground, its Pods) are gone.
	serviceDeletion := watchDeletion(t, dyn.Resource(servicesGVR).Namespace(ns), "web")
	deploymentDeletion := watchDeletion(t, dyn.Resource(deploymentsGVR).Namespace(ns), "web")
	client := stepwiseClient(t)
	require.NoError(t, client.StepwiseV1alpha1().Pipelines(ns).Delete(ctx, "webapp", metav1.DeleteOptions{}))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.StepwiseV1alpha1().Pipelines(ns).Get(ctx, "webapp", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "pipeline was not deleted; operator log %s", operator.Log)

	_, err = cluster.Client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "Service gone: %v", err)
	_, err = cluster.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "Deployment gone: %v", err)
	pods, err = cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	assert.Empty(t, pods.Items, "foreground deletion: the Pods went before the Deployment")

	s, d := serviceDeletion(), deploymentDeletion()
	t.Logf("resource versions: Service deletion started %d, gone %d; Deployment deletion started %d, gone %d", s.started, s.gone, d.started, d.gone)
	require.NotZero(t, s.gone, "the Service's deletion was seen")
	require.NotZero(t, d.started, "the Deployment's deletion was seen")
	require.NotZero(t, d.gone, "the Deployment's removal was seen")
	assert.Less(t, s.started, d.started, "the Service's deletion started before the Deployment's")
	assert.Less(t, s.gone, d.started, "the Service was gone before the Deployment's deletion started")
}

func TestWebappWithoutRBACOnDeploymentsIsForbiddenAndCreatesNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	dyn, err := dynamic.NewForConfig(cluster.Config)
	require.NoError(t, err)

	// A ServiceAccount that may manage Services, but not Deployments.
	const sa = "no-deployments"
	cluster.ServiceAccount(t, ns, sa, rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"services"},
		Verbs: []string{"get", "list", "watch", "create", "patch", "update", "delete"},
	})

	// The example's Pipeline, acting as that ServiceAccount (no node: nothing may run).
	var pipeline *unstructured.Unstructured
	for _, obj := range webappExample(t, ns, "no-such-node") {
		if obj.GetKind() == "Pipeline" {
			pipeline = obj
		}
	}
	require.NotNil(t, pipeline)
	require.NoError(t, unstructured.SetNestedField(pipeline.Object, sa, "spec", "serviceAccountName"))
	createAll(t, dyn, []*unstructured.Unstructured{pipeline})

	// With the default retry policy the step is retried a few times, then fails.
	got := waitPipeline(t, ns, "webapp", time.Minute, func(p *v1alpha1.Pipeline) bool {
		return p.Status.Phase == v1alpha1.PipelineFailed
	})
	step := got.Status.Steps[0]
	assert.Equal(t, "deployment", step.Name)
	assert.Equal(t, v1alpha1.StepFailed, step.Phase)
	c := meta.FindStatusCondition(step.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, c)
	assert.Equal(t, "Forbidden", c.Reason)
	// k8s.apply reads the object first, to refuse one it does not own.
	assert.Contains(t, c.Message, `"system:serviceaccount:`+ns+`:`+sa+`" cannot get resource "deployments"`,
		"the executor acted as the pipeline's ServiceAccount, not as the operator")
	assert.NotContains(t, step.Outputs, "objects", "nothing was applied, so nothing is recorded")
	assert.Equal(t, v1alpha1.StepPending, got.Status.Steps[1].Phase, "the service step never started")
	ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)

	deployments, err := cluster.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, deployments.Items)
	services, err := cluster.Client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, services.Items)

	// Nothing was applied, so the teardown has nothing to do and the pipeline goes at once.
	client := stepwiseClient(t)
	require.NoError(t, client.StepwiseV1alpha1().Pipelines(ns).Delete(ctx, "webapp", metav1.DeleteOptions{}))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.StepwiseV1alpha1().Pipelines(ns).Get(ctx, "webapp", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "pipeline was not deleted; operator log %s", operator.Log)
}

// TestWebappApplyStepDeletesItsObjectsLastFirst checks, on a real API server, one k8s.apply
// step with several documents: it applies them all, and its teardown deletes them in
// reverse order and waits until they are gone.
func TestWebappApplyStepDeletesItsObjectsLastFirst(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	dyn, err := dynamic.NewForConfig(cluster.Config)
	require.NoError(t, err)

	const sa = "config-writer"
	cluster.ServiceAccount(t, ns, sa, rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"configmaps"},
		Verbs: []string{"get", "create", "patch", "delete"},
	})

	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: first}\ndata: {n: \"1\"}\n" +
		"---\n---\n" +
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: second}\ndata: {n: \"2\"}\n"
	client := stepwiseClient(t)
	_, err = client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "configs", Namespace: ns},
		Spec: v1alpha1.PipelineSpec{
			ServiceAccountName: sa,
			Steps:              []v1alpha1.Step{{Name: "apply", Executor: "k8s.apply", With: map[string]string{"manifest": manifest}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	got := waitPipeline(t, ns, "configs", time.Minute, func(p *v1alpha1.Pipeline) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady)
	})
	assert.Equal(t, "/v1/ConfigMap/"+ns+"/first,/v1/ConfigMap/"+ns+"/second", got.Status.Steps[0].Outputs["objects"])
	for _, name := range []string{"first", "second"} {
		cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "apply", cm.Labels["stepwise.dev/step"])
	}

	configMaps := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns)
	firstDeletion := watchDeletion(t, configMaps, "first")
	secondDeletion := watchDeletion(t, configMaps, "second")
	require.NoError(t, client.StepwiseV1alpha1().Pipelines(ns).Delete(ctx, "configs", metav1.DeleteOptions{}))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.StepwiseV1alpha1().Pipelines(ns).Get(ctx, "configs", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "pipeline was not deleted; operator log %s", operator.Log)
	first, second := firstDeletion(), secondDeletion()
	require.NotZero(t, first.gone)
	require.NotZero(t, second.gone)
	assert.Less(t, second.started, first.started, "the last object applied is deleted first")
}
