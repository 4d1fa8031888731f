package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-plugin"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	logsapi "k8s.io/component-base/logs/api/v1"
	// --logging-format=json: component-base's JSON logger, as Kubernetes' own components.
	_ "k8s.io/component-base/logs/json/register"

	buildversion "github.com/stepwise-dev/stepwise/internal/version"
	"github.com/stepwise-dev/stepwise/pkg/egress"
	"github.com/stepwise-dev/stepwise/pkg/fairqueue"
	"github.com/stepwise-dev/stepwise/pkg/plugin/host"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
	"github.com/stepwise-dev/stepwise/pkg/tracing"
	"github.com/stepwise-dev/stepwise/pkg/trigger"
	"github.com/stepwise-dev/stepwise/pkg/trigger/gate"
)

// options are the operator's command-line flags.
type options struct {
	kubeconfig string
	master     string
	qps        float64
	burst      int
	// apiCompression asks the API server to gzip its responses.
	apiCompression bool
	workers        int
	resync         time.Duration
	// namespaceShare: see workerShares.
	namespaceShare int

	leaderElect          bool
	leaderElectNamespace string
	leaderElectID        string
	leaseDuration        time.Duration
	renewDeadline        time.Duration
	retryPeriod          time.Duration

	metricsAddr string
	// metricsSecure serves the metrics endpoint over TLS to callers the API server
	// authenticates and authorizes (pkg/delegatedauth).
	metricsSecure   bool
	metricsCertFile string
	metricsKeyFile  string
	healthAddr      string
	// profiling serves Go's /debug/pprof on the metrics endpoint.
	profiling     bool
	shutdownGrace time.Duration
	hookCall      time.Duration

	enableTestExecutors bool

	pluginDir       string
	pluginChecksums string
	// installedPluginDir and installedPluginChecksums are the plugins installed from their
	// own images and the checksum file the installer wrote for them.
	installedPluginDir       string
	installedPluginChecksums string
	// installedPluginPolicies is who must have signed the installed plugins (a JSON file
	// of signature.Policies); pluginTrustedRoot the trusted root keyless ones are checked
	// against.
	installedPluginPolicies string
	pluginTrustedRoot       string
	pluginAllowedCIDRs      string
	pluginReattach          map[string]string
	// pluginAllowedCIDRsFor holds each --plugin-allowed-cidrs-for as given, PLUGIN=CIDRS.
	pluginAllowedCIDRsFor []string
	pluginMemoryLimit     string
	// gateAllowedCIDRs are the ranges health gates may query (Prometheus).
	gateAllowedCIDRs string
	// gateAllowPublic lets health gates query public addresses.
	gateAllowPublic bool
	// gatePrometheusURLFor holds each --gate-prometheus-url-for as given, NAMESPACE=URL.
	gatePrometheusURLFor []string

	// tracing: OTLP export of the pipelines' traces, off without an endpoint.
	otlpEndpoint     string
	otlpInsecure     bool
	traceSampleRatio float64

	namespace   string
	catalogName string

	triggerResources string
	triggerWorkers   int

	// archiveDSNFile holds the archive's PostgreSQL connection string; empty: no archive.
	archiveDSNFile string
	// history serves the archive as history.stepwise.dev (pkg/historyapi) on this port
	// when the archive is on; 0: not served.
	historyPort     int
	historyAddress  string
	historyCertDir  string
	historyCertFile string
	historyKeyFile  string
	// defaultRetention: see controller.Config.DefaultRetention.
	defaultRetention time.Duration
	// archiveRetention is how long the archive keeps a record; 0: for ever.
	archiveRetention time.Duration

	// version: print the version and exit.
	version bool

	// logging is component-base's: --logging-format (text or json), -v, --vmodule.
	logging *logsapi.LoggingConfiguration
}

// parse parses args into o, with the logging flags of component-base, on fs (main's exits on a bad flag and on -h).
// With --version it prints the version to out and returns true, before validate or
// anything else: the caller exits 0.
func (o *options) parse(fs *flag.FlagSet, args []string, out io.Writer) (bool, error) {
	o.addFlags(fs)
	o.logging = logsapi.NewLoggingConfiguration()
	logsapi.AddGoFlags(o.logging, fs)
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	if !o.version {
		return false, nil
	}
	_, err := fmt.Fprintln(out, "stepwise-operator version", buildversion.Version)
	return true, err
}

func (o *options) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig. Empty: the in-cluster configuration.")
	fs.StringVar(&o.master, "master", "", "The address of the Kubernetes API server, overriding the one in the kubeconfig.")
	fs.Float64Var(&o.qps, "kube-api-qps", 200, "Requests per second to the API server, sustained. A negative value turns client-side throttling off (the server's priority and fairness still applies).")
	fs.IntVar(&o.burst, "kube-api-burst", 400, "Requests to the API server allowed in a burst above --kube-api-qps.")
	fs.BoolVar(&o.apiCompression, "kube-api-compression", false, "Ask the API server to gzip its responses. Off, as kube-controller-manager has it: on the cluster's network gzip costs the API server more CPU than it saves time, most of all for the lists of a start (100,000 pipelines are hundreds of megabytes); on a slow link to a remote API server, turn it on.")
	fs.IntVar(&o.workers, "workers", 8, "Pipelines reconciled at the same time.")
	fs.IntVar(&o.namespaceShare, "max-workers-per-namespace", 0, "The most workers one namespace's pipelines hold while another namespace's wait, a cap on its share: namespaces take turns, and while N namespaces have pipelines waiting each holds at most all workers but one divided by N (rounded up, at least 1). A namespace alone may use all workers but one, and the last goes only to a namespace holding none, so one that arrives is served at once even when the others' hooks hang. 0: no cap but the share; --workers: a namespace alone may use every worker.")
	fs.DurationVar(&o.resync, "resync-period", 10*time.Minute, "How often every pipeline is looked at even when nothing changed.")

	fs.BoolVar(&o.leaderElect, "leader-elect", true, "Run the engine only in the replica holding the Lease, so that several replicas can run for availability.")
	fs.StringVar(&o.leaderElectNamespace, "leader-elect-namespace", "", "Namespace of the leader election Lease. Default: the operator's own namespace (--namespace).")
	fs.StringVar(&o.leaderElectID, "leader-elect-id", "stepwise-operator", "Name of the leader election Lease.")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a standby waits before taking over a Lease that is not renewed.")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader tries to renew its Lease before giving up leadership.")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "How often leader election is tried.")

	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus /metrics endpoint. Empty or 0 turns it off.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve the metrics endpoint over HTTPS, only to callers the API server authenticates (a bearer token, by TokenReview) and authorizes to get the path (by SubjectAccessReview: a ClusterRole with nonResourceURLs [/metrics] and verb get, such as the chart's stepwise-metrics-reader). false serves plain HTTP to anyone who reaches the address: for a loopback address only.")
	fs.StringVar(&o.metricsCertFile, "metrics-tls-cert-file", "", "With --metrics-secure: the serving certificate's PEM file (with --metrics-tls-key-file). Empty: a self-signed certificate made at start, in memory only.")
	fs.StringVar(&o.metricsKeyFile, "metrics-tls-key-file", "", "With --metrics-secure: the serving certificate's private key, PEM.")
	fs.BoolVar(&o.profiling, "profiling", false, "Serve Go's profiles (/debug/pprof/: heap, CPU, goroutines) on the metrics endpoint, to callers allowed to get their paths (nonResourceURLs [/debug/pprof/*]) under --metrics-secure. Off by default: a profile shows the operator's memory, and a CPU profile costs while it runs.")
	fs.StringVar(&o.healthAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints. Empty or 0 turns them off.")
	fs.DurationVar(&o.shutdownGrace, "shutdown-grace-period", 30*time.Second, "On SIGTERM, how long running hooks may take to finish before they are cancelled.")
	fs.DurationVar(&o.hookCall, "hook-call-timeout", 30*time.Second, "The longest one call of a hook may take, whatever its step's timeout: a call that does not answer fails (retryable, reason HookCallTimeout) and frees its worker. Executors return Wait for long work. 0: no bound but the step's timeout.")

	fs.BoolVar(&o.enableTestExecutors, "enable-test-executors", false, "Register test.noop, test.record, test.sleep and test.wait, executors for tests, demos and benchmarks.")

	fs.StringVar(&o.pluginDir, "plugin-dir", "", "Directory of out-of-process executor plugins (executables named stepwise-plugin-*), started once and reused. Empty: no plugins.")
	fs.StringVar(&o.namespace, "namespace", "", "The operator's own namespace, where it publishes its executor catalogue and, unless --leader-elect-namespace says otherwise, keeps its Lease. Default: POD_NAMESPACE, else stepwise-system.")
	fs.StringVar(&o.catalogName, "executor-catalog-name", "stepwise-executors", "Name of the ConfigMap, in --namespace, where the executors on offer (built-in and plugins) are published at start, for 'kubectl stepwise executors'. Empty: not published.")
	fs.StringVar(&o.pluginAllowedCIDRs, "plugin-allowed-cidrs", "", "Comma-separated CIDRs that plugins may connect to although they are loopback, link-local, private or otherwise internal (refused by default, after DNS resolution, on every connection and redirect), e.g. the CIDR of an on-premises vCenter. Given to plugins as "+egress.EnvAllowedCIDRs+".")
	fs.StringVar(&o.triggerResources, "trigger-resources", trigger.DefaultResources, "Comma-separated kinds PipelineTriggers may watch, as resource.group (resource alone for the core group), e.g. nodes,webapps.demo.stepwise.dev. The operator watches each with its own identity, so grant it list and watch on each: the Helm chart's value triggerResources sets both this flag and those rules (deploy/base is rendered from the chart by make generate); a trigger on another kind is Ready=False, reason ResourceNotAllowed. Empty: none.")
	fs.IntVar(&o.triggerWorkers, "trigger-workers", 2, "PipelineTriggers reconciled at the same time.")
	fs.Func("plugin-reattach", "For plugin development only, repeatable: NAME=FILE connects to the plugin NAME (e.g. stepwise-plugin-example) that a developer started under a debugger with STEPWISE_PLUGIN_DEBUG=1, instead of starting it; FILE holds the JSON it printed after STEPWISE_PLUGIN_REATTACH=. Its checksum is not verified and it is never killed.", func(v string) error {
		name, file, ok := strings.Cut(v, "=")
		if !ok || name == "" || file == "" {
			return fmt.Errorf("%q is not NAME=FILE", v)
		}
		if o.pluginReattach == nil {
			o.pluginReattach = map[string]string{}
		}
		o.pluginReattach[name] = file
		return nil
	})
	fs.StringVar(&o.otlpEndpoint, "otlp-endpoint", "", "OpenTelemetry collector (OTLP over gRPC, host:port) to send the pipelines' traces to: a span per pipeline, step, hook call and plugin call, carried into plugins and on in their HTTP requests (W3C traceparent); the plugins send theirs there too, through the operator (a relay on a Unix socket of its own), never connecting to it themselves, so that their egress policy holds. Empty: no tracing, at no cost.")
	fs.BoolVar(&o.otlpInsecure, "otlp-insecure", false, "Send traces to --otlp-endpoint in plaintext (a collector on loopback or beside the operator) rather than over TLS.")
	fs.Float64Var(&o.traceSampleRatio, "trace-sample-ratio", 1, "The share of pipelines whose traces are sent, 0 to 1; a pipeline's trace is kept or dropped whole.")
	fs.StringVar(&o.gateAllowedCIDRs, "gate-allowed-cidrs", "", "Comma-separated CIDRs that triggers' Prometheus health gates may query at the URL a gate names: loopback, private or otherwise internal ones (refused by default, after DNS resolution, on every connection), and public ones (refused too unless --gate-allow-public-addresses). Every tenant's gates may then reach every address of these ranges, and tell from their status whether it answers: list the Prometheus' own address (its Service IP/32) rather than the Service CIDR, or use --gate-prometheus-url-for. Plugins are not given them.")
	fs.BoolVar(&o.gateAllowPublic, "gate-allow-public-addresses", false, "Let triggers' Prometheus health gates query any public (globally reachable) address at the URL a gate names, as well as the ranges of --gate-allowed-cidrs. Off: a gate reaches only those ranges, so that a tenant cannot send the operator's requests anywhere on the Internet.")
	fs.Func("gate-prometheus-url-for", "Repeatable: NAMESPACE=URL makes the Prometheus health gates of the triggers of namespace NAMESPACE query URL, whatever URL they name, with their query as written: the operator adds no namespace matcher, leaving to that Prometheus (one of the namespace's own, or a label proxy such as prom-label-proxy, e.g. http://prom-label-proxy.monitoring:8080/?namespace=ops) what the namespace may read. It is the admin's address: --gate-allowed-cidrs does not apply to it, and a gate's status does not show it. Elsewhere a gate queries its own URL, its query limited to series labelled namespace=\"<the trigger's namespace>\".", func(v string) error {
		o.gatePrometheusURLFor = append(o.gatePrometheusURLFor, v)
		return nil
	})
	fs.Func("plugin-allowed-cidrs-for", "Repeatable: PLUGIN=CIDR[,CIDR...] adds CIDRs to --plugin-allowed-cidrs for the plugin PLUGIN only (its executable's name, with or without the stepwise-plugin- prefix), e.g. vsphere=10.20.0.0/16 lets the vSphere plugin reach an on-premises vCenter without letting every tenant's webhook reach it. A name no plugin has is logged when the plugins start.", func(v string) error {
		o.pluginAllowedCIDRsFor = append(o.pluginAllowedCIDRsFor, v)
		return nil
	})
	fs.StringVar(&o.pluginMemoryLimit, "plugin-memory-limit", "256Mi", "The memory each plugin process may map, as a quantity (256Mi, 1Gi); over it the plugin dies, failing only the hooks in flight in it, and is restarted on the next call, while the operator runs on. Its garbage collector is told a lower limit (GOMEMLIMIT) to work hard before. A Go plugin maps about 80Mi as it starts, which counts. Keep the sum with the operator's own memory under the container's limit. 0: no limit.")
	fs.StringVar(&o.archiveDSNFile, "archive-dsn-file", "", "File holding the PostgreSQL connection string (postgres://user:password@host:5432/db?sslmode=verify-full, or key=value form) of the archive: every pipeline's record (spec, status, approvals, the operator's Events) is written there when it finishes and when it is deleted, once per state, and a deleted pipeline keeps its finalizer until its record is written. Mount it from a Secret; the operator migrates the schema at start. Empty: no archive.")
	fs.DurationVar(&o.defaultRetention, "default-retention", 0, "With --archive-dsn-file: how long a finished pipeline stays in the API server once the archive has its record, when neither it nor its template sets spec.retention; then it is removed WITHOUT a teardown (its record says Removed). It applies only to pipelines whose steps recorded nothing they created, so that nothing a pipeline owns is left without a way to tear it down; set spec.retention on those that own what they made. 0: kept until deleted.")
	fs.DurationVar(&o.archiveRetention, "archive-retention", 0, "With --archive-dsn-file: how long the archive keeps a record (and the Events of a pipeline whose records are all gone), e.g. 8760h for a year; older ones are deleted every hour. The archive grows with every pipeline every tenant runs, so bound it unless the database is sized for all of history. 0: records are kept for ever.")
	fs.IntVar(&o.historyPort, "history-secure-port", 0, "With --archive-dsn-file: serve the archive read-only as the aggregated API history.stepwise.dev/v1alpha1 (pipelinerecords) over HTTPS on this port, to requests the API server's aggregation layer forwards; authentication and authorization are delegated to the API server, so RBAC on pipelinerecords decides who reads which namespace's records. Register it with an APIService (the chart does). 0: not served.")
	fs.StringVar(&o.historyAddress, "history-bind-address", "0.0.0.0", "The IP address the history API listens on (with --history-secure-port); the API server's aggregation layer must reach it there.")
	fs.StringVar(&o.historyCertDir, "history-cert-dir", "", "Where the history API keeps a self-signed serving certificate it makes when --history-tls-cert-file is not given. Empty: in memory.")
	fs.StringVar(&o.historyCertFile, "history-tls-cert-file", "", "The history API's serving certificate, PEM (with --history-tls-key-file); the APIService's caBundle must verify it.")
	fs.StringVar(&o.historyKeyFile, "history-tls-key-file", "", "The history API's serving certificate's private key, PEM.")
	fs.BoolVar(&o.version, "version", false, "Print the operator's version and exit.")
	fs.StringVar(&o.pluginChecksums, "plugin-checksums", "", "sha256sum-format file listing the SHA-256 of every plugin; a plugin missing from it or not matching it is refused. Default: <plugin-dir>/SHA256SUMS.")
	fs.StringVar(&o.installedPluginDir, "installed-plugin-dir", "", "Directory of plugins installed from their own images (image volumes, one directory each, or copied there by init containers); verified against --installed-plugin-checksums and --installed-plugin-policies, never against what the images carry.")
	fs.StringVar(&o.installedPluginPolicies, "installed-plugin-policies", "", "JSON file of who must have signed each plugin of --installed-plugin-dir, by plugin name: {\"NAME\": {\"publicKey\": \"PEM\"}} or {\"NAME\": {\"identity\": \"...\", \"issuer\": \"...\"}} (keyless, checked against --plugin-trusted-root), written by the installer. Such a plugin runs only when the Sigstore bundle next to it (stepwise-plugin-NAME.sigstore.json, as cosign sign-blob --bundle makes it) is a signature of its bytes by that signer; a plugin neither listed in --installed-plugin-checksums nor given a policy is refused. Needs --installed-plugin-dir.")
	fs.StringVar(&o.pluginTrustedRoot, "plugin-trusted-root", "", "Sigstore trusted root (trusted_root.json: the CAs, transparency logs and timestamp authorities) that keyless signature policies are checked against, offline: copy it from Sigstore's TUF repository, or your own deployment's. Without it a keyless policy refuses its plugin.")
	fs.StringVar(&o.installedPluginChecksums, "installed-plugin-checksums", "", "sha256sum-format file listing the SHA-256 of every plugin of --installed-plugin-dir, written by the installer (e.g. a mounted ConfigMap), not by the plugin images; a plugin missing from it or not matching it is refused, and so is one whose name --plugin-dir has. Needs --installed-plugin-dir, and the other way round.")
}

func (o *options) validate() error {
	var errs []error
	if o.traceSampleRatio < 0 || o.traceSampleRatio > 1 {
		errs = append(errs, fmt.Errorf("--trace-sample-ratio must be between 0 and 1, got %g", o.traceSampleRatio))
	}
	if o.workers < 1 {
		errs = append(errs, fmt.Errorf("--workers must be at least 1, got %d", o.workers))
	}
	if o.namespaceShare < 0 {
		errs = append(errs, fmt.Errorf("--max-workers-per-namespace must not be negative, got %d", o.namespaceShare))
	}
	if o.burst < 0 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must not be negative, got %d", o.burst))
	}
	if o.leaderElect && o.renewDeadline >= o.leaseDuration {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be shorter than --leader-elect-lease-duration (%s)", o.renewDeadline, o.leaseDuration))
	}
	if o.shutdownGrace < 0 {
		errs = append(errs, errors.New("--shutdown-grace-period must not be negative"))
	}
	if o.hookCall < 0 {
		errs = append(errs, errors.New("--hook-call-timeout must not be negative"))
	}
	if o.pluginChecksums != "" && o.pluginDir == "" {
		errs = append(errs, errors.New("--plugin-checksums needs --plugin-dir"))
	}
	if o.installedPluginDir != "" && o.installedPluginChecksums == "" {
		errs = append(errs, errors.New("--installed-plugin-dir needs --installed-plugin-checksums (a checksum file the installer writes: there is no default)"))
	}
	if o.installedPluginChecksums != "" && o.installedPluginDir == "" {
		errs = append(errs, errors.New("--installed-plugin-checksums needs --installed-plugin-dir"))
	}
	if o.installedPluginPolicies != "" && o.installedPluginDir == "" {
		errs = append(errs, errors.New("--installed-plugin-policies needs --installed-plugin-dir"))
	}
	if o.installedPluginDir != "" && o.pluginDir != "" && filepath.Clean(o.installedPluginDir) == filepath.Clean(o.pluginDir) {
		errs = append(errs, errors.New("--installed-plugin-dir must be another directory than --plugin-dir"))
	}
	if o.historyPort != 0 && o.archiveDSNFile == "" {
		errs = append(errs, errors.New("--history-secure-port needs --archive-dsn-file: the history API serves the archive"))
	}
	if o.defaultRetention != 0 && o.archiveDSNFile == "" {
		errs = append(errs, errors.New("--default-retention needs --archive-dsn-file: a pipeline is removed only once the archive has its record"))
	}
	if o.archiveRetention != 0 && o.archiveDSNFile == "" {
		errs = append(errs, errors.New("--archive-retention needs --archive-dsn-file"))
	}
	if o.archiveRetention < 0 {
		errs = append(errs, fmt.Errorf("--archive-retention must not be negative, got %s", o.archiveRetention))
	}
	if o.defaultRetention < 0 {
		errs = append(errs, fmt.Errorf("--default-retention must not be negative, got %s", o.defaultRetention))
	}
	if o.historyPort < 0 || o.historyPort > 65535 {
		errs = append(errs, fmt.Errorf("--history-secure-port must be a port (1-65535) or 0, got %d", o.historyPort))
	}
	if net.ParseIP(o.historyAddress) == nil {
		errs = append(errs, fmt.Errorf("--history-bind-address must be an IP address, got %q", o.historyAddress))
	}
	if (o.historyCertFile == "") != (o.historyKeyFile == "") {
		errs = append(errs, errors.New("--history-tls-cert-file and --history-tls-key-file go together"))
	}
	if o.triggerWorkers < 1 {
		errs = append(errs, fmt.Errorf("--trigger-workers must be at least 1, got %d", o.triggerWorkers))
	}
	if _, err := trigger.ParseResources(o.triggerResources); err != nil {
		errs = append(errs, err)
	}
	if _, err := o.reattach(); err != nil {
		errs = append(errs, fmt.Errorf("--plugin-reattach: %w", err))
	}
	if _, err := egress.Parse(o.pluginAllowedCIDRs); err != nil {
		errs = append(errs, fmt.Errorf("--plugin-allowed-cidrs: %w", err))
	}
	if _, err := egress.Parse(o.gateAllowedCIDRs); err != nil {
		errs = append(errs, fmt.Errorf("--gate-allowed-cidrs: %w", err))
	}
	if _, err := o.gatePrometheusURLs(); err != nil {
		errs = append(errs, fmt.Errorf("--gate-prometheus-url-for: %w", err))
	}
	if _, err := o.allowedCIDRsFor(); err != nil {
		errs = append(errs, fmt.Errorf("--plugin-allowed-cidrs-for: %w", err))
	}
	if _, err := o.memoryLimit(); err != nil {
		errs = append(errs, err)
	}
	if (o.metricsCertFile == "") != (o.metricsKeyFile == "") {
		errs = append(errs, errors.New("--metrics-tls-cert-file and --metrics-tls-key-file go together"))
	}
	if !o.metricsSecure && (o.metricsCertFile != "" || o.metricsKeyFile != "") {
		errs = append(errs, errors.New("--metrics-tls-cert-file and --metrics-tls-key-file need --metrics-secure"))
	}
	return errors.Join(errs...)
}

// workerShares are the engine queue's Share (--max-workers-per-namespace, 0: none) and
// Borrow (all workers but one, kept for a namespace that arrives), from which the queue
// derives each namespace's share as namespaces come and go (pkg/fairqueue).
func (o *options) workerShares() (share, borrow int) {
	return fairqueue.Shares(o.workers, o.namespaceShare)
}

// leaseNamespace is where the leader election Lease lives.
func (o *options) leaseNamespace() string {
	if o.leaderElectNamespace != "" {
		return o.leaderElectNamespace
	}
	return o.ownNamespace()
}

// ownNamespace is the operator's namespace: --namespace, else POD_NAMESPACE (set from the
// Downward API in deploy/), else stepwise-system.
func (o *options) ownNamespace() string {
	if o.namespace != "" {
		return o.namespace
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "stepwise-system"
}

// enabled tells whether an address flag asks for a server.
func enabled(addr string) bool { return addr != "" && addr != "0" }

// reattach reads the files of --plugin-reattach.
func (o *options) reattach() (map[string]*plugin.ReattachConfig, error) {
	if len(o.pluginReattach) == 0 {
		return nil, nil
	}
	out := make(map[string]*plugin.ReattachConfig, len(o.pluginReattach))
	for name, file := range o.pluginReattach {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("plugin %s: %w", name, err)
		}
		cfg, err := proto.ParseReattach(bytes.TrimPrefix(bytes.TrimSpace(data), []byte(proto.ReattachPrefix)))
		if err != nil {
			return nil, fmt.Errorf("plugin %s: %w", name, err)
		}
		out[name] = cfg
	}
	return out, nil
}

// minPluginMemoryLimit is the least --plugin-memory-limit but 0: a Go plugin maps about
// 80Mi as it starts (measured: VmData 76Mi at rest for 14Mi resident), so less leaves it
// next to no heap, and the error catches a limit given in bytes ("512") for one in Mi.
const minPluginMemoryLimit = 128 << 20

// memoryLimit is --plugin-memory-limit in bytes; 0: no limit.
func (o *options) memoryLimit() (int64, error) {
	q, err := resource.ParseQuantity(o.pluginMemoryLimit)
	if err != nil {
		return 0, fmt.Errorf("--plugin-memory-limit: %q is not a quantity such as 256Mi or 1Gi: %w", o.pluginMemoryLimit, err)
	}
	limit := q.Value()
	switch {
	case limit < 0:
		return 0, fmt.Errorf("--plugin-memory-limit must not be negative, got %s", o.pluginMemoryLimit)
	case limit > 0 && limit < minPluginMemoryLimit:
		return 0, fmt.Errorf("--plugin-memory-limit must be 0 (no limit) or at least 128Mi (a plugin maps about 80Mi as it starts), got %s", o.pluginMemoryLimit)
	}
	return limit, nil
}

// allowedCIDRsFor reads --plugin-allowed-cidrs-for: the CIDRs each plugin is allowed on
// top of --plugin-allowed-cidrs, by its executable's name.
func (o *options) allowedCIDRsFor() (map[string][]string, error) {
	if len(o.pluginAllowedCIDRsFor) == 0 {
		return nil, nil
	}
	out := map[string][]string{}
	for _, v := range o.pluginAllowedCIDRsFor {
		name, csv, ok := strings.Cut(v, "=")
		cidrs := splitCIDRs(csv)
		if !ok || name == "" || len(cidrs) == 0 {
			return nil, fmt.Errorf("%q is not PLUGIN=CIDR[,CIDR...]", v)
		}
		short := strings.TrimPrefix(name, host.Prefix)
		if short == "" || strings.ContainsAny(short, `/\`) || short == "." || short == ".." {
			return nil, fmt.Errorf("plugin %q is not the name of a plugin, such as vsphere", name)
		}
		if _, err := egress.Parse(csv); err != nil {
			return nil, fmt.Errorf("plugin %s: %w", short, err)
		}
		out[host.Prefix+short] = append(out[host.Prefix+short], cidrs...)
	}
	return out, nil
}

// gatePolicy is the egress policy of the URLs health gates name: the ranges of
// --gate-allowed-cidrs, and public addresses only with --gate-allow-public-addresses.
func (o *options) gatePolicy() (*egress.Policy, error) {
	policy, err := egress.Parse(o.gateAllowedCIDRs)
	if err != nil {
		return nil, fmt.Errorf("--gate-allowed-cidrs: %w", err)
	}
	if o.gateAllowPublic {
		return policy, nil
	}
	return policy.RefusingPublic(), nil
}

// gatePrometheusURLs reads --gate-prometheus-url-for: the Prometheus URL of each
// namespace that has one.
func (o *options) gatePrometheusURLs() (map[string]string, error) {
	if len(o.gatePrometheusURLFor) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, v := range o.gatePrometheusURLFor {
		namespace, raw, ok := strings.Cut(v, "=")
		if !ok || namespace == "" || raw == "" {
			// Not quoted: the URL may hold a token in its query.
			return nil, errors.New("an entry is not NAMESPACE=URL")
		}
		if len(validation.IsDNS1123Label(namespace)) > 0 {
			// Not quoted: of a URL given alone, it would be the URL up to its first "=".
			return nil, errors.New("an entry's NAMESPACE is not a namespace's name (NAMESPACE=URL)")
		}
		if _, err := gate.CheckURL(raw); err != nil {
			return nil, fmt.Errorf("namespace %s: %w", namespace, err)
		}
		if _, dup := out[namespace]; dup {
			return nil, fmt.Errorf("namespace %s is given twice", namespace)
		}
		out[namespace] = raw
	}
	return out, nil
}

// pluginEnv is the environment of every plugin and what it is for one plugin: the CIDRs
// of --plugin-allowed-cidrs, and those of --plugin-allowed-cidrs-for added for that plugin.
// tracing is the export of traces the flags ask for.
func (o *options) tracing() tracing.Options {
	return tracing.Options{Endpoint: o.otlpEndpoint, Insecure: o.otlpInsecure, SampleRatio: o.traceSampleRatio, ServiceName: "stepwise-operator"}
}

func (o *options) pluginEnv() (env []string, envFor map[string][]string, err error) {
	// No OTLP endpoint: the host relays the plugins' spans (host.Options.TraceCollector).
	env = []string{egress.EnvAllowedCIDRs + "=" + o.pluginAllowedCIDRs}
	extra, err := o.allowedCIDRsFor()
	if err != nil {
		return nil, nil, fmt.Errorf("--plugin-allowed-cidrs-for: %w", err)
	}
	if len(extra) == 0 {
		return env, nil, nil
	}
	envFor = make(map[string][]string, len(extra))
	for name, cidrs := range extra {
		all := append(splitCIDRs(o.pluginAllowedCIDRs), cidrs...)
		envFor[name] = []string{egress.EnvAllowedCIDRs + "=" + strings.Join(all, ",")}
	}
	return env, envFor, nil
}

// splitCIDRs splits a comma-separated list, skipping blank entries as egress.Parse does.
func splitCIDRs(csv string) []string {
	var out []string
	for entry := range strings.SplitSeq(csv, ",") {
		if entry = strings.TrimSpace(entry); entry != "" {
			out = append(out, entry)
		}
	}
	return out
}
