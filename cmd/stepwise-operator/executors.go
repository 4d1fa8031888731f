package main

import (
	"context"
	"fmt"
	"go.opentelemetry.io/otel/trace"

	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/plugin/host"
	"github.com/stepwise-dev/stepwise/pkg/plugin/signature"
	"github.com/stepwise-dev/stepwise/tasks/k8s"
	"github.com/stepwise-dev/stepwise/tasks/node"
	"github.com/stepwise-dev/stepwise/tasks/testexec"
)

// loadExecutors registers the built-in executors (and the test ones when enabled), then
// starts the plugins and registers theirs. The caller closes the host, which kills the
// plugin processes, even when an error is returned.
func loadExecutors(ctx context.Context, opts *options, drainRules *node.DrainRules, restarts host.RestartRecorder, tp trace.TracerProvider) (*executor.Registry, *host.Host, error) {
	registry := executor.NewRegistry()
	if err := registry.Register(builtinExecutors(drainRules)...); err != nil {
		return nil, nil, fmt.Errorf("register built-in executors: %w", err)
	}
	if opts.enableTestExecutors {
		if err := registry.Register(testexec.Executors()...); err != nil {
			return nil, nil, fmt.Errorf("register test executors: %w", err)
		}
	}
	logger := klog.FromContext(ctx)
	reattach, err := opts.reattach()
	if err != nil {
		return nil, nil, fmt.Errorf("--plugin-reattach: %w", err)
	}
	env, envFor, err := opts.pluginEnv()
	if err != nil {
		return nil, nil, err
	}
	memoryLimit, err := opts.memoryLimit()
	if err != nil {
		return nil, nil, err
	}
	verifier, err := signature.NewVerifier(opts.pluginTrustedRoot)
	if err != nil {
		return nil, nil, fmt.Errorf("--plugin-trusted-root: %w", err)
	}
	var policies signature.Policies
	if opts.installedPluginPolicies != "" {
		if policies, err = signature.LoadPolicies(opts.installedPluginPolicies); err != nil {
			return nil, nil, fmt.Errorf("--installed-plugin-policies: %w", err)
		}
	}
	plugins := host.New(logger, host.Options{
		Dir: opts.pluginDir, Checksums: opts.pluginChecksums,
		InstalledDir: opts.installedPluginDir, InstalledChecksums: opts.installedPluginChecksums,
		InstalledPolicies: policies, Verifier: verifier,
		Env: env, EnvFor: envFor, MemoryLimit: memoryLimit, TraceCollector: opts.tracing(),
		Reattach: reattach, Restarts: restarts, TracerProvider: tp,
	})
	if err := plugins.Load(ctx, registry); err != nil {
		return nil, plugins, fmt.Errorf("load plugins: %w", err)
	}
	logger.Info("Executors registered", "names", registry.Names())
	return registry, plugins, nil
}

// builtinExecutors are the executors compiled into the operator; node.drain reads the
// cluster's DrainRules from drainRules.
func builtinExecutors(drainRules *node.DrainRules) []executor.TaskExecutor {
	return append(node.Executors(drainRules), k8s.Executors()...)
}
