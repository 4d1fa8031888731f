// Package hostile is the hostile-object suite of the operator: a property test against a
// real API server. A seeded generator (gen.go, mutate.go, corpus.go) reads the three CRDs
// of crd/ at run time, walks their openAPIV3Schema and mutates a valid base object of each
// kind (Pipeline, PipelineTemplate, PipelineTrigger) with boundary and just-past-boundary
// values, odd durations, cron schedules, time zones, strings, YAML and references. The
// e2e test (hostile_test.go) applies them as a tenant with namespaced rights while a canary
// in another namespace measures how fast a one-step pipeline becomes Ready, and asserts
// that the operator never exits nor panics, that the canary stays fast, that every
// admitted object is handled (it gets a Ready condition for its generation), that the
// tenant reaches nothing outside its namespace, and that the tenant's namespace can be
// deleted afterwards.
//
// `go test ./test/e2e/hostile/` (so `make test`) runs a few hundred objects with a fixed
// seed; `make hostile` runs thousands with a random one. A failure prints its seed: repeat
// it with -hostile.seed=N (and the same -hostile.count). `go test -run Generator
// ./test/e2e/hostile/` runs the generator's own tests without starting a cluster.
package hostile
