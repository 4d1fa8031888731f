package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
	"github.com/stepwise-dev/stepwise/pkg/sdk/sdkhttp"
)

// secretPath is the part of a chat webhook's URL that is its credential.
const secretPath = "/services/T0001/B0002/xYzZy5ecr3t"

// receiver records the bodies POSTed to secretPath.
type receiver struct {
	mu     sync.Mutex
	bodies []string
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != secretPath || req.Header.Get("Content-Type") != "application/json" {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.bodies = append(r.bodies, string(b))
	r.mu.Unlock()
}

func newPost(t *testing.T) post {
	t.Setenv(egress.EnvAllowedCIDRs, "127.0.0.0/8")
	return post{client: sdkhttp.Client()}
}

func request(hook sdk.Hook, url string) *sdk.Request {
	req := plugintest.Request(hook, "uid", map[string]string{"urlSecret": "chat", "message": "retiring node-3"})
	req.SecretParams = map[string]map[string][]byte{"urlSecret": {"url": []byte(url + "\n")}}
	req.Secrets = req.SecretParams["urlSecret"]
	return req
}

func TestNotifiesOnCreateAndTeardown(t *testing.T) {
	rec := &receiver{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	c := plugintest.Serve(t, newPost(t))
	for _, hook := range []sdk.Hook{sdk.HookCreate, sdk.HookDelete} {
		res, err := c.Run(t.Context(), "notify.post", hook, request(hook, srv.URL+secretPath+"?token=t0k3n"))
		require.NoError(t, err, hook)
		assert.True(t, res.Done)
		assert.Equal(t, "sent", res.Message)
	}
	assert.Equal(t, []string{`{"text":"retiring node-3"}`, `{"text":"torn down"}`}, rec.bodies)
}

// TestSecretURLNeverLeaks: the plugin returns net/http's *url.Error as it is, which quotes
// the URL kept in the Secret; what leaves the plugin holds no part of it, whether the
// endpoint refuses the connection or the egress policy refuses the address.
func TestSecretURLNeverLeaks(t *testing.T) {
	for name, allowed := range map[string]string{"unreachable": "127.0.0.0/8", "not allowed": ""} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(egress.EnvAllowedCIDRs, allowed)
			c := plugintest.Serve(t, post{client: sdkhttp.Client()})
			url := "http://bot:pa55w0rd@127.0.0.1:1" + secretPath + "?token=t0k3n-s3cr3t"
			_, err := c.Run(t.Context(), "notify.post", sdk.HookCreate, request(sdk.HookCreate, url))
			require.Error(t, err)
			for _, part := range []string{url, secretPath, "xYzZy5ecr3t", "t0k3n-s3cr3t", "pa55w0rd"} {
				assert.NotContains(t, err.Error(), part)
			}
			assert.Contains(t, err.Error(), contract.Redacted)
		})
	}
}

func TestNotifyConformance(t *testing.T) {
	srv := httptest.NewServer(&receiver{})
	t.Cleanup(srv.Close)
	plugintest.Conformance(t, newPost(t), map[string]string{"urlSecret": "chat", "message": "hello"},
		plugintest.WithSecretParam("urlSecret", map[string][]byte{"url": []byte(srv.URL + secretPath + "?token=t0k3n")}))
}

func TestNotifyRefusesARejectedPost(t *testing.T) {
	srv := httptest.NewServer(&receiver{})
	t.Cleanup(srv.Close)
	c := plugintest.Serve(t, newPost(t))
	_, err := c.Run(t.Context(), "notify.post", sdk.HookCreate, request(sdk.HookCreate, srv.URL+"/wrong"))
	require.Error(t, err)
	assert.True(t, sdk.IsPermanent(err))
	assert.False(t, strings.Contains(err.Error(), srv.URL), "the URL is not in the message")
}
