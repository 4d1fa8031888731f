package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// loopbackService is a service a tenant must not reach: it answers with a secret.
func loopbackService(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"db_password":"s3cret"}`)
	})) // listens on 127.0.0.1
	t.Cleanup(s.Close)
	return s
}

func get(t *testing.T, client *http.Client, target string) (string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, target, nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

func TestTransport(t *testing.T) {
	secret := loopbackService(t)
	port := secret.Listener.Addr().(*net.TCPAddr).Port
	tests := []struct {
		name        string
		policy      *Policy
		target      string
		wantRefused string // the refused address; empty: the call succeeds
	}{
		{name: "loopback refused", policy: New(), target: secret.URL, wantRefused: "127.0.0.1"},
		{name: "loopback by name refused after DNS", policy: New(), target: "http://localhost:" + strconv.Itoa(port), wantRefused: "127.0.0.1"},
		{name: "loopback allowed with 127.0.0.0/8", policy: New(netip.MustParsePrefix("127.0.0.0/8")), target: secret.URL},
		{name: "another allowed range does not help", policy: New(netip.MustParsePrefix("10.0.0.0/8")), target: secret.URL, wantRefused: "127.0.0.1"},
		{name: "metadata service refused", policy: New(netip.MustParsePrefix("127.0.0.0/8")), target: "http://169.254.169.254/latest/meta-data/", wantRefused: "169.254.169.254"},
		{name: "private address refused", policy: New(), target: "http://10.0.0.1:9/", wantRefused: "10.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &http.Client{Transport: tt.policy.Transport(nil)}
			defer client.CloseIdleConnections()
			body, err := get(t, client, tt.target)
			if tt.wantRefused == "" {
				require.NoError(t, err)
				assert.Equal(t, `{"db_password":"s3cret"}`, body)
				return
			}
			var refused *RefusedError
			require.ErrorAs(t, err, &refused)
			assert.Equal(t, tt.wantRefused, refused.Addr.String())
			assert.Empty(t, body)
		})
	}
}

func TestTransportRefusesARedirectToARefusedAddress(t *testing.T) {
	secret := loopbackService(t)
	// The allowed server (127.0.0.1 only) redirects to the secret service by another
	// loopback address, and to the metadata service.
	for _, location := range []string{
		"http://127.0.0.2:" + strconv.Itoa(secret.Listener.Addr().(*net.TCPAddr).Port) + "/",
		"http://169.254.169.254/latest/meta-data/iam/security-credentials/",
	} {
		t.Run(location, func(t *testing.T) {
			redirector := httptest.NewServer(http.RedirectHandler(location, http.StatusFound))
			defer redirector.Close()
			client := &http.Client{Transport: New(netip.MustParsePrefix("127.0.0.1/32")).Transport(nil)}
			defer client.CloseIdleConnections()

			_, err := get(t, client, redirector.URL)
			var refused *RefusedError
			require.ErrorAs(t, err, &refused, "the redirect is followed and its address refused")
			assert.NotEqual(t, "127.0.0.1", refused.Addr.String())
		})
	}
}

func TestTransportIgnoresTheBaseProxyAndDialers(t *testing.T) {
	secret := loopbackService(t)
	// A proxy that would fetch anything for the plugin.
	proxied := 0
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied++
		_, _ = io.WriteString(w, "via the proxy")
	}))
	defer proxy.Close()
	proxyURL, err := url.Parse(proxy.URL)
	require.NoError(t, err)
	unchecked := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	base := &http.Transport{
		Proxy:          http.ProxyURL(proxyURL),
		DialContext:    unchecked,
		DialTLSContext: unchecked,
	}

	tr := New().Transport(base)
	assert.Nil(t, tr.Proxy)
	assert.Nil(t, tr.DialTLSContext)
	assert.NotNil(t, base.Proxy, "base is not modified")
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()
	_, err = get(t, client, secret.URL)
	var refused *RefusedError
	require.ErrorAs(t, err, &refused)
	assert.Zero(t, proxied)
}

func TestTransportKeepsTheBaseTLSConfig(t *testing.T) {
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer server.Close()
	base := server.Client().Transport.(*http.Transport) // trusts the server's certificate
	client := &http.Client{Transport: New(netip.MustParsePrefix("127.0.0.0/8")).Transport(base)}
	defer client.CloseIdleConnections()
	body, err := get(t, client, server.URL)
	require.NoError(t, err)
	assert.Equal(t, "ok", body)

	// With another policy the handshake never starts.
	client = &http.Client{Transport: New().Transport(base)}
	_, err = get(t, client, server.URL)
	var refused *RefusedError
	require.ErrorAs(t, err, &refused)
	var certErr *tls.CertificateVerificationError
	assert.False(t, errors.As(err, &certErr))
}

func TestDialerRefusesAtConnect(t *testing.T) {
	secret := loopbackService(t)
	_, err := New().Dialer().DialContext(t.Context(), "tcp", secret.Listener.Addr().String())
	var refused *RefusedError
	require.ErrorAs(t, err, &refused)

	conn, err := New(netip.MustParsePrefix("127.0.0.1/32")).Dialer().DialContext(t.Context(), "tcp", secret.Listener.Addr().String())
	require.NoError(t, err)
	require.NoError(t, conn.Close())
}

func TestControlRefusesWhatIsNotAnIPAddress(t *testing.T) {
	err := New().Control("unix", "/var/run/docker.sock", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not an IP address")
	assert.NoError(t, New().Control("tcp4", "8.8.8.8:443", nil))
	assert.Error(t, New().Control("tcp6", "[fe80::1%eth0]:80", nil))
}

func TestAsPermanent(t *testing.T) {
	secret := loopbackService(t)
	client := &http.Client{Transport: New().Transport(nil)}
	target := "http://tenant:Sup3rS3cret@" + secret.Listener.Addr().String() + "/v3?token=abc123"
	_, err := get(t, client, target)
	require.Error(t, err)

	perm := AsPermanent(err)
	require.Error(t, perm)
	var e *contract.Error
	require.ErrorAs(t, perm, &e)
	assert.Equal(t, ReasonEndpointNotAllowed, e.Reason)
	assert.True(t, e.Permanent)
	assert.Contains(t, perm.Error(), "127.0.0.1 is a loopback address")
	for _, secret := range []string{"tenant", "Sup3rS3cret", "abc123", "token"} {
		assert.NotContains(t, perm.Error(), secret)
	}

	assert.NoError(t, AsPermanent(nil))
	assert.NoError(t, AsPermanent(errors.New("connection refused")))
}

// TestControlRefusesAPublicAddressBeforeConnecting checks the address being connected to,
// after DNS resolution: a policy refusing public addresses refuses it there, so that a name
// resolving to one (or rebound to one) is refused as its address is.
func TestControlRefusesAPublicAddressBeforeConnecting(t *testing.T) {
	p := New(netip.MustParsePrefix("127.0.0.0/8")).RefusingPublic()
	var refused *RefusedError
	require.ErrorAs(t, p.Control("tcp4", "8.8.8.8:9090", nil), &refused)
	assert.Equal(t, "a public address", refused.Range)
	require.ErrorAs(t, p.Control("tcp6", "[2606:4700:4700::1111]:443", nil), &refused)
	assert.NoError(t, p.Control("tcp4", "127.0.0.1:9090", nil))

	secret := loopbackService(t)
	port := secret.Listener.Addr().(*net.TCPAddr).Port
	client := &http.Client{Transport: p.Transport(nil)}
	defer client.CloseIdleConnections()
	body, err := get(t, client, "http://localhost:"+strconv.Itoa(port))
	require.NoError(t, err, "a name resolving to an allowed address")
	assert.Equal(t, `{"db_password":"s3cret"}`, body)
}
