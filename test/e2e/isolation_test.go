package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/egress"
)

// webhookTenant makes a namespace whose ServiceAccount may read the webhook's Secret.
func webhookTenant(t *testing.T) (ns, sa string) {
	t.Helper()
	ns = cluster.CreateNamespace(t)
	sa = "caller"
	cluster.ServiceAccount(t, ns, sa, rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"webhook-key"},
	})
	_, err := cluster.Client.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook-key"},
		Data:       map[string][]byte{"hmacKey": []byte("e2e-hmac-key")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return ns, sa
}

func webhookPipeline(ns, name, sa, url string) *v1alpha1.Pipeline {
	return &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.PipelineSpec{ServiceAccountName: sa, Steps: []v1alpha1.Step{{
			Name: "call", Executor: "webhook.call",
			With:  map[string]string{"url": url, "credentialsSecret": "webhook-key"},
			Retry: &v1alpha1.RetryPolicy{Limit: 0},
		}}},
	}
}

// everythingSaidAbout is the pipeline's status and its Events, as text.
func everythingSaidAbout(t *testing.T, p *v1alpha1.Pipeline) string {
	t.Helper()
	status, err := json.Marshal(p.Status)
	require.NoError(t, err)
	events, err := cluster.Client.CoreV1().Events(p.Namespace).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	var b strings.Builder
	b.Write(status)
	for _, e := range events.Items {
		b.WriteString("\n" + e.Reason + ": " + e.Message)
	}
	return b.String()
}

// TestWebhookToLoopbackIsRefused: with the operator's defaults, a tenant cannot aim the
// webhook plugin at a service on the operator's loopback; nothing of that service's answer
// reaches the status or Events, and the service is never called.
func TestWebhookToLoopbackIsRefused(t *testing.T) {
	// Not parallel: it replaces the shared operator with one that allows no CIDR.
	var calls atomic.Int32
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"db_password":"hunter2-internal","message":"hunter2-internal"}`))
	}))
	t.Cleanup(internal.Close)
	restartOperator(t, "--plugin-dir", cluster.BinPath("plugins"))

	ns, sa := webhookTenant(t)
	_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(t.Context(), webhookPipeline(ns, "probe", sa, internal.URL), metav1.CreateOptions{})
	require.NoError(t, err)
	failed := waitPipeline(t, ns, "probe", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineFailed })

	ready := meta.FindStatusCondition(failed.Status.Steps[0].Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, egress.ReasonEndpointNotAllowed, ready.Reason)
	assert.Contains(t, ready.Message, "loopback")
	assert.Contains(t, ready.Message, "--plugin-allowed-cidrs", "the message says how an admin allows it")
	assert.NotContains(t, everythingSaidAbout(t, failed), "hunter2")
	assert.Zero(t, calls.Load(), "the internal service was never called")
}

// TestParameterExpansionPastTheBoundFailsOnlyItsPipeline: a spec of about 130 KiB whose
// references would expand to 378 MiB fails with InvalidParameter, and the operator keeps
// serving another tenant.
func TestParameterExpansionPastTheBoundFailsOnlyItsPipeline(t *testing.T) {
	t.Parallel()
	client := stepwiseClient(t)
	hostileNS := cluster.CreateNamespace(t)
	serviceAccount(t, hostileNS, "runner", true)
	hostile := recordPipeline(hostileNS, "expand", "runner", recordStep("blob", map[string]string{
		"blob": strings.Repeat("$(params.x)", 5900),
	}))
	hostile.Spec.Params = map[string]string{"x": strings.Repeat("A", 64<<10)}
	_, err := client.StepwiseV1alpha1().Pipelines(hostileNS).Create(t.Context(), hostile, metav1.CreateOptions{})
	require.NoError(t, err)

	otherNS := cluster.CreateNamespace(t)
	serviceAccount(t, otherNS, "runner", true)
	_, err = client.StepwiseV1alpha1().Pipelines(otherNS).Create(t.Context(),
		recordPipeline(otherNS, "ordinary", "runner", recordStep("one", nil), recordStep("two", nil)), metav1.CreateOptions{})
	require.NoError(t, err)

	failed := waitPipeline(t, hostileNS, "expand", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineFailed })
	ready := meta.FindStatusCondition(failed.Status.Steps[0].Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, contract.ReasonInvalidParameter, ready.Reason)
	assert.Contains(t, ready.Message, fmt.Sprintf("more than %d bytes", v1alpha1.MaxResolvedParamsSize))
	waitPipeline(t, otherNS, "ordinary", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })
	select {
	case <-operator.Exited():
		t.Fatalf("the operator exited; log: %s", operator.Log)
	default:
	}
}

// TestHostilePluginAnswerFailsOnlyItsStep: a plugin hook that answers text that is not
// UTF-8, or a result over the protocol's size limit, fails its own step; the plugin
// process, which every tenant shares, keeps its PID and serves the next step.
func TestHostilePluginAnswerFailsOnlyItsStep(t *testing.T) {
	// Not parallel: it replaces the shared operator.
	dir := t.TempDir()
	exe := filepath.Join(dir, "stepwise-plugin-test")
	out, err := exec.Command("go", "build", "-o", exe, "github.com/stepwise-dev/stepwise/pkg/plugin/internal/testplugin").CombinedOutput()
	require.NoError(t, err, "%s", out)
	b, err := os.ReadFile(exe)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(hex.EncodeToString(sum[:])+"  stepwise-plugin-test\n"), 0o644))
	restartOperator(t, "--plugin-dir", dir)

	var pids []int
	require.Eventually(t, func() bool {
		pids = processesOf(t, "stepwise-plugin-test", operator.PID())
		return len(pids) == 1
	}, 30*time.Second, 50*time.Millisecond, "the test plugin runs")

	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", false)
	client := stepwiseClient(t)
	hostile := func(name, mode string) {
		p := recordPipeline(ns, name, "runner", v1alpha1.Step{
			Name: "answer", Executor: "test.hostile", With: map[string]string{"mode": mode},
			Retry: &v1alpha1.RetryPolicy{Limit: 0},
		})
		_, err := client.StepwiseV1alpha1().Pipelines(ns).Create(t.Context(), p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	hostile("not-utf8", "invalid-error")
	hostile("too-large", "huge-result")

	for name, wantReason := range map[string]string{"not-utf8": "ReceiverFailed", "too-large": "MessageTooLarge"} {
		failed := waitPipeline(t, ns, name, time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineFailed })
		s := failed.Status.Steps[0]
		assert.True(t, utf8.ValidString(s.Message), "message %q", s.Message)
		ready := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady)
		require.NotNil(t, ready)
		assert.Equal(t, wantReason, ready.Reason, "%s: %s", name, ready.Message)
	}

	_, err = client.StepwiseV1alpha1().Pipelines(ns).Create(t.Context(),
		recordPipeline(ns, "after", "runner", v1alpha1.Step{Name: "echo", Executor: "test.echo"}), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPipeline(t, ns, "after", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })
	assert.Equal(t, pids, processesOf(t, "stepwise-plugin-test", operator.PID()), "the plugin process is the same")
}
