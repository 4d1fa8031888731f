package delegatedauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/klog/v2"
)

// tokens authenticates the bearer tokens it knows as their users.
type tokens map[string]string

func (t tokens) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	h := r.Header.Get("Authorization")
	if h == "Bearer broken" {
		return nil, false, errors.New("TokenReview failed: connection refused")
	}
	name, ok := t[h]
	if !ok {
		return nil, false, nil
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: name}}, true, nil
}

// grants allows a user a verb on a path; it records what it was asked.
type grants struct {
	allowed map[string]bool // "user verb path"
	asked   []authorizer.AttributesRecord
}

func (g *grants) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	g.asked = append(g.asked, a.(authorizer.AttributesRecord))
	if a.GetUser().GetName() == "flaky" {
		return authorizer.DecisionNoOpinion, "", errors.New("SubjectAccessReview failed: secret detail")
	}
	if g.allowed[a.GetUser().GetName()+" "+a.GetVerb()+" "+a.GetPath()] {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "no RBAC policy matched: secret detail", nil
}

func TestFilterServesOnlyWhomTheAPIServerAllows(t *testing.T) {
	authn := tokens{"Bearer prom": "system:serviceaccount:monitoring:prometheus", "Bearer dev": "dev", "Bearer flaky": "flaky"}
	cases := []struct {
		name      string
		method    string
		path      string
		token     string
		want      int
		wantAsked *authorizer.AttributesRecord
	}{
		{name: "no token", method: http.MethodGet, path: "/metrics", want: http.StatusUnauthorized},
		{name: "a token the API server does not know", method: http.MethodGet, path: "/metrics", token: "Bearer forged", want: http.StatusUnauthorized},
		{name: "the TokenReview fails", method: http.MethodGet, path: "/metrics", token: "Bearer broken", want: http.StatusUnauthorized},
		{name: "allowed to get /metrics", method: http.MethodGet, path: "/metrics", token: "Bearer prom", want: http.StatusOK,
			wantAsked: &authorizer.AttributesRecord{Verb: "get", Path: "/metrics"}},
		{name: "HEAD is get", method: http.MethodHead, path: "/metrics", token: "Bearer prom", want: http.StatusOK,
			wantAsked: &authorizer.AttributesRecord{Verb: "get", Path: "/metrics"}},
		{name: "allowed /metrics, not the profiles", method: http.MethodGet, path: "/debug/pprof/heap", token: "Bearer prom", want: http.StatusForbidden,
			wantAsked: &authorizer.AttributesRecord{Verb: "get", Path: "/debug/pprof/heap"}},
		{name: "POST is post", method: http.MethodPost, path: "/metrics", token: "Bearer prom", want: http.StatusForbidden,
			wantAsked: &authorizer.AttributesRecord{Verb: "post", Path: "/metrics"}},
		{name: "authenticated, not allowed", method: http.MethodGet, path: "/metrics", token: "Bearer dev", want: http.StatusForbidden,
			wantAsked: &authorizer.AttributesRecord{Verb: "get", Path: "/metrics"}},
		{name: "the SubjectAccessReview fails", method: http.MethodGet, path: "/metrics", token: "Bearer flaky", want: http.StatusForbidden,
			wantAsked: &authorizer.AttributesRecord{Verb: "get", Path: "/metrics"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			authz := &grants{allowed: map[string]bool{"system:serviceaccount:monitoring:prometheus get /metrics": true}}
			served := false
			h := newFilter(authn, authz, klog.Background()).Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				served = true
				_, _ = w.Write([]byte("stepwise_pipelines 1\n"))
			}))
			req := httptest.NewRequest(tc.method, tc.path, nil)
			if tc.token != "" {
				req.Header.Set("Authorization", tc.token)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			assert.Equal(t, tc.want, rec.Code)
			assert.Equal(t, tc.want == http.StatusOK, served, "the endpoint is served only when allowed")
			assert.NotContains(t, rec.Body.String(), "secret detail", "why a review failed is not the caller's to read")
			if tc.want != http.StatusOK {
				assert.NotContains(t, rec.Body.String(), "stepwise_pipelines")
			}
			if tc.wantAsked == nil {
				assert.Empty(t, authz.asked, "no authorization without an identity")
				return
			}
			if assert.Len(t, authz.asked, 1) {
				got := authz.asked[0]
				assert.Equal(t, tc.wantAsked.Verb, got.Verb)
				assert.Equal(t, tc.wantAsked.Path, got.Path)
				assert.False(t, got.ResourceRequest, "a path, not a resource")
				assert.Equal(t, authn[tc.token], got.User.GetName())
			}
		})
	}
}
