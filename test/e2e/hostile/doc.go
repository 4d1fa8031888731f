// Package hostile is the hostile-object suite of the operator: a property test against a
// real API server. A seeded generator (gen.go, mutate.go, corpus.go) reads the four CRDs
// of crd/ at run time, walks their openAPIV3Schema and mutates a valid base object of each
// kind (Pipeline, PipelineTemplate, PipelineTrigger, Approval) with boundary and
// just-past-boundary values, odd durations, cron schedules, time zones, strings, YAML,
// references, and forged approvers. Some base steps wait for approval; base Approvals are
// the tenant's decisions on those waits (with the request the cluster shows, the one value
// not taken from the seed) or on steps and pipelines that do not wait or do not exist.
// The e2e test (hostile_test.go) installs the admission policies of an install and applies
// the objects as a tenant with namespaced rights (an approver's among them) while a canary
// in another namespace measures how fast a one-step pipeline becomes Ready, and asserts
// that the operator never exits nor panics, that the canary stays fast, that every
// admitted pipeline and trigger is handled (it gets a Ready condition for its generation;
// templates and Approvals have no status), that no step that waits for approval runs its
// hooks without the approvals it requires and no decision counts that must not (another
// user's, under four eyes), that the tenant reaches nothing outside its namespace, and that
// the tenant's namespace can be deleted afterwards.
//
// `go test ./test/e2e/hostile/` (so `make test`) runs a few hundred objects with a fixed
// seed; `make hostile` runs thousands with a random one. A failure prints its seed: repeat
// it with -hostile.seed=N (and the same -hostile.count). `go test -run Generator
// ./test/e2e/hostile/` runs the generator's own tests without starting a cluster.
package hostile
