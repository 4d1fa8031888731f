package e2e

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

// gzipMember is data gzipped as one gzip member.
func gzipMember(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	require.NoError(t, err)
	_, err = zw.Write(data)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// keystoneBomb is a Keystone token answer that inflates to more than mib MiB: the start of
// a JSON token, then mib gzip members of 1 MiB of spaces each (a reader of gzip reads the
// members one after the other), about a thousandth of that on the wire.
func keystoneBomb(t *testing.T, mib int) []byte {
	t.Helper()
	bomb := gzipMember(t, []byte(`{"token":{"catalog":[`))
	padding := gzipMember(t, bytes.Repeat([]byte(" "), 1<<20))
	return append(bomb, bytes.Repeat(padding, mib)...)
}

// A tenant's Keystone answering a small gzip that inflates to 1 GiB fails that tenant's
// step with a clear reason; the OpenStack plugin, which every tenant shares, neither dies
// nor grows past its memory limit, and another tenant's pipeline runs meanwhile.
func TestAGzipBombFailsOnlyItsStep(t *testing.T) {
	t.Parallel()
	bomb := keystoneBomb(t, 1024)
	keystone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("X-Subject-Token", "token")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(bomb)
	}))
	t.Cleanup(keystone.Close)
	before := processesOf(t, "stepwise-plugin-openstack", operator.PID())

	client := stepwiseClient(t).StepwiseV1alpha1()
	hostile := cluster.CreateNamespace(t)
	cluster.ServiceAccount(t, hostile, "terminator", rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"openstack-creds"},
	})
	_, err := cluster.Client.CoreV1().Secrets(hostile).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "openstack-creds"},
		Data: map[string][]byte{
			"authURL": []byte(keystone.URL + "/v3"), "username": []byte("u"), "password": []byte("p"),
			"projectName": []byte("ops"), "domainName": []byte("Default"), "region": []byte("RegionOne"),
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.Pipelines(hostile).Create(t.Context(), &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "bomb", Namespace: hostile},
		Spec: v1alpha1.PipelineSpec{ServiceAccountName: "terminator", Steps: []v1alpha1.Step{{
			Name: "terminate", Executor: "openstack.terminate-server", Retry: &v1alpha1.RetryPolicy{Limit: 0},
			With: map[string]string{"serverID": "0b8f3d1c-6a55-4a8e-9d1e-3c1c2b7a9f00", "node": "k8s-node-3", "credentialsSecret": "openstack-creds"},
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	other := cluster.CreateNamespace(t)
	serviceAccount(t, other, "runner", false)
	_, err = client.Pipelines(other).Create(t.Context(), &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "ordinary", Namespace: other},
		Spec:       v1alpha1.PipelineSpec{ServiceAccountName: "runner", Steps: []v1alpha1.Step{{Name: "one", Executor: "test.noop"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	failed := waitPipeline(t, hostile, "bomb", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineFailed })
	ready := meta.FindStatusCondition(failed.Status.Steps[0].Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, ready)
	assert.Contains(t, ready.Message, "the most a plugin reads", "the step says why: %+v", ready)
	waitPipeline(t, other, "ordinary", time.Minute, func(p *v1alpha1.Pipeline) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady)
	})

	after := processesOf(t, "stepwise-plugin-openstack", operator.PID())
	require.Len(t, after, 1)
	if len(before) == 1 {
		assert.Equal(t, before, after, "the OpenStack plugin did not die")
	}
	peak, err := framework.PeakRSS(after[0])
	require.NoError(t, err)
	assert.Less(t, peak, int64(256<<20), "the plugin's peak RSS stays under its memory limit (--plugin-memory-limit, 256Mi)")
	t.Logf("OpenStack plugin peak RSS %d MiB after a %d KiB answer that inflates to 1 GiB", peak>>20, len(bomb)>>10)
}
