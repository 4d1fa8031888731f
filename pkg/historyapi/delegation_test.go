package historyapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	stepwisev1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/archive"
)

// fakeKube is the part of a kube-apiserver an aggregated API server delegates to: the
// extension-apiserver-authentication ConfigMap, TokenReview and SubjectAccessReview.
// RBAC lets reader get and list pipelinerecords in namespace a.
type fakeKube struct {
	cm     *corev1.ConfigMap
	tokens map[string]string // bearer token: user
	stop   chan struct{}     // ends the watches

	mu   sync.Mutex
	sars []string
}

func (f *fakeKube) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const configMaps = "/api/v1/namespaces/kube-system/configmaps"
	switch {
	case r.Method == http.MethodGet && r.URL.Path == configMaps+"/extension-apiserver-authentication":
		writeJSON(w, f.cm)
	case r.Method == http.MethodGet && r.URL.Path == configMaps && r.URL.Query().Get("watch") != "":
		// Nothing changes: a watch that stays open until its client or the test leaves,
		// after the ConfigMap when the client streams the list (sendInitialEvents).
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		if r.URL.Query().Get("sendInitialEvents") == "true" {
			bookmark := &corev1.ConfigMap{
				TypeMeta: f.cm.TypeMeta,
				ObjectMeta: metav1.ObjectMeta{ResourceVersion: f.cm.ResourceVersion,
					Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}},
			}
			enc := json.NewEncoder(w)
			_ = enc.Encode(metav1.WatchEvent{Type: "ADDED", Object: runtime.RawExtension{Object: f.cm}})
			_ = enc.Encode(metav1.WatchEvent{Type: "BOOKMARK", Object: runtime.RawExtension{Object: bookmark}})
		}
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-f.stop:
		}
	case r.Method == http.MethodGet && r.URL.Path == configMaps:
		writeJSON(w, &corev1.ConfigMapList{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"},
			ListMeta: metav1.ListMeta{ResourceVersion: "1"},
			Items:    []corev1.ConfigMap{*f.cm},
		})
	case r.Method == http.MethodPost && r.URL.Path == "/apis/authentication.k8s.io/v1/tokenreviews":
		var tr authenticationv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if name, ok := f.tokens[tr.Spec.Token]; ok {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: name, Groups: []string{"system:authenticated"}}}
		}
		writeJSON(w, &tr)
	case r.Method == http.MethodPost && r.URL.Path == "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		var sar authorizationv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if ra := sar.Spec.ResourceAttributes; ra != nil {
			f.mu.Lock()
			f.sars = append(f.sars, fmt.Sprintf("%s %s %s/%s %s", sar.Spec.User, ra.Verb, ra.Group, ra.Resource, ra.Namespace))
			f.mu.Unlock()
			sar.Status.Allowed = sar.Spec.User == "reader" && ra.Namespace == "a" &&
				ra.Group == "history.stepwise.dev" && ra.Resource == "pipelinerecords" && (ra.Verb == "get" || ra.Verb == "list")
		} else {
			sar.Status.Allowed = sar.Spec.User != "system:anonymous" // system:discovery
		}
		writeJSON(w, &sar)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeKube) reviews() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sars)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// certificate is a key and a certificate for cn, signed by parent (self-signed when nil).
type certificate struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
	pem  []byte
}

func newCertificate(t *testing.T, cn string, parent *certificate) *certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.ExtKeyUsage = nil
	} else {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &certificate{key: key, cert: cert, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (c *certificate) tls() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{c.cert.Raw}, PrivateKey: c.key, Leaf: c.cert}
}

// The server New makes without Authn and Authz trusts what the kube-apiserver says:
// users the aggregator vouches for with its front-proxy client certificate, bearer
// tokens by TokenReview, and every request's permission by SubjectAccessReview.
func TestDelegatedToTheAPIServer(t *testing.T) {
	frontProxyCA := newCertificate(t, "front-proxy-ca", nil)
	frontProxy := newCertificate(t, "front-proxy-client", frontProxyCA)
	otherCA := newCertificate(t, "other-ca", nil)
	impostor := newCertificate(t, "front-proxy-client", otherCA)
	notTheProxy := newCertificate(t, "someone", frontProxyCA)
	clusterCA := newCertificate(t, "kubernetes-ca", nil)

	kube := &fakeKube{
		cm: &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "extension-apiserver-authentication", Namespace: "kube-system", ResourceVersion: "1"},
			Data: map[string]string{
				"client-ca-file":                     string(clusterCA.pem),
				"requestheader-client-ca-file":       string(frontProxyCA.pem),
				"requestheader-allowed-names":        `["front-proxy-client"]`,
				"requestheader-username-headers":     `["X-Remote-User"]`,
				"requestheader-group-headers":        `["X-Remote-Group"]`,
				"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
			},
		},
		tokens: map[string]string{"reader-token": "reader", "outsider-token": "outsider"},
		stop:   make(chan struct{}),
	}
	apiserver := httptest.NewTLSServer(kube)
	t.Cleanup(apiserver.Close)
	t.Cleanup(func() { close(kube.stop) })
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: apiserver.Certificate().Raw})
	require.NoError(t, os.WriteFile(kubeconfig, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority-data: %q}}]
users: [{name: operator, user: {token: operator-token}}]
contexts: [{name: c, context: {cluster: c, user: operator}}]
current-context: c
`, apiserver.URL, base64.StdEncoding.EncodeToString(caPEM)), 0o600))

	mem := &memArchive{records: []archive.Record{record("a", "retire-n1", stepwisev1alpha1.ArchiveSucceeded)}}
	base, client, _ := startServer(t, Options{Kubeconfig: kubeconfig}, mem, "")
	transport := client.Transport.(*http.Transport)

	do := func(t *testing.T, path string, cert *certificate, headers map[string]string) int {
		t.Helper()
		tr := transport.Clone()
		if cert != nil {
			// Sent even when the server does not name its CA among those it accepts.
			c := cert.tls()
			tr.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }
		}
		defer tr.CloseIdleConnections()
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		require.NoError(t, err)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	const records = "/apis/history.stepwise.dev/v1alpha1/namespaces/a/pipelinerecords"
	asReader := map[string]string{"X-Remote-User": "reader", "X-Remote-Group": "system:authenticated"}

	tests := []struct {
		name    string
		path    string
		cert    *certificate
		headers map[string]string
		want    int
	}{
		{name: "through the aggregator", path: records, cert: frontProxy, headers: asReader, want: http.StatusOK},
		{name: "a record through the aggregator", path: records + "/retire-n1.3f2a9c01.1.succeeded", cert: frontProxy, headers: asReader, want: http.StatusOK},
		{name: "through the aggregator, another namespace", path: "/apis/history.stepwise.dev/v1alpha1/namespaces/b/pipelinerecords", cert: frontProxy, headers: asReader, want: http.StatusForbidden},
		{name: "through the aggregator, another user", path: records, cert: frontProxy, headers: map[string]string{"X-Remote-User": "outsider"}, want: http.StatusForbidden},
		{name: "headers without the front proxy's certificate", path: records, headers: asReader, want: http.StatusForbidden},
		{name: "headers with a certificate of another CA", path: records, cert: impostor, headers: asReader, want: http.StatusUnauthorized},
		{name: "headers with a certificate of the CA, not the proxy's", path: records, cert: notTheProxy, headers: asReader, want: http.StatusUnauthorized},
		{name: "a token", path: records, headers: map[string]string{"Authorization": "Bearer reader-token"}, want: http.StatusOK},
		{name: "another user's token", path: records, headers: map[string]string{"Authorization": "Bearer outsider-token"}, want: http.StatusForbidden},
		{name: "a token the API server does not know", path: records, headers: map[string]string{"Authorization": "Bearer forged"}, want: http.StatusUnauthorized},
		{name: "probes need no credentials", path: "/readyz", want: http.StatusOK},
		{name: "nor does livez", path: "/livez", want: http.StatusOK},
		{name: "readiness waits for the front proxy's CA", path: "/readyz/front-proxy-client-ca",
			headers: map[string]string{"Authorization": "Bearer reader-token"}, want: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, do(t, tt.path, tt.cert, tt.headers))
		})
	}
	assert.Subset(t, kube.reviews(), []string{
		"reader list history.stepwise.dev/pipelinerecords a",
		"reader get history.stepwise.dev/pipelinerecords a",
		"reader list history.stepwise.dev/pipelinerecords b",
		"outsider list history.stepwise.dev/pipelinerecords a",
		"system:anonymous list history.stepwise.dev/pipelinerecords a",
	})
}
