package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// The local control plane behaves like a kubeadm cluster where a user of Stepwise would
// notice: the built-in user roles have rules, and every namespace gets the cluster's CA.

func TestBuiltInUserRolesAreAggregated(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"admin", "edit", "view"} {
		err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			role, err := cluster.Client.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
			return err == nil && len(role.Rules) > 0, nil
		})
		assert.NoError(t, err, "ClusterRole %s has no rules: is clusterrole-aggregation-controller running?", name)
	}
}

func TestNamespacesGetTheRootCA(t *testing.T) {
	t.Parallel()
	ns := cluster.CreateNamespace(t)
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil && cm.Data["ca.crt"] != "", nil
	})
	assert.NoError(t, err, "kube-root-ca.crt was not published: is root-ca-certificate-publisher-controller running?")
}

// TestRoleBindingToEditLetsStepsAct is what a user types first to give a pipeline's
// ServiceAccount rights: `kubectl create rolebinding ... --clusterrole=edit`.
func TestRoleBindingToEditLetsStepsAct(t *testing.T) {
	t.Parallel()
	ns := cluster.CreateNamespace(t)
	const sa = "editor"
	cluster.ServiceAccount(t, ns, sa)
	cluster.Bind(t, ns, sa, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"})

	_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(t.Context(), &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "edit", Namespace: ns},
		Spec: v1alpha1.PipelineSpec{
			ServiceAccountName: sa,
			Steps: []v1alpha1.Step{
				{Name: "apply", Executor: "k8s.apply", With: map[string]string{
					"manifest": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: edit}\n",
				}},
				{Name: "wait", Executor: "k8s.wait", With: map[string]string{
					"apiVersion": "v1", "kind": "ConfigMap", "name": "settings",
					"jsonPath": "{.data.mode}", "value": "edit", "timeout": "30s",
				}},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	got := waitPipeline(t, ns, "edit", time.Minute, func(p *v1alpha1.Pipeline) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady)
	})
	assert.Equal(t, v1alpha1.PipelineSucceeded, got.Status.Phase)
	_, err = cluster.Client.CoreV1().ConfigMaps(ns).Get(t.Context(), "settings", metav1.GetOptions{})
	assert.NoError(t, err, "the step created the ConfigMap as the ServiceAccount bound to edit")
}
