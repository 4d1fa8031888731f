package k8s

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

const (
	webDeployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
	prodSettings  = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: prod-settings}\ndata: {mode: test}\n"
)

// liveProdSettings is the ConfigMap prod-settings as someone else left it.
func liveProdSettings() *unstructured.Unstructured {
	return object(configMapGVK, pipelineNS, "prod-settings", map[string]any{"data": map[string]any{"mode": "prod"}})
}

func TestApplyRefusesObjectsItDoesNotOwn(t *testing.T) {
	tests := []struct {
		name     string
		live     *unstructured.Unstructured
		previous string // the step's "objects" output of an earlier run
		want     []string
	}{
		{
			name: "labelled for another pipeline",
			live: labelled(liveProdSettings(), "billing", "uid-9", "seed"),
			want: []string{`labelled for pipeline "billing" (UID uid-9), step "seed"`},
		},
		{
			name: "a same-named pipeline with another UID",
			live: labelled(liveProdSettings(), pipelineName, "uid-0", stepName),
			want: []string{`labelled for pipeline "webapp" (UID uid-0), step "deploy"`},
		},
		{
			name: "another step of this pipeline",
			live: labelled(liveProdSettings(), pipelineName, pipelineUID, "seed"),
			want: []string{`step "seed"`},
		},
		{
			name: "made by hand",
			live: liveProdSettings(),
			want: []string{"has no stepwise.dev/pipeline label"},
		},
		{
			name: "labelled for this step before the UID label, but not in its inventory",
			live: labelled(liveProdSettings(), pipelineName, "", stepName),
			want: []string{`pipeline "webapp" (no stepwise.dev/pipeline-uid label)`},
		},
		{
			name:     "in its inventory, but labelled for another pipeline since",
			live:     labelled(liveProdSettings(), "billing", "uid-9", "seed"),
			previous: "/v1/ConfigMap/shop/prod-settings",
			want:     []string{`pipeline "billing"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newClient(t, tc.live.DeepCopy())
			var outputs map[string]string
			if tc.previous != "" {
				outputs = map[string]string{ObjectsOutput: tc.previous}
			}
			params := map[string]string{"manifest": webDeployment + "---\n" + prodSettings}
			_, err := Apply{}.Create(t.Context(), newRequest(client, newMapper(), params, outputs))
			requirePermanent(t, err, "NotOwned", append(tc.want,
				"ConfigMap shop/prod-settings exists and is not this step's", `force: "true"`)...)
			assert.Empty(t, writes(client), "nothing applied, not even the objects before it")
			got := getObject(t, client, configMaps, pipelineNS, "prod-settings")
			assert.Equal(t, tc.live.GetLabels(), got.GetLabels())
			assert.Equal(t, tc.live.Object["data"], got.Object["data"])
		})
	}
}

func TestApplyForceTakesAnObjectOver(t *testing.T) {
	client := newClient(t, labelled(liveProdSettings(), "billing", "uid-9", "seed"))
	params := map[string]string{"manifest": prodSettings, "force": "true"}
	res, err := Apply{}.Create(t.Context(), newRequest(client, newMapper(), params, nil))
	require.NoError(t, err)
	assert.True(t, res.Done)
	assert.Equal(t, "applied 1 object; took over ConfigMap shop/prod-settings", res.Message)
	assert.Equal(t, map[string]string{ObjectsOutput: "/v1/ConfigMap/shop/prod-settings"}, res.Outputs)
	assert.Equal(t, []bool{true}, patchForced(client))
	got := getObject(t, client, configMaps, pipelineNS, "prod-settings")
	assert.Equal(t, map[string]string{PipelineLabel: pipelineName, PipelineUIDLabel: pipelineUID, StepLabel: stepName}, got.GetLabels())
	assert.Equal(t, map[string]any{"mode": "test"}, got.Object["data"])

	// From then on it is this step's: a run without force applies it, unforced.
	client.ClearActions()
	again, err := Apply{}.Create(t.Context(), newRequest(client, newMapper(), map[string]string{"manifest": prodSettings}, res.Outputs))
	require.NoError(t, err)
	assert.Equal(t, "applied 1 object", again.Message)
	assert.Equal(t, []bool{false}, patchForced(client))

	// And its teardown deletes it.
	client.ClearActions()
	_, err = Apply{}.Delete(t.Context(), newRequest(client, newMapper(), nil, res.Outputs))
	require.NoError(t, err)
	assert.Equal(t, []string{"delete configmaps shop/prod-settings"}, writes(client))
	assert.False(t, exists(t, client, configMaps, pipelineNS, "prod-settings"))
}

// TestApplyParametersTheEngineRefuses: what the declarations say (the manifest required,
// force a bool, no other parameter) the engine checks before any hook.
func TestApplyParametersTheEngineRefuses(t *testing.T) {
	plugintest.AssertRefusals(t, Apply{}.Describe(), []plugintest.Refusal{
		{Name: "no manifest", Params: map[string]string{"force": "true"}, Want: `parameter "manifest" is required`},
		{Name: "force not a bool", Params: map[string]string{"manifest": prodSettings, "force": "yes"}, Want: `parameter "force" is "yes", not true or false`},
		{Name: "a parameter it does not take", Params: map[string]string{"manifest": prodSettings, "prune": "false"}, Want: `parameter "prune" is not a parameter of the executor, which takes manifest, force`},
	})
}

func TestApplyNeedsThePipelineUID(t *testing.T) {
	client := newClient(t)
	req := newRequest(client, newMapper(), map[string]string{"manifest": prodSettings}, nil)
	req.Pipeline.UID = ""
	_, err := Apply{}.Create(t.Context(), req)
	requirePermanent(t, err, "NoPipelineUID", "no pipeline UID")
	assert.Empty(t, writes(client))
}

func TestApplyAppliesOntoItsOwnObjectsUnforced(t *testing.T) {
	tests := []struct {
		name     string
		live     *unstructured.Unstructured
		previous map[string]string
	}{
		{name: "labelled with this pipeline's UID and step", live: ours(liveProdSettings())},
		{
			name:     "in its inventory, labelled before the UID label",
			live:     labelled(liveProdSettings(), pipelineName, "", stepName),
			previous: map[string]string{ObjectsOutput: "/v1/ConfigMap/shop/prod-settings"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newClient(t, tc.live)
			res, err := Apply{}.Create(t.Context(), newRequest(client, newMapper(), map[string]string{"manifest": prodSettings}, tc.previous))
			require.NoError(t, err)
			assert.Equal(t, contract.DoneWithOutputs("applied 1 object", map[string]string{ObjectsOutput: "/v1/ConfigMap/shop/prod-settings"}), res)
			assert.Equal(t, []bool{false}, patchForced(client))
			assert.Equal(t, pipelineUID, getObject(t, client, configMaps, pipelineNS, "prod-settings").GetLabels()[PipelineUIDLabel])
		})
	}
}

func TestApplyReportsFieldManagerConflicts(t *testing.T) {
	fieldConflict := apierrors.NewApplyConflict([]metav1.StatusCause{
		{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "kubectl-scale" using apps/v1`, Field: ".spec.replicas"},
		{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "ops"`, Field: ".metadata.labels.tier"},
	}, "Apply failed with 2 conflicts: ...")
	staleConflict := apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errMsg("the object has been modified"))
	tests := []struct {
		name   string
		force  string
		err    error
		forced bool // the API server also fails forced applies
		check  func(t *testing.T, err error)
	}{
		{
			name: "another manager owns fields: permanent, naming them",
			err:  fieldConflict,
			check: func(t *testing.T, err error) {
				requirePermanent(t, err, "Conflict", "apply Deployment shop/web: ",
					`.spec.replicas (managed by "kubectl-scale" using apps/v1)`, `.metadata.labels.tier (managed by "ops")`,
					`force: "true"`)
				assert.True(t, apierrors.IsConflict(err), "the API error is wrapped")
			},
		},
		{
			name:  "force takes the fields over",
			force: "true",
			err:   fieldConflict,
			check: func(t *testing.T, err error) { require.NoError(t, err) },
		},
		{
			name:   "a stale write is retried",
			err:    staleConflict,
			forced: true,
			check: func(t *testing.T, err error) {
				require.Error(t, err)
				assert.False(t, contract.IsPermanent(err))
				assert.Equal(t, "Conflict", executor.ReasonFor(err))
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newClient(t, ours(object(deploymentGVK, pipelineNS, "web", nil)))
			client.PrependReactor("patch", "deployments", func(a clienttesting.Action) (bool, runtime.Object, error) {
				force := a.(clienttesting.PatchActionImpl).PatchOptions.Force
				if force != nil && *force && !tc.forced {
					return false, nil, nil
				}
				return true, nil, tc.err
			})
			params := map[string]string{"manifest": webDeployment, "force": tc.force}
			_, err := Apply{}.Create(t.Context(), newRequest(client, newMapper(), params, nil))
			tc.check(t, err)
		})
	}
}

func TestDeleteLeavesObjectsThatAreNotItsOwn(t *testing.T) {
	client := newClient(t,
		ours(object(deploymentGVK, pipelineNS, "web", nil)),
		labelled(liveProdSettings(), "billing", "uid-9", "seed"),
		labelled(object(serviceGVK, pipelineNS, "web", nil), pipelineName, "uid-0", stepName),
		labelled(object(secretGVK, pipelineNS, "legacy", nil), pipelineName, "", stepName), // applied before the UID label
		object(configMapGVK, pipelineNS, "by-hand", nil),
	)
	outputs := map[string]string{ObjectsOutput: "apps/v1/Deployment/shop/web,/v1/ConfigMap/shop/prod-settings," +
		"/v1/Service/shop/web,/v1/Secret/shop/legacy,/v1/ConfigMap/shop/by-hand"}

	res, err := Apply{}.Delete(t.Context(), newRequest(client, newMapper(), nil, outputs))
	require.NoError(t, err)
	assert.False(t, res.Done)
	assert.Equal(t, []string{"delete secrets shop/legacy", "delete deployments shop/web"}, writes(client))
	assert.Equal(t, "waiting for 2 objects to be gone: Secret shop/legacy, Deployment shop/web; "+
		"left 3 objects that are not this step's: ConfigMap shop/by-hand (has no stepwise.dev/pipeline label), "+
		`Service shop/web (labelled for pipeline "webapp" (UID uid-0), step "deploy"), `+
		`ConfigMap shop/prod-settings (labelled for pipeline "billing" (UID uid-9), step "seed")`, res.Message)

	res, err = Apply{}.Delete(t.Context(), newRequest(client, newMapper(), nil, outputs))
	require.NoError(t, err)
	assert.True(t, res.Done)
	assert.Contains(t, res.Message, "deleted 2 objects; left 3 objects that are not this step's: ")
	assert.True(t, exists(t, client, configMaps, pipelineNS, "prod-settings"))
	assert.True(t, exists(t, client, services, pipelineNS, "web"))
	assert.True(t, exists(t, client, configMaps, pipelineNS, "by-hand"))
}

type errMsg string

func (e errMsg) Error() string { return string(e) }
