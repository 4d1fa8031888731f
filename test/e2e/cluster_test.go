package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

// cluster is shared by all tests of the package: starting one takes a few
// seconds, and tests isolate themselves with their own namespace.
var cluster *framework.Cluster

// operator is the stepwise-operator process running against cluster. Tests that restart
// it do not run in parallel.
var operator *framework.Operator

func TestMain(m *testing.M) {
	framework.DefaultParallel(6)
	os.Exit(framework.Main(m, framework.Suite{Name: "e2e", CRDs: true, AdmissionPolicies: true, Archive: true, OperatorArgs: pluginArgsOn,
		Ready: func(c *framework.Cluster, op *framework.Operator) { cluster, operator = c, op }}))
}

func TestServerVersion(t *testing.T) {
	t.Parallel()
	v, err := cluster.Client.Discovery().ServerVersion()
	require.NoError(t, err)
	assert.Equal(t, "v1.37.1", v.GitVersion)
	assert.Equal(t, "1", v.Major)
	assert.Equal(t, "37", v.Minor)
}

func TestDeploymentBecomesAvailableOnFakeNode(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)

	node, err := cluster.CreateFakeNode(ctx, "e2e-node-"+rand.String(5))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cluster.Client.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{})
	})

	labels := map[string]string{"app": "web"}
	replicas := int32(2)
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					// Pin to this test's node; kwok "runs" the pods.
					NodeSelector: map[string]string{corev1.LabelHostname: node.Name},
					Containers:   []corev1.Container{{Name: "web", Image: "registry.invalid/web:1"}},
				},
			},
		},
	}
	_, err = cluster.Client.AppsV1().Deployments(ns).Create(ctx, deploy, metav1.CreateOptions{})
	require.NoError(t, err)

	var got *appsv1.Deployment
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err = cluster.Client.AppsV1().Deployments(ns).Get(ctx, deploy.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil // transient; the deadline bounds retries
		}
		return got.Status.AvailableReplicas == 2 && deploymentAvailable(got), nil
	})
	require.NoError(t, err, "deployment never became Available; last status: %+v", statusOf(got))

	pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 2)
	for _, p := range pods.Items {
		assert.Equal(t, node.Name, p.Spec.NodeName, "pod %s", p.Name)
		assert.Equal(t, corev1.PodRunning, p.Status.Phase, "pod %s", p.Name)
	}
}

func TestNamespaceDeletionFinishes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)

	// Content makes the namespace controller do real work before the
	// namespace can go.
	_, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Data:       map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	require.NoError(t, cluster.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
	// Alone it takes about 5 s; in the full suite 15-30 s, since the namespace controller
	// walks every resource type for every test's namespace at once. The deadline leaves
	// room for a loaded machine; the conditions say why when it is missed.
	var last *corev1.Namespace
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := cluster.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err == nil {
			last = got
		}
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "namespace %s was not deleted; its conditions: %v", ns, namespaceConditions(last))
}

// namespaceConditions are a namespace's deletion conditions that are true (what is left,
// which discovery failed), for a failure's message.
func namespaceConditions(ns *corev1.Namespace) []string {
	if ns == nil {
		return nil
	}
	var out []string
	for _, c := range ns.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			out = append(out, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	return out
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func statusOf(d *appsv1.Deployment) any {
	if d == nil {
		return nil
	}
	return d.Status
}
