package framework

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

// InstallAdmissionPolicies creates or updates the ValidatingAdmissionPolicies and their
// bindings the install ships (deploy/base/admission-policy.yaml).
func (c *Cluster) InstallAdmissionPolicies(ctx context.Context) error {
	data, err := os.ReadFile(filepath.Join(c.root, "deploy", "base", "admission-policy.yaml"))
	if err != nil {
		return fmt.Errorf("read the admission policies: %w", err)
	}
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	policies := client.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var kind struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &kind); err != nil {
			return fmt.Errorf("decode the admission policies: %w", err)
		}
		switch kind.Kind {
		case "ValidatingAdmissionPolicy":
			var p admissionregistrationv1.ValidatingAdmissionPolicy
			if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
				return fmt.Errorf("decode policy: %w", err)
			}
			if _, err := policies.Create(ctx, &p, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create policy %s: %w", p.Name, err)
			}
		case "ValidatingAdmissionPolicyBinding":
			var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
			if err := yaml.UnmarshalStrict([]byte(doc), &b); err != nil {
				return fmt.Errorf("decode binding: %w", err)
			}
			if _, err := bindings.Create(ctx, &b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create binding %s: %w", b.Name, err)
			}
		case "MutatingAdmissionPolicy":
			var p admissionregistrationv1.MutatingAdmissionPolicy
			if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
				return fmt.Errorf("decode mutating policy: %w", err)
			}
			if _, err := client.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, &p, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create mutating policy %s: %w", p.Name, err)
			}
		case "MutatingAdmissionPolicyBinding":
			var b admissionregistrationv1.MutatingAdmissionPolicyBinding
			if err := yaml.UnmarshalStrict([]byte(doc), &b); err != nil {
				return fmt.Errorf("decode mutating binding: %w", err)
			}
			if _, err := client.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, &b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create mutating binding %s: %w", b.Name, err)
			}
		default:
			return fmt.Errorf("the admission policies hold a %s, which the test cluster does not install", kind.Kind)
		}
	}
	return c.WaitForAdmissionPolicies(ctx)
}

// WaitForAdmissionPolicies waits until the mutating policy stamps who creates a Pipeline (a
// server-side dry run) and the validating ones refuse a forged approver: the API server
// reads a custom resource's schema for the mutating policy a few seconds after the CRD is
// served, refusing creations (503) until then, and loads new policies asynchronously.
func (c *Cluster) WaitForAdmissionPolicies(ctx context.Context) error {
	client, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	pipelines := client.Resource(schema.GroupVersionResource{Group: "stepwise.dev", Version: "v1alpha1", Resource: "pipelines"}).Namespace("default")
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stepwise.dev/v1alpha1", "kind": "Pipeline",
		"metadata": map[string]any{"name": "admission-probe"},
		"spec":     map[string]any{"steps": []any{map[string]any{"name": "probe", "executor": "test.noop"}}},
	}}
	approvals := client.Resource(schema.GroupVersionResource{Group: "stepwise.dev", Version: "v1alpha1", Resource: "approvals"}).Namespace("default")
	forged := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stepwise.dev/v1alpha1", "kind": "Approval",
		"metadata": map[string]any{"name": "admission-probe"},
		"spec":     map[string]any{"pipeline": "p", "step": "s", "request": "r", "decision": "Approve", "user": "someone-else"},
	}}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		created, err := pipelines.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err
			return false, nil
		}
		if created.GetAnnotations()["stepwise.dev/created-by"] == "" {
			return false, nil
		}
		// And the validating policies are in force: a forged approver is refused.
		_, err = approvals.Create(ctx, forged, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		last = err
		return apierrors.IsForbidden(err), nil
	})
	if err != nil {
		return fmt.Errorf("wait for the admission policies to stamp a pipeline's creator (last error: %v): %w", last, err)
	}
	return nil
}

// InstallCRDs creates every CustomResourceDefinition in the repository's crd/ directory
// and waits until the API server serves them.
func (c *Cluster) InstallCRDs(ctx context.Context) error {
	return c.ApplyCRDs(ctx, nil)
}

// ApplyCRDs creates or updates every CustomResourceDefinition in the repository's crd/
// directory, each changed by edit first when it is not nil (e.g. to install an older,
// looser schema), and waits until the API server serves them.
func (c *Cluster) ApplyCRDs(ctx context.Context, edit func(*apiextensionsv1.CustomResourceDefinition)) error {
	client, err := apiextensions.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("apiextensions client: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(c.root, "crd", "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("find CRDs in %s/crd: %v", c.root, err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("read %s: %w", file, err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return fmt.Errorf("decode %s: %w", file, err)
		}
		if edit != nil {
			edit(&crd)
		}
		_, err = client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				current, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				current.Spec = crd.Spec
				_, err = client.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, current, metav1.UpdateOptions{})
				return err
			})
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", crd.Name, err)
		}
		err = wait.PollUntilContextTimeout(ctx, pollInterval, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("wait for CRD %s to be established: %w", crd.Name, err)
		}
	}
	return nil
}

// BinPath is the path of a program in the repository's bin/, such as "kubectl".
func (c *Cluster) BinPath(name string) string { return filepath.Join(c.root, "bin", name) }

// Operator is a stepwise-operator process started from bin/ against the cluster.
type Operator struct {
	cmd *exec.Cmd
	// done is closed once the process has exited; waitErr says how, read after done.
	done    chan struct{}
	waitErr error
	Log     string
	// MetricsURL and HealthURL are known after WaitReady: the endpoints listen on port 0,
	// so only the log tells where. MetricsURL is HTTPS, behind the API server's
	// authentication: read it with Cluster.AdminMetricsClient.
	MetricsURL string
	HealthURL  string
}

// OperatorNamespace is the operator's --namespace under StartOperator: where it publishes
// its executor catalogue (ConfigMap stepwise-executors).
const OperatorNamespace = "default"

// StartOperator runs bin/stepwise-operator against the cluster with the test executors,
// without leader election, its endpoints on loopback, and its log in the cluster's dir.
// extraArgs come last, so they override those defaults (the Go flag package keeps the
// last value): e.g. --kubeconfig of another identity, --leader-elect=true or -v=0.
func (c *Cluster) StartOperator(extraArgs ...string) (*Operator, error) {
	bin := c.BinPath("stepwise-operator")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s is missing; run `make build` first: %w", bin, err)
	}
	logPath := filepath.Join(c.Dir, "logs", fmt.Sprintf("operator-%d.log", time.Now().UnixNano()))
	log, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create operator log: %w", err)
	}
	defer func() { _ = log.Close() }() // the child keeps its own descriptor
	args := []string{
		"--kubeconfig", c.Kubeconfig,
		"--enable-test-executors",
		"--leader-elect=false",
		"--metrics-bind-address=127.0.0.1:0",
		"--metrics-tls-cert-file=" + c.metricsCert,
		"--metrics-tls-key-file=" + c.metricsKey,
		"--health-probe-bind-address=127.0.0.1:0",
		"--shutdown-grace-period=5s",
		// The executor catalogue goes to a namespace every cluster has.
		"--namespace=" + OperatorNamespace,
		"-v=2",
	}
	if c.archive != nil {
		args = append(args, c.archive.args()...)
	}
	args = append(args, extraArgs...)
	cmd := exec.Command(bin, args...)
	if len(c.OperatorEnv) > 0 {
		cmd.Env = append(os.Environ(), c.OperatorEnv...)
	}
	cmd.Stdout, cmd.Stderr = log, log
	// The operator must not outlive a test binary that dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start operator: %w", err)
	}
	o := &Operator{cmd: cmd, done: make(chan struct{}), Log: logPath}
	go func() {
		o.waitErr = cmd.Wait()
		close(o.done)
	}()
	return o, nil
}

// servingRE finds the addresses the operator logs once its endpoints listen, in the text
// format (`"Serving" endpoint="metrics" address="..." tls=true`) or JSON
// (`"msg":"Serving","endpoint":"metrics",...,"tls":true`).
var servingRE = regexp.MustCompile(`"Serving"[ ,]"?endpoint"?[=:]"(metrics|health)"[ ,]"?address"?[=:]"([^"]+)"[ ,]"?tls"?[=:](true|false)`)

// WaitServing reads the endpoints' addresses (MetricsURL, HealthURL) from the log, once
// they listen. It fails at once if the operator exits.
func (o *Operator) WaitServing(ctx context.Context) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := o.exited(); err != nil {
			return false, err
		}
		data, err := os.ReadFile(o.Log)
		if err != nil {
			return false, fmt.Errorf("read operator log: %w", err)
		}
		for _, m := range servingRE.FindAllStringSubmatch(string(data), -1) {
			scheme := "http://"
			if m[3] == "true" {
				scheme = "https://"
			}
			if m[1] == "metrics" {
				o.MetricsURL = scheme + m[2] + "/metrics"
			} else {
				o.HealthURL = scheme + m[2] + "/readyz"
			}
		}
		return o.MetricsURL != "" && o.HealthURL != "", nil
	})
	if err != nil {
		return fmt.Errorf("wait for the operator to serve its endpoints (log: %s): %w", o.Log, err)
	}
	return nil
}

// WaitReady waits for the endpoints (WaitServing), then until /readyz answers OK: the
// operator's caches have synced. It fails at once if the operator exits.
func (o *Operator) WaitReady(ctx context.Context) error {
	if err := o.WaitServing(ctx); err != nil {
		return err
	}
	client := &http.Client{Timeout: 10 * time.Second}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := o.exited(); err != nil {
			return false, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.HealthURL, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the operator to be ready (log: %s): %w", o.Log, err)
	}
	return nil
}

// exited is the operator's exit, as an error, once it has exited; nil while it runs.
func (o *Operator) exited() error {
	select {
	case <-o.done:
		return fmt.Errorf("operator exited: %v", o.waitErr)
	default:
		return nil
	}
}

// PID is the operator's process ID.
func (o *Operator) PID() int { return o.cmd.Process.Pid }

// Exited is closed once the operator's process has exited.
func (o *Operator) Exited() <-chan struct{} { return o.done }

// Kill stops the operator with SIGKILL, as a crash or an OOM kill would.
func (o *Operator) Kill() error {
	if err := o.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill operator %d: %w", o.cmd.Process.Pid, err)
	}
	<-o.done
	// Killed on purpose, so an exit error is expected; a failure to wait is not.
	var exitErr *exec.ExitError
	if o.waitErr != nil && !errors.As(o.waitErr, &exitErr) {
		return fmt.Errorf("wait for operator %d: %w", o.cmd.Process.Pid, o.waitErr)
	}
	return nil
}

// Stop sends SIGTERM and waits, bounded, for the operator to exit. Stopping an operator
// that has exited returns how it exited. Signalling through the process handle is safe
// against PID reuse: it is a no-op once the process has been waited for.
func (o *Operator) Stop() error {
	if err := o.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop operator %d: %w", o.cmd.Process.Pid, err)
	}
	select {
	case <-o.done:
		var exitErr *exec.ExitError
		if errors.As(o.waitErr, &exitErr) {
			return fmt.Errorf("operator exited with %v (log: %s)", exitErr, o.Log)
		}
		return o.waitErr
	case <-time.After(30 * time.Second):
		_ = o.Kill()
		return fmt.Errorf("operator did not stop within 30s of SIGTERM (log: %s)", o.Log)
	}
}
