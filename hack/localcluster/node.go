package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	criclient "k8s.io/cri-client/pkg"
)

// The node that runs containers: one per machine, since its bridge, its Pod subnet and the
// rule that takes Pods to the API server are the machine's (see docs in README.md).
const (
	nodeName = "localnode"
	// nodeBridge is the Pods' bridge; its address is the node's and the Pods' gateway.
	nodeBridge  = "lc0"
	nodeAddress = "10.88.0.1"
	podSubnet   = "10.88.0.0/24"
	// kubernetesServiceIP is the first address of --service-cluster-ip-range: the
	// `kubernetes` Service, which in-cluster clients (KUBERNETES_SERVICE_HOST) dial.
	kubernetesServiceIP = "10.96.0.1"
	// pauseImage is each Pod's sandbox container, built from ./pause (make builds it and
	// passes it with --node-images): nothing is pulled.
	pauseImage = "localhost/localcluster-pause:v1"
	// criNamespace is the containerd namespace the CRI plugin keeps Kubernetes' images in.
	criNamespace = "k8s.io"
	// cniBinDir holds Debian's containernetworking-plugins.
	cniBinDir = "/usr/lib/cni"
)

func (l layout) node() string              { return filepath.Join(l.dir, "node") }
func (l layout) containerdDir() string     { return filepath.Join(l.node(), "containerd") }
func (l layout) containerdConfig() string  { return filepath.Join(l.containerdDir(), "config.toml") }
func (l layout) containerdSocket() string  { return filepath.Join(l.containerdDir(), "containerd.sock") }
func (l layout) cniConfDir() string        { return filepath.Join(l.node(), "cni", "net.d") }
func (l layout) kubeletDir() string        { return filepath.Join(l.node(), "kubelet") }
func (l layout) kubeletConfig() string     { return filepath.Join(l.kubeletDir(), "config.yaml") }
func (l layout) kubeletKubeconfig() string { return filepath.Join(l.kubeletDir(), "kubeconfig") }
func (l layout) podLogs() string           { return filepath.Join(l.logs(), "pods") }
func (l layout) hasNode() bool             { _, err := os.Stat(l.containerdConfig()); return err == nil }
func (l layout) criEndpoint() string       { return "unix://" + l.containerdSocket() }
func (l layout) nodeRuleComment() string   { return "localcluster " + l.dir }
func (l layout) kubeletRootDir() string    { return filepath.Join(l.kubeletDir(), "root") }
func (l layout) kubeletCertDir() string    { return filepath.Join(l.kubeletDir(), "pki") }
func (l layout) cniIPAMDir() string        { return filepath.Join(l.node(), "cni", "ipam") }
func (l layout) containerdRoot() string    { return filepath.Join(l.containerdDir(), "root") }
func (l layout) containerdState() string   { return filepath.Join(l.containerdDir(), "state") }

// containerdConfig runs Debian's containerd (1.6) with everything in the state dir, the
// CRI plugin on, runc with cgroupfs (the machines mount cgroup v1), and CNI's bridge.
//
// restrict_oom_score_adj: these machines refuse a negative oom_score_adj even to root
// (runc: "failed to update /proc/self/oom_score_adj: Permission denied"), and the kubelet
// asks -998 for every sandbox; restricted, containerd asks no less than its own score.
func containerdConfig(l layout) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[6]q
    conf_dir = %[7]q
`, l.containerdRoot(), l.containerdState(), l.containerdSocket(), l.containerdSocket()+".ttrpc",
		pauseImage, cniBinDir, l.cniConfDir())
}

// cniConfig puts Pods on the bridge with addresses of podSubnet; the bridge is the
// gateway, so a Pod's packets to the `kubernetes` Service reach the host's rule.
func cniConfig(l layout) string {
	return fmt.Sprintf(`{"cniVersion": "0.4.0", "name": "localcluster", "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
`, nodeBridge, l.cniIPAMDir(), podSubnet, nodeAddress)
}

// kubeletConfig serves the kubelet's API on the node's own address (the Pods' bridge, not
// reachable from outside the machine), where the API server reaches it for logs, exec and
// port-forward; it authenticates and authorizes
// its callers by the API server, runs with cgroupfs on cgroup v1 (failCgroupV1: false:
// v1.37 refuses cgroup v1 otherwise) and evicts nothing for lack of disk or memory, which
// a shared test machine may well look like.
func kubeletConfig(l layout, creds *pki, port, healthzPort int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %q
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: %q
podLogsDir: %q
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, nodeAddress, port, healthzPort, creds.caCert, l.criEndpoint(), l.podLogs())
}

// checkNodeTools says which of the node's programs (Debian's containerd, runc, iptables,
// iproute2 and containernetworking-plugins; `make node-deps` installs them) are missing,
// and that the node needs root.
func checkNodeTools() error {
	if os.Geteuid() != 0 {
		return errors.New("a node that runs containers needs root (containerd, runc, iptables)")
	}
	var missing []string
	for _, tool := range []string{"containerd", "ctr", "runc", "iptables", "ip", "sysctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if _, err := os.Stat(filepath.Join(cniBinDir, "bridge")); err != nil {
		missing = append(missing, filepath.Join(cniBinDir, "bridge"))
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s: run `make node-deps` (apt-get install containerd runc containernetworking-plugins iptables iproute2)", strings.Join(missing, ", "))
	}
	return nil
}

// startNode starts containerd and a kubelet registered as nodeName, loads images into
// containerd and waits for the node to be Ready. The kubelet authenticates with a client
// certificate of system:node:localnode (the Node authorizer's), and Pods reach the API
// server, which listens on loopback, by the `kubernetes` Service's address (see
// routeServiceToAPIServer).
func startNode(ctx context.Context, l layout, self string, creds *pki, apiServer string, apiPort int, images []string,
	run func(name, bin string, args ...string) error, waitFor func(string, func(context.Context) bool) error, cs kubernetes.Interface) error {
	for _, d := range []string{l.containerdRoot(), l.containerdState(), l.cniConfDir(), l.cniIPAMDir(), l.kubeletRootDir(), l.kubeletCertDir(), l.podLogs()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	ports, err := freePorts(2)
	if err != nil {
		return fmt.Errorf("pick the kubelet's ports: %w", err)
	}
	files := map[string]string{
		l.containerdConfig(): containerdConfig(l),
		filepath.Join(l.cniConfDir(), "10-localcluster.conflist"): cniConfig(l),
		l.kubeletConfig(): kubeletConfig(l, creds, ports[0], ports[1]),
	}
	for path, data := range files {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := writeKubeconfig(l.kubeletKubeconfig(), apiServer, creds.caCert,
		&clientcmdapi.AuthInfo{ClientCertificate: creds.kubeletCert, ClientKey: creds.kubeletKey}); err != nil {
		return err
	}
	if err := routeServiceToAPIServer(l, apiPort); err != nil {
		return err
	}

	containerd, err := exec.LookPath("containerd")
	if err != nil {
		return fmt.Errorf("find containerd: %w", err)
	}
	if err := run("containerd", containerd, "--config", l.containerdConfig()); err != nil {
		return err
	}
	if err := waitFor("containerd", func(ctx context.Context) bool {
		return exec.CommandContext(ctx, "ctr", "--address", l.containerdSocket(), "version").Run() == nil
	}); err != nil {
		return err
	}
	if err := loadImages(ctx, l, images); err != nil {
		return err
	}
	if err := run("kubelet", self, "kubelet",
		"--config="+l.kubeletConfig(),
		"--kubeconfig="+l.kubeletKubeconfig(),
		"--root-dir="+l.kubeletRootDir(),
		"--cert-dir="+l.kubeletCertDir(),
		"--hostname-override="+nodeName,
		"--node-ip="+nodeAddress,
	); err != nil {
		return err
	}
	return waitFor("the node "+nodeName+" to be Ready", func(ctx context.Context) bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		return err == nil && nodeSchedulable(n)
	})
}

// routeServiceToAPIServer makes the Pods' bridge (made here, so that its address is
// known before the first Pod) and takes the Pods' connections to the `kubernetes` Service
// to the API server on loopback: what kube-proxy does for a Service, for this one Service,
// with route_localnet so that a packet from the bridge may go to 127.0.0.1.
func routeServiceToAPIServer(l layout, apiPort int) error {
	if err := removeNodeNetwork(l); err != nil {
		return err
	}
	cmds := [][]string{
		{"ip", "link", "add", nodeBridge, "type", "bridge"},
		{"ip", "addr", "add", nodeAddress + "/24", "dev", nodeBridge},
		{"ip", "link", "set", nodeBridge, "up"},
		{"sysctl", "-q", "-w", "net.ipv4.conf." + nodeBridge + ".route_localnet=1"},
		append([]string{"iptables", "-t", "nat", "-A", "PREROUTING"}, serviceRule(l, apiPort)...),
	}
	for _, c := range cmds {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(c, " "), err, out)
		}
	}
	return os.WriteFile(filepath.Join(l.node(), "api-port"), []byte(strconv.Itoa(apiPort)), 0o600)
}

func serviceRule(l layout, apiPort int) []string {
	return []string{"-i", nodeBridge, "-d", kubernetesServiceIP + "/32", "-p", "tcp", "--dport", "443",
		"-m", "comment", "--comment", l.nodeRuleComment(),
		"-j", "DNAT", "--to-destination", "127.0.0.1:" + strconv.Itoa(apiPort)}
}

// removeNodeNetwork deletes the bridge and this cluster's rule, if there.
func removeNodeNetwork(l layout) error {
	var errs []error
	if port, err := os.ReadFile(filepath.Join(l.node(), "api-port")); err == nil {
		p, _ := strconv.Atoi(strings.TrimSpace(string(port)))
		rule := serviceRule(l, p)
		if exec.Command("iptables", append([]string{"-t", "nat", "-C", "PREROUTING"}, rule...)...).Run() == nil {
			if out, err := exec.Command("iptables", append([]string{"-t", "nat", "-D", "PREROUTING"}, rule...)...).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("delete the Service rule: %w: %s", err, out))
			}
		}
	}
	if exec.Command("ip", "link", "show", nodeBridge).Run() == nil {
		if out, err := exec.Command("ip", "link", "delete", nodeBridge).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("delete the bridge %s: %w: %s", nodeBridge, err, out))
		}
	}
	return errors.Join(errs...)
}

// loadImages imports OCI archives (make images, or the pause image) into the node's
// containerd, where the kubelet finds them by name, NAME:TAG, and by digest,
// NAME@sha256:...: what a user's registry would serve. containerd's CRI finds an image by
// the names it is stored under only, so each is stored under its digest's name too.
func loadImages(ctx context.Context, l layout, archives []string) error {
	ctr := func(args ...string) ([]byte, error) {
		return exec.CommandContext(ctx, "ctr", append([]string{"--address", l.containerdSocket(), "--namespace", criNamespace}, args...)...).CombinedOutput()
	}
	for _, a := range archives {
		out, err := ctr("images", "import", a)
		if err != nil {
			return fmt.Errorf("import %s into the node's containerd: %w: %s", a, err, out)
		}
		for _, imported := range importedImages(string(out)) {
			if out, err := ctr("images", "tag", "--force", imported.name, imported.byDigest()); err != nil {
				return fmt.Errorf("name %s by its digest in the node's containerd: %w: %s", imported.name, err, out)
			}
		}
	}
	return nil
}

// importedImage is an image `ctr images import` stored: its name and manifest's digest.
type importedImage struct{ name, digest string }

// byDigest is the image's name by digest: its repository, @, its digest.
func (i importedImage) byDigest() string {
	repo := i.name
	if colon := strings.LastIndex(repo, ":"); colon > strings.LastIndex(repo, "/") {
		repo = repo[:colon]
	}
	return repo + "@" + i.digest
}

// importedImages reads what `ctr images import` printed: "unpacking NAME (sha256:HEX)...done".
func importedImages(out string) []importedImage {
	var images []importedImage
	for line := range strings.Lines(out) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "unpacking ")
		if !ok {
			continue
		}
		name, rest, ok := strings.Cut(rest, " (")
		digest, _, found := strings.Cut(rest, ")")
		if ok && found && strings.HasPrefix(digest, "sha256:") {
			images = append(images, importedImage{name: name, digest: digest})
		}
	}
	return images
}

// runLoadImage loads OCI archives into the node of the cluster in --dir, as `kind load
// image-archive` does: the way to give the node an image without a registry.
func runLoadImage(args []string) error {
	fs := flag.NewFlagSet("load-image", flag.ContinueOnError)
	dir := fs.String("dir", ".local", "state directory given to up --node")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long the loads may take")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("usage: localcluster load-image --dir DIR ARCHIVE.tar [ARCHIVE.tar]")
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", *dir, err)
	}
	l := layout{dir: abs}
	if pid, err := l.ownedPID("containerd"); err != nil || pid == 0 {
		return fmt.Errorf("no node runs in %s: start it with up --node", abs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := loadImages(ctx, l, fs.Args()); err != nil {
		return err
	}
	fmt.Printf("loaded %s into the node\n", strings.Join(fs.Args(), ", "))
	return nil
}

// stopPods stops and removes every Pod sandbox through the CRI, as the kubelet would: the
// containers, their shims (which outlive containerd), network namespaces and addresses
// go with them. Run after the kubelet stopped (it would start them again) and before
// containerd stops.
func stopPods(ctx context.Context, l layout) error {
	if _, err := os.Stat(l.containerdSocket()); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rs, err := criclient.NewRemoteRuntimeServiceBuilder().WithEndpoint(l.criEndpoint()).WithConnectionTimeout(10 * time.Second).Build(ctx)
	if err != nil {
		return fmt.Errorf("connect to containerd: %w", err)
	}
	sandboxes, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{})
	if err != nil {
		return fmt.Errorf("list the Pods: %w", err)
	}
	var errs []error
	for _, s := range sandboxes {
		if err := rs.StopPodSandbox(ctx, s.Id); err != nil {
			errs = append(errs, fmt.Errorf("stop Pod %s/%s: %w", s.Metadata.Namespace, s.Metadata.Name, err))
			continue
		}
		if err := rs.RemovePodSandbox(ctx, s.Id); err != nil {
			errs = append(errs, fmt.Errorf("remove Pod %s/%s: %w", s.Metadata.Namespace, s.Metadata.Name, err))
		}
	}
	return errors.Join(errs...)
}

// unmountUnder detaches every mount below dir (the kubelet's Secret and token volumes,
// containerd's root filesystems), deepest first, so that the directory can go.
func unmountUnder(dir string) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("read mounts: %w", err)
	}
	var mounts []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+string(filepath.Separator)) {
			mounts = append(mounts, fields[4])
		}
	}
	// Deepest first: a child mount keeps its parent busy.
	slices.SortFunc(mounts, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// stopNode undoes startNode around stopping the recorded processes: Pods away while
// containerd runs, then, with everything stopped, mounts and the network.
func stopNode(ctx context.Context, l layout, stop func(name string) error) error {
	if !l.hasNode() {
		return nil
	}
	var errs []error
	if err := stop("kubelet"); err != nil {
		errs = append(errs, err)
	}
	if err := stopPods(ctx, l); err != nil {
		errs = append(errs, err)
	}
	if err := stop("containerd"); err != nil {
		errs = append(errs, err)
	}
	if err := unmountUnder(l.node()); err != nil {
		errs = append(errs, err)
	}
	if err := removeNodeNetwork(l); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
