package k8s

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

// waitParamsFor is a valid set of k8s.wait parameters with the changes given (an empty
// value removes the parameter).
func waitParamsFor(changes map[string]string) map[string]string {
	return withChanges(map[string]string{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "condition": "Available"}, changes)
}

// waitRequest is a k8s.wait request with the parameters as the engine hands them over:
// checked against its declarations, with their defaults.
func waitRequest(t *testing.T, client *dynamicfake.FakeDynamicClient, mapper meta.RESTMapper, params map[string]string) *executor.Request {
	t.Helper()
	return newRequest(client, mapper, plugintest.Checked(t, Wait{}.Describe(), params), nil)
}

// TestWaitParametersTheEngineRefuses: what the declarations say (required, types, no other
// parameter) the engine checks before any hook.
func TestWaitParametersTheEngineRefuses(t *testing.T) {
	plugintest.AssertRefusals(t, Wait{}.Describe(), []plugintest.Refusal{
		{Name: "no apiVersion", Params: waitParamsFor(map[string]string{"apiVersion": ""}), Want: `parameter "apiVersion" is required`},
		{Name: "no kind", Params: waitParamsFor(map[string]string{"kind": ""}), Want: `parameter "kind" is required`},
		{Name: "no name", Params: waitParamsFor(map[string]string{"name": ""}), Want: `parameter "name" is required`},
		{Name: "bad timeout", Params: waitParamsFor(map[string]string{"timeout": "soon"}), Want: `parameter "timeout" is "soon", not a duration`},
		{Name: "a parameter it does not take", Params: waitParamsFor(map[string]string{"replicas": "3"}), Want: `parameter "replicas" is not a parameter of the executor`},
	})
}

// TestWaitRejectsBadParameters: what the types cannot say, the hooks check, failing the
// step at PreCreate, its first hook, and at Create.
func TestWaitRejectsBadParameters(t *testing.T) {
	tests := []struct {
		name    string
		changes map[string]string
		want    string
		// atCreate: only Create, which asks the API server, can tell.
		atCreate bool
	}{
		{"blank apiVersion", map[string]string{"apiVersion": " "}, `parameter "apiVersion": is empty`, false},
		{"bad apiVersion", map[string]string{"apiVersion": "a/b/c"}, `parameter "apiVersion": `, false},
		{"blank kind", map[string]string{"kind": " "}, `parameter "kind": is empty`, false},
		{"blank name", map[string]string{"name": " "}, `parameter "name": is empty`, false},
		{"neither condition nor jsonPath", map[string]string{"condition": ""}, `give either parameter "condition" (e.g. Available) or parameters "jsonPath" and "value"`, false},
		{"both condition and jsonPath", map[string]string{"jsonPath": "{.status.readyReplicas}", "value": "2"}, `parameters "condition" and "jsonPath" exclude each other`, false},
		{"jsonPath without value", map[string]string{"condition": "", "jsonPath": "{.status.readyReplicas}"}, `parameter "value": is required with "jsonPath"`, false},
		{"value with condition", map[string]string{"value": "True"}, `parameter "value": goes with "jsonPath"`, false},
		{"bad jsonPath", map[string]string{"condition": "", "jsonPath": "{.status[", "value": "1"}, `parameter "jsonPath": "{.status[" is not a JSONPath template`, false},
		{"zero timeout", map[string]string{"timeout": "0s"}, `parameter "timeout": "0s" must be positive`, false},
		{"negative timeout", map[string]string{"timeout": "-1s"}, `parameter "timeout": "-1s" must be positive`, false},
		{"unknown kind", map[string]string{"apiVersion": "example.com/v1", "kind": "Gadget"}, `parameter "kind": the API server serves no kind "Gadget" in "example.com/v1"`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newClient(t)
			req := waitRequest(t, client, newMapper(), waitParamsFor(tc.changes))
			res, err := Wait{}.PreCreate(t.Context(), req)
			if tc.atCreate {
				require.NoError(t, err)
				assert.True(t, res.Done)
			} else {
				requirePermanent(t, err, ReasonInvalidParameter, tc.want)
			}
			_, err = Wait{}.Create(t.Context(), req)
			requirePermanent(t, err, ReasonInvalidParameter, tc.want)
			assert.Empty(t, client.Actions(), "nothing is read")
		})
	}
}

// deployment is a Deployment at generation 2 with the given status.
func deployment(ns string, status map[string]any) runtime.Object {
	obj := object(deploymentGVK, ns, "web", map[string]any{"status": status})
	obj.SetGeneration(2)
	return obj
}

func available(status string, extra map[string]any) map[string]any {
	c := map[string]any{"type": "Available", "status": status, "reason": "MinimumReplicasAvailable"}
	maps.Copy(c, extra)
	return c
}

func TestWaitCreate(t *testing.T) {
	unavailable := map[string]any{
		"observedGeneration": int64(2),
		"readyReplicas":      int64(1),
		"conditions": []any{
			map[string]any{"type": "Progressing", "status": "True"},
			available("False", map[string]any{"message": "Deployment does not have minimum availability."}),
		},
	}
	ready := map[string]any{
		"observedGeneration": int64(2),
		"readyReplicas":      int64(2),
		"conditions":         []any{available("True", nil)},
	}
	tests := []struct {
		name         string
		objs         []runtime.Object
		changes      map[string]string
		wantDone     bool
		wantMessage  string
		wantObserved string
	}{
		{
			name:         "condition met",
			objs:         []runtime.Object{deployment(pipelineNS, ready)},
			wantDone:     true,
			wantMessage:  "Deployment web: condition Available met (True)",
			wantObserved: "True",
		},
		{
			name:        "condition not met",
			objs:        []runtime.Object{deployment(pipelineNS, unavailable)},
			wantMessage: "Deployment web: waiting for condition Available (now False: Deployment does not have minimum availability.)",
		},
		{
			name:        "not found",
			wantMessage: "Deployment web: waiting for condition Available (not found)",
		},
		{
			name:        "condition not reported",
			objs:        []runtime.Object{deployment(pipelineNS, map[string]any{})},
			wantMessage: "Deployment web: waiting for condition Available (not reported yet)",
		},
		{
			name:        "status of an older generation",
			objs:        []runtime.Object{deployment(pipelineNS, map[string]any{"observedGeneration": int64(1), "conditions": []any{available("True", nil)}})},
			wantMessage: "Deployment web: waiting for condition Available (status is of generation 1, the object is at 2)",
		},
		{
			name:        "condition of an older generation",
			objs:        []runtime.Object{deployment(pipelineNS, map[string]any{"conditions": []any{available("True", map[string]any{"observedGeneration": int64(1)})}})},
			wantMessage: "Deployment web: waiting for condition Available (now True for generation 1, the object is at 2)",
		},
		{
			name:        "in the namespace given",
			objs:        []runtime.Object{deployment("other", ready)},
			changes:     map[string]string{"namespace": "other"},
			wantDone:    true,
			wantMessage: "Deployment web: condition Available met (True)", wantObserved: "True",
		},
		{
			name:        "not in the pipeline's namespace",
			objs:        []runtime.Object{deployment("other", ready)},
			wantMessage: "Deployment web: waiting for condition Available (not found)",
		},
		{
			name:         "jsonPath value met",
			objs:         []runtime.Object{deployment(pipelineNS, ready)},
			changes:      map[string]string{"condition": "", "jsonPath": "{.status.readyReplicas}", "value": "2"},
			wantDone:     true,
			wantMessage:  `Deployment web: {.status.readyReplicas} to be "2" met (2)`,
			wantObserved: "2",
		},
		{
			name:        "jsonPath value not met",
			objs:        []runtime.Object{deployment(pipelineNS, unavailable)},
			changes:     map[string]string{"condition": "", "jsonPath": "{.status.readyReplicas}", "value": "2"},
			wantMessage: `Deployment web: waiting for {.status.readyReplicas} to be "2" (now "1")`,
		},
		{
			name:        "jsonPath not set",
			objs:        []runtime.Object{deployment(pipelineNS, map[string]any{})},
			changes:     map[string]string{"condition": "", "jsonPath": "{.status.readyReplicas}", "value": "2"},
			wantMessage: `Deployment web: waiting for {.status.readyReplicas} to be "2" (not set)`,
		},
		{
			name:         "jsonPath without braces, with a filter",
			objs:         []runtime.Object{deployment(pipelineNS, unavailable)},
			changes:      map[string]string{"condition": "", "jsonPath": `.status.conditions[?(@.type=="Progressing")].status`, "value": "True"},
			wantDone:     true,
			wantMessage:  `Deployment web: .status.conditions[?(@.type=="Progressing")].status to be "True" met (True)`,
			wantObserved: "True",
		},
		{
			name:         "cluster-scoped kind ignores the namespace",
			objs:         []runtime.Object{object(namespaceGVK, "", "shop", map[string]any{"status": map[string]any{"phase": "Active"}})},
			changes:      map[string]string{"apiVersion": "v1", "kind": "Namespace", "name": "shop", "namespace": "other", "condition": "", "jsonPath": "{.status.phase}", "value": "Active"},
			wantDone:     true,
			wantMessage:  `Namespace shop: {.status.phase} to be "Active" met (Active)`,
			wantObserved: "Active",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newClient(t, tc.objs...)
			req := waitRequest(t, client, newMapper(), waitParamsFor(tc.changes))
			req.HookStarted = time.Now()
			res, err := Wait{}.Create(t.Context(), req)
			require.NoError(t, err)
			assert.Equal(t, tc.wantMessage, res.Message)
			assert.Equal(t, tc.wantDone, res.Done)
			if tc.wantDone {
				assert.Equal(t, map[string]string{ObservedOutput: tc.wantObserved}, res.Outputs)
				return
			}
			assert.Equal(t, 2*time.Second, res.RequeueAfter)
			assert.Empty(t, res.Outputs, "the engine keeps when the wait started, not the outputs")
			assert.Empty(t, res.State)
		})
	}
}

// TestWaitTimesOutFromWhenItStarted: the timeout runs from the hook's first call, which
// the engine tells every call (HookStarted).
func TestWaitTimesOutFromWhenItStarted(t *testing.T) {
	notReported := deployment(pipelineNS, map[string]any{"observedGeneration": int64(2)})
	met := deployment(pipelineNS, map[string]any{"conditions": []any{available("True", nil)}})
	tests := []struct {
		name    string
		obj     runtime.Object
		timeout string // empty: the default
		ago     time.Duration
		// wantErr is the Timeout's message; empty: no error.
		wantErr  string
		wantDone bool
	}{
		{"within the timeout: still waiting", notReported, "2m", time.Minute, "", false},
		{"past it: a Timeout naming what was awaited and what was seen", notReported, "2m", 3 * time.Minute,
			"Deployment web: condition Available not met within 2m0s (not reported yet)", false},
		{"within the default timeout of 5m", notReported, "", 4 * time.Minute, "", false},
		{"past the default timeout", notReported, "", 6 * time.Minute, "not met within 5m0s", false},
		{"met, even late: done", met, "", 6 * time.Minute, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newClient(t, tc.obj)
			req := waitRequest(t, client, newMapper(), waitParamsFor(map[string]string{"timeout": tc.timeout}))
			req.HookStarted = time.Now().Add(-tc.ago)
			res, err := Wait{}.Create(t.Context(), req)
			if tc.wantErr != "" {
				requirePermanent(t, err, "Timeout", tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantDone, res.Done)
		})
	}
}

// TestWaitWithoutAHookStartStartsNow: a request without HookStarted (from a caller other
// than the engine) is a first call, never past its timeout.
func TestWaitWithoutAHookStartStartsNow(t *testing.T) {
	client := newClient(t, deployment(pipelineNS, map[string]any{"observedGeneration": int64(2)}))
	req := waitRequest(t, client, newMapper(), waitParamsFor(map[string]string{"timeout": "1ns"}))
	res, err := Wait{}.Create(t.Context(), req)
	require.NoError(t, err)
	assert.False(t, res.Done)
}

func TestWaitReportsAPIErrors(t *testing.T) {
	client := newClient(t)
	client.PrependReactor("get", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("no RBAC"))
	})
	_, err := Wait{}.Create(t.Context(), waitRequest(t, client, newMapper(), waitParamsFor(nil)))
	require.Error(t, err)
	assert.False(t, contract.IsPermanent(err))
	assert.Equal(t, "Forbidden", executor.ReasonFor(err))
	assert.Contains(t, err.Error(), "wait for Deployment shop/web: get: ")
}

func TestWaitTeardownDoesNothing(t *testing.T) {
	client := newClient(t)
	req := waitRequest(t, client, newMapper(), waitParamsFor(nil))
	for _, hook := range []func() (contract.Result, error){
		func() (contract.Result, error) { return Wait{}.PreDelete(t.Context(), req) },
		func() (contract.Result, error) { return Wait{}.Delete(t.Context(), req) },
		func() (contract.Result, error) { return Wait{}.PostDelete(t.Context(), req) },
	} {
		res, err := hook()
		require.NoError(t, err)
		assert.True(t, res.Done)
	}
	assert.Empty(t, client.Actions())
}

// TestWaitRefusesSecrets: k8s.wait copies what it reads into the step's status (the
// "observed" output, messages quoting the value seen), which whoever may read the
// Pipeline sees. A Secret's data must not get there, so Secrets are refused before they
// are read: by PreCreate, the first hook, when the kind says Secret, and by Create when
// the API server maps another kind to secrets.
func TestWaitRefusesSecrets(t *testing.T) {
	const encoded = "aHVudGVyMg==" // "hunter2"
	secret := object(secretGVK, pipelineNS, "db", map[string]any{"data": map[string]any{"password": encoded}})
	// Credential is another name the mapper gives the core secrets resource.
	aliased := newMapper()
	aliased.AddSpecific(schema.GroupVersionKind{Version: "v1", Kind: "Credential"}, secrets,
		schema.GroupVersionResource{Version: "v1", Resource: "secret"}, meta.RESTScopeNamespace)
	tests := []struct {
		name    string
		changes map[string]string
		mapper  meta.RESTMapper
		// byKind: the kind says Secret, so PreCreate refuses it already.
		byKind bool
	}{
		{"jsonPath met", map[string]string{"apiVersion": "v1", "kind": "Secret", "name": "db", "condition": "", "jsonPath": "{.data.password}", "value": encoded}, newMapper(), true},
		{"jsonPath not met", map[string]string{"apiVersion": "v1", "kind": "Secret", "name": "db", "condition": "", "jsonPath": "{.data.password}", "value": "x"}, newMapper(), true},
		{"kind in lower case", map[string]string{"apiVersion": "v1", "kind": "secret", "name": "db", "condition": "", "jsonPath": "{.data}", "value": "x"}, newMapper(), true},
		{"kind in upper case, with a condition", map[string]string{"apiVersion": "v1", "kind": "SECRET", "name": "db"}, newMapper(), true},
		{"another kind of the secrets resource", map[string]string{"apiVersion": "v1", "kind": "Credential", "name": "db", "condition": "", "jsonPath": "{.data.password}", "value": "x"}, aliased, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newClient(t, secret.DeepCopy())
			req := waitRequest(t, client, tc.mapper, waitParamsFor(tc.changes))
			res, err := Wait{}.PreCreate(t.Context(), req)
			if tc.byKind {
				requirePermanent(t, err, ReasonInvalidParameter, `parameter "kind": `, "Secret", "status")
			} else {
				require.NoError(t, err)
				assert.True(t, res.Done)
			}
			res, err = Wait{}.Create(t.Context(), req)
			requirePermanent(t, err, ReasonInvalidParameter, `parameter "kind": `, "Secret", "status")
			assert.Empty(t, client.Actions(), "the Secret is not read")
			assert.NotContains(t, err.Error(), encoded)
			assert.NotContains(t, res.Message, encoded)
			assert.Empty(t, res.Outputs)
		})
	}
}
