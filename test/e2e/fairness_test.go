package e2e

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// hangingVCenter is a TLS endpoint on loopback that accepts every request and never
// answers, until the test ends: what a tenant can point its vSphere Secret at. hanging
// counts the requests it holds.
func hangingVCenter(t *testing.T) (url string, ca []byte, hanging *atomic.Int32) {
	t.Helper()
	release := make(chan struct{})
	hanging = &atomic.Int32{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		hanging.Add(1)
		defer hanging.Add(-1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() {
		close(release)
		srv.Close()
	})
	ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return srv.URL + "/sdk", ca, hanging
}

// Issue 27's reproduction: ten pipelines of one namespace whose vSphere hook hangs used to
// hold all eight workers, and a pipeline of another namespace was not Ready within 20 s.
// Namespaces now share the workers: the other namespace's pipeline runs at once.
func TestANamespaceWhoseHooksHangHoldsOnlyItsShareOfWorkers(t *testing.T) {
	ctx := t.Context()
	url, ca, hanging := hangingVCenter(t)

	hog := cluster.CreateNamespace(t)
	sa := vsphereRetirer(t, hog)
	_, err := cluster.Client.CoreV1().Secrets(hog).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "vsphere-creds"},
		Data:       map[string][]byte{"url": []byte(url), "username": []byte("u"), "password": []byte("p"), "ca.crt": ca},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	pipelines := stepwiseClient(t).StepwiseV1alpha1()
	for i := range 10 {
		p := &v1alpha1.Pipeline{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("hang-%d", i), Namespace: hog},
			Spec: v1alpha1.PipelineSpec{ServiceAccountName: sa, Steps: []v1alpha1.Step{{
				Name: "terminate", Executor: "vsphere.terminate-vm", With: map[string]string{
					"providerID":        fmt.Sprintf("vsphere://4224d3a1-0000-0000-0000-%012d", i),
					"node":              fmt.Sprintf("hang-%d", i),
					"credentialsSecret": "vsphere-creds",
				},
			}}},
		}
		_, err := pipelines.Pipelines(hog).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// The hog alone holds every worker it may: all but one (all eight before).
	require.Eventually(t, func() bool { return hanging.Load() >= 7 }, time.Minute, 50*time.Millisecond,
		"hanging calls: %d; operator log: %s", hanging.Load(), operator.Log)

	other := cluster.CreateNamespace(t)
	serviceAccount(t, other, "runner", false)
	start := time.Now()
	_, err = pipelines.Pipelines(other).Create(ctx, &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "quick", Namespace: other},
		Spec: v1alpha1.PipelineSpec{ServiceAccountName: "runner", Steps: []v1alpha1.Step{
			{Name: "one", Executor: "test.noop"},
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// Well under the hook call bound (30 s), which is what freed a worker before.
	waitPipeline(t, other, "quick", 10*time.Second, func(p *v1alpha1.Pipeline) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady)
	})
	t.Logf("another namespace's pipeline was Ready %s after it was applied, with ten hanging pipelines in %s", time.Since(start).Round(time.Millisecond), hog)
}
