package upgrade

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
)

var (
	pipelines = schema.GroupVersionResource{Group: "stepwise.dev", Version: "v1alpha1", Resource: "pipelines"}
	templates = schema.GroupVersionResource{Group: "stepwise.dev", Version: "v1alpha1", Resource: "pipelinetemplates"}
	triggers  = schema.GroupVersionResource{Group: "stepwise.dev", Version: "v1alpha1", Resource: "pipelinetriggers"}
)

// withoutRules is the CRD as an older operator shipped it, or as someone applied it by
// hand: no CEL rules, no patterns.
func withoutRules(crd *apiextensionsv1.CustomResourceDefinition) {
	var strip func(s *apiextensionsv1.JSONSchemaProps)
	strip = func(s *apiextensionsv1.JSONSchemaProps) {
		if s == nil {
			return
		}
		s.XValidations, s.Pattern = nil, ""
		for k, p := range s.Properties {
			strip(&p)
			s.Properties[k] = p
		}
		if s.Items != nil {
			strip(s.Items.Schema)
		}
		if s.AdditionalProperties != nil {
			strip(s.AdditionalProperties.Schema)
		}
	}
	for i := range crd.Spec.Versions {
		strip(crd.Spec.Versions[i].Schema.OpenAPIV3Schema)
	}
}

// TestObjectsStoredUnderALooserSchemaStopNothing reproduces the two objects that stopped
// every tenant (a Pipeline whose timeout metav1.Duration cannot decode, a PipelineTrigger
// whose schedule made the cron parser panic), stored as a looser schema admitted them.
// With the schema as it is now applied over them, the operator starts, serves another
// namespace, says on each poison object why it does nothing, survives a restart, and
// refuses such objects at admission from then on.
func TestObjectsStoredUnderALooserSchemaStopNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	require.NoError(t, cluster.ApplyCRDs(ctx, withoutRules))
	dyn, err := dynamic.NewForConfig(cluster.Config)
	require.NoError(t, err)
	sw, err := versioned.NewForConfig(cluster.Config)
	require.NoError(t, err)

	tenant, other := cluster.CreateNamespace(t), cluster.CreateNamespace(t)
	cluster.ServiceAccount(t, tenant, "tenant")
	cluster.GrantClusterWide(t, tenant, "tenant", "list-nodes-"+tenant,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}})
	create := func(gvr schema.GroupVersionResource, obj map[string]any) {
		t.Helper()
		u := &unstructured.Unstructured{Object: obj}
		u.SetAPIVersion("stepwise.dev/v1alpha1")
		_, err := dyn.Resource(gvr).Namespace(tenant).Create(ctx, u, metav1.CreateOptions{})
		require.NoError(t, err, "the looser schema admits %s", u.GetName())
	}
	noop := []any{map[string]any{"name": "a", "executor": "test.noop"}}
	create(pipelines, map[string]any{"kind": "Pipeline", "metadata": map[string]any{"name": "poison"},
		"spec": map[string]any{"suspend": true, "steps": []any{map[string]any{"name": "a", "executor": "test.noop", "timeout": "9999999999h"}}}})
	// Decodable, but past today's bound: it still runs (its status writes are not refused
	// for a value it had before the bound).
	create(pipelines, map[string]any{"kind": "Pipeline", "metadata": map[string]any{"name": "old-bound"},
		"spec": map[string]any{"steps": []any{map[string]any{"name": "a", "executor": "test.noop", "timeout": "200h"}}}})
	create(templates, map[string]any{"kind": "PipelineTemplate", "metadata": map[string]any{"name": "poison"},
		"spec": map[string]any{"steps": []any{map[string]any{"name": "a", "executor": "test.noop",
			"retry": map[string]any{"limit": int64(1), "backoff": map[string]any{"max": "9999999999h"}}}}}})
	create(pipelines, map[string]any{"kind": "Pipeline", "metadata": map[string]any{"name": "uses-poison"},
		"spec": map[string]any{"templateRef": map[string]any{"name": "poison"}}})
	create(templates, map[string]any{"kind": "PipelineTemplate", "metadata": map[string]any{"name": "noop"}, "spec": map[string]any{"steps": noop}})
	trigger := func(name string, window map[string]any) map[string]any {
		return map[string]any{"kind": "PipelineTrigger", "metadata": map[string]any{"name": name}, "spec": map[string]any{
			"resource": map[string]any{"apiVersion": "v1", "kind": "Node"}, "templateRef": map[string]any{"name": "noop"},
			"serviceAccountName": "tenant", "selector": map[string]any{"matchLabels": map[string]any{"none": "such"}},
			"maintenanceWindow": window,
		}}
	}
	create(triggers, trigger("tz", map[string]any{"schedule": "TZ=UTC", "duration": "1h"}))
	create(triggers, trigger("poison", map[string]any{"schedule": "0 3 * * *", "duration": "9999999999h"}))

	require.NoError(t, cluster.ApplyCRDs(ctx, nil), "the schema as it is now")
	operator, err := cluster.StartOperator()
	require.NoError(t, err)
	defer func() { _ = operator.Stop() }()
	require.NoError(t, operator.WaitReady(ctx), "the caches sync despite the poison")

	canary := func(name string) {
		t.Helper()
		start := time.Now()
		_, err := sw.StepwiseV1alpha1().Pipelines(other).Create(ctx, &v1alpha1.Pipeline{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       v1alpha1.PipelineSpec{Steps: []v1alpha1.Step{{Name: "a", Executor: "test.noop"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		waitReady(ctx, t, dyn, pipelines, other, name, "True", "")
		t.Logf("canary %s Ready %v after apply", name, time.Since(start).Round(time.Millisecond))
	}
	canary("canary-1")

	waitReady(ctx, t, dyn, pipelines, tenant, "old-bound", "True", "")
	waitReady(ctx, t, dyn, pipelines, tenant, "poison", "False", `cannot decode this pipeline (time: invalid duration "9999999999h")`)
	waitReady(ctx, t, dyn, pipelines, tenant, "uses-poison", "False", "template poison cannot be decoded")
	waitReady(ctx, t, dyn, triggers, tenant, "poison", "False", "cannot decode this trigger")
	waitReady(ctx, t, dyn, triggers, tenant, "tz", "False", "a time zone prefix is not allowed")

	// Such objects are refused at admission now.
	_, err = dyn.Resource(pipelines).Namespace(tenant).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stepwise.dev/v1alpha1", "kind": "Pipeline", "metadata": map[string]any{"name": "poison-2"},
		"spec": map[string]any{"steps": []any{map[string]any{"name": "a", "executor": "test.noop", "timeout": "9999999999h"}}},
	}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "a timeout that overflows is refused: %v", err)
	u := &unstructured.Unstructured{Object: trigger("tz-2", map[string]any{"schedule": "TZ=UTC", "duration": "1h"})}
	u.SetAPIVersion("stepwise.dev/v1alpha1")
	_, err = dyn.Resource(triggers).Namespace(tenant).Create(ctx, u, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "a TZ= schedule is refused: %v", err)

	// A restarted operator starts too.
	require.NoError(t, operator.Stop())
	operator, err = cluster.StartOperator()
	require.NoError(t, err)
	require.NoError(t, operator.WaitReady(ctx), "a restarted operator syncs despite the poison")
	canary("canary-2")

	// Fixed, the template is decoded again and its pipeline runs.
	_, err = dyn.Resource(templates).Namespace(tenant).Patch(ctx, "poison", "application/merge-patch+json",
		[]byte(`{"spec":{"steps":[{"name":"a","executor":"test.noop"}]}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	waitReady(ctx, t, dyn, pipelines, tenant, "uses-poison", "True", "")

	// The poison pipeline never got a finalizer: it goes at once.
	require.NoError(t, dyn.Resource(pipelines).Namespace(tenant).Delete(ctx, "poison", metav1.DeleteOptions{}))
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(pipelines).Namespace(tenant).Get(ctx, "poison", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}))

	select {
	case <-operator.Exited():
		t.Fatal("the operator exited")
	default:
	}
	log, err := os.ReadFile(operator.Log)
	require.NoError(t, err)
	assert.NotContains(t, strings.ToLower(string(log)), "panic")
}

// waitReady waits until the object's Ready condition has status, and a message holding
// want, read with the dynamic client (the typed one cannot decode a poison object).
func waitReady(ctx context.Context, t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name, status, want string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conditions {
			c, _ := c.(map[string]any)
			if c["type"] != v1alpha1.ConditionReady {
				continue
			}
			last = c["status"].(string) + " " + c["reason"].(string) + ": " + c["message"].(string)
			return c["status"] == status && strings.Contains(c["message"].(string), want), nil
		}
		return false, nil
	})
	require.NoError(t, err, "%s %s/%s: Ready %s with %q; last: %s", gvr.Resource, ns, name, status, want, last)
}
