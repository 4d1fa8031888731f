package dashboard

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
