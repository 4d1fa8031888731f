package dashboard

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

func TestToken(t *testing.T) {
	f := newFixture(t, fixtureOptions{objects: []runtime.Object{pipeline("demo", "a", v1alpha1.PipelineRunning, 0)}})
	withHeader := func(v string) func(*http.Request) {
		return func(r *http.Request) {
			if v == "" {
				r.Header.Del(TokenHeader)
			} else {
				r.Header.Set(TokenHeader, v)
			}
		}
	}
	// A stream whose client has gone ends at once: the recorder can take it.
	gone := func(r *http.Request) *http.Request {
		ctx, cancel := context.WithCancel(r.Context())
		cancel()
		return r.WithContext(ctx)
	}
	for _, tc := range []struct {
		name, method, target string
		header               string
		wantStatus           int
		wantBody             string
	}{
		{"api with the header", http.MethodGet, "/api/pipelines", testToken, http.StatusOK, `"name":"a"`},
		{"api without a token", http.MethodGet, "/api/pipelines", "", http.StatusUnauthorized, "missing X-Stepwise-Token"},
		{"api with another token", http.MethodGet, "/api/pipelines", "wrong-token-0123456789", http.StatusForbidden, "wrong dashboard token"},
		{"api with a prefix of the token", http.MethodGet, "/api/pipelines", testToken[:10], http.StatusForbidden, "wrong dashboard token"},
		{"api takes no token in the URL", http.MethodGet, "/api/pipelines?token=" + testToken, "", http.StatusUnauthorized, "missing"},
		{"action without a token", http.MethodPost, "/api/pipelines/demo/a/suspend", "", http.StatusUnauthorized, "missing"},
		{"action takes no token in the URL", http.MethodDelete, "/api/pipelines/demo/a?token=" + testToken, "", http.StatusUnauthorized, "missing"},
		{"events with the URL token", http.MethodGet, "/api/events?token=" + testToken, "", http.StatusOK, ": connected"},
		{"events without a token", http.MethodGet, "/api/events", "", http.StatusUnauthorized, "missing"},
		{"events with another URL token", http.MethodGet, "/api/events?token=nope", "", http.StatusForbidden, "wrong"},
		{"page with the URL token", http.MethodGet, "/?token=" + testToken, "", http.StatusOK, "<title>Stepwise</title>"},
		{"page without a token", http.MethodGet, "/", "", http.StatusForbidden, "Open the URL the command printed"},
		{"page with another token", http.MethodGet, "/?token=nope", "", http.StatusForbidden, "Open the URL"},
		{"page ignores the header", http.MethodGet, "/", testToken, http.StatusForbidden, "Open the URL"},
		{"static files need no token", http.MethodGet, "/static/app.js", "", http.StatusOK, "console.log"},
		{"static files in folders", http.MethodGet, "/static/js/live.js", "", http.StatusOK, "export"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := request(tc.method, tc.target, nil)
			withHeader(tc.header)(req)
			if strings.HasPrefix(tc.target, "/api/events") {
				req = gone(req)
			}
			rec := f.serve(req)
			assert.Equal(t, tc.wantStatus, rec.Code, rec.Body.String())
			assert.Contains(t, rec.Body.String(), tc.wantBody)
			assert.NotContains(t, rec.Body.String(), testToken, "the token is never echoed")
		})
	}
}

func TestStatic(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	for _, tc := range []struct {
		target      string
		wantStatus  int
		contentType string
	}{
		{"/static/app.js", http.StatusOK, "text/javascript; charset=utf-8"},
		{"/static/app.css", http.StatusOK, "text/css; charset=utf-8"},
		{"/static/", http.StatusNotFound, ""},
		{"/static/js/", http.StatusNotFound, ""},
		{"/static/js", http.StatusNotFound, ""},
		{"/static/missing.js", http.StatusNotFound, ""},
		{"/index.html", http.StatusNotFound, ""},
	} {
		t.Run(tc.target, func(t *testing.T) {
			rec := f.serve(request(http.MethodGet, tc.target, nil))
			assert.Equal(t, tc.wantStatus, rec.Code)
			if tc.contentType != "" {
				assert.Equal(t, tc.contentType, rec.Header().Get("Content-Type"))
			}
		})
	}
}

func TestHost(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	for _, tc := range []struct {
		host string
		want int
	}{
		{"127.0.0.1:8089", http.StatusOK},
		{"localhost:8089", http.StatusOK},
		{"LocalHost:8089", http.StatusOK},
		{"[::1]:8089", http.StatusOK},
		{"evil.example:8089", http.StatusForbidden},     // DNS rebinding
		{"127.0.0.1.nip.io:8089", http.StatusForbidden}, // a name that resolves to loopback
		{"localhost.evil.example:8089", http.StatusForbidden},
		{"127.0.0.1:9999", http.StatusForbidden}, // another port
		{"127.0.0.1", http.StatusForbidden},      // port 80
		{"0.0.0.0:8089", http.StatusForbidden},
		{"", http.StatusForbidden},
	} {
		t.Run(tc.host, func(t *testing.T) {
			req := request(http.MethodGet, "/api/templates", nil)
			req.Host = tc.host
			rec := f.serve(req)
			assert.Equal(t, tc.want, rec.Code, rec.Body.String())
			if tc.want == http.StatusForbidden {
				assert.Contains(t, errorOf(t, rec), "loopback")
			}
		})
	}
	t.Run("a request that did not come through a listener", func(t *testing.T) {
		req := request(http.MethodGet, "/api/templates", nil)
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, net.Addr(nil)))
		assert.Equal(t, http.StatusForbidden, f.serve(req).Code)
	})
	t.Run("the page refuses a foreign Host too, in text", func(t *testing.T) {
		req := request(http.MethodGet, "/?token="+testToken, nil)
		req.Host = "evil.example:8089"
		rec := f.serve(req)
		assert.Equal(t, http.StatusForbidden, rec.Code)
		assert.Contains(t, rec.Header().Get("Content-Type"), "text/plain")
	})
}

func TestOrigin(t *testing.T) {
	f := newFixture(t, fixtureOptions{objects: []runtime.Object{pipeline("demo", "a", v1alpha1.PipelineRunning, 0)}})
	for _, tc := range []struct {
		name, origin, fetchSite string
		want                    int
	}{
		{"no Origin (curl)", "", "", http.StatusOK},
		{"own origin", "http://127.0.0.1:8089", "same-origin", http.StatusOK},
		{"own origin by another loopback name", "http://localhost:8089", "", http.StatusForbidden},
		{"another site", "https://evil.example", "cross-site", http.StatusForbidden},
		{"another loopback port", "http://127.0.0.1:3000", "same-site", http.StatusForbidden},
		{"an opaque origin", "null", "", http.StatusForbidden},
		{"a browser that says cross-site without Origin", "", "cross-site", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := request(http.MethodPost, "/api/pipelines/demo/a/suspend", nil)
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			if tc.fetchSite != "" {
				req.Header.Set("Sec-Fetch-Site", tc.fetchSite)
			}
			rec := f.serve(req)
			assert.Equal(t, tc.want, rec.Code, rec.Body.String())
		})
	}
	t.Run("reads are not held to it", func(t *testing.T) {
		req := request(http.MethodGet, "/api/pipelines", nil)
		req.Header.Set("Origin", "https://evil.example")
		assert.Equal(t, http.StatusOK, f.serve(req).Code)
	})
}

func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	for _, target := range []string{"/api/pipelines", "/?token=" + testToken, "/", "/static/app.js", "/nothing"} {
		t.Run(target, func(t *testing.T) {
			h := f.get(target).Header()
			assert.Equal(t, "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
				h.Get("Content-Security-Policy"))
			assert.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
			assert.Equal(t, "no-referrer", h.Get("Referrer-Policy"))
			if strings.HasPrefix(target, "/api/") {
				assert.Equal(t, "no-store", h.Get("Cache-Control"))
				assert.Equal(t, "application/json; charset=utf-8", h.Get("Content-Type"))
			}
		})
	}
}

func TestNewToken(t *testing.T) {
	a, err := NewToken()
	require.NoError(t, err)
	b, err := NewToken()
	require.NoError(t, err)
	assert.Len(t, a, 43, "32 bytes, base64url without padding")
	assert.NotEqual(t, a, b)
	assert.NotContains(t, a, "=")
	assert.NotContains(t, a, "+")
	assert.NotContains(t, a, "/")
}

func TestListenLoopback(t *testing.T) {
	l, err := ListenLoopback(0)
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	addr, ok := l.Addr().(*net.TCPAddr)
	require.True(t, ok)
	assert.True(t, addr.IP.IsLoopback())
	assert.NotZero(t, addr.Port)

	_, err = ListenLoopback(addr.Port)
	assert.Error(t, err, "the port is taken")
	_, err = ListenLoopback(70000)
	assert.Error(t, err)
}

func TestNewRefusesAWeakToken(t *testing.T) {
	_, err := New(context.Background(), Config{Stepwise: nil})
	assert.Error(t, err)
	f := newFixture(t, fixtureOptions{})
	_, err = New(context.Background(), Config{Stepwise: f.client, Kube: f.kube, Token: "short"})
	assert.ErrorContains(t, err, "at least 16")
}

// TestReloadIsLetInByTheCookie: the page opened with the token sets a cookie (HttpOnly,
// SameSite=Strict) that lets a reload without the token in; the API does not take it.
func TestReloadIsLetInByTheCookie(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	page := request(http.MethodGet, "/?token="+testToken, nil)
	page.Header.Del(TokenHeader)
	open := f.serve(page)
	require.Equal(t, http.StatusOK, open.Code)
	cookies := open.Result().Cookies()
	require.Len(t, cookies, 1)
	c := cookies[0]
	assert.True(t, c.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, c.SameSite)
	// Browsers send a cookie of 127.0.0.1 to every port of it: a page another local user
	// serves on any loopback port receives it. It must not be the API token.
	assert.NotContains(t, c.Value, testToken, "the cookie carries the API token")
	api := request(http.MethodGet, "/api/pipelines", nil)
	api.Header.Set(TokenHeader, c.Value)
	assert.Equal(t, http.StatusForbidden, f.serve(api).Code, "the cookie's value opens no API: a wrong token")

	withCookie := func(target string, cookie *http.Cookie) *httptest.ResponseRecorder {
		req := request(http.MethodGet, target, nil)
		req.Header.Del(TokenHeader)
		req.AddCookie(cookie)
		return f.serve(req)
	}
	assert.Equal(t, http.StatusOK, withCookie("/", c).Code)
	assert.Equal(t, http.StatusForbidden, withCookie("/", &http.Cookie{Name: c.Name, Value: "other"}).Code)
	assert.Equal(t, http.StatusUnauthorized, withCookie("/api/pipelines", c).Code, "the API takes the token from its header only")
}
