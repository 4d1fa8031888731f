# Stepwise: every tool the build needs is pinned here and installed into ./bin.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -o errexit -o nounset -o pipefail -c
.DEFAULT_GOAL := build

LOCALBIN ?= $(CURDIR)/bin
export GOBIN := $(LOCALBIN)

CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0
# Versioned file names make a version bump install the new tool.
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)

GO_TEST_FLAGS ?= -race -count=1

-include hack/localcluster.mk

##@ Build

.PHONY: build
build: ## Build the operator and its tools into ./bin.
	go build -o $(LOCALBIN)/ ./cmd/...

.PHONY: demo
demo: build localcluster-tools ## Start a local control plane and the operator, and run a first pipeline.
	hack/demo.sh up

.PHONY: demo-down
demo-down: ## Stop the demo's operator and control plane.
	hack/demo.sh down

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate deepcopy, clientset, listers, informers, apply configurations and the CRD.
	hack/update-codegen.sh
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/update-crd.sh

##@ Check

.PHONY: test
test: lint verify build localcluster-tools ## Everything CI runs: lint, verify generated files, unit and e2e tests with -race.
	go test $(GO_TEST_FLAGS) ./...

.PHONY: unit
unit: ## Unit tests only (no control plane needed).
	go test $(GO_TEST_FLAGS) $$(go list ./... | grep -v /test/e2e)

.PHONY: e2e
e2e: build localcluster-tools ## End-to-end tests on a local control plane started for the run.
	go test $(GO_TEST_FLAGS) ./test/e2e/...

.PHONY: verify
verify: $(CONTROLLER_GEN) ## Fail when generated code or the CRD is stale.
	hack/verify-codegen.sh
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/verify-crd.sh

.PHONY: lint
lint: fmt-check vet golangci-lint ## gofmt, go vet and golangci-lint.

.PHONY: fmt-check
fmt-check:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './bin/*' -not -path './.local/*')); \
	if [[ -n "$$out" ]]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

.PHONY: vet
vet:
	go vet ./...

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run ./...

##@ Tools

$(LOCALBIN):
	mkdir -p $@

$(CONTROLLER_GEN): | $(LOCALBIN)
	go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(LOCALBIN)/controller-gen $@

$(GOLANGCI_LINT): | $(LOCALBIN)
	go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(LOCALBIN)/golangci-lint $@

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
