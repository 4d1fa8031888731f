package dashboard

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/internal/apitest"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
)

// writes are the actions of client that change something.
func writes(client *fake.Clientset) []k8stesting.Action { return apitest.WriteActions(client) }

func TestActions(t *testing.T) {
	for _, tc := range []struct {
		name, method, target, body string
		wantStatus                 int
		wantMessage                string
		// wantWrite is the patch (or "delete") the action makes; empty: none.
		wantWrite string
	}{
		{"retry the failed step", http.MethodPost, "/api/pipelines/ops/failed/retry", "",
			http.StatusOK, "retry of pipeline ops/failed requested", `{"metadata":{"annotations":{"stepwise.dev/retry":""}}}`},
		{"retry with an empty object", http.MethodPost, "/api/pipelines/ops/failed/retry", `{}`,
			http.StatusOK, "retry of pipeline ops/failed requested", `{"metadata":{"annotations":{"stepwise.dev/retry":""}}}`},
		{"retry from a step", http.MethodPost, "/api/pipelines/ops/failed/retry", `{"step":"prepare"}`,
			http.StatusOK, "from step prepare", `{"metadata":{"annotations":{"stepwise.dev/retry":"prepare"}}}`},
		{"retry of a pipeline that has not failed", http.MethodPost, "/api/pipelines/ops/running/retry", "",
			http.StatusConflict, "pipeline ops/running has not failed (phase Running): there is nothing to retry", ""},
		{"retry from a step it does not have", http.MethodPost, "/api/pipelines/ops/failed/retry", `{"step":"nope"}`,
			http.StatusConflict, `pipeline ops/failed has no step "nope"`, ""},
		{"retry of an absent pipeline", http.MethodPost, "/api/pipelines/ops/absent/retry", "",
			http.StatusNotFound, `pipelines.stepwise.dev "absent" not found`, ""},
		{"retry with a bad body", http.MethodPost, "/api/pipelines/ops/failed/retry", `{"step":`,
			http.StatusBadRequest, "read the request body", ""},
		{"retry with an unknown field", http.MethodPost, "/api/pipelines/ops/failed/retry", `{"stpe":"x"}`,
			http.StatusBadRequest, "unknown field", ""},
		{"retry with a huge body", http.MethodPost, "/api/pipelines/ops/failed/retry", `{"step":"` + strings.Repeat("x", 8<<10) + `"}`,
			http.StatusBadRequest, "too large", ""},
		{"suspend", http.MethodPost, "/api/pipelines/ops/running/suspend", "",
			http.StatusOK, "pipeline ops/running suspended", `{"spec":{"suspend":true}}`},
		{"resume", http.MethodPost, "/api/pipelines/ops/running/resume", "",
			http.StatusOK, "pipeline ops/running resumed", `{"spec":{"suspend":false}}`},
		{"suspend an absent pipeline", http.MethodPost, "/api/pipelines/ops/absent/suspend", "",
			http.StatusNotFound, "not found", `{"spec":{"suspend":true}}`},
		{"delete", http.MethodDelete, "/api/pipelines/ops/running", "",
			http.StatusOK, "pipeline ops/running deleted", "delete"},
		{"delete an absent pipeline", http.MethodDelete, "/api/pipelines/ops/absent", "",
			http.StatusNotFound, `delete pipeline ops/absent: pipelines.stepwise.dev "absent" not found`, "delete"},
		{"GET is not an action", http.MethodGet, "/api/pipelines/ops/running/suspend", "",
			http.StatusMethodNotAllowed, "", ""},
		{"PUT is not an action", http.MethodPut, "/api/pipelines/ops/running", "",
			http.StatusMethodNotAllowed, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{objects: []runtime.Object{
				pipeline("ops", "failed", v1alpha1.PipelineFailed, 0),
				pipeline("ops", "running", v1alpha1.PipelineRunning, 0),
			}})
			f.client.ClearActions()
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req := request(tc.method, tc.target, body)
			req.Header.Set("Origin", "http://"+testHost)
			rec := f.serve(req)
			require.Equal(t, tc.wantStatus, rec.Code, rec.Body.String())
			if tc.wantMessage != "" {
				if rec.Code < 300 {
					assert.Contains(t, decode[actionResult](t, rec).Message, tc.wantMessage)
				} else {
					assert.Contains(t, errorOf(t, rec), tc.wantMessage)
				}
			}

			w := writes(f.client)
			if tc.wantWrite == "" {
				assert.Empty(t, w)
				return
			}
			require.Len(t, w, 1)
			switch a := w[0].(type) {
			case k8stesting.PatchAction:
				assert.Equal(t, types.MergePatchType, a.GetPatchType(), "a merge patch of the one field")
				assert.JSONEq(t, tc.wantWrite, string(a.GetPatch()))
				assert.Equal(t, "ops", a.GetNamespace())
			case k8stesting.DeleteAction:
				assert.Equal(t, "delete", tc.wantWrite)
				assert.Equal(t, "ops", a.GetNamespace())
			default:
				t.Fatalf("unexpected action %v", a)
			}
		})
	}
}

func TestActionsPassOnTheAPIServersRefusal(t *testing.T) {
	forbidden := func(verb string) func(*fake.Clientset, *kubefake.Clientset) {
		return func(client *fake.Clientset, _ *kubefake.Clientset) {
			client.PrependReactor(verb, "pipelines", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(v1alpha1.Resource("pipelines"), "failed",
					errors.New(`User "bob" cannot `+verb+` resource "pipelines"`))
			})
		}
	}
	conflict := func(client *fake.Clientset, _ *kubefake.Clientset) {
		client.PrependReactor("delete", "pipelines", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewConflict(v1alpha1.Resource("pipelines"), "failed", errors.New("the object has been modified"))
		})
	}
	unauthorized := func(client *fake.Clientset, _ *kubefake.Clientset) {
		client.PrependReactor("patch", "pipelines", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewUnauthorized("the server has asked for the client to provide credentials")
		})
	}
	for _, tc := range []struct {
		name           string
		setup          func(*fake.Clientset, *kubefake.Clientset)
		method, target string
		want           int
		wantMessage    string
	}{
		{"retry forbidden", forbidden("patch"), http.MethodPost, "/api/pipelines/ops/failed/retry", http.StatusForbidden,
			`User "bob" cannot patch resource "pipelines"`},
		{"suspend forbidden", forbidden("patch"), http.MethodPost, "/api/pipelines/ops/failed/suspend", http.StatusForbidden,
			`cannot patch`},
		{"delete forbidden", forbidden("delete"), http.MethodDelete, "/api/pipelines/ops/failed", http.StatusForbidden,
			`cannot delete`},
		{"delete conflict", conflict, http.MethodDelete, "/api/pipelines/ops/failed", http.StatusConflict, "has been modified"},
		{"expired credentials are not the dashboard's 401", unauthorized, http.MethodPost, "/api/pipelines/ops/failed/resume",
			http.StatusBadGateway, "provide credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{
				objects: []runtime.Object{pipeline("ops", "failed", v1alpha1.PipelineFailed, 0)},
				setup:   tc.setup,
			})
			rec := f.serve(request(tc.method, tc.target, nil))
			assert.Equal(t, tc.want, rec.Code, rec.Body.String())
			assert.Contains(t, errorOf(t, rec), tc.wantMessage)
		})
	}
}

// TestTriggerPauseAndResume: the dashboard pauses and resumes a trigger in the user's name
// (their credentials say who, a SelfSubjectReview), one merge patch each.
func TestTriggerPauseAndResume(t *testing.T) {
	trig := &v1alpha1.PipelineTrigger{ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: "ops"}}
	for _, tc := range []struct {
		name, target, body string
		wantStatus         int
		wantMessage        string
		check              func(t *testing.T, patch map[string]any)
	}{
		{"pause, with a reason", "/api/triggers/ops/retire/pause", `{"reason":"INC-42"}`, http.StatusOK, "trigger ops/retire paused by alice",
			func(t *testing.T, patch map[string]any) {
				assert.Equal(t, map[string]any{"spec": map[string]any{"pause": map[string]any{"by": "alice", "reason": "INC-42"}}}, patch)
			}},
		{"resume", "/api/triggers/ops/retire/resume", "", http.StatusOK, "trigger ops/retire resumed by alice",
			func(t *testing.T, patch map[string]any) {
				spec := patch["spec"].(map[string]any)
				assert.Nil(t, spec["pause"], "the pause is lifted")
				assert.Equal(t, "alice", spec["resume"].(map[string]any)["by"])
			}},
		{"a field it does not know", "/api/triggers/ops/retire/pause", `{"by":"mallory"}`, http.StatusBadRequest, "unknown field", nil},
		{"an absent trigger", "/api/triggers/ops/absent/pause", "", http.StatusNotFound, "pause trigger ops/absent", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{objects: []runtime.Object{trig}})
			f.kube.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
					UserInfo: authenticationv1.UserInfo{Username: "alice"}}}, nil
			})
			// The fake's field tracking knows no schema of ours: apply the merge patch as
			// the API server would, onto the stored trigger.
			f.client.PrependReactor("patch", "pipelinetriggers", func(action k8stesting.Action) (bool, runtime.Object, error) {
				a := action.(k8stesting.PatchAction)
				if a.GetName() != trig.Name {
					return true, nil, apierrors.NewNotFound(v1alpha1.Resource("pipelinetriggers"), a.GetName())
				}
				patched := trig.DeepCopy()
				return true, patched, json.Unmarshal(a.GetPatch(), patched)
			})
			f.client.ClearActions()
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req := request(http.MethodPost, tc.target, body)
			req.Header.Set("Origin", "http://"+testHost)
			rec := f.serve(req)
			require.Equal(t, tc.wantStatus, rec.Code, rec.Body.String())
			if rec.Code < 300 {
				assert.Contains(t, decode[actionResult](t, rec).Message, tc.wantMessage)
			} else {
				assert.Contains(t, errorOf(t, rec), tc.wantMessage)
			}
			if tc.check == nil {
				return
			}
			w := writes(f.client)
			require.Len(t, w, 1)
			a, ok := w[0].(k8stesting.PatchAction)
			require.True(t, ok)
			var patch map[string]any
			require.NoError(t, json.Unmarshal(a.GetPatch(), &patch))
			tc.check(t, patch)
		})
	}
}
