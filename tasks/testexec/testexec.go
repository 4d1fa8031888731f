// Package testexec holds executors for tests, demos and benchmarks, registered only when
// the operator runs with --enable-test-executors:
//
//   - test.noop does nothing, at once, in every hook.
//   - test.record appends "STEP/HOOK" to the "calls" key of a ConfigMap in the pipeline's
//     namespace, acting as the pipeline's ServiceAccount, so a test can observe the order
//     of hooks and the engine's impersonation. Parameters: configMap (default
//     "stepwise-record-PIPELINE"); gate (true: Create waits until the ConfigMap has the key
//     "open.STEP"); fail ("permanent" or "retryable": Create fails); output (a value to
//     report as the output "value"). The engine checks them against Describe before any
//     hook.
//   - test.sleep's Create sleeps for its parameter duration (or until its call is
//     cancelled), then succeeds or fails as its parameter fail asks: a tenant whose hooks
//     are slow or hang.
//   - test.wait's Create is done once its parameter duration has passed since its first
//     call, asking to be called again until then: a step that takes time without holding
//     a worker, as one polling a remote operation.
//
// test.noop declares no parameter, so it takes any: tests and benchmarks give it what they
// need to exercise the engine.
package testexec

import "github.com/stepwise-dev/stepwise/pkg/executor"

// Executors returns the test executors.
func Executors() []executor.TaskExecutor {
	return []executor.TaskExecutor{Noop{}, Record{}, Sleep{}, Wait{}}
}
