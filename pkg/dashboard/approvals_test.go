package dashboard

import (
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
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
)

// awaiting puts step of the pipeline into the wait for approval, with request.
func awaiting(step, request string) func(*v1alpha1.Pipeline) {
	return func(p *v1alpha1.Pipeline) {
		p.Status.CurrentStep = step
		p.Status.Steps = append(p.Status.Steps, v1alpha1.StepStatus{
			Name: step, Phase: v1alpha1.StepAwaitingApproval,
			Approval: &v1alpha1.StepApproval{Request: request, Since: metav1.Time{Time: t0}, Required: 1},
		})
	}
}

// approvalFixture is a dashboard over ops/gated, whose step build waits for approval
// (request r1), ops/running, which waits for nothing, and other/gated, outside a dashboard
// limited to namespace (all namespaces when empty). The user is alice, of group ops. The
// fake API server creates Approvals, naming them from their generateName (its field
// tracking knows no schema of ours); setup's reactors come before.
func approvalFixture(t *testing.T, namespace string, setup func(*fake.Clientset, *kubefake.Clientset)) *fixture {
	t.Helper()
	serve := func(client *fake.Clientset, kube *kubefake.Clientset) {
		client.PrependReactor("create", "approvals", func(action k8stesting.Action) (bool, runtime.Object, error) {
			a := action.(k8stesting.CreateAction).GetObject().(*v1alpha1.Approval).DeepCopy()
			a.Name = a.GenerateName + "x7k2q"
			return true, a, nil
		})
		if setup != nil {
			setup(client, kube)
		}
	}
	f := newFixture(t, fixtureOptions{namespace: namespace, setup: serve, objects: []runtime.Object{
		pipeline("ops", "gated", v1alpha1.PipelineRunning, 0, awaiting("build", "r1")),
		pipeline("ops", "running", v1alpha1.PipelineRunning, 0),
		pipeline("other", "gated", v1alpha1.PipelineRunning, 0, awaiting("build", "r2")),
	}})
	f.kube.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
			UserInfo: authenticationv1.UserInfo{Username: "alice", Groups: []string{"ops", "system:authenticated"}}}}, nil
	})
	f.client.ClearActions()
	return f
}

// postDecision is the request the page makes: same origin, the token, a JSON body.
func postDecision(target, body string) *http.Request {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := request(http.MethodPost, target, r)
	req.Header.Set("Origin", "http://"+testHost)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return req
}

// createdApprovals are the Approvals the dashboard created.
func createdApprovals(t *testing.T, client *fake.Clientset) []*v1alpha1.Approval {
	t.Helper()
	var out []*v1alpha1.Approval
	for _, w := range writes(client) {
		c, ok := w.(k8stesting.CreateAction)
		require.True(t, ok, "only creates: %v", w)
		a, ok := c.GetObject().(*v1alpha1.Approval)
		require.True(t, ok, "only Approvals: %v", c.GetObject())
		assert.Equal(t, c.GetNamespace(), a.Namespace)
		out = append(out, a)
	}
	return out
}

// TestApproveAndReject: the dashboard approves or rejects a step that waits in the user's
// name (a SelfSubjectReview says who), one Approval naming the step's wait; it refuses a
// rejection without a comment, and a step that does not wait.
func TestApproveAndReject(t *testing.T) {
	for _, tc := range []struct {
		name, target, body string
		wantStatus         int
		wantMessage        string
		// wantDecision and wantComment are the Approval made; empty: none.
		wantDecision v1alpha1.ApprovalDecision
		wantComment  string
	}{
		{"approve", "/api/pipelines/ops/gated/approve", `{"step":"build","comment":"looks good"}`,
			http.StatusOK, "approval of step build of pipeline ops/gated by alice recorded", v1alpha1.ApprovalApprove, "looks good"},
		{"approve without a comment", "/api/pipelines/ops/gated/approve", `{"step":"build"}`,
			http.StatusOK, "approval of step build", v1alpha1.ApprovalApprove, ""},
		{"approve the one step that waits", "/api/pipelines/ops/gated/approve", "",
			http.StatusOK, "approval of step build", v1alpha1.ApprovalApprove, ""},
		{"reject, with a comment", "/api/pipelines/ops/gated/reject", `{"step":"build","comment":"  not during the freeze "}`,
			http.StatusOK, "rejection of step build of pipeline ops/gated by alice recorded", v1alpha1.ApprovalReject, "not during the freeze"},
		{"reject without a comment", "/api/pipelines/ops/gated/reject", `{"step":"build"}`,
			http.StatusBadRequest, "a rejection needs a comment", "", ""},
		{"reject with a blank comment", "/api/pipelines/ops/gated/reject", `{"step":"build","comment":" \n\t "}`,
			http.StatusBadRequest, "a rejection needs a comment", "", ""},
		{"reject without a body", "/api/pipelines/ops/gated/reject", "",
			http.StatusBadRequest, "a rejection needs a comment", "", ""},
		{"a comment too long", "/api/pipelines/ops/gated/approve", `{"step":"build","comment":"` + strings.Repeat("x", 1025) + `"}`,
			http.StatusBadRequest, "at most 1024", "", ""},
		{"a huge body", "/api/pipelines/ops/gated/approve", `{"comment":"` + strings.Repeat("x", 8<<10) + `"}`,
			http.StatusBadRequest, "too large", "", ""},
		{"a field it does not know", "/api/pipelines/ops/gated/approve", `{"step":"build","user":"mallory"}`,
			http.StatusBadRequest, "unknown field", "", ""},
		{"a step that does not wait", "/api/pipelines/ops/gated/approve", `{"step":"publish"}`,
			http.StatusConflict, "step publish of pipeline ops/gated does not wait for approval", "", ""},
		{"a pipeline where no step waits", "/api/pipelines/ops/running/approve", "",
			http.StatusConflict, "no step of pipeline ops/running waits for approval", "", ""},
		{"an absent pipeline", "/api/pipelines/ops/absent/reject", `{"comment":"no"}`,
			http.StatusNotFound, `pipelines.stepwise.dev "absent" not found`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := approvalFixture(t, "", nil)
			rec := f.serve(postDecision(tc.target, tc.body))
			require.Equal(t, tc.wantStatus, rec.Code, rec.Body.String())
			if rec.Code < 300 {
				assert.Contains(t, decode[actionResult](t, rec).Message, tc.wantMessage)
			} else {
				assert.Contains(t, errorOf(t, rec), tc.wantMessage)
			}

			made := createdApprovals(t, f.client)
			if tc.wantDecision == "" {
				assert.Empty(t, made)
				return
			}
			require.Len(t, made, 1)
			a := made[0]
			assert.Equal(t, "ops", a.Namespace)
			assert.Equal(t, "gated-build-", a.GenerateName)
			assert.Equal(t, v1alpha1.ApprovalSpec{
				Pipeline: "gated", Step: "build", Request: "r1", Decision: tc.wantDecision, Comment: tc.wantComment,
				User: "alice", Groups: []string{"ops", "system:authenticated"},
			}, a.Spec, "the user the API server authenticated, and the step's wait")
			require.Len(t, a.OwnerReferences, 1, "the Approval goes with its pipeline")
			assert.Equal(t, "Pipeline", a.OwnerReferences[0].Kind)
			assert.Equal(t, "gated", a.OwnerReferences[0].Name)
		})
	}
}

// TestApproveOutsideTheScope: a dashboard limited to a namespace decides nothing in
// another, and asks the API server nothing about it.
func TestApproveOutsideTheScope(t *testing.T) {
	f := approvalFixture(t, "ops", nil)
	for _, target := range []string{"/api/pipelines/other/gated/approve", "/api/pipelines/other/gated/reject"} {
		t.Run(target, func(t *testing.T) {
			rec := f.serve(postDecision(target, `{"step":"build","comment":"yes"}`))
			assert.Equal(t, http.StatusNotFound, rec.Code, rec.Body.String())
			assert.Contains(t, errorOf(t, rec), "outside this dashboard's namespace ops")
		})
	}
	assert.Empty(t, writes(f.client), "no Approval")
	for _, a := range f.kube.Actions() {
		assert.NotEqual(t, "selfsubjectreviews", a.GetResource().Resource, "not even a SelfSubjectReview")
	}

	rec := f.serve(postDecision("/api/pipelines/ops/gated/approve", `{"step":"build"}`))
	assert.Equal(t, http.StatusOK, rec.Code, "its own namespace: %s", rec.Body.String())
}

// TestApproveIsAnAction: the approval routes take POST only, and are held to the same
// checks as the other actions: the token, and no request from another origin or site.
func TestApproveIsAnAction(t *testing.T) {
	for _, tc := range []struct {
		name, method, target string
		header               map[string]string // set on the request; an empty value removes it
		want                 int
		wantMessage          string
	}{
		{"GET approve", http.MethodGet, "/api/pipelines/ops/gated/approve", nil, http.StatusMethodNotAllowed, ""},
		{"PUT reject", http.MethodPut, "/api/pipelines/ops/gated/reject", nil, http.StatusMethodNotAllowed, ""},
		{"DELETE approve", http.MethodDelete, "/api/pipelines/ops/gated/approve", nil, http.StatusMethodNotAllowed, ""},
		{"approve without the token", http.MethodPost, "/api/pipelines/ops/gated/approve",
			map[string]string{TokenHeader: ""}, http.StatusUnauthorized, "missing"},
		{"reject with another token", http.MethodPost, "/api/pipelines/ops/gated/reject",
			map[string]string{TokenHeader: "wrong-token-0123456789"}, http.StatusForbidden, "wrong dashboard token"},
		{"approve from another site", http.MethodPost, "/api/pipelines/ops/gated/approve",
			map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden, "cross-origin"},
		{"reject from another loopback port", http.MethodPost, "/api/pipelines/ops/gated/reject",
			map[string]string{"Origin": "http://127.0.0.1:3000", "Sec-Fetch-Site": "same-site"}, http.StatusForbidden, "cross-origin"},
		{"approve from an opaque origin", http.MethodPost, "/api/pipelines/ops/gated/approve",
			map[string]string{"Origin": "null"}, http.StatusForbidden, "cross-origin"},
		{"a browser that says cross-site without Origin", http.MethodPost, "/api/pipelines/ops/gated/approve",
			map[string]string{"Origin": "", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden, "cross-site"},
		{"approve from a foreign Host (DNS rebinding)", http.MethodPost, "/api/pipelines/ops/gated/approve",
			map[string]string{"Host": "evil.example:8089", "Origin": "http://evil.example:8089"}, http.StatusForbidden, "loopback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := approvalFixture(t, "", nil)
			req := postDecision(tc.target, `{"step":"build","comment":"forged"}`)
			req.Method = tc.method
			for k, v := range tc.header {
				switch {
				case k == "Host":
					req.Host = v
				case v == "":
					req.Header.Del(k)
				default:
					req.Header.Set(k, v)
				}
			}
			rec := f.serve(req)
			assert.Equal(t, tc.want, rec.Code, rec.Body.String())
			if tc.wantMessage != "" {
				assert.Contains(t, errorOf(t, rec), tc.wantMessage)
			}
			assert.Empty(t, writes(f.client), "no Approval")
		})
	}
}

// TestApproveRefusedByTheAPIServer: the install's admission policy refuses an Approval of
// a user without the verb approve; the dashboard passes the refusal on as it came.
func TestApproveRefusedByTheAPIServer(t *testing.T) {
	f := approvalFixture(t, "", func(client *fake.Clientset, _ *kubefake.Clientset) {
		client.PrependReactor("create", "approvals", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(v1alpha1.Resource("approvals"), "",
				errors.New("alice may not approve pipeline ops/gated: that needs the verb approve on pipelines.stepwise.dev"))
		})
	})
	rec := f.serve(postDecision("/api/pipelines/ops/gated/approve", `{"step":"build"}`))
	assert.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
	assert.Contains(t, errorOf(t, rec), "that needs the verb approve")
}
