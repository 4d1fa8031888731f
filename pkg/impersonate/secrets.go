package impersonate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxSecretBytes bounds the answer read for one Secret: etcd's object limit and a margin.
const maxSecretBytes = 3 << 20

// secretReader reads Secrets over a plain HTTP GET with the client set's impersonating
// http.Client. client-go's REST client logs every response body from -v=8 (whole at
// -v=10): a Secret read through it would put its values in the operator's log. This reads
// the same answer, and logs nothing of it at any verbosity.
type secretReader struct {
	host   string // the API server's URL, with its path prefix if any
	client *http.Client
}

func newSecretReader(host string, client *http.Client) (*secretReader, error) {
	u, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("the API server's URL %q: %w", host, err)
	}
	if u.Scheme == "" {
		u.Scheme = "https"
	}
	return &secretReader{host: strings.TrimSuffix(u.String(), "/"), client: client}, nil
}

// GetSecret returns the Secret namespace/name, or the API server's error as a
// *apierrors.StatusError (so apierrors.IsNotFound and its kin work).
func (r *secretReader) GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	u := r.host + "/api/v1/namespaces/" + url.PathEscape(namespace) + "/secrets/" + url.PathEscape(name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", namespace, name, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", namespace, name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSecretBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", namespace, name, err)
	}
	if len(body) > maxSecretBytes {
		return nil, fmt.Errorf("read Secret %s/%s: the answer is over %d bytes", namespace, name, maxSecretBytes)
	}
	if resp.StatusCode != http.StatusOK {
		var status metav1.Status
		if json.Unmarshal(body, &status) == nil && status.Kind == "Status" {
			return nil, &apierrors.StatusError{ErrStatus: status}
		}
		// Never the body: it may hold what a proxy echoed of the request.
		return nil, apierrors.NewGenericServerResponse(resp.StatusCode, http.MethodGet,
			corev1.Resource("secrets"), name, "", 0, false)
	}
	var s corev1.Secret
	if err := json.Unmarshal(body, &s); err != nil {
		// Not the decoder's message: it may quote the data.
		return nil, fmt.Errorf("read Secret %s/%s: the answer is not a Secret", namespace, name)
	}
	return &s, nil
}
