// Package chaos holds the chaos suite of the operator (chaos_test.go): pipelines run on a
// local control plane with real plugins while the operator is SIGKILLed and restarted,
// plugin processes are killed, the leader of two leader-elected replicas is killed, and the
// API server is restarted; then every pipeline must be Ready, every hook must have run at
// least once with its first run in order, and deleting the pipelines must run every
// teardown, last step first. Last, a drain that brings a replacement up first runs while
// the leader is killed at its moves: the Deployment it drains must never be without an
// available replica, and be scaled up and back exactly once.
//
// `go test ./test/e2e/chaos/` (so `make test`) runs a short version; `make chaos` runs the
// full one (-chaos.full, or STEPWISE_CHAOS_FULL=1).
package chaos
