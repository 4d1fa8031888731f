package impersonate

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/internal/apitest"
)

// logAtVerbosity10 sends klog's output to a buffer at -v=10 until the test ends.
func logAtVerbosity10(t *testing.T) *apitest.SyncBuffer {
	t.Helper()
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	require.NoError(t, fs.Set("v", "10"))
	require.NoError(t, fs.Set("logtostderr", "false"))
	require.NoError(t, fs.Set("alsologtostderr", "false"))
	var buf apitest.SyncBuffer
	klog.SetOutput(&buf)
	t.Cleanup(func() {
		klog.Flush()
		_ = fs.Set("v", "0")
		_ = fs.Set("logtostderr", "true")
		klog.SetOutput(os.Stderr)
	})
	return &buf
}

// TestSecretValuesAreNotLoggedAtAnyVerbosity: at -v=10, where client-go's REST client
// logs whole response bodies, the Secret reader of a client set reads a Secret (and a
// missing one, as NotFound) without its value reaching the log; the same read through the
// typed client does put it there, which is why the engine does not use it.
func TestSecretValuesAreNotLoggedAtAnyVerbosity(t *testing.T) {
	const value = "s3cr3t-value-not-for-logs"
	encoded := "czNjcjN0LXZhbHVlLW5vdC1mb3ItbG9ncw==" // base64 of value
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/api/v1/namespaces/tenant/secrets/token" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"secrets \"other\" not found"}`)
			return
		}
		_, _ = fmt.Fprintf(w, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"token","namespace":"tenant"},"data":{"token":%q}}`, encoded)
	}))
	t.Cleanup(server.Close)
	buf := logAtVerbosity10(t)

	p := NewClientProvider(&rest.Config{Host: server.URL, BearerToken: "operator-token"}, nil)
	c, err := p.ForServiceAccount("tenant", "runner")
	require.NoError(t, err)
	require.NotNil(t, c.Secrets)
	s, err := c.Secrets.GetSecret(context.Background(), "tenant", "token")
	require.NoError(t, err)
	assert.Equal(t, value, string(s.Data["token"]))
	_, err = c.Secrets.GetSecret(context.Background(), "tenant", "other")
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
	klog.Flush()
	assert.NotContains(t, buf.String(), encoded)
	assert.NotContains(t, buf.String(), value)

	_, err = c.Kube.CoreV1().Secrets("tenant").Get(context.Background(), "token", metav1.GetOptions{})
	require.NoError(t, err)
	klog.Flush()
	assert.Contains(t, buf.String(), encoded, "the typed client logs the body at -v=10: the capture works")
}
