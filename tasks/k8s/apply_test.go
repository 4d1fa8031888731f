package k8s

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clienttesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

const webManifest = `
# The app, then its Service.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.invalid/web:1}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80}]
---
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: elsewhere}
data: {mode: fast}
---
{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "web-viewer", "namespace": "ignored"}, "rules": []}
`

const webObjects = "apps/v1/Deployment/shop/web,/v1/Service/shop/web,/v1/ConfigMap/elsewhere/settings," +
	"rbac.authorization.k8s.io/v1/ClusterRole//web-viewer"

func TestApplyAppliesLabelsDefaultsNamespacesAndListsObjects(t *testing.T) {
	client := newClient(t)
	req := newRequest(client, newMapper(), map[string]string{"manifest": webManifest}, nil)

	res, err := Apply{}.Create(t.Context(), req)
	require.NoError(t, err)
	assert.True(t, res.Done)
	assert.Equal(t, "applied 4 objects", res.Message)
	assert.Equal(t, map[string]string{ObjectsOutput: webObjects}, res.Outputs)

	// In order of the documents, each server-side applied, unforced, as "stepwise".
	assert.Equal(t, []string{
		"patch deployments shop/web",
		"patch services shop/web",
		"patch configmaps elsewhere/settings",
		"patch clusterroles /web-viewer",
	}, writes(client))
	for _, a := range client.Actions() {
		if patch, ok := a.(clienttesting.PatchActionImpl); ok {
			assert.Equal(t, FieldManager, patch.PatchOptions.FieldManager)
		}
	}
	assert.Equal(t, []bool{false, false, false, false}, patchForced(client), "never takes fields over unless asked")

	owner := map[string]string{PipelineLabel: pipelineName, PipelineUIDLabel: pipelineUID, StepLabel: stepName}
	for _, tc := range []struct {
		gvr      schema.GroupVersionResource
		ns, name string
		labels   map[string]string
	}{
		{deployments, pipelineNS, "web", map[string]string{"app": "web", PipelineLabel: pipelineName, PipelineUIDLabel: pipelineUID, StepLabel: stepName}},
		{services, pipelineNS, "web", owner},
		{configMaps, "elsewhere", "settings", owner},
		{clusterRoles, "", "web-viewer", owner},
	} {
		obj := getObject(t, client, tc.gvr, tc.ns, tc.name)
		assert.Equal(t, tc.labels, obj.GetLabels(), tc.gvr.Resource)
		assert.Equal(t, tc.ns, obj.GetNamespace(), tc.gvr.Resource)
	}
	replicas, ok := int64Field(getObject(t, client, deployments, pipelineNS, "web").Object, "spec", "replicas")
	assert.True(t, ok)
	assert.Equal(t, int64(2), replicas, "numbers stay integers")

	// A second Create (hooks run at least once) applies the same and reports the same.
	client.ClearActions()
	again, err := Apply{}.Create(t.Context(), newRequest(client, newMapper(), map[string]string{"manifest": webManifest}, res.Outputs))
	require.NoError(t, err)
	assert.Equal(t, res, again)
	assert.Len(t, writes(client), 4)
}

func TestApplyRejectsBadManifests(t *testing.T) {
	deployment := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
	tests := []struct {
		name     string
		manifest string
		want     []string
	}{
		// The engine refuses a step without a manifest (TestApplyParametersTheEngineRefuses);
		// one set to nothing is the hook's to refuse.
		{"empty", "", []string{`parameter "manifest": is empty`}},
		{"blank", "  \n", []string{`parameter "manifest": is empty`}},
		{"only empty documents", "---\n# nothing\n---\n", []string{`parameter "manifest": holds no object`}},
		{"malformed YAML", "apiVersion: v1\nkind: [ConfigMap\n", []string{`parameter "manifest": document 1 is not valid YAML or JSON`}},
		{"malformed second document", deployment + "---\nkind: : x\n", []string{`parameter "manifest": document 2 is not valid YAML or JSON`}},
		{"not an object", "- a\n- b\n", []string{`parameter "manifest": document 1 is not a Kubernetes object`}},
		{"no apiVersion", "kind: ConfigMap\nmetadata: {name: a}\n", []string{`document 1 has no apiVersion`}},
		{"no kind", "apiVersion: v1\nmetadata: {name: a}\n", []string{`document 1 has no kind`}},
		{"no name", deployment + "---\napiVersion: v1\nkind: Service\nmetadata: {namespace: x}\n", []string{`document 2 has no metadata.name`}},
		{"nothing at all", "a: b\n", []string{`document 1 has no apiVersion, kind, metadata.name`}},
		{"generateName", "apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: a-}\n", []string{`has no metadata.name`, `generateName is not supported`}},
		{"bad apiVersion", "apiVersion: a/b/c\nkind: ConfigMap\nmetadata: {name: a}\n", []string{`parameter "manifest": document 1`, `a/b/c`}},
		{"unknown kind", deployment + "---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
			[]string{`parameter "manifest": object 2 (Widget w): the API server serves no kind "Widget" in "example.com/v1"`}},
		{"duplicate", deployment + "---\n" + deployment, []string{`object 2 (Deployment shop/web) is also object 1`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newClient(t)
			_, err := Apply{}.Create(t.Context(), newRequest(client, newMapper(), map[string]string{"manifest": tc.manifest}, nil))
			requirePermanent(t, err, ReasonInvalidParameter, tc.want...)
			assert.Empty(t, writes(client), "nothing is applied when any document is bad")
		})
	}
}

func TestApplyResetsAStaleMapperOnce(t *testing.T) {
	widget := "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"

	mapper := &resettableMapper{DefaultRESTMapper: newMapper()}
	client := newClient(t)
	res, err := Apply{}.Create(t.Context(), newRequest(client, mapper, map[string]string{"manifest": widget}, nil))
	require.NoError(t, err)
	assert.Equal(t, 1, mapper.resets)
	assert.Equal(t, "example.com/v1/Widget/shop/w", res.Outputs[ObjectsOutput])
	getObject(t, client, widgets, pipelineNS, "w")

	// A kind that stays unknown after the reset fails, after exactly one reset.
	mapper = &resettableMapper{DefaultRESTMapper: newMapper()}
	gadget := "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n"
	_, err = Apply{}.Create(t.Context(), newRequest(newClient(t), mapper, map[string]string{"manifest": gadget + "---\n" + gadget}, nil))
	requirePermanent(t, err, ReasonInvalidParameter, `no kind "Gadget"`)
	assert.Equal(t, 1, mapper.resets)
}

func TestApplyFailsWhenTheObjectListDoesNotFitTheOutputs(t *testing.T) {
	var docs []string
	for i := range 60 {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s-%02d}\n", strings.Repeat("x", 60), i))
	}
	client := newClient(t)
	_, err := Apply{}.Create(t.Context(), newRequest(client, newMapper(), map[string]string{"manifest": strings.Join(docs, "---\n")}, nil))
	requirePermanent(t, err, ReasonInvalidParameter, `its 60 objects make an "objects" output of`, "4096 bytes", "split the manifest")
	assert.Empty(t, writes(client))
}

func TestApplyRecordsWhatItAppliedBeforeFailing(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "web", errors.New("no RBAC"))
	failServices := func(client interface {
		PrependReactor(string, string, clienttesting.ReactionFunc)
	}, err error) {
		client.PrependReactor("patch", "services", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, err
		})
	}

	t.Run("first object fails: nothing recorded", func(t *testing.T) {
		client := newClient(t)
		failServices(client, forbidden)
		manifest := "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n"
		_, err := Apply{}.Create(t.Context(), newRequest(client, newMapper(), map[string]string{"manifest": manifest}, nil))
		require.Error(t, err)
		assert.False(t, contract.IsPermanent(err), "RBAC can be fixed: retryable")
		assert.Equal(t, "Forbidden", executor.ReasonFor(err))
		assert.Contains(t, err.Error(), "apply Service shop/web: ")
	})

	t.Run("later object fails: earlier ones recorded, then the error", func(t *testing.T) {
		client := newClient(t)
		failServices(client, forbidden)
		params := map[string]string{"manifest": webManifest}
		res, err := Apply{}.Create(t.Context(), newRequest(client, newMapper(), params, nil))
		require.NoError(t, err)
		assert.False(t, res.Done)
		assert.Positive(t, res.RequeueAfter)
		assert.Equal(t, map[string]string{ObjectsOutput: "apps/v1/Deployment/shop/web"}, res.Outputs)
		assert.Contains(t, res.Message, "applied 1 of 4 objects, then: apply Service shop/web: ")

		// Called again with the recorded outputs, it fails.
		_, err = Apply{}.Create(t.Context(), newRequest(client, newMapper(), params, res.Outputs))
		require.Error(t, err)
		assert.Equal(t, "Forbidden", executor.ReasonFor(err))
	})

	t.Run("the API server refuses an object: permanent", func(t *testing.T) {
		client := newClient(t)
		failServices(client, apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "web",
			field.ErrorList{field.Required(field.NewPath("spec", "ports"), "")}))
		manifest := "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n"
		_, err := Apply{}.Create(t.Context(), newRequest(client, newMapper(), map[string]string{"manifest": manifest}, nil))
		requirePermanent(t, err, "Invalid", "apply Service shop/web: ", "spec.ports")
	})
}

func TestApplyNeedsClients(t *testing.T) {
	req := newRequest(newClient(t), newMapper(), map[string]string{"manifest": webManifest}, nil)
	req.Clients = nil
	_, err := Apply{}.Create(t.Context(), req)
	requirePermanent(t, err, "NoClient")
}

// holdDeletes makes deletes of the fake leave objects in place, marked for deletion, as
// foreground deletion does while dependents remain.
func holdDeletes(client interface {
	PrependReactor(string, string, clienttesting.ReactionFunc)
	Tracker() clienttesting.ObjectTracker
}) {
	client.PrependReactor("delete", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		del := action.(clienttesting.DeleteActionImpl)
		obj, err := client.Tracker().Get(del.GetResource(), del.GetNamespace(), del.GetName())
		if err != nil {
			return true, nil, err
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return true, nil, err
		}
		now := metav1.Now()
		m.SetDeletionTimestamp(&now)
		return true, nil, client.Tracker().Update(del.GetResource(), obj, del.GetNamespace())
	})
}

func TestDeleteDeletesItsObjectsInReverseAndWaitsUntilGone(t *testing.T) {
	client := newClient(t,
		ours(object(deploymentGVK, pipelineNS, "web", nil)),
		ours(object(serviceGVK, pipelineNS, "web", nil)),
		ours(object(clusterRoleGVK, "", "web-viewer", nil)),
		ours(object(configMapGVK, pipelineNS, "unrelated", nil)),
	)
	holdDeletes(client)
	// The ConfigMap in "elsewhere" was never created (or is gone already): NotFound is fine.
	outputs := map[string]string{ObjectsOutput: webObjects}

	res, err := Apply{}.Delete(t.Context(), newRequest(client, newMapper(), nil, outputs))
	require.NoError(t, err)
	assert.False(t, res.Done)
	assert.Equal(t, deletePoll, res.RequeueAfter)
	assert.Equal(t, "waiting for 3 objects to be gone: ClusterRole web-viewer, Service shop/web, Deployment shop/web", res.Message)
	assert.Equal(t, []string{
		"delete clusterroles /web-viewer",
		"delete services shop/web",
		"delete deployments shop/web",
	}, writes(client), "last applied, first deleted; only the listed objects")
	for _, a := range client.Actions() {
		if del, ok := a.(clienttesting.DeleteActionImpl); ok {
			require.NotNil(t, del.DeleteOptions.PropagationPolicy)
			assert.Equal(t, metav1.DeletePropagationForeground, *del.DeleteOptions.PropagationPolicy)
			require.NotNil(t, del.DeleteOptions.Preconditions)
			assert.NotNil(t, del.DeleteOptions.Preconditions.UID)
		}
	}

	// Still there, already deleting: no second delete, still waiting.
	client.ClearActions()
	res, err = Apply{}.Delete(t.Context(), newRequest(client, newMapper(), nil, outputs))
	require.NoError(t, err)
	assert.False(t, res.Done)
	assert.Empty(t, writes(client))

	// The Service and ClusterRole go; the Deployment still waits for its Pods.
	require.NoError(t, client.Tracker().Delete(services, pipelineNS, "web"))
	require.NoError(t, client.Tracker().Delete(clusterRoles, "", "web-viewer"))
	res, err = Apply{}.Delete(t.Context(), newRequest(client, newMapper(), nil, outputs))
	require.NoError(t, err)
	assert.Equal(t, "waiting for 1 object to be gone: Deployment shop/web", res.Message)

	require.NoError(t, client.Tracker().Delete(deployments, pipelineNS, "web"))
	res, err = Apply{}.Delete(t.Context(), newRequest(client, newMapper(), nil, outputs))
	require.NoError(t, err)
	assert.Equal(t, contract.Done("deleted 4 objects"), res)
	getObject(t, client, configMaps, pipelineNS, "unrelated")
}

func TestDeleteIsDoneOnlyOnceAGetSaysGone(t *testing.T) {
	client := newClient(t, ours(object(deploymentGVK, pipelineNS, "web", nil)), ours(object(serviceGVK, pipelineNS, "web", nil)))
	outputs := map[string]string{ObjectsOutput: "apps/v1/Deployment/shop/web,/v1/Service/shop/web"}
	res, err := Apply{}.Delete(t.Context(), newRequest(client, newMapper(), nil, outputs))
	require.NoError(t, err)
	// The fake removes objects on delete, but Delete only trusts a later GET.
	assert.False(t, res.Done)
	assert.Equal(t, "waiting for 2 objects to be gone: Service shop/web, Deployment shop/web", res.Message)

	res, err = Apply{}.Delete(t.Context(), newRequest(client, newMapper(), nil, outputs))
	require.NoError(t, err)
	assert.True(t, res.Done)
}

func TestDeleteEdgeCases(t *testing.T) {
	tests := []struct {
		name    string
		outputs map[string]string
		mapper  func() *resettableMapper
		check   func(t *testing.T, res contract.Result, err error)
	}{
		{
			name: "no outputs: Create never ran",
			check: func(t *testing.T, res contract.Result, err error) {
				require.NoError(t, err)
				assert.Equal(t, contract.Done("nothing was applied"), res)
			},
		},
		{
			name:    "empty list",
			outputs: map[string]string{ObjectsOutput: ""},
			check: func(t *testing.T, res contract.Result, err error) {
				require.NoError(t, err)
				assert.True(t, res.Done)
			},
		},
		{
			name:    "malformed list",
			outputs: map[string]string{ObjectsOutput: "apps/v1/Deployment/web"},
			check: func(t *testing.T, _ contract.Result, err error) {
				requirePermanent(t, err, "InvalidOutput", `output "objects" of step deploy`, "GROUP/VERSION/KIND/NAMESPACE/NAME")
			},
		},
		{
			name:    "kind no longer served, after one reset",
			outputs: map[string]string{ObjectsOutput: "example.com/v1/Gadget/shop/g"},
			check: func(t *testing.T, res contract.Result, err error) {
				require.NoError(t, err)
				assert.True(t, res.Done)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newClient(t)
			mapper := &resettableMapper{DefaultRESTMapper: newMapper()}
			res, err := Apply{}.Delete(t.Context(), newRequest(client, mapper, nil, tc.outputs))
			tc.check(t, res, err)
			assert.Empty(t, writes(client))
			assert.LessOrEqual(t, mapper.resets, 1)
		})
	}
}

func TestDeleteReportsAPIErrors(t *testing.T) {
	client := newClient(t, ours(object(serviceGVK, pipelineNS, "web", nil)))
	client.PrependReactor("delete", "services", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "web", errors.New("no RBAC"))
	})
	_, err := Apply{}.Delete(t.Context(), newRequest(client, newMapper(), nil, map[string]string{ObjectsOutput: "/v1/Service/shop/web"}))
	require.Error(t, err)
	assert.Equal(t, "Forbidden", executor.ReasonFor(err))
	assert.Contains(t, err.Error(), "delete Service shop/web: ")
}
