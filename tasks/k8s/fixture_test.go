package k8s

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

var (
	deploymentGVK  = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	serviceGVK     = schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	configMapGVK   = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secretGVK      = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	namespaceGVK   = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	clusterRoleGVK = schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}
	widgetGVK      = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

	deployments  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	services     = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	configMaps   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secrets      = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	namespaces   = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	clusterRoles = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
	widgets      = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
)

const (
	pipelineNS   = "shop"
	pipelineName = "webapp"
	stepName     = "deploy"
)

// newMapper knows the kinds of the tests, except Widget.
func newMapper() *meta.DefaultRESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(deploymentGVK, meta.RESTScopeNamespace)
	m.Add(serviceGVK, meta.RESTScopeNamespace)
	m.Add(configMapGVK, meta.RESTScopeNamespace)
	m.Add(secretGVK, meta.RESTScopeNamespace)
	m.Add(namespaceGVK, meta.RESTScopeRoot)
	m.Add(clusterRoleGVK, meta.RESTScopeRoot)
	return m
}

// resettableMapper is a mapper with a stale cache: Widget appears only after a Reset.
type resettableMapper struct {
	*meta.DefaultRESTMapper
	resets int
}

func (m *resettableMapper) Reset() {
	m.resets++
	m.Add(widgetGVK, meta.RESTScopeNamespace)
}

// newClient is a fake dynamic client holding objs, that also serves server-side apply.
//
// The fake's own apply only patches objects that exist, so a reactor stands in for the
// API server: it stores the applied object as is (creating or replacing it). A dry run
// (dryRun=All) stores nothing: it answers with the applied fields merged into the object
// that exists (see mergeApplied), or the applied object when there is none. Field
// ownership, list merging and removing the fields a manager no longer applies are left to
// the e2e tests, against a real API server.
func newClient(t *testing.T, objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	t.Helper()
	scheme := runtime.NewScheme()
	listKinds := map[schema.GroupVersionResource]string{}
	for gvr, gvk := range map[schema.GroupVersionResource]schema.GroupVersionKind{
		deployments: deploymentGVK, services: serviceGVK, configMaps: configMapGVK, secrets: secretGVK,
		namespaces: namespaceGVK, clusterRoles: clusterRoleGVK, widgets: widgetGVK,
	} {
		scheme.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
		listKinds[gvr] = gvk.Kind + "List"
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, listKinds, objs...)
	client.PrependReactor("patch", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		patch, ok := action.(clienttesting.PatchActionImpl)
		if !ok || patch.GetPatchType() != types.ApplyPatchType {
			return false, nil, nil
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(patch.GetPatch()); err != nil {
			return true, nil, err
		}
		gvr, ns, tracker := patch.GetResource(), patch.GetNamespace(), client.Tracker()
		live, err := tracker.Get(gvr, ns, patch.GetName())
		if slices.Contains(patch.PatchOptions.DryRun, metav1.DryRunAll) {
			switch {
			case apierrors.IsNotFound(err):
				return true, obj, nil
			case err != nil:
				return true, nil, err
			}
			merged := live.(*unstructured.Unstructured).DeepCopy()
			mergeApplied(merged.Object, obj.Object)
			return true, merged, nil
		}
		switch {
		case apierrors.IsNotFound(err):
			err = tracker.Create(gvr, obj, ns)
		case err == nil:
			err = tracker.Update(gvr, obj, ns)
		}
		if err != nil {
			return true, nil, err
		}
		stored, err := tracker.Get(gvr, ns, patch.GetName())
		return true, stored, err
	})
	return client
}

// mergeApplied merges the applied fields into live: maps field by field, any other value
// (lists too) replaced.
func mergeApplied(live, applied map[string]any) {
	for k, v := range applied {
		if sub, ok := v.(map[string]any); ok {
			if liveSub, ok := live[k].(map[string]any); ok {
				mergeApplied(liveSub, sub)
				continue
			}
		}
		live[k] = runtime.DeepCopyJSONValue(v)
	}
}

func newRequest(client *dynamicfake.FakeDynamicClient, mapper meta.RESTMapper, params, outputs map[string]string) *executor.Request {
	req := &executor.Request{
		Request: contract.Request{
			Pipeline: contract.PipelineRef{Namespace: pipelineNS, Name: pipelineName, UID: pipelineUID, Generation: 1},
			Step:     stepName,
			Params:   params,
			Outputs:  map[string]map[string]string{},
		},
		Clients: &executor.Clients{Dynamic: client, Mapper: mapper},
	}
	if outputs != nil {
		req.Outputs[stepName] = outputs
	}
	return req
}

// object builds an unstructured object.
func object(gvk schema.GroupVersionKind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range fields {
		obj.Object[k] = v
	}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(ns)
	obj.SetName(name)
	return obj
}

// getObject reads an object from the fake's store.
func getObject(t *testing.T, client *dynamicfake.FakeDynamicClient, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := client.Tracker().Get(gvr, ns, name)
	require.NoError(t, err, "%s %s/%s", gvr.Resource, ns, name)
	u, ok := obj.(*unstructured.Unstructured)
	require.True(t, ok, "%T", obj)
	return u
}

// requirePermanent checks that err is a permanent error with the reason and a message
// holding every one of want.
func requirePermanent(t *testing.T, err error, reason string, want ...string) {
	t.Helper()
	require.Error(t, err)
	require.True(t, contract.IsPermanent(err), "not permanent: %v", err)
	require.Equal(t, reason, executor.ReasonFor(err), "%v", err)
	for _, w := range want {
		require.Contains(t, err.Error(), w)
	}
}

// writes lists the writes the fake saw, in order, as "VERB RESOURCE NAMESPACE/NAME".
func writes(client *dynamicfake.FakeDynamicClient) []string {
	var out []string
	for _, a := range client.Actions() {
		switch a := a.(type) {
		case clienttesting.PatchActionImpl:
			out = append(out, "patch "+a.GetResource().Resource+" "+a.GetNamespace()+"/"+a.GetName())
		case clienttesting.DeleteActionImpl:
			out = append(out, "delete "+a.GetResource().Resource+" "+a.GetNamespace()+"/"+a.GetName())
		case clienttesting.CreateActionImpl, clienttesting.UpdateActionImpl:
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	return out
}

// pipelineUID is the UID of the test pipeline (see newRequest).
const pipelineUID = "uid-1"

// labelled gives obj the owner labels of a step: pipeline, its UID, step. An empty value
// leaves its label out, as on an object applied before the UID label existed.
func labelled(obj *unstructured.Unstructured, pipeline, uid, step string) *unstructured.Unstructured {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range map[string]string{PipelineLabel: pipeline, PipelineUIDLabel: uid, StepLabel: step} {
		if v != "" {
			labels[k] = v
		}
	}
	obj.SetLabels(labels)
	return obj
}

// ours labels obj as applied by the step of the test pipeline.
func ours(obj *unstructured.Unstructured) *unstructured.Unstructured {
	return labelled(obj, pipelineName, pipelineUID, stepName)
}

// exists tells whether the fake's store holds the object.
func exists(t *testing.T, client *dynamicfake.FakeDynamicClient, gvr schema.GroupVersionResource, ns, name string) bool {
	t.Helper()
	_, err := client.Tracker().Get(gvr, ns, name)
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

// deleteOptions lists the options of the deletes the fake saw, in order.
func deleteOptions(client *dynamicfake.FakeDynamicClient) []metav1.DeleteOptions {
	var out []metav1.DeleteOptions
	for _, a := range client.Actions() {
		if del, ok := a.(clienttesting.DeleteActionImpl); ok {
			out = append(out, del.DeleteOptions)
		}
	}
	return out
}

// patchForced lists, for each apply the fake saw, whether it was forced.
func patchForced(client *dynamicfake.FakeDynamicClient) []bool {
	var out []bool
	for _, a := range client.Actions() {
		if patch, ok := a.(clienttesting.PatchActionImpl); ok {
			out = append(out, patch.PatchOptions.Force != nil && *patch.PatchOptions.Force)
		}
	}
	return out
}

// withChanges is params with the changes given: a value set, or removed when empty.
func withChanges(params, changes map[string]string) map[string]string {
	for k, v := range changes {
		if v == "" {
			delete(params, k)
			continue
		}
		params[k] = v
	}
	return params
}
