// Command stepwise-operator runs Stepwise Pipelines: it watches them and runs their steps
// through the registered executors.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/catalog"
	"github.com/stepwise-dev/stepwise/pkg/controller"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	stepwisescheme "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/scheme"
	informers "github.com/stepwise-dev/stepwise/pkg/generated/informers/externalversions"
	"github.com/stepwise-dev/stepwise/pkg/impersonate"
	"github.com/stepwise-dev/stepwise/pkg/metrics"
	"github.com/stepwise-dev/stepwise/pkg/plugin/host"
	"github.com/stepwise-dev/stepwise/tasks/k8s"
	"github.com/stepwise-dev/stepwise/tasks/node"
	"github.com/stepwise-dev/stepwise/tasks/testexec"
)

func main() {
	fs := flag.NewFlagSet("stepwise-operator", flag.ExitOnError)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "Usage: stepwise-operator [flags]\n\nRuns Stepwise Pipelines in the cluster of the kubeconfig (or in-cluster).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	var opts options
	opts.addFlags(fs)
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[1:]) // ExitOnError: a bad flag exits with usage
	if err := opts.validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	if err := run(ctx, &opts); err != nil {
		klog.FromContext(ctx).Error(err, "Operator failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}

func run(ctx context.Context, opts *options) error {
	logger := klog.FromContext(ctx)

	cfg, err := clientcmd.BuildConfigFromFlags(opts.master, opts.kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS = float32(opts.qps)
	cfg.Burst = opts.burst
	cfg.UserAgent = controller.ControllerName
	// Every client made from cfg (the impersonating ones too) counts its API requests.
	reg := prometheus.NewRegistry()
	cfg.Wrap(metrics.NewAPIRequests(reg).WrapTransport)

	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create kubernetes client: %w", err)
	}
	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create stepwise client: %w", err)
	}

	registry := executor.NewRegistry()
	if err := registry.Register(builtinExecutors()...); err != nil {
		return fmt.Errorf("register built-in executors: %w", err)
	}
	if opts.enableTestExecutors {
		if err := registry.Register(testexec.Executors()...); err != nil {
			return fmt.Errorf("register test executors: %w", err)
		}
	}
	// Plugins start before the engine, and are killed when the operator stops.
	plugins := host.New(logger, host.Options{Dir: opts.pluginDir, Checksums: opts.pluginChecksums})
	defer plugins.Close()
	if err := plugins.Load(ctx, registry); err != nil {
		return fmt.Errorf("load plugins: %w", err)
	}
	logger.Info("Executors registered", "names", registry.Names())
	if opts.catalogName != "" {
		// In the background: a catalogue that cannot be written yet never delays pipelines.
		go catalog.NewPublisher(kube, opts.ownNamespace(), opts.catalogName).Run(ctx, catalog.Build(registry, version()))
	}

	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// Events name our objects, so the recorder's scheme must know our types; a scheme of
	// our own avoids changing client-go's global one.
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(stepwisescheme.AddToScheme(scheme))
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(4)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	hostname, _ := os.Hostname()
	recorder := broadcaster.NewRecorder(scheme, corev1.EventSource{Component: controller.ControllerName, Host: hostname})

	var ready atomic.Bool // caches synced, or standing by for leadership
	var electionChecker *leaderelection.HealthzAdaptor
	if opts.leaderElect {
		electionChecker = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}
	servers, err := startServers(ctx, opts, reg, &ready, electionChecker)
	if err != nil {
		return err
	}
	defer shutdownServers(servers)

	runEngine := func(ctx context.Context) error {
		// The engine never reads managedFields nor kubectl's last-applied copy: dropping
		// them from the cache saves 1-1.5 KiB per pipeline (make bench), and as much again
		// for pipelines made with kubectl apply.
		factory := informers.NewSharedInformerFactoryWithOptions(client, opts.resync,
			informers.WithTransform(controller.TrimForCache))
		mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
		c, err := controller.New(ctx, controller.Config{
			Client:           client,
			Informer:         factory.Stepwise().V1alpha1().Pipelines(),
			Executors:        registry,
			Clients:          impersonate.NewClientProvider(cfg, mapper),
			Recorder:         recorder,
			Metrics:          metrics.New(reg),
			WorkqueueMetrics: metrics.NewWorkqueueProvider(reg),
			ShutdownGrace:    opts.shutdownGrace,
		})
		if err != nil {
			return err
		}
		factory.Start(ctx.Done())
		defer factory.Shutdown()
		go func() {
			if factory.WaitForCacheSync(ctx.Done()) != nil {
				ready.Store(true)
			}
		}()
		return c.Run(ctx, opts.workers)
	}

	if !opts.leaderElect {
		return runEngine(ctx)
	}
	ready.Store(true) // a standby is ready: it serves probes and waits for the Lease

	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, opts.leaseNamespace(), opts.leaderElectID,
		kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity(hostname), EventRecorder: recorder})
	if err != nil {
		return fmt.Errorf("create leader election lock: %w", err)
	}
	engineDone := make(chan error, 1)
	var led atomic.Bool
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   opts.leaseDuration,
		RenewDeadline:   opts.renewDeadline,
		RetryPeriod:     opts.retryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        electionChecker,
		Name:            opts.leaderElectID,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				led.Store(true)
				logger.Info("Became the leader, starting the engine")
				engineDone <- runEngine(ctx)
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					// Another replica may already be running pipelines: stop at once.
					logger.Error(nil, "Lost leadership, exiting")
					klog.FlushAndExit(klog.ExitFlushTimeout, 1)
				}
			},
		},
	})
	if !led.Load() {
		return nil // a standby has no engine to wait for
	}
	// RunOrDie returns on shutdown, possibly before the engine has drained its workers.
	select {
	case err := <-engineDone:
		return err
	case <-time.After(opts.shutdownGrace + 5*time.Second):
		return errors.New("engine did not stop within the shutdown grace period")
	}
}

// builtinExecutors are the executors compiled into the operator.
func builtinExecutors() []executor.TaskExecutor {
	return append(node.Executors(), k8s.Executors()...)
}

// version is the operator's module version as the Go toolchain stamped it.
func version() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		return info.Main.Version
	}
	return ""
}

func identity(hostname string) string {
	if hostname == "" {
		hostname = "stepwise"
	}
	return fmt.Sprintf("%s_%d", hostname, os.Getpid())
}

// startServers starts the metrics and probe endpoints that are enabled.
func startServers(ctx context.Context, opts *options, reg *prometheus.Registry, ready *atomic.Bool, election *leaderelection.HealthzAdaptor) ([]*http.Server, error) {
	logger := klog.FromContext(ctx)
	var servers []*http.Server
	serve := func(name, addr string, handler http.Handler) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen for %s on %s: %w", name, addr, err)
		}
		srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, srv)
		logger.Info("Serving", "endpoint", name, "address", ln.Addr().String())
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error(err, "Server stopped", "endpoint", name)
			}
		}()
		return nil
	}
	if enabled(opts.metricsAddr) {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		if err := serve("metrics", opts.metricsAddr, mux); err != nil {
			return servers, err
		}
	}
	if enabled(opts.healthAddr) {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
			if election != nil {
				if err := election.Check(r); err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
			}
			_, _ = w.Write([]byte("ok"))
		})
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !ready.Load() {
				http.Error(w, "caches not synced", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
		if err := serve("health", opts.healthAddr, mux); err != nil {
			return servers, err
		}
	}
	return servers, nil
}

func shutdownServers(servers []*http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range servers {
		_ = srv.Shutdown(ctx)
	}
}
