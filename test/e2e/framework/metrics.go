package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/transport"
	"k8s.io/client-go/util/cert"
	"sigs.k8s.io/yaml"
)

// metricsCertificate makes the serving certificate StartOperator gives every operator of
// the cluster (--metrics-tls-cert-file), in the cluster's dir, so a test's client verifies
// the endpoint instead of skipping verification.
func (c *Cluster) metricsCertificate() (certFile, keyFile string, err error) {
	dir := filepath.Join(c.Dir, "metrics-tls")
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("127.0.0.1", nil, nil)
	if err != nil {
		return "", "", fmt.Errorf("make the operators' metrics certificate: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("make the operators' metrics certificate: %w", err)
	}
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("write the operators' metrics certificate: %w", err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("write the operators' metrics key: %w", err)
	}
	return certFile, keyFile, nil
}

// MetricsCAFile is the file a client of the operators' metrics endpoints trusts (it holds
// their certificate and its CA): a Prometheus' tls_config.ca_file.
func (c *Cluster) MetricsCAFile() string { return c.metricsCert }

// MetricsClient is an HTTP client of the operators' metrics endpoints as token's bearer:
// it trusts their certificate and sends the token, which the operator reviews with the API
// server (TokenReview, SubjectAccessReview). An empty token sends none.
func (c *Cluster) MetricsClient(token string) (*http.Client, error) {
	pem, err := os.ReadFile(c.MetricsCAFile())
	if err != nil {
		return nil, fmt.Errorf("read the operators' metrics certificate : %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("the operators' metrics certificate holds no certificate")
	}
	var rt http.RoundTripper = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	if token != "" {
		rt = transport.NewBearerAuthRoundTripper(token, rt)
	}
	return &http.Client{Transport: rt, Timeout: time.Minute}, nil
}

// AdminMetricsClient is MetricsClient with the cluster admin's token (system:masters):
// what a test that reads the metrics, not their protection, uses.
func (c *Cluster) AdminMetricsClient() (*http.Client, error) {
	return c.MetricsClient(c.Config.BearerToken)
}

// InstallMetricsReaderRole creates the ClusterRole stepwise-metrics-reader as the install
// ships it (deploy/base/user-roles.yaml): who may read the operators' metrics.
func (c *Cluster) InstallMetricsReaderRole(ctx context.Context) error {
	data, err := os.ReadFile(filepath.Join(c.root, "deploy", "base", "user-roles.yaml"))
	if err != nil {
		return fmt.Errorf("read the user roles: %w", err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			return fmt.Errorf("decode the user roles: %w", err)
		}
		if role.Kind != "ClusterRole" || role.Name != MetricsReaderRole {
			continue
		}
		if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create ClusterRole %s: %w", role.Name, err)
		}
		return nil
	}
	return fmt.Errorf("deploy/base/user-roles.yaml has no ClusterRole %s", MetricsReaderRole)
}

// MetricsReaderRole is the ClusterRole the install ships for scrapers of the metrics.
const MetricsReaderRole = "stepwise-metrics-reader"

// ServiceAccountToken is a token of the ServiceAccount ns/name, valid for an hour, from
// the TokenRequest API.
func (c *Cluster) ServiceAccountToken(ctx context.Context, ns, name string) (string, error) {
	expiry := int64(3600)
	tr, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("request a token of %s/%s: %w", ns, name, err)
	}
	return tr.Status.Token, nil
}
