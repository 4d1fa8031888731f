package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

func TestLoopbackVCenterIsRefusedWithoutAllowance(t *testing.T) {
	sim := startVCSim(t)
	vm := sim.vm(t, "DC0_H0_VM0")
	tests := []struct {
		name    string
		secrets func() map[string][]byte
	}{
		{name: "https with its CA", secrets: sim.secrets},
		{name: "insecure", secrets: func() map[string][]byte {
			s := sim.secrets()
			delete(s, keyCA)
			s[keyInsecure] = []byte("true")
			return s
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := serve(t, newTestExecutorAllowing()).Run(t, sdk.HookCreate,
				request(withParams(nil, paramProviderID, "vsphere://"+vm.UUID, paramNode, vm.Name), tt.secrets(), nil))
			plugintest.AssertEndpointRefused(t, err, "127.0.0.1 is a loopback address")
			assert.True(t, sim.exists(t, vm))
			assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, sim.vm(t, vm.Name).PowerState)
		})
	}
}

// The url key may carry credentials in its user info or query: no message shows them.
func TestMessagesShowTheVCenterURLWithoutCredentials(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := closed.Addr().String()
	require.NoError(t, closed.Close())
	tests := []struct {
		name     string
		url      string
		executor *terminateVM
		want     plugintest.Outcome
	}{
		{name: "unreachable", url: plugintest.WithCredentials("https://" + addr + "/sdk"), executor: newTestExecutor(),
			want: plugintest.Outcome{Reason: "VSphereUnavailable"}},
		{name: "refused", url: plugintest.WithCredentials("https://" + addr + "/sdk"), executor: newTestExecutorAllowing(),
			want: plugintest.Outcome{Reason: "EndpointNotAllowed", Permanent: true}},
		{name: "not a URL", url: plugintest.WithCredentials("ftp://" + addr + "/sdk"), executor: newTestExecutor(),
			want: plugintest.Outcome{Reason: "InvalidParameter", Permanent: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secrets := map[string][]byte{keyURL: []byte(tt.url), keyUsername: []byte(simUser), keyPassword: []byte(simPassword)}
			_, err := serve(t, tt.executor).Run(t, sdk.HookCreate, request(withParams(nil, paramNode, "k8s-node-3"), secrets, nil))
			plugintest.AssertOutcome(t, tt.want, sdk.Result{}, err)
			require.Error(t, err)
			plugintest.AssertNoSecret(t, err.Error(), append(plugintest.URLSecrets(), simPassword)...)
			if tt.want.Reason != "InvalidParameter" {
				assert.True(t, strings.Contains(err.Error(), addr), "the message says where: %v", err)
			}
		})
	}
}

// credentialsFor is the data of a credentials Secret for a server of the tests on loopback,
// trusting its certificate, or any without one.
func credentialsFor(url string, cert []byte) map[string][]byte {
	s := map[string][]byte{keyURL: []byte(url), keyUsername: []byte(simUser), keyPassword: []byte(simPassword)}
	if cert == nil {
		s[keyInsecure] = []byte("true")
	} else {
		s[keyCA] = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert})
	}
	return s
}

// TestAVCenterThatNeverAnswersFailsWithinTheRequestBound: a tenant's Secret may point the
// plugin, which every tenant shares, at a server that accepts the connection and never
// answers; each request is bounded (requestTimeout, short here), so the hook fails soon
// with a retryable error saying so, rather than holding the engine's worker until the
// step's deadline.
func TestAVCenterThatNeverAnswersFailsWithinTheRequestBound(t *testing.T) {
	const bound = 300 * time.Millisecond
	// never answers until hung is closed, with prefix, the start of an answer, if any.
	never := func(hung <-chan struct{}, prefix string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if prefix != "" {
				w.Header().Set("Content-Type", "text/xml")
				_, _ = w.Write([]byte(prefix))
				w.(http.Flusher).Flush()
			}
			<-hung
		}
	}
	tlsServer := func(t *testing.T, h http.Handler) (string, []byte) {
		srv := httptest.NewTLSServer(h)
		t.Cleanup(srv.Close)
		return srv.URL + "/sdk", srv.Certificate().Raw
	}

	tests := []struct {
		name string
		// server starts a server that holds every connection until hung is closed.
		server func(t *testing.T, hung <-chan struct{}) (url string, cert []byte)
	}{
		{name: "accepts the connection, no TLS handshake", server: func(t *testing.T, hung <-chan struct{}) (string, []byte) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					go func() {
						<-hung
						_ = c.Close()
					}()
				}
			}()
			return "https://" + l.Addr().String() + "/sdk", nil
		}},
		{name: "TLS, no answer", server: func(t *testing.T, hung <-chan struct{}) (string, []byte) {
			return tlsServer(t, never(hung, ""))
		}},
		{name: "the answer's start, never its end", server: func(t *testing.T, hung <-chan struct{}) (string, []byte) {
			return tlsServer(t, never(hung, `<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body>`))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hung := make(chan struct{})
			url, cert := tt.server(t, hung)
			// Before the server closes, which waits for its handlers.
			t.Cleanup(func() { close(hung) })
			e := newTestExecutor()
			e.requestTimeout = bound
			c := serve(t, e)

			// The step's deadline, far longer than the bound.
			ctx, cancel := context.WithTimeout(t.Context(), 20*bound)
			defer cancel()
			start := time.Now()
			_, err := c.Client.Run(ctx, executorName, sdk.HookCreate,
				request(withParams(nil, paramNode, "k8s-node-3"), credentialsFor(url, cert), nil))
			elapsed := time.Since(start)
			plugintest.AssertOutcome(t, plugintest.Outcome{Reason: "VSphereUnavailable"}, sdk.Result{}, err)
			require.Error(t, err)
			assert.Contains(t, err.Error(), strings.TrimSuffix(strings.TrimPrefix(url, "https://"), "/sdk"), "names the vCenter")
			assert.Contains(t, err.Error(), "did not answer within 300ms")
			assert.Less(t, elapsed, 10*bound, "failed within about the bound")
		})
	}
}

// TestAGzipBombFailsItsStep: a tenant's vCenter answering some 64 KiB of gzip that inflate
// to 64 MiB fails the step with a clear error after reading the bound (Go's transport
// inflates gzip transparently), rather than inflate it all in the plugin every tenant
// shares.
func TestAGzipBombFailsItsStep(t *testing.T) {
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	require.NoError(t, err)
	_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body><RetrieveServiceContentResponse xmlns="urn:vim25"><returnval><about><fullName>`))
	const inflated = 64 << 20
	padding := bytes.Repeat([]byte(" "), 1<<20)
	for range inflated >> 20 {
		_, _ = w.Write(padding)
	}
	require.NoError(t, w.Close())
	require.Less(t, buf.Len(), 128<<10, "small on the wire")
	bomb := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/xml")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(buf.Bytes())
	}))
	defer bomb.Close()
	c := serve(t, newTestExecutor())
	req := request(withParams(nil, paramNode, "k8s-node-3"), credentialsFor(bomb.URL+"/sdk", bomb.Certificate().Raw), nil)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = c.Run(t, sdk.HookCreate, req)
	runtime.ReadMemStats(&after)
	// Permanent: the same request gets the same answer.
	plugintest.AssertOutcome(t, plugintest.Outcome{Reason: "ResponseTooLarge", Permanent: true}, sdk.Result{}, err)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "connect to vCenter "+bomb.Listener.Addr().String())
	assert.Contains(t, err.Error(), "more than 8388608 bytes")
	// Read whole, the answer would cost several times what it inflates to (336 MB before
	// the bound); read up to the bound, about 40 MB.
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(inflated), "the answer was not read whole")
}
