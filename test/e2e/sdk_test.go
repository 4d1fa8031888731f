package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// TestSecretURLInAPluginErrorNeverReachesStatusOrLog: notify.post returns net/http's error
// as it is, which quotes the chat webhook's URL kept in a Secret (its path and query are
// the credential); neither the step's status, nor its Events, nor the operator's log (at
// -v=2) hold any part of it.
func TestSecretURLInAPluginErrorNeverReachesStatusOrLog(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "notifier", true)
	cluster.Grant(t, ns, "notifier", "read-chat-secret",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"chat"}, Verbs: []string{"get"}})
	const (
		path  = "/services/T0E2E/B0E2E/e2eSecretPathXyz"
		token = "e2e-t0k3n-value"
	)
	url := "http://127.0.0.1:1" + path + "?token=" + token // nothing listens on port 1
	_, err := cluster.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "chat"}, StringData: map[string]string{"url": url},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	p := recordPipeline(ns, "notify", "notifier", v1alpha1.Step{
		Name: "tell", Executor: "notify.post", With: map[string]string{"urlSecret": "chat", "message": "retiring"},
		Retry: &v1alpha1.RetryPolicy{Limit: 1},
	})
	_, err = stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	got := waitPipeline(t, ns, "notify", 2*time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineFailed })
	msg := got.Status.Steps[0].Message
	assert.Contains(t, msg, "[redacted]", "the error came back, without the URL")

	events, err := cluster.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var eventText strings.Builder
	for _, e := range events.Items {
		eventText.WriteString(e.Message + "\n")
	}
	log, err := os.ReadFile(operator.Log)
	require.NoError(t, err)
	for _, part := range []string{url, path, "e2eSecretPathXyz", token} {
		assert.NotContains(t, msg, part)
		assert.NotContains(t, eventText.String(), part)
		assert.NotContains(t, string(log), part, "operator log %s", operator.Log)
	}
}
