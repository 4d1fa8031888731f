package k8s

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

// planRequest is a request as the engine hands one to Plan: the parameters checked
// against the declarations d, with their defaults, and no hook.
func planRequest(t *testing.T, client *dynamicfake.FakeDynamicClient, d contract.Description, params, outputs map[string]string) *executor.Request {
	t.Helper()
	return newRequest(client, newMapper(), plugintest.Checked(t, d, params), outputs)
}

// dryRuns checks that the fake saw nothing but reads and server-side applies with
// dryRun=All, as field manager stepwise, forced only when force; it lists the applies as
// "RESOURCE NAMESPACE/NAME".
func dryRuns(t *testing.T, client *dynamicfake.FakeDynamicClient, force bool) []string {
	t.Helper()
	var out []string
	for _, a := range client.Actions() {
		switch a := a.(type) {
		case clienttesting.GetActionImpl:
		case clienttesting.PatchActionImpl:
			assert.Equal(t, types.ApplyPatchType, a.GetPatchType())
			assert.Equal(t, []string{metav1.DryRunAll}, a.PatchOptions.DryRun, "a plan applies only in a dry run")
			assert.Equal(t, FieldManager, a.PatchOptions.FieldManager)
			assert.Equal(t, force, ptr.Deref(a.PatchOptions.Force, false))
			out = append(out, a.GetResource().Resource+" "+a.GetNamespace()+"/"+a.GetName())
		default:
			t.Errorf("a plan must not %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	return out
}

// kubeReads checks that the fake clientset saw only reads, and counts them.
func kubeReads(t *testing.T, client *kubefake.Clientset) int {
	t.Helper()
	for _, a := range client.Actions() {
		assert.Equal(t, "get", a.GetVerb(), "a plan must not %s %s", a.GetVerb(), a.GetResource().Resource)
	}
	return len(client.Actions())
}

// failWith is a reactor that fails the verb on resource with err.
func failWith(client interface {
	PrependReactor(string, string, clienttesting.ReactionFunc)
}, verb, resource string, err error) {
	client.PrependReactor(verb, resource, func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, err })
}

// forbidden is the API server's answer to a verb the ServiceAccount may not use.
func forbidden(gr schema.GroupResource, name, verb string) error {
	return apierrors.NewForbidden(gr, name, errors.New(`User "system:serviceaccount:shop:deployer" cannot `+verb+` resource "`+gr.Resource+`"`))
}

// missingNamespaces fails applies into namespaces that do not exist, as the API server's
// admission does.
func missingNamespaces(client *dynamicfake.FakeDynamicClient) {
	client.PrependReactor("patch", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		ns := a.GetNamespace()
		if ns == "" {
			return false, nil, nil
		}
		if _, err := client.Tracker().Get(namespaces, "", ns); apierrors.IsNotFound(err) {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, ns)
		}
		return false, nil, nil
	})
}

func TestApplyPlan(t *testing.T) {
	webApp := webManifest[:strings.Index(webManifest, "---\n---")] // the Deployment and its Service
	threeReplicas := strings.Replace(webManifest, "replicas: 2", "replicas: 3", 1)
	billing := func() *unstructured.Unstructured { return labelled(liveProdSettings(), "billing", "uid-9", "seed") }
	const billingLabels = `labelled for pipeline "billing" (UID uid-9), step "seed"`
	tests := []struct {
		name string
		live []runtime.Object
		// before is a manifest that Create applies first, whose outputs the plan gets.
		before string
		params map[string]string
		// previous are the step's outputs, when there is no before.
		previous map[string]string
		react    func(client *dynamicfake.FakeDynamicClient)
		want     contract.Plan
		// wantDryRuns are the dry-run applies, made forced when force is "true".
		wantDryRuns []string
	}{
		{
			name:   "nothing exists: all create",
			params: map[string]string{"manifest": webManifest},
			want: contract.Plan{
				Summary: "create 4",
				Details: []contract.PlanItem{
					{Kind: "Deployment", Name: "shop/web", Action: "create"},
					{Kind: "Service", Name: "shop/web", Action: "create"},
					{Kind: "ConfigMap", Name: "elsewhere/settings", Action: "create"},
					{Kind: "ClusterRole", Name: "web-viewer", Action: "create"},
				},
				Outputs: map[string]string{ObjectsOutput: webObjects},
			},
			wantDryRuns: []string{"deployments shop/web", "services shop/web", "configmaps elsewhere/settings", "clusterroles /web-viewer"},
		},
		{
			name:   "applied already: all unchanged",
			before: webManifest,
			params: map[string]string{"manifest": webManifest},
			want: contract.Plan{
				Summary: "unchanged 4",
				Details: []contract.PlanItem{
					{Kind: "Deployment", Name: "shop/web", Action: "unchanged"},
					{Kind: "Service", Name: "shop/web", Action: "unchanged"},
					{Kind: "ConfigMap", Name: "elsewhere/settings", Action: "unchanged"},
					{Kind: "ClusterRole", Name: "web-viewer", Action: "unchanged"},
				},
				Outputs: map[string]string{ObjectsOutput: webObjects},
			},
			wantDryRuns: []string{"deployments shop/web", "services shop/web", "configmaps elsewhere/settings", "clusterroles /web-viewer"},
		},
		{
			name:   "replicas edited, objects added",
			before: webApp,
			params: map[string]string{"manifest": threeReplicas},
			want: contract.Plan{
				Summary: "create 2, change 1 (spec.replicas), unchanged 1",
				Details: []contract.PlanItem{
					{Kind: "Deployment", Name: "shop/web", Action: "change", Note: "spec.replicas"},
					{Kind: "Service", Name: "shop/web", Action: "unchanged"},
					{Kind: "ConfigMap", Name: "elsewhere/settings", Action: "create"},
					{Kind: "ClusterRole", Name: "web-viewer", Action: "create"},
				},
				Outputs: map[string]string{ObjectsOutput: webObjects},
			},
			wantDryRuns: []string{"deployments shop/web", "services shop/web", "configmaps elsewhere/settings", "clusterroles /web-viewer"},
		},
		{
			name:   "another pipeline's object: refused, not applied",
			live:   []runtime.Object{billing()},
			params: map[string]string{"manifest": webDeployment + "---\n" + prodSettings},
			want: contract.Plan{
				Summary: "create 1, refuse 1; 1 warning",
				Details: []contract.PlanItem{
					{Kind: "Deployment", Name: "shop/web", Action: "create"},
					{Kind: "ConfigMap", Name: "shop/prod-settings", Action: "refuse", Note: "not this step's: " + billingLabels},
				},
				Warnings: []string{"NotOwned: ConfigMap shop/prod-settings exists and is not this step's (" + billingLabels + `): ` +
					`set force: "true" on the step to take it over, and its teardown will then delete it; or leave it out of the manifest`},
				Outputs: map[string]string{ObjectsOutput: "apps/v1/Deployment/shop/web,/v1/ConfigMap/shop/prod-settings"},
			},
			wantDryRuns: []string{"deployments shop/web"},
		},
		{
			name:   "another pipeline's object, forced: taken over",
			live:   []runtime.Object{billing()},
			params: map[string]string{"manifest": prodSettings, "force": "true"},
			want: contract.Plan{
				Summary: "change 1 (data.mode, metadata.labels[stepwise.dev/pipeline-uid], metadata.labels[stepwise.dev/pipeline] and 1 more)",
				Details: []contract.PlanItem{{Kind: "ConfigMap", Name: "shop/prod-settings", Action: "change",
					Note: "takes it over (" + billingLabels + "); data.mode, metadata.labels[stepwise.dev/pipeline-uid], " +
						"metadata.labels[stepwise.dev/pipeline], metadata.labels[stepwise.dev/step]"}},
				Outputs: map[string]string{ObjectsOutput: "/v1/ConfigMap/shop/prod-settings"},
			},
			wantDryRuns: []string{"configmaps shop/prod-settings"},
		},
		{
			name:   "forbidden to get",
			params: map[string]string{"manifest": webDeployment + "---\n" + prodSettings},
			react: func(c *dynamicfake.FakeDynamicClient) {
				failWith(c, "get", "configmaps", forbidden(schema.GroupResource{Resource: "configmaps"}, "prod-settings", "get"))
			},
			want: contract.Plan{
				Summary: "create 1, apply 1; 1 warning",
				Details: []contract.PlanItem{
					{Kind: "Deployment", Name: "shop/web", Action: "create"},
					{Kind: "ConfigMap", Name: "shop/prod-settings", Action: "apply", Note: "cannot get it: Forbidden"},
				},
				Warnings: []string{`Forbidden: get ConfigMap shop/prod-settings: configmaps "prod-settings" is forbidden: ` +
					`User "system:serviceaccount:shop:deployer" cannot get resource "configmaps"`},
				Outputs: map[string]string{ObjectsOutput: "apps/v1/Deployment/shop/web,/v1/ConfigMap/shop/prod-settings"},
			},
			wantDryRuns: []string{"deployments shop/web"},
		},
		{
			name:   "forbidden to apply",
			params: map[string]string{"manifest": webDeployment},
			react: func(c *dynamicfake.FakeDynamicClient) {
				failWith(c, "patch", "deployments", forbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", "patch"))
			},
			want: contract.Plan{
				Summary: "create 1; 1 warning",
				Details: []contract.PlanItem{{Kind: "Deployment", Name: "shop/web", Action: "create", Note: "cannot apply it: Forbidden"}},
				Warnings: []string{`Forbidden: apply Deployment shop/web: deployments.apps "web" is forbidden: ` +
					`User "system:serviceaccount:shop:deployer" cannot patch resource "deployments"`},
				Outputs: map[string]string{ObjectsOutput: "apps/v1/Deployment/shop/web"},
			},
			wantDryRuns: []string{"deployments shop/web"},
		},
		{
			name:   "a field another manager owns",
			live:   []runtime.Object{ours(object(deploymentGVK, pipelineNS, "web", nil))},
			params: map[string]string{"manifest": webDeployment},
			react: func(c *dynamicfake.FakeDynamicClient) {
				failWith(c, "patch", "deployments", apierrors.NewApplyConflict([]metav1.StatusCause{
					{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "kubectl-scale" using apps/v1`, Field: ".spec.replicas"},
				}, "Apply failed with 1 conflict"))
			},
			want: contract.Plan{
				Summary: "apply 1; 1 warning",
				Details: []contract.PlanItem{{Kind: "Deployment", Name: "shop/web", Action: "apply", Note: "would fail: Conflict"}},
				Warnings: []string{`Conflict: apply Deployment shop/web: fields the manifest sets are managed by another field manager: ` +
					`.spec.replicas (managed by "kubectl-scale" using apps/v1); leave them out of the manifest, or set force: "true" on the step to take them over`},
				Outputs: map[string]string{ObjectsOutput: "apps/v1/Deployment/shop/web"},
			},
			wantDryRuns: []string{"deployments shop/web"},
		},
		{
			name: "prunes what is still its own",
			live: []runtime.Object{
				ours(object(configMapGVK, pipelineNS, "settings", nil)),
				labelled(object(serviceGVK, pipelineNS, "web", nil), "billing", "uid-9", "seed"),
				func() runtime.Object {
					d := ours(object(deploymentGVK, pipelineNS, "web2", nil))
					d.SetDeletionTimestamp(ptr.To(metav1.Now()))
					return d
				}(),
			},
			params: map[string]string{"manifest": webDeployment},
			previous: map[string]string{ObjectsOutput: "apps/v1/Deployment/shop/web2,/v1/Service/shop/web,/v1/ConfigMap/shop/settings," +
				"/v1/ConfigMap/shop/gone,apps/v1/Deployment/shop/web"},
			want: contract.Plan{
				Summary: "create 1, delete 2, skip 1",
				Details: []contract.PlanItem{
					{Kind: "Deployment", Name: "shop/web", Action: "create"},
					{Kind: "ConfigMap", Name: "shop/settings", Action: "delete", Note: "no longer in the manifest"},
					{Kind: "Service", Name: "shop/web", Action: "skip", Note: "no longer in the manifest, and not this step's: " + billingLabels},
					{Kind: "Deployment", Name: "shop/web2", Action: "delete", Note: "no longer in the manifest; being deleted already"},
				},
				Outputs: map[string]string{ObjectsOutput: "apps/v1/Deployment/shop/web"},
			},
			wantDryRuns: []string{"deployments shop/web"},
		},
		{
			name: "namespaces that do not exist",
			params: map[string]string{"manifest": "apiVersion: v1\nkind: Namespace\nmetadata: {name: fresh}\n---\n" +
				"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: fresh}\n---\n" +
				"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: elsewhere}\n"},
			react: missingNamespaces,
			want: contract.Plan{
				Summary: "create 3; 1 warning",
				Details: []contract.PlanItem{
					{Kind: "Namespace", Name: "fresh", Action: "create"},
					{Kind: "ConfigMap", Name: "fresh/a", Action: "create", Note: "in namespace fresh, which the manifest creates before: not checked"},
					{Kind: "ConfigMap", Name: "elsewhere/b", Action: "create", Note: "namespace elsewhere does not exist now"},
				},
				Warnings: []string{`NotFound: apply ConfigMap elsewhere/b: namespaces "elsewhere" not found (now: an earlier step may create it)`},
				Outputs:  map[string]string{ObjectsOutput: "/v1/Namespace//fresh,/v1/ConfigMap/fresh/a,/v1/ConfigMap/elsewhere/b"},
			},
			wantDryRuns: []string{"namespaces /fresh", "configmaps fresh/a", "configmaps elsewhere/b"},
		},
		{
			name:   "a kind not served now",
			params: map[string]string{"manifest": "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"},
			want: contract.Plan{
				Summary: "create 1; 1 warning",
				Details: []contract.PlanItem{{Kind: "Widget", Name: "shop/w", Action: "create", Note: "its kind is not served now"}},
				Warnings: []string{`InvalidParameter: parameter "manifest": object 1 (Widget w): the API server serves no kind "Widget" in "example.com/v1"` +
					" (now: an earlier step may install it)"},
				Outputs: map[string]string{ObjectsOutput: "example.com/v1/Widget/shop/w"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newClient(t, tc.live...)
			previous := tc.previous
			if tc.before != "" {
				res, err := Apply{}.Create(t.Context(), newRequest(client, newMapper(), map[string]string{"manifest": tc.before}, nil))
				require.NoError(t, err)
				previous = res.Outputs
				client.ClearActions()
			}
			if tc.react != nil {
				tc.react(client)
			}
			req := planRequest(t, client, Apply{}.Describe(), tc.params, previous)
			got, err := executor.Plan(t.Context(), Apply{}, req)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.wantDryRuns, dryRuns(t, client, tc.params["force"] == "true"))
		})
	}
}

// TestApplyPlanStoresNothing: the dry runs leave the objects as they were.
func TestApplyPlanStoresNothing(t *testing.T) {
	client := newClient(t, ours(object(deploymentGVK, pipelineNS, "web", map[string]any{"spec": map[string]any{"replicas": int64(1)}})))
	_, err := Apply{}.Plan(t.Context(), planRequest(t, client, Apply{}.Describe(), map[string]string{"manifest": webManifest}, nil))
	require.NoError(t, err)
	replicas, _ := int64Field(getObject(t, client, deployments, pipelineNS, "web").Object, "spec", "replicas")
	assert.Equal(t, int64(1), replicas)
	assert.False(t, exists(t, client, services, pipelineNS, "web"))
	assert.False(t, exists(t, client, clusterRoles, "", "web-viewer"))
}

// TestApplyPlanFails: what Create refuses at once, Plan refuses too; an API server that
// does not answer fails the plan.
func TestApplyPlanFails(t *testing.T) {
	t.Run("bad manifest", func(t *testing.T) {
		client := newClient(t)
		_, err := Apply{}.Plan(t.Context(), planRequest(t, client, Apply{}.Describe(), map[string]string{"manifest": "a: b\n"}, nil))
		requirePermanent(t, err, ReasonInvalidParameter, `document 1 has no apiVersion, kind, metadata.name`)
		assert.Empty(t, client.Actions())
	})
	t.Run("no pipeline UID", func(t *testing.T) {
		client := newClient(t)
		req := planRequest(t, client, Apply{}.Describe(), map[string]string{"manifest": webDeployment}, nil)
		req.Pipeline.UID = ""
		_, err := Apply{}.Plan(t.Context(), req)
		requirePermanent(t, err, "NoPipelineUID")
	})
	t.Run("API server unavailable", func(t *testing.T) {
		client := newClient(t)
		failWith(client, "get", "deployments", apierrors.NewServiceUnavailable("etcd is down"))
		_, err := Apply{}.Plan(t.Context(), planRequest(t, client, Apply{}.Describe(), map[string]string{"manifest": webDeployment}, nil))
		require.Error(t, err)
		assert.False(t, contract.IsPermanent(err))
		assert.Equal(t, "ServiceUnavailable", executor.ReasonFor(err))
		assert.Contains(t, err.Error(), "read Deployment shop/web before applying it: ")
	})
}

func TestWaitPlan(t *testing.T) {
	unavailable := map[string]any{
		"observedGeneration": int64(2),
		"readyReplicas":      int64(1),
		"conditions":         []any{available("False", map[string]any{"message": "Deployment does not have minimum availability."})},
	}
	ready := map[string]any{"observedGeneration": int64(2), "readyReplicas": int64(2), "conditions": []any{available("True", nil)}}
	readyReplicas := map[string]string{"condition": "", "jsonPath": "{.status.readyReplicas}", "value": "2"}
	tests := []struct {
		name    string
		objs    []runtime.Object
		changes map[string]string
		react   func(client *dynamicfake.FakeDynamicClient)
		want    contract.Plan
	}{
		{
			name: "met now",
			objs: []runtime.Object{deployment(pipelineNS, ready)},
			want: contract.Plan{
				Summary: "wait up to 5m0s for Deployment web: condition Available (met now)",
				Details: []contract.PlanItem{{Kind: "Deployment", Name: "shop/web", Action: "wait", Note: "met now (True)"}},
				Outputs: map[string]string{ObservedOutput: "True"},
			},
		},
		{
			name: "not met now",
			objs: []runtime.Object{deployment(pipelineNS, unavailable)},
			want: contract.Plan{
				Summary: "wait up to 5m0s for Deployment web: condition Available (now False: Deployment does not have minimum availability.)",
				Details: []contract.PlanItem{{Kind: "Deployment", Name: "shop/web", Action: "wait",
					Note: "condition Available: now False: Deployment does not have minimum availability."}},
				Outputs: map[string]string{ObservedOutput: "True"},
			},
		},
		{
			name:    "jsonPath not met now",
			objs:    []runtime.Object{deployment(pipelineNS, unavailable)},
			changes: readyReplicas,
			want: contract.Plan{
				Summary: `wait up to 5m0s for Deployment web: {.status.readyReplicas} to be "2" (now "1")`,
				Details: []contract.PlanItem{{Kind: "Deployment", Name: "shop/web", Action: "wait", Note: `{.status.readyReplicas} to be "2": now "1"`}},
				Outputs: map[string]string{ObservedOutput: "2"},
			},
		},
		{
			name:    "does not exist yet",
			changes: map[string]string{"timeout": "90s"},
			want: contract.Plan{
				Summary: "wait up to 1m30s for Deployment web: condition Available (does not exist yet)",
				Details: []contract.PlanItem{{Kind: "Deployment", Name: "shop/web", Action: "wait", Note: "does not exist yet"}},
				Outputs: map[string]string{ObservedOutput: "True"},
			},
		},
		{
			name:    "cluster-scoped",
			objs:    []runtime.Object{object(namespaceGVK, "", "shop", map[string]any{"status": map[string]any{"phase": "Active"}})},
			changes: map[string]string{"apiVersion": "v1", "kind": "Namespace", "name": "shop", "condition": "", "jsonPath": "{.status.phase}", "value": "Active"},
			want: contract.Plan{
				Summary: `wait up to 5m0s for Namespace shop: {.status.phase} to be "Active" (met now)`,
				Details: []contract.PlanItem{{Kind: "Namespace", Name: "shop", Action: "wait", Note: "met now (Active)"}},
				Outputs: map[string]string{ObservedOutput: "Active"},
			},
		},
		{
			name: "forbidden",
			react: func(c *dynamicfake.FakeDynamicClient) {
				failWith(c, "get", "deployments", forbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", "get"))
			},
			want: contract.Plan{
				Summary: "wait up to 5m0s for Deployment web: condition Available (cannot get it)",
				Details: []contract.PlanItem{{Kind: "Deployment", Name: "shop/web", Action: "wait", Note: "cannot get it: Forbidden"}},
				Warnings: []string{`Forbidden: wait for Deployment shop/web: get: deployments.apps "web" is forbidden: ` +
					`User "system:serviceaccount:shop:deployer" cannot get resource "deployments"`},
				Outputs: map[string]string{ObservedOutput: "True"},
			},
		},
		{
			name:    "a kind not served now",
			changes: map[string]string{"apiVersion": "example.com/v1", "kind": "Widget", "name": "w"},
			want: contract.Plan{
				Summary: "wait up to 5m0s for Widget w: condition Available (kind not served now)",
				Details: []contract.PlanItem{{Kind: "Widget", Name: "shop/w", Action: "wait", Note: "its kind is not served now"}},
				Warnings: []string{`InvalidParameter: parameter "kind": the API server serves no kind "Widget" in "example.com/v1"` +
					" (now: an earlier step may install it)"},
				Outputs: map[string]string{ObservedOutput: "True"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newClient(t, tc.objs...)
			if tc.react != nil {
				tc.react(client)
			}
			got, err := executor.Plan(t.Context(), Wait{}, planRequest(t, client, Wait{}.Describe(), waitParamsFor(tc.changes), nil))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Empty(t, dryRuns(t, client, false), "only reads")
		})
	}
}

func TestWaitPlanRefusesWhatCreateRefuses(t *testing.T) {
	client := newClient(t)
	_, err := Wait{}.Plan(t.Context(), planRequest(t, client, Wait{}.Describe(), waitParamsFor(map[string]string{"apiVersion": "v1", "kind": "secret"}), nil))
	requirePermanent(t, err, ReasonInvalidParameter, "k8s.wait does not read Secrets")
	_, err = Wait{}.Plan(t.Context(), planRequest(t, client, Wait{}.Describe(), waitParamsFor(map[string]string{"condition": ""}), nil))
	requirePermanent(t, err, ReasonInvalidParameter, `give either parameter "condition"`)
	assert.Empty(t, client.Actions())
}

func TestScalePlan(t *testing.T) {
	tests := []struct {
		name     string
		objs     []runtime.Object
		params   map[string]string
		recorded map[string]string
		react    func(client *kubefake.Clientset)
		want     contract.Plan
	}{
		{
			name:   "scale down",
			objs:   []runtime.Object{readyDeployment(3)},
			params: scaleWith(map[string]string{"replicas": "0"}),
			want: contract.Plan{
				Summary: "scale Deployment web from 3 to 0 replicas",
				Details: []contract.PlanItem{{Kind: "Deployment", Name: "shop/web", Action: "scale", Note: "3 → 0"}},
				Outputs: map[string]string{PreviousReplicasOutput: "3", ReplicasOutput: "0"},
			},
		},
		{
			name:   "at the count already",
			objs:   []runtime.Object{readyDeployment(5)},
			params: scaleWith(nil),
			want: contract.Plan{
				Summary: "Deployment web is at 5 replicas already",
				Details: []contract.PlanItem{{Kind: "Deployment", Name: "shop/web", Action: "unchanged", Note: "at 5 already"}},
				Outputs: map[string]string{PreviousReplicasOutput: "5", ReplicasOutput: "5"},
			},
		},
		{
			name:     "a re-run keeps the count its first run recorded",
			objs:     []runtime.Object{readyStatefulSet(5)},
			params:   scaleWith(map[string]string{"kind": "StatefulSet", "name": "db", "replicas": "1"}),
			recorded: map[string]string{PreviousReplicasOutput: "2", ReplicasOutput: "5"},
			want: contract.Plan{
				Summary: "scale StatefulSet db from 5 to 1 replicas",
				Details: []contract.PlanItem{{Kind: "StatefulSet", Name: "shop/db", Action: "scale", Note: "5 → 1"}},
				Outputs: map[string]string{PreviousReplicasOutput: "2", ReplicasOutput: "1"},
			},
		},
		{
			name:   "missing",
			params: scaleWith(map[string]string{"replicas": "0"}),
			want: contract.Plan{
				Summary:  "scale Deployment web to 0 replicas: does not exist now",
				Details:  []contract.PlanItem{{Kind: "Deployment", Name: "shop/web", Action: "scale", Note: "does not exist now"}},
				Warnings: []string{`NotFound: scale Deployment shop/web: get scale: deployments.apps "web" not found`},
				Outputs:  map[string]string{ReplicasOutput: "0"},
			},
		},
		{
			name:   "forbidden",
			objs:   []runtime.Object{readyDeployment(3)},
			params: scaleWith(nil),
			react: func(c *kubefake.Clientset) {
				failWith(c, "get", "deployments", forbidden(schema.GroupResource{Group: "apps", Resource: "deployments/scale"}, "web", "get"))
			},
			want: contract.Plan{
				Summary: "scale Deployment web to 5 replicas: cannot get its scale: Forbidden",
				Details: []contract.PlanItem{{Kind: "Deployment", Name: "shop/web", Action: "scale", Note: "cannot get its scale: Forbidden"}},
				Warnings: []string{`Forbidden: scale Deployment shop/web: get scale: deployments/scale.apps "web" is forbidden: ` +
					`User "system:serviceaccount:shop:deployer" cannot get resource "deployments/scale"`},
				Outputs: map[string]string{ReplicasOutput: "5"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newKube(t, tc.objs...)
			if tc.react != nil {
				tc.react(client)
			}
			got, err := executor.Plan(t.Context(), Scale{}, scaleRequest(t, client, "", tc.params, tc.recorded))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, 1, kubeReads(t, client), "one read of the scale subresource")
		})
	}
}

func TestScalePlanRefusesWhatCreateRefuses(t *testing.T) {
	client := newKube(t, readyDeployment(3))
	_, err := Scale{}.Plan(t.Context(), scaleRequest(t, client, "", scaleWith(map[string]string{"replicas": "-1"}), nil))
	requirePermanent(t, err, ReasonInvalidParameter, `parameter "replicas"`)
	_, err = Scale{}.Plan(t.Context(), scaleRequest(t, client, "", scaleWith(nil), map[string]string{PreviousReplicasOutput: "many"}))
	requirePermanent(t, err, ReasonInvalidOutput, `"many" is not a replica count`)
	assert.Empty(t, client.Actions())
}
