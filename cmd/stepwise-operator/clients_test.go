package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// TestResponsesAreNotCompressedUnlessAsked: the API server gzips a response the client asks
// for compressed, which on the cluster's network costs it more CPU than it saves (a list of
// 100,000 pipelines is hundreds of megabytes); the operator does not ask, as
// kube-controller-manager does not, unless --kube-api-compression says so. (An API server
// serves TLS; client-go keeps Go's default transport, which always asks, for plain HTTP.)
func TestResponsesAreNotCompressedUnlessAsked(t *testing.T) {
	for _, tt := range []struct {
		name     string
		args     []string
		wantGzip bool
	}{
		{name: "default"},
		{name: "asked", args: []string{"--kube-api-compression"}, wantGzip: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var accepted []string
			server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				accepted = append(accepted, r.Header.Get("Accept-Encoding"))
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"kind":"NamespaceList","apiVersion":"v1","metadata":{},"items":[]}`))
			}))
			defer server.Close()
			kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
			require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+server.URL+`", insecure-skip-tls-verify: true}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {}}]
current-context: c
`), 0o600))

			opts := parseFlags(t, append([]string{"--kubeconfig=" + kubeconfig}, tt.args...)...)
			c, err := newClients(opts, prometheus.NewRegistry())
			require.NoError(t, err)
			_, err = c.kube.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)

			mu.Lock()
			defer mu.Unlock()
			require.Len(t, accepted, 1)
			if tt.wantGzip {
				assert.Contains(t, accepted[0], "gzip")
			} else {
				assert.NotContains(t, accepted[0], "gzip")
			}
		})
	}
}

func TestWhoAmIIsWhomTheAPIServerAuthenticates(t *testing.T) {
	kube := fake.NewClientset()
	kube.PrependReactor("create", "selfsubjectreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
			UserInfo: authenticationv1.UserInfo{Username: "system:serviceaccount:stepwise-system:stepwise-operator"}}}, nil
	})
	user, err := whoAmI(t.Context(), kube)
	require.NoError(t, err)
	assert.Equal(t, "system:serviceaccount:stepwise-system:stepwise-operator", user)

	refusing := fake.NewClientset()
	refusing.PrependReactor("create", "selfsubjectreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	_, err = whoAmI(t.Context(), refusing)
	assert.ErrorContains(t, err, "ask the API server who the operator is")
}
