// Package framework starts a throw-away local Kubernetes control plane for
// e2e tests (bin/localcluster: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok) and offers small helpers on top of it.
//
// The binaries are built by `make localcluster-tools`; the framework never
// builds them, because a cold build takes about ten minutes.
//
// A suite's TestMain starts and sets up its control plane with Main (main.go).
package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	// modulePath identifies the repository root while walking up from the
	// test's working directory.
	modulePath = "github.com/stepwise-dev/stepwise"

	// KwokNodeAnnotation is the annotation (value "fake") that makes kwok
	// manage a node; localcluster starts kwok with exactly this selector.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// FakeNodeLabel is set to "kwok" on nodes made by CreateFakeNode; use it
	// as a nodeSelector to pin pods onto fake nodes.
	FakeNodeLabel = "type"
	// FakeNodeLabelValue is the value of FakeNodeLabel on fake nodes.
	FakeNodeLabelValue = "kwok"

	pollInterval = 200 * time.Millisecond
)

// Options tunes StartCluster. The zero value is fine.
type Options struct {
	// RepoRoot is the repository holding bin/; found by walking up from the
	// working directory to the go.mod of the product module when empty.
	RepoRoot string
	// KeepStateDir leaves the cluster's state directory (logs, etcd data) in
	// place after Stop, for debugging.
	KeepStateDir bool
	// Node adds a node that runs containers (localcluster up --node: Debian's containerd
	// and a kubelet; root, `make node-tools`). Its Pods' logs are in Dir/logs/pods. One
	// such cluster runs on a machine at a time.
	Node bool
}

// Cluster is a running local control plane.
type Cluster struct {
	// Config is an admin (system:masters) client config.
	Config *rest.Config
	// Client is a clientset built from Config.
	Client kubernetes.Interface
	// Kubeconfig is the path of the admin kubeconfig file.
	Kubeconfig string
	// Dir is the state directory (logs/ holds every component's log).
	Dir string
	// OperatorEnv is added to the environment of the operators StartOperator starts (a
	// benchmark's GOMEMLIMIT), and to theirs only.
	OperatorEnv []string

	// metricsCert and metricsKey are the operators' metrics serving certificate.
	metricsCert, metricsKey string
	// archive, once started, is where the operators archive (StartArchive).
	archive *Archive

	root     string
	bin      string
	keepDir  bool
	watchdog *exec.Cmd
}

// StartCluster starts a new cluster in a fresh temporary directory. ctx
// bounds the startup. Free ports are used, so it can run next to the demo
// cluster of `make cluster-up`.
func StartCluster(ctx context.Context, opts Options) (*Cluster, error) {
	root := opts.RepoRoot
	if root == "" {
		var err error
		if root, err = findRepoRoot(); err != nil {
			return nil, fmt.Errorf("locate repository root: %w", err)
		}
	}
	bin := filepath.Join(root, "bin")
	lc, kwok, stages := filepath.Join(bin, "localcluster"), filepath.Join(bin, "kwok"), filepath.Join(bin, "kwok-stages.yaml")
	for _, f := range []string{lc, kwok, stages} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("%s is missing; run `make localcluster-tools` first: %w", f, err)
		}
	}

	dir, err := os.MkdirTemp("", "stepwise-e2e-")
	if err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	c := &Cluster{Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"), root: root, bin: lc, keepDir: opts.KeepStateDir}

	up := exec.CommandContext(ctx, lc, "up", "--dir", dir, "--kwok", kwok, "--kwok-stages", stages)
	if opts.Node {
		pause := filepath.Join(bin, "images", "localcluster-pause.tar")
		if _, err := os.Stat(pause); err != nil {
			return nil, fmt.Errorf("%s is missing; run `make node-tools` first: %w", pause, err)
		}
		up.Args = append(up.Args, "--node", "--node-images", pause)
	}
	if deadline, ok := ctx.Deadline(); ok {
		up.Args = append(up.Args, "--timeout", time.Until(deadline).Round(time.Second).String())
	}
	if out, err := up.CombinedOutput(); err != nil {
		// up stops what it started when it fails; logs stay in dir.
		return nil, fmt.Errorf("localcluster up (logs in %s/logs): %w\n%s", dir, err, out)
	}

	if err := c.startWatchdog(); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	if c.metricsCert, c.metricsKey, err = c.metricsCertificate(); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return nil, errors.Join(fmt.Errorf("load kubeconfig: %w", err), c.Stop())
	}
	// Tests create objects in bursts; client-side throttling only slows them.
	c.Config.QPS, c.Config.Burst = 200, 400
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return nil, errors.Join(fmt.Errorf("create clientset: %w", err), c.Stop())
	}
	return c, nil
}

// Root is the repository's root directory.
func (c *Cluster) Root() string { return c.root }

// LoadImages loads OCI archives into the node's containerd (a cluster started with
// Options.Node): what pushing them to a registry the node pulls from would do.
func (c *Cluster) LoadImages(ctx context.Context, archives ...string) error {
	out, err := exec.CommandContext(ctx, c.bin, append([]string{"load-image", "--dir", c.Dir}, archives...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("localcluster load-image: %w\n%s", err, out)
	}
	return nil
}

// Helm is the pinned Helm: $HELM (the Makefile exports it) or bin/helm.
func (c *Cluster) Helm() (string, error) {
	if path := os.Getenv("HELM"); path != "" {
		return path, nil
	}
	path := filepath.Join(c.root, "bin", "helm")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("no Helm in bin/ (run make helm): %w", err)
	}
	return path, nil
}

// startWatchdog starts a detached `localcluster down --wait-for-pid <us>`.
// A panicking test or `go test -timeout` ends the test binary without
// running TestMain's cleanup; the watchdog then stops the cluster so no
// control plane outlives the test run. Stop kills it on the normal path.
func (c *Cluster) startWatchdog() error {
	log, err := os.Create(filepath.Join(c.Dir, "logs", "watchdog.log"))
	if err != nil {
		return fmt.Errorf("create watchdog log: %w", err)
	}
	defer func() { _ = log.Close() }() // the child keeps its own descriptor
	cmd := exec.Command(c.bin, "down", "--dir", c.Dir, "--wait-for-pid", strconv.Itoa(os.Getpid()))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start watchdog: %w", err)
	}
	c.watchdog = cmd
	return nil
}

// Stop stops the cluster's processes (by the PIDs localcluster recorded) and
// removes its state directory unless Options.KeepStateDir was set.
func (c *Cluster) Stop() error {
	var errs []error
	out, err := exec.Command(c.bin, "down", "--dir", c.Dir).CombinedOutput()
	if err != nil {
		errs = append(errs, fmt.Errorf("localcluster down: %w\n%s", err, out))
	}
	if c.watchdog != nil {
		_ = c.watchdog.Process.Kill()
		_ = c.watchdog.Wait() // reap it; the error is just "killed"
	}
	if err == nil && !c.keepDir {
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, fmt.Errorf("remove state dir: %w", err))
		}
	}
	return errors.Join(errs...)
}

// CreateNamespace creates a uniquely named namespace, waits until its
// `default` ServiceAccount exists (pods are rejected before that), and
// deletes it when the test ends. It returns the namespace name.
func (c *Cluster) CreateNamespace(t testing.TB) string {
	t.Helper()
	ctx := t.Context()
	ns, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		// t.Context is already cancelled during cleanup.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := c.Client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
		}
	})
	err = wait.PollUntilContextTimeout(ctx, pollInterval, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("wait for the default ServiceAccount in %s: %v", ns.Name, err)
	}
	return ns.Name
}

// CreateFakeNode creates a node managed by kwok and waits (bounded by ctx
// and one minute) until it is Ready and free of the not-ready taint, so
// pods can be scheduled onto it. Pods select it with
// nodeSelector {FakeNodeLabel: FakeNodeLabelValue}; kwok then reports them
// Running and Ready without running anything.
func (c *Cluster) CreateFakeNode(ctx context.Context, name string) (*corev1.Node, error) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        name,
		Annotations: map[string]string{KwokNodeAnnotation: "fake"},
		Labels: map[string]string{
			FakeNodeLabel:          FakeNodeLabelValue,
			corev1.LabelHostname:   name,
			corev1.LabelOSStable:   "linux",
			corev1.LabelArchStable: "amd64",
		},
	}}
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create node %s: %w", name, err)
	}
	var ready *corev1.Node
	err := wait.PollUntilContextTimeout(ctx, pollInterval, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		ready = n
		return nodeSchedulable(n), nil
	})
	if err != nil {
		return nil, fmt.Errorf("wait for node %s to become Ready (kwok log: %s): %w", name, filepath.Join(c.Dir, "logs", "kwok.log"), err)
	}
	return ready, nil
}

// nodeSchedulable reports Ready=True without the taints the node lifecycle
// controller keeps on nodes it has not yet seen healthy.
func nodeSchedulable(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// findRepoRoot walks up from the working directory (the test package's
// directory under `go test`) to the go.mod of the product module.
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("get working directory: %w", err)
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declaresModule(data) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", modulePath)
		}
		dir = parent
	}
}

// declaresModule reports whether a go.mod declares the product module (and
// not, say, hack/localcluster's nested module).
func declaresModule(gomod []byte) bool {
	for _, line := range bytes.Split(gomod, []byte("\n")) {
		if string(bytes.TrimSpace(line)) == "module "+modulePath {
			return true
		}
	}
	return false
}

// ServiceAccount creates a ServiceAccount in ns and, when rules are given, grants it them
// with a Role of the same name: the rights a pipeline's steps act with.
func (c *Cluster) ServiceAccount(t testing.TB, ns, name string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(context.Background(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ServiceAccount %s/%s: %v", ns, name, err)
	}
	if len(rules) > 0 {
		c.Grant(t, ns, name, name, rules...)
	}
}

// Grant creates the Role ns/role with rules and binds it to the ServiceAccount ns/sa.
func (c *Cluster) Grant(t testing.TB, ns, sa, role string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	if _, err := c.Client.RbacV1().Roles(ns).Create(context.Background(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rules,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Role %s/%s: %v", ns, role, err)
	}
	c.Bind(t, ns, sa, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role})
}

// GrantClusterWide creates the ClusterRole name with rules and binds it to the
// ServiceAccount ns/sa in every namespace; both go when the test ends.
func (c *Cluster) GrantClusterWide(t testing.TB, ns, sa, name string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ClusterRole %s: %v", name, err)
	}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind ClusterRole %s to %s/%s: %v", name, ns, sa, err)
	}
	t.Cleanup(func() {
		_ = c.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = c.Client.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// BindClusterWide binds the ClusterRole role to the ServiceAccount ns/sa in every
// namespace and for non-resource paths (a ClusterRoleBinding, deleted when the test ends).
func (c *Cluster) BindClusterWide(t testing.TB, ns, sa, role string) {
	t.Helper()
	binding, err := c.Client.RbacV1().ClusterRoleBindings().Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: role + "-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("bind ClusterRole %s to %s/%s: %v", role, ns, sa, err)
	}
	t.Cleanup(func() {
		_ = c.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
}

// Bind grants the ServiceAccount ns/sa the role (a Role in ns or a ClusterRole) in ns, with
// a RoleBinding named after the role.
func (c *Cluster) Bind(t testing.TB, ns, sa string, role rbacv1.RoleRef) {
	t.Helper()
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    role,
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind %s %s to %s/%s: %v", role.Kind, role.Name, ns, sa, err)
	}
}

// KeepLogs copies the cluster's logs (control plane and operators) out of its state
// directory, which Stop removes, so that a failed run of suite can be read afterwards; it
// says where on stderr.
func (c *Cluster) KeepLogs(suite string) {
	dst, err := os.MkdirTemp("", "stepwise-"+suite+"-logs-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "keep logs: %v\n", err)
		return
	}
	if out, err := exec.Command("cp", "-a", filepath.Join(c.Dir, "logs"), dst).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "keep logs: %v: %s\n", err, out)
		return
	}
	fmt.Fprintf(os.Stderr, "%s: logs of the run kept in %s/logs\n", suite, dst)
}
