package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// componentOrder lists the components in start order; `down` stops them in
// reverse.
func componentOrder() []string {
	return []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "containerd", "kubelet"}
}

// controllers are those a kubeadm cluster runs that matter to workloads, RBAC and
// namespaces, and cost little here; volume, certificate-signing, node-IPAM and
// bootstrap-token controllers are left out (no storage or kubelets to serve). The HPA
// controller runs, though no metrics are served: it still holds a Deployment within its
// autoscaler's bounds, which node.drain raises for a replacement first.
// Without node-lifecycle-controller new nodes keep the node.kubernetes.io/not-ready taint;
// without serviceaccount-controller no `default` ServiceAccount exists and admission rejects
// every pod; without clusterrole-aggregation-controller the built-in admin, edit and view
// ClusterRoles have no rules, so a RoleBinding to `edit` grants nothing.
var controllers = []string{
	"clusterrole-aggregation-controller",
	"cronjob-controller",
	"daemonset-controller",
	"deployment-controller",
	"disruption-controller",
	"endpoints-controller",
	"endpointslice-controller",
	"endpointslice-mirroring-controller",
	"garbage-collector-controller",
	"horizontal-pod-autoscaler-controller",
	"job-controller",
	"namespace-controller",
	"node-lifecycle-controller",
	"pod-garbage-collector-controller",
	"replicaset-controller",
	"replicationcontroller-controller",
	"resourcequota-controller",
	"root-ca-certificate-publisher-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"statefulset-controller",
	"taint-eviction-controller",
	"ttl-after-finished-controller",
	"ttl-controller",
}

// kwokNodeAnnotation marks the nodes kwok manages.
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

type upOptions struct {
	dir        string
	kwok       string
	kwokStages string
	node       bool
	nodeImages []string
	// alpha serves the alpha APIs the product uses where a cluster serves them.
	alpha   bool
	timeout time.Duration
}

// The alpha features the product uses where a cluster serves them, and the API versions
// they serve: the EvictionRequest API, which node.drain asks through.
const (
	alphaFeatureGates  = "EvictionRequestAPI=true"
	alphaRuntimeConfig = "lifecycle.k8s.io/v1alpha1=true"
)

func runUp(args []string) error {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	var o upOptions
	fs.StringVar(&o.dir, "dir", ".local", "state directory (certs, etcd data, logs, pids, kubeconfig)")
	fs.StringVar(&o.kwok, "kwok", "", "path to the kwok binary; empty starts no kwok")
	fs.StringVar(&o.kwokStages, "kwok-stages", "", "path to kwok's stage config (required with --kwok)")
	fs.BoolVar(&o.node, "node", false, "also start a node that runs containers: containerd and a kubelet (needs root and `make node-deps`)")
	images := fs.String("node-images", "", "with --node: OCI archives (comma-separated) to load into the node's containerd; the pause image ("+pauseImage+") must be one")
	fs.BoolVar(&o.alpha, "alpha", true, "serve the alpha APIs the product uses where a cluster serves them ("+alphaFeatureGates+", "+alphaRuntimeConfig+"); --alpha=false starts a cluster without them")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long to wait for the cluster to become ready")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *images != "" {
		o.nodeImages = strings.Split(*images, ",")
	}
	if len(o.nodeImages) > 0 && !o.node {
		return errors.New("--node-images needs --node")
	}
	if o.kwok != "" && o.kwokStages == "" {
		return errors.New("--kwok-stages is required with --kwok")
	}
	// Absolute paths: they end up in child arguments (which `down` matches
	// against) and children must not depend on our working directory.
	paths := []*string{&o.dir, &o.kwok, &o.kwokStages}
	for i := range o.nodeImages {
		paths = append(paths, &o.nodeImages[i])
	}
	for _, p := range paths {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return fmt.Errorf("resolve %s: %w", *p, err)
		}
		*p = abs
	}
	for _, p := range append([]string{o.kwok, o.kwokStages}, o.nodeImages...) {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("check input: %w", err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	l := layout{dir: o.dir}
	if o.node {
		if err := checkNodeTools(); err != nil {
			return err
		}
	}

	if healthy(ctx, l, o) {
		fmt.Printf("cluster in %s is already up; kubeconfig: %s\n", l.dir, l.kubeconfig())
		return nil
	}
	// Anything left over is from a cluster that is down or broken: stop what
	// still runs and start from empty state, which keeps `up` predictable.
	if err := stopAll(l); err != nil {
		return fmt.Errorf("clean up previous cluster: %w", err)
	}
	for _, p := range []string{l.etcdData(), l.pki(), l.kubeconfig(), l.node()} {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("remove stale state: %w", err)
		}
	}

	started := time.Now()
	if err := start(ctx, l, o); err != nil {
		// Leave nothing half-running behind; logs stay for diagnosis.
		if stopErr := stopAll(l); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stop after failure: %w", stopErr))
		}
		return err
	}
	fmt.Printf("cluster is up after %s; kubeconfig: %s\n", time.Since(started).Round(100*time.Millisecond), l.kubeconfig())
	return nil
}

// healthy reports whether the cluster recorded in the state dir has all its
// processes running and its API server ready.
func healthy(ctx context.Context, l layout, o upOptions) bool {
	for _, name := range componentOrder() {
		if (name == "kwok" && o.kwok == "") || ((name == "containerd" || name == "kubelet") && !o.node) {
			continue
		}
		if pid, err := l.ownedPID(name); err != nil || pid == 0 {
			return false
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", l.kubeconfig())
	if err != nil {
		return false
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil
}

func start(ctx context.Context, l layout, o upOptions) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary: %w", err)
	}
	// 0700: the directories hold keys and the admin token (etcd insists).
	for _, d := range []string{l.logs(), l.pids(), l.etcdData()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	creds, err := generatePKI(l.pki())
	if err != nil {
		return fmt.Errorf("generate credentials: %w", err)
	}
	// Free ports rather than fixed ones, so several clusters (the demo and
	// the e2e tests) can run side by side.
	ports, err := freePorts(3)
	if err != nil {
		return fmt.Errorf("pick ports: %w", err)
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	apiPort := ports[2]

	var children []*child
	run := func(name, bin string, args ...string) error {
		c, err := l.start(name, bin, args...)
		if err != nil {
			return err
		}
		children = append(children, c)
		return nil
	}
	// waitFor polls cond until it holds, the deadline passes or a child dies.
	waitFor := func(what string, cond func(context.Context) bool) error {
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			for _, c := range children {
				select {
				case <-c.exited:
					return false, fmt.Errorf("%s exited (%v); last log lines of %s:\n%s", c.name, c.err, c.log, tail(c.log, 2000))
				default:
				}
			}
			return cond(ctx), nil
		})
		if err != nil {
			return fmt.Errorf("wait for %s: %w", what, err)
		}
		return nil
	}

	if err := run("etcd", self, "etcd",
		"--data-dir="+l.etcdData(),
		"--listen-client-url="+etcdURL,
		"--listen-peer-url=http://127.0.0.1:"+strconv.Itoa(ports[1]),
	); err != nil {
		return err
	}
	if err := waitFor("etcd", func(ctx context.Context) bool { return httpOK(ctx, etcdURL+"/health") }); err != nil {
		return err
	}

	apiserverArgs := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		// Loopback is a valid advertise address only without an endpoint
		// reconciler; nothing in this cluster dials the `kubernetes`
		// Service, so its endpoints are not needed.
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--tls-cert-file=" + creds.serverCert,
		"--tls-private-key-file=" + creds.serverKey,
		"--token-auth-file=" + creds.tokenFile,
		// Node: the kubelet's own rights, by its certificate's name.
		"--authorization-mode=Node,RBAC",
		"--client-ca-file=" + creds.caCert,
		// kubectl logs, exec and port-forward reach the node's kubelet at its InternalIP
		// (its name resolves nowhere), as a client the kubelet authorizes.
		"--kubelet-client-certificate=" + creds.apiserverKubeletCert,
		"--kubelet-client-key=" + creds.apiserverKubeletKey,
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + creds.saKey,
		"--service-account-signing-key-file=" + creds.saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		// The aggregation layer, for APIServices such as the operator's history API: the
		// API server forwards requests with the user in headers, under a client
		// certificate that the extension-apiserver-authentication ConfigMap tells
		// aggregated servers to trust.
		"--requestheader-client-ca-file=" + creds.frontProxyCA,
		"--requestheader-allowed-names=" + frontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + creds.frontProxyCert,
		"--proxy-client-key-file=" + creds.frontProxyKey,
	}
	if o.alpha {
		apiserverArgs = append(apiserverArgs, "--feature-gates="+alphaFeatureGates, "--runtime-config="+alphaRuntimeConfig)
	}
	if err := run("kube-apiserver", self, append([]string{"kube-apiserver"}, apiserverArgs...)...); err != nil {
		return err
	}
	if err := writeKubeconfig(l.kubeconfig(), "https://127.0.0.1:"+strconv.Itoa(apiPort), creds.caCert, &clientcmdapi.AuthInfo{Token: creds.adminToken}); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", l.kubeconfig())
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	if err := waitFor("kube-apiserver /readyz", func(ctx context.Context) bool {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil
	}); err != nil {
		return err
	}

	// Serving ports 0: no health endpoints are needed, and fixed default
	// ports would clash between two clusters.
	if err := run("kube-controller-manager", self, "kube-controller-manager",
		"--kubeconfig="+l.kubeconfig(),
		"--controllers="+strings.Join(controllers, ","),
		// The token controller signs legacy token Secrets with the key the API server
		// verifies with; the root-CA publisher puts the CA into kube-root-ca.crt.
		"--service-account-private-key-file="+creds.saKey,
		"--root-ca-file="+creds.caCert,
		"--leader-elect=false",
		"--secure-port=0",
		"--kube-api-qps=100",
		"--kube-api-burst=200",
		// An autoscaler's new bounds take effect in a second, not the default 15.
		"--horizontal-pod-autoscaler-sync-period=1s",
	); err != nil {
		return err
	}
	if err := run("kube-scheduler", self, "kube-scheduler",
		"--kubeconfig="+l.kubeconfig(),
		"--leader-elect=false",
		"--secure-port=0",
	); err != nil {
		return err
	}
	// The serviceaccount-controller creating `default` proves the
	// controller-manager works; pods cannot be created before it exists.
	if err := waitFor("the default ServiceAccount", func(ctx context.Context) bool {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}); err != nil {
		return err
	}

	if o.kwok != "" {
		if err := startKwok(ctx, o, l, cs, run, waitFor); err != nil {
			return err
		}
	}
	if o.node {
		return startNode(ctx, l, self, creds, "https://127.0.0.1:"+strconv.Itoa(apiPort), apiPort, o.nodeImages, run, waitFor, cs)
	}
	return nil
}

// startKwok starts kwok for the nodes annotated kwokNodeAnnotation and waits until such a
// node can take Pods.
func startKwok(ctx context.Context, o upOptions, l layout, cs kubernetes.Interface,
	run func(name, bin string, args ...string) error, waitFor func(string, func(context.Context) bool) error) error {
	if err := run("kwok", o.kwok,
		"--kubeconfig="+l.kubeconfig(),
		"--config="+o.kwokStages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+kwokNodeAnnotation+"=fake",
		"--node-ip=10.240.0.1",
		"--cidr=10.244.0.0/16",
		// kwok's own default is 0 (no leases); without a heartbeat
		// node-lifecycle-controller marks nodes unreachable after ~50s.
		"--node-lease-duration-seconds=40",
	); err != nil {
		return err
	}
	return probeKwok(ctx, cs, waitFor)
}

// probeKwok creates a throw-away fake node and waits until kwok reports it
// Ready and node-lifecycle-controller has lifted the not-ready taint, i.e.
// pods could be scheduled onto kwok nodes now.
func probeKwok(ctx context.Context, cs kubernetes.Interface, waitFor func(string, func(context.Context) bool) error) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        "localcluster-probe",
		Annotations: map[string]string{kwokNodeAnnotation: "fake"},
		Labels:      map[string]string{"type": "kwok"},
	}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create probe node: %w", err)
	}
	if err := waitFor("kwok to make a fake node Ready", func(ctx context.Context) bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		return err == nil && nodeSchedulable(n)
	}); err != nil {
		return err
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete probe node: %w", err)
	}
	return nil
}

func nodeSchedulable(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// stopAll stops every recorded component, last started first; the node's Pods, mounts
// and network go with the node.
func stopAll(l layout) error {
	var errs []error
	stop := func(name string) error {
		if err := l.stop(name, 15*time.Second); err != nil {
			return fmt.Errorf("stop %s: %w", name, err)
		}
		return nil
	}
	if err := stopNode(context.Background(), l, stop); err != nil {
		errs = append(errs, err)
	}
	names := componentOrder()
	slices.Reverse(names)
	for _, name := range names {
		if err := l.stop(name, 15*time.Second); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// writeKubeconfig writes a kubeconfig for server, trusting caFile, as auth.
func writeKubeconfig(path, server, caFile string, auth *clientcmdapi.AuthInfo) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("read CA: %w", err)
	}
	const name = "localcluster"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	kc.AuthInfos[name] = auth
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// freePorts asks the kernel for n distinct free loopback ports. Holding all
// listeners open until every port is known keeps them distinct; the ports
// can in theory be taken again before the components bind them, which would
// show up as a component exiting during startup.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("listen on a free port: %w", err)
		}
		defer lis.Close()
		ports = append(ports, lis.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func httpOK(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
