package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/delegatedauth"
)

// startServers starts the metrics and probe endpoints that are enabled. The metrics
// endpoint (and its profiles) is served, under --metrics-secure, over TLS to callers the
// API server (kube) authenticates and authorizes; the probes are the kubelet's, open.
func startServers(ctx context.Context, opts *options, kube kubernetes.Interface, reg *prometheus.Registry, ready *atomic.Bool, election *leaderelection.HealthzAdaptor) ([]*http.Server, error) {
	logger := klog.FromContext(ctx)
	var servers []*http.Server
	serve := func(name, addr string, handler http.Handler, tlsConfig *tls.Config) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen for %s on %s: %w", name, addr, err)
		}
		if tlsConfig != nil {
			ln = tls.NewListener(ln, tlsConfig)
		}
		srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, srv)
		logger.Info("Serving", "endpoint", name, "address", ln.Addr().String(), "tls", tlsConfig != nil)
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
		if opts.profiling {
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		}
		handler, tlsConfig, err := protectMetrics(opts, kube, mux, logger)
		if err != nil {
			return servers, err
		}
		if err := serve("metrics", opts.metricsAddr, handler, tlsConfig); err != nil {
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
		if err := serve("health", opts.healthAddr, mux, nil); err != nil {
			return servers, err
		}
	}
	return servers, nil
}

// protectMetrics puts mux behind the API server's authentication and authorization and
// serves it over TLS, unless --metrics-secure=false.
func protectMetrics(opts *options, kube kubernetes.Interface, mux http.Handler, logger klog.Logger) (http.Handler, *tls.Config, error) {
	if !opts.metricsSecure {
		logger.Info("The metrics endpoint is served to anyone who reaches it (--metrics-secure=false)", "address", opts.metricsAddr)
		return mux, nil, nil
	}
	filter, err := delegatedauth.NewFilter(kube, logger.WithName("metrics"))
	if err != nil {
		return nil, nil, fmt.Errorf("protect the metrics endpoint: %w", err)
	}
	pair, err := delegatedauth.ServingCertificate(opts.metricsCertFile, opts.metricsKeyFile, "stepwise-operator")
	if err != nil {
		return nil, nil, fmt.Errorf("protect the metrics endpoint: %w", err)
	}
	return filter.Wrap(mux), delegatedauth.TLSConfig(pair), nil
}

func shutdownServers(servers []*http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range servers {
		_ = srv.Shutdown(ctx)
	}
}
