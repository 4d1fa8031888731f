package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/catalog"
	"github.com/stepwise-dev/stepwise/pkg/cli"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

const (
	deployNamespace      = "stepwise-system"
	deployServiceAccount = "stepwise-operator"
)

// kubectlOn runs bin/kubectl against the cluster of a kubeconfig.
func kubectlOn(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), cluster.BinPath("kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func deployDir() string { return filepath.Join("..", "..", "deploy") }

// TestDeployManifestsServerDryRun has the API server admit every object of deploy/, as
// `kubectl apply -k deploy` would create them, without keeping any.
func TestDeployManifestsServerDryRun(t *testing.T) {
	ctx := t.Context()
	// A server-side dry run creates nothing, so the objects in the Namespace the
	// manifests create would find no namespace: make it for real, bare.
	_, err := cluster.Client.CoreV1().Namespaces().Get(ctx, deployNamespace, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "namespace %s is left from an earlier test: %v", deployNamespace, err)
	ensureNamespace(t, deployNamespace)

	out, err := kubectlOn(t, cluster.Kubeconfig, "apply", "-k", deployDir(), "--dry-run=server")
	require.NoError(t, err, out)
	for _, obj := range []string{
		"namespace/stepwise-system", "customresourcedefinition.apiextensions.k8s.io/pipelines.stepwise.dev",
		"serviceaccount/stepwise-operator", "clusterrole.rbac.authorization.k8s.io/stepwise-operator",
		"clusterrolebinding.rbac.authorization.k8s.io/stepwise-operator", "role.rbac.authorization.k8s.io/stepwise-operator",
		"rolebinding.rbac.authorization.k8s.io/stepwise-operator", "deployment.apps/stepwise-operator",
		"service/stepwise-operator-metrics", "poddisruptionbudget.policy/stepwise-operator",
		"clusterrole.rbac.authorization.k8s.io/stepwise-view", "clusterrole.rbac.authorization.k8s.io/stepwise-edit",
	} {
		assert.Regexp(t, `(?m)^`+strings.ReplaceAll(obj, ".", `\.`)+` (created|configured|unchanged) \(server dry run\)$`, out)
	}
	_, err = cluster.Client.RbacV1().ClusterRoles().Get(ctx, "stepwise-operator", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a dry run keeps nothing")

	// The chart renders the same objects (deploy/chart_test.go); the API server admits
	// them, the default install and the namespaced one with a tenant.
	ensureNamespace(t, "chart-tenant")
	plugin := []string{"--set", "plugins[0].name=example", "--set", "plugins[0].image=registry.example/stepwise-plugin-example@sha256:" + strings.Repeat("b", 64),
		"--set", "plugins[0].sha256=" + strings.Repeat("a", 64)}
	for _, values := range [][]string{
		nil,
		{"--set", "namespaced.enabled=true", "--set", "namespaced.tenants[0].namespace=chart-tenant"},
		plugin,
		append([]string{"--set", "pluginDelivery=initContainer"}, plugin...),
	} {
		rendered := helmTemplate(t, append([]string{"--include-crds"}, values...)...)
		cmd := exec.CommandContext(ctx, cluster.BinPath("kubectl"), "--kubeconfig", cluster.Kubeconfig, "apply", "--dry-run=server", "-f", "-")
		cmd.Stdin = strings.NewReader(rendered)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%v: %s", values, out)
		assert.Contains(t, string(out), "deployment.apps/stepwise-operator created (server dry run)")
	}
}

// helmTemplate renders the chart with the pinned Helm (make exports HELM) into the
// release namespace stepwise-system.
func helmTemplate(t *testing.T, args ...string) string {
	t.Helper()
	helm, err := cluster.Helm()
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), helm, append([]string{"template", "stepwise", filepath.Join("..", "..", "charts", "stepwise"),
		"--namespace", deployNamespace}, args...)...)
	out, err := cmd.Output()
	require.NoError(t, err, "helm template %v", args)
	return string(out)
}

// TestDeployRBACIsEnoughAndNoMore installs deploy/ on a cluster of its own (a second
// operator on the shared cluster would race the shared one for every pipeline), runs two
// operators as the deploy ServiceAccount, with leader election as the Deployment does,
// and shows that a pipeline runs to Ready and tears down with that identity, and that the
// identity cannot do what the built-in executors do as the pipeline's ServiceAccount.
func TestDeployRBACIsEnoughAndNoMore(t *testing.T) {
	ctx := t.Context()
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c2, err := framework.StartCluster(startCtx, framework.Options{})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := c2.Stop(); err != nil {
			t.Errorf("stop the second cluster: %v", err)
		}
	})

	out, err := kubectlOn(t, c2.Kubeconfig, "apply", "-k", deployDir())
	require.NoError(t, err, out)
	out, err = kubectlOn(t, c2.Kubeconfig, "wait", "--for=condition=Established", "--timeout=60s", "crd/pipelines.stepwise.dev")
	require.NoError(t, err, out)
	// The API server admits pipelines once the install's admission policies are in force
	// (docs/install.md: a few seconds after the CRDs).
	require.NoError(t, c2.WaitForAdmissionPolicies(ctx))

	// The operator's kubeconfig holds a token of the deploy ServiceAccount, as in a pod.
	kubeconfig, saConfig := serviceAccountKubeconfig(t, c2, deployNamespace, deployServiceAccount)
	args := []string{
		"--kubeconfig=" + kubeconfig, "--leader-elect=true", "--namespace=" + deployNamespace,
	}
	var operators []*framework.Operator
	t.Cleanup(func() {
		for _, op := range operators {
			if err := op.Stop(); err != nil {
				t.Errorf("stop operator: %v", err)
			}
		}
	})
	// The second replica starts once the first leads, without the example plugin: the
	// catalogue stays the leader's, which offers it (a standby's would not).
	for _, pluginDir := range []string{c2.BinPath("plugins"), t.TempDir()} {
		op, err := c2.StartOperator(append(args, "--plugin-dir", pluginDir)...)
		require.NoError(t, err)
		operators = append(operators, op)
		readyCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		require.NoError(t, op.WaitReady(readyCtx), "operator log %s", op.Log)
		require.NoError(t, wait.PollUntilContextCancel(readyCtx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			lease, err := c2.Client.CoordinationV1().Leases(deployNamespace).Get(ctx, "stepwise-operator", metav1.GetOptions{})
			return err == nil && ptr.Deref(lease.Spec.HolderIdentity, "") != "", nil
		}), "no replica leads; operator log %s", op.Log)
		cancel()
	}
	logs := func() string { return operators[0].Log + " " + operators[1].Log }

	// A pipeline whose ServiceAccount may touch ConfigMaps in its namespace.
	admin := c2.Client
	ns := c2.CreateNamespace(t)
	c2.ServiceAccount(t, ns, "runner", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update"}})

	sw, err := clientset.NewForConfig(c2.Config)
	require.NoError(t, err)
	pipelines := sw.StepwiseV1alpha1().Pipelines(ns)
	_, err = pipelines.Create(ctx, recordPipeline(ns, "rbac", "runner", recordStep("first", nil), recordStep("second", nil)), metav1.CreateOptions{})
	require.NoError(t, err)
	// Up to a lease duration (15s) passes before a replica leads.
	var last *v1alpha1.Pipeline
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := pipelines.Get(ctx, "rbac", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = p
		return p.Ready(), nil
	})
	require.NoError(t, err, "pipeline not Ready; status %+v; operator logs %s", pipelineStatus(last), logs())

	lease, err := admin.CoordinationV1().Leases(deployNamespace).Get(ctx, "stepwise-operator", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, lease.Spec.HolderIdentity)
	assert.NotEmpty(t, *lease.Spec.HolderIdentity, "one replica leads")

	// The catalogue was published in the operator's namespace; the CLI reads it there by
	// default.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := catalog.Read(ctx, admin, deployNamespace, catalog.DefaultName)
		return err == nil, nil
	})
	require.NoError(t, err, "no catalogue; operator logs %s", logs())
	code, out, errOut := stepwiseCLI(t, c2.Kubeconfig, "executors")
	require.Equal(t, cli.ExitOK, code, errOut)
	assert.Contains(t, out, "test.record")
	assert.Contains(t, out, "example.greet")

	// Teardown, then the object is gone: the finalizer came off.
	require.NoError(t, pipelines.Delete(ctx, "rbac", metav1.DeleteOptions{}))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := pipelines.Get(ctx, "rbac", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "pipeline not deleted; operator logs %s", logs())
	cm, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, "stepwise-record-rbac", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"first/PreCreate", "first/Create", "first/PostCreate",
		"second/PreCreate", "second/Create", "second/PostCreate",
		"second/PreDelete", "second/Delete", "second/PostDelete",
		"first/PreDelete", "first/Delete", "first/PostDelete",
	}, strings.Split(cm.Data["calls"], "\n"))

	// Nothing the operators tried was refused (events, leases, status, catalogue).
	for _, op := range operators {
		data, err := os.ReadFile(op.Log)
		require.NoError(t, err)
		assert.NotContains(t, strings.ToLower(string(data)), "forbidden", "operator log %s", op.Log)
	}

	// And what the identity must not do.
	sa, err := kubernetes.NewForConfig(saConfig)
	require.NoError(t, err)
	forbidden := map[string]func(context.Context) error{
		"read Secrets": func(ctx context.Context) error {
			_, err := sa.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
			return err
		},
		"read ConfigMaps outside its namespace": func(ctx context.Context) error {
			_, err := sa.CoreV1().ConfigMaps(ns).Get(ctx, "stepwise-record-rbac", metav1.GetOptions{})
			return err
		},
		"cordon a Node": func(ctx context.Context) error {
			_, err := sa.CoreV1().Nodes().Patch(ctx, "any", types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
			return err
		},
		"list Pods": func(ctx context.Context) error {
			_, err := sa.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
			return err
		},
		"list Deployments": func(ctx context.Context) error {
			_, err := sa.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			return err
		},
		"change the Role it has": func(ctx context.Context) error {
			_, err := sa.RbacV1().Roles(deployNamespace).Get(ctx, "stepwise-operator", metav1.GetOptions{})
			return err
		},
		"impersonate a user or a group": func(ctx context.Context) error {
			cfg := rest.CopyConfig(saConfig)
			cfg.Impersonate = rest.ImpersonationConfig{UserName: "admin", Groups: []string{"system:masters"}}
			admin, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			_, err = admin.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			return err
		},
	}
	for what, do := range forbidden {
		err := do(ctx)
		assert.True(t, apierrors.IsForbidden(err), "the operator's identity must not %s; got %v", what, err)
	}
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the ServiceAccount
// with a token from the TokenRequest API, and returns its path and the rest.Config.
func serviceAccountKubeconfig(t *testing.T, c *framework.Cluster, namespace, name string) (string, *rest.Config) {
	t.Helper()
	expiry := int64(3600)
	tr, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(t.Context(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	require.NoError(t, err)
	ca := c.Config.CAData
	if len(ca) == 0 && c.Config.CAFile != "" {
		ca, err = os.ReadFile(c.Config.CAFile)
		require.NoError(t, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name}
	cfg.CurrentContext = name
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	restConfig, err := clientcmd.BuildConfigFromFlags("", path)
	require.NoError(t, err)
	return path, restConfig
}
