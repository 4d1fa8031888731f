package k8s

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

const (
	web2Deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web2}\n"
	webService     = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n"
	settingsMap    = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n"
)

func TestApplyPrunesWhatTheManifestNoLongerHas(t *testing.T) {
	type key struct {
		gvr      schema.GroupVersionResource
		ns, name string
	}
	tests := []struct {
		name        string
		live        []runtime.Object
		previous    string
		manifest    string
		wantWrites  []string
		wantObjects string
		wantMessage string
		wantGone    []key
		wantKept    []key
	}{
		{
			name:        "web renamed web2: web is pruned",
			live:        []runtime.Object{ours(object(deploymentGVK, pipelineNS, "web", nil)), ours(object(serviceGVK, pipelineNS, "web", nil))},
			previous:    "apps/v1/Deployment/shop/web,/v1/Service/shop/web",
			manifest:    web2Deployment + "---\n" + webService,
			wantWrites:  []string{"patch deployments shop/web2", "patch services shop/web", "delete deployments shop/web"},
			wantObjects: "apps/v1/Deployment/shop/web2,/v1/Service/shop/web",
			wantMessage: "applied 2 objects; pruned 1 object: Deployment shop/web",
			wantGone:    []key{{deployments, pipelineNS, "web"}},
			wantKept:    []key{{deployments, pipelineNS, "web2"}, {services, pipelineNS, "web"}},
		},
		{
			name:        "both kept: nothing is pruned",
			live:        []runtime.Object{ours(object(deploymentGVK, pipelineNS, "web", nil)), ours(object(serviceGVK, pipelineNS, "web", nil))},
			previous:    "apps/v1/Deployment/shop/web,/v1/Service/shop/web",
			manifest:    webDeployment + "---\n" + webService,
			wantWrites:  []string{"patch deployments shop/web", "patch services shop/web"},
			wantObjects: "apps/v1/Deployment/shop/web,/v1/Service/shop/web",
			wantMessage: "applied 2 objects",
			wantKept:    []key{{deployments, pipelineNS, "web"}, {services, pipelineNS, "web"}},
		},
		{
			name: "several removed: last applied, first pruned",
			live: []runtime.Object{ours(object(deploymentGVK, pipelineNS, "web", nil)), ours(object(serviceGVK, pipelineNS, "web", nil)),
				ours(object(configMapGVK, pipelineNS, "settings", nil))},
			previous:    "apps/v1/Deployment/shop/web,/v1/Service/shop/web,/v1/ConfigMap/shop/settings",
			manifest:    settingsMap,
			wantWrites:  []string{"patch configmaps shop/settings", "delete services shop/web", "delete deployments shop/web"},
			wantObjects: "/v1/ConfigMap/shop/settings",
			wantMessage: "applied 1 object; pruned 2 objects: Service shop/web, Deployment shop/web",
			wantGone:    []key{{deployments, pipelineNS, "web"}, {services, pipelineNS, "web"}},
		},
		{
			name: "objects that are not its own are left, and leave the inventory",
			live: []runtime.Object{
				ours(object(deploymentGVK, pipelineNS, "web", nil)),
				labelled(liveProdSettings(), "billing", "uid-9", "seed"),
				labelled(object(serviceGVK, pipelineNS, "web", nil), pipelineName, "uid-0", stepName),
			},
			previous:    "apps/v1/Deployment/shop/web,/v1/ConfigMap/shop/prod-settings,/v1/Service/shop/web",
			manifest:    web2Deployment,
			wantWrites:  []string{"patch deployments shop/web2", "delete deployments shop/web"},
			wantObjects: "apps/v1/Deployment/shop/web2",
			wantMessage: "applied 1 object; pruned 1 object: Deployment shop/web; left 2 objects that are not this step's: " +
				`Service shop/web (labelled for pipeline "webapp" (UID uid-0), step "deploy"), ` +
				`ConfigMap shop/prod-settings (labelled for pipeline "billing" (UID uid-9), step "seed")`,
			wantGone: []key{{deployments, pipelineNS, "web"}},
			wantKept: []key{{configMaps, pipelineNS, "prod-settings"}, {services, pipelineNS, "web"}},
		},
		{
			name:        "an object gone already is dropped",
			previous:    "apps/v1/Deployment/shop/web",
			manifest:    web2Deployment,
			wantWrites:  []string{"patch deployments shop/web2"},
			wantObjects: "apps/v1/Deployment/shop/web2",
			wantMessage: "applied 1 object",
		},
		{
			name:        "the same object under another version is not pruned",
			live:        []runtime.Object{ours(object(deploymentGVK, pipelineNS, "web", nil))},
			previous:    "apps/v1beta1/Deployment/shop/web",
			manifest:    webDeployment,
			wantWrites:  []string{"patch deployments shop/web"},
			wantObjects: "apps/v1/Deployment/shop/web",
			wantMessage: "applied 1 object",
			wantKept:    []key{{deployments, pipelineNS, "web"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newClient(t, tc.live...)
			params := map[string]string{"manifest": tc.manifest}
			res, err := Apply{}.Create(t.Context(), newRequest(client, newMapper(), params, map[string]string{ObjectsOutput: tc.previous}))
			require.NoError(t, err)
			assert.Equal(t, contract.DoneWithOutputs(tc.wantMessage, map[string]string{ObjectsOutput: tc.wantObjects}), res)
			assert.Equal(t, tc.wantWrites, writes(client))
			for _, opts := range deleteOptions(client) {
				require.NotNil(t, opts.PropagationPolicy)
				assert.Equal(t, metav1.DeletePropagationForeground, *opts.PropagationPolicy)
				require.NotNil(t, opts.Preconditions)
				assert.NotNil(t, opts.Preconditions.UID, "deletes the object it read, not one created since")
			}
			for _, k := range tc.wantGone {
				assert.False(t, exists(t, client, k.gvr, k.ns, k.name), "%s %s pruned", k.gvr.Resource, k.name)
			}
			for _, k := range tc.wantKept {
				assert.True(t, exists(t, client, k.gvr, k.ns, k.name), "%s %s kept", k.gvr.Resource, k.name)
			}
		})
	}
}

func TestApplyRerunThenTeardown(t *testing.T) {
	client := newClient(t)
	first, err := Apply{}.Create(t.Context(), newRequest(client, newMapper(), map[string]string{"manifest": webDeployment + "---\n" + webService}, nil))
	require.NoError(t, err)

	rerun, err := Apply{}.Create(t.Context(), newRequest(client, newMapper(), map[string]string{"manifest": web2Deployment + "---\n" + webService}, first.Outputs))
	require.NoError(t, err)
	assert.Equal(t, "apps/v1/Deployment/shop/web2,/v1/Service/shop/web", rerun.Outputs[ObjectsOutput])
	assert.False(t, exists(t, client, deployments, pipelineNS, "web"))

	client.ClearActions()
	for range 2 { // the second call sees everything gone
		_, err = Apply{}.Delete(t.Context(), newRequest(client, newMapper(), nil, rerun.Outputs))
		require.NoError(t, err)
	}
	assert.Equal(t, []string{"delete services shop/web", "delete deployments shop/web2"}, writes(client))
	assert.False(t, exists(t, client, deployments, pipelineNS, "web2"))
	assert.False(t, exists(t, client, services, pipelineNS, "web"))
}

func TestApplyRecordsBothInventoriesWhenPruningFails(t *testing.T) {
	client := newClient(t, ours(object(deploymentGVK, pipelineNS, "web", nil)))
	client.PrependReactor("delete", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("no RBAC"))
	})
	params := map[string]string{"manifest": web2Deployment}
	res, err := Apply{}.Create(t.Context(), newRequest(client, newMapper(), params, map[string]string{ObjectsOutput: "apps/v1/Deployment/shop/web"}))
	require.NoError(t, err)
	assert.False(t, res.Done)
	assert.Positive(t, res.RequeueAfter)
	assert.Equal(t, map[string]string{ObjectsOutput: "apps/v1/Deployment/shop/web,apps/v1/Deployment/shop/web2"}, res.Outputs,
		"web2 exists and web is not gone: the teardown must find both")
	assert.Contains(t, res.Message, "applied 1 object, then: prune Deployment shop/web: ")

	// Called again with both recorded, it reports the failure, to be retried.
	_, err = Apply{}.Create(t.Context(), newRequest(client, newMapper(), params, res.Outputs))
	require.Error(t, err)
	assert.False(t, contract.IsPermanent(err))
	assert.Equal(t, "Forbidden", executor.ReasonFor(err))
	assert.Contains(t, err.Error(), "prune Deployment shop/web: ")
}

func TestApplyFailsWhenOldAndNewInventoriesDoNotFitTogether(t *testing.T) {
	configMaps := func(prefix string) (manifest, objects string) {
		var docs, refs []string
		for i := range 30 {
			name := fmt.Sprintf("%s-%s-%02d", prefix, strings.Repeat("x", 56), i)
			docs = append(docs, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+name+"}\n")
			refs = append(refs, "/v1/ConfigMap/shop/"+name)
		}
		return strings.Join(docs, "---\n"), strings.Join(refs, ",")
	}
	oldManifest, oldObjects := configMaps("old")
	newManifest, _ := configMaps("new")

	// Each fits alone; while the step replaces the one by the other it must list both.
	client := newClient(t)
	_, err := Apply{}.Create(t.Context(), newRequest(client, newMapper(), map[string]string{"manifest": newManifest}, map[string]string{ObjectsOutput: oldObjects}))
	requirePermanent(t, err, ReasonInvalidParameter, `its 30 objects, with the 30 objects of the previous run that it would prune, make an "objects" output of`,
		"4096 bytes", "split the manifest")
	assert.Empty(t, writes(client))

	// The same objects again fit.
	client = newClient(t)
	_, err = Apply{}.Create(t.Context(), newRequest(client, newMapper(), map[string]string{"manifest": oldManifest}, map[string]string{ObjectsOutput: oldObjects}))
	require.NoError(t, err)
}
