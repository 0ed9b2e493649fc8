# ocf-claim: every entry point. `make help` lists them.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# The control-plane version comes from one place: the tools module.
K8S_VERSION := $(shell awk '$$1=="k8s.io/kubernetes"{sub(/^v/,"",$$2); print $$2}' hack/envtest/go.mod)
ENVTEST_DIR := bin/k8s/$(K8S_VERSION)
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := bin/golangci-lint-$(GOLANGCI_LINT_VERSION)

# go test flags for `make test`; the race detector fits the time budget.
TEST_FLAGS ?= -race -count=1 -timeout 20m
# Packages' envtest suites each start their own control plane on free ports;
# two at a time suits two cores.
TEST_PARALLEL ?= 2

export KUBEBUILDER_ASSETS := $(abspath $(ENVTEST_DIR))

# The Go modules of the repository. The kubectl plugin is a module of its own
# so that a program importing the library does not pull cobra and cli-runtime;
# `go test ./...` at the root does not descend into it, so every target that
# covers "all the code" walks CODE_MODULES. hack/envtest is the tools module
# that builds the control plane: it has no code of ours to vet or lint, but its
# go.mod must stay tidy like the others.
PLUGIN_MODULE := cmd/kubectl-claims
CODE_MODULES := . $(PLUGIN_MODULE)
MODULES := $(CODE_MODULES) hack/envtest

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: envtest
envtest: ## Build kube-apiserver, etcd and kubectl from source into bin/k8s/<version> (once; ~10 min).
	@hack/envtest/build.sh $(ENVTEST_DIR)

.PHONY: envtest-server
envtest-server: ## Build only what the suites need (kube-apiserver and etcd), once.
	@ENVTEST_BINARIES="etcd kube-apiserver" hack/envtest/build.sh $(ENVTEST_DIR)

.PHONY: test
# The model is checked by the `model` prerequisite, so the go test below
# leaves ./model out rather than explore it twice.
test: envtest-server vet model ## Build the control plane if missing, vet, check the protocol model, and run every test against it.
	go test $(TEST_FLAGS) -p $(TEST_PARALLEL) $$(go list ./... | grep -v '/model$$')
	cd $(PLUGIN_MODULE) && go test $(TEST_FLAGS) -p $(TEST_PARALLEL) ./...
	@$(MAKE) --no-print-directory fuzz-short

.PHONY: spin
spin: ## Install SPIN from the distribution's packages when it is missing (needs root or sudo).
	@command -v spin >/dev/null || { \
	  echo "spin: not on PATH; installing the distribution's package"; \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update && $$sudo apt-get install -y spin; }

# `make model`: SPIN explores every interleaving of the bounded worlds of
# model/*.pml and fails on any counterexample, whose trail it prints in words;
# each known bug, put back by its -D switch, must yield one. docs/model.md.
.PHONY: model
# MODEL_FLAGS=-v also prints each world's state count and each mutation's
# counterexample. The timeout is wall time: on a shared machine the 5
# CPU-minutes can take several times that.
MODEL_FLAGS ?=
model: spin ## Model-check the claim protocol and the middleware with SPIN (about 5 CPU-minutes; MODEL_FLAGS=-v for trails).
	go test -count=1 -timeout 40m $(MODEL_FLAGS) ./model/

.PHONY: build
build: ## Build the kubectl plugin into bin/kubectl-claims (put bin/ on PATH: kubectl claims ...).
	cd $(PLUGIN_MODULE) && go build -o $(abspath bin/kubectl-claims) .

.PHONY: vet
vet: ## go vet every package of every module.
	@for m in $(CODE_MODULES); do echo "go vet ./... (in $$m)"; (cd $$m && go vet ./...); done

.PHONY: lint
lint: $(GOLANGCI_LINT) ## gofmt, tidy go.mod files, go vet and golangci-lint, in every module.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES); do echo "go mod tidy -diff (in $$m)"; (cd $$m && go mod tidy -diff) || { echo "$$m/go.mod or go.sum is not tidy: run go mod tidy in $$m"; exit 1; }; done
	@$(MAKE) --no-print-directory vet
	@for m in $(CODE_MODULES); do echo "golangci-lint run ./... (in $$m)"; (cd $$m && $(abspath $(GOLANGCI_LINT)) run ./...); done

$(GOLANGCI_LINT):
	@echo "lint: building golangci-lint $(GOLANGCI_LINT_VERSION) from the module proxy"
	@mkdir -p bin && GOBIN=$(abspath bin) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	@mv bin/golangci-lint $(GOLANGCI_LINT)

.PHONY: duplicates
duplicates: ## Repeated code as the development tool `duplicates` counts it, Go import blocks left out (DUPLICATES_FLAGS, default --most 60).
	hack/duplicates $(or $(DUPLICATES_FLAGS),--most 60 --seconds 120)

.PHONY: demo
demo: envtest build ## Play the handover scenario against an embedded control plane, then kubectl claims on it (DEMO_FLAGS=-keep keeps it running).
	go run ./examples/camundacluster/demo $(DEMO_FLAGS)

.PHONY: bench
# `make bench`: the Go benchmarks of the pure parts, then every envtest
# scenario at full size; one table on stdout and in docs/benchmarks.md.
BENCH_GO_TEST := go test -count=1 -timeout 30m -run '^TestBench$$' ./bench/
bench: envtest ## Measure API cost and latency of claims against the alternatives (writes docs/benchmarks.md).
	@mkdir -p bin
	go test -run '^$$' -bench . -benchmem ./pkg/claim/ ./pkg/backends/ | tee bin/bench-micro.txt
	go test -run '^$$' -bench . -benchtime 50x ./pkg/generation/ | tee bin/bench-generation.txt
	BENCH_FULL=1 BENCH_REPORT=$(abspath docs/benchmarks.md) BENCH_MICRO=$(abspath bin/bench-micro.txt) \
	  BENCH_COMMAND="make bench ($(BENCH_GO_TEST) with BENCH_FULL=1)" $(BENCH_GO_TEST) -v | grep -E '^(\||--- |ok|FAIL|panic)|_test\.go'

.PHONY: fuzz
FUZZ_PKGS := ./pkg/claim/ ./pkg/backends/
fuzz: ## Run each fuzz target briefly (FUZZTIME, default 5s).
	@set -e; for p in $(FUZZ_PKGS); do \
	  for t in $$(go test -list '^Fuzz' $$p | grep ^Fuzz); do go test -run '^$$' -fuzz "^$$t$$" -fuzztime $${FUZZTIME:-5s} $$p; done; \
	done

# fuzz-short counts executions instead of seconds: with a duration, Go
# 1.26's fuzz coordinator can report its own deadline as a failure
# ("context deadline exceeded", no input written; go.dev/issue/75804,
# fixed in Go 1.27) when a loaded machine starves a worker at the end.
.PHONY: fuzz-short
fuzz-short: ## Run each fuzz target for 5000 executions from its committed corpus (FUZZTIME); part of `make test`.
	@FUZZTIME=$${FUZZTIME:-5000x} $(MAKE) --no-print-directory fuzz

# `make chaos`: the randomized runs of internal/chaos for SEEDS seeds each:
# claims under faults and crashes (TestChaos), and the middleware under a
# real manager (TestMiddlewareChaos); CHAOS_SEED=N replays one seed of both.
# `make test` runs 3 seeds of each.
SEEDS ?= 200
.PHONY: chaos
chaos: envtest ## Randomized claims and middleware under injected faults, history-checked (SEEDS=200; CHAOS_SEED=N replays one).
	CHAOS_SEEDS=$(SEEDS) go test -race -count=1 -timeout 120m -run '^(TestChaos|TestMiddlewareChaos)$$' -v ./internal/chaos/

# `make chaos-mutants`: each known bug of internal/mutant put back in turn
# (CHAOS_MUTANT=<name>, in a test binary built with -tags chaosmutants, the
# only kind in which a mutant can be on) and TestMiddlewareChaos run until a
# seed reports a violation, for at most MUTANT_SEEDS seeds; with a mutant
# on, the test fails when no seed does. Fails unless every mutant is caught.
MUTANT_SEEDS ?= 40
MUTANTS ?= $(shell sed -n 's/^\t\([A-Za-z]*\) Name = ".*"$$/\1/p' internal/mutant/mutant.go)
.PHONY: chaos-mutants
chaos-mutants: envtest ## Put each known bug back (internal/mutant) and fail unless the middleware checker catches every one (MUTANT_SEEDS=40).
	@failed=; for m in $(MUTANTS); do \
	  echo "== mutant $$m"; \
	  if CHAOS_MUTANT=$$m CHAOS_SEEDS=$(MUTANT_SEEDS) go test -tags chaosmutants -count=1 -timeout 60m -run '^TestMiddlewareChaos$$' -v ./internal/chaos/ | grep -E '^(---|ok|FAIL)|mutant|summary|^ +[a-z]+(-[a-z]+)+: '; \
	  then :; else failed="$$failed $$m"; fi; \
	done; \
	if [ -n "$$failed" ]; then echo "chaos-mutants: not caught:$$failed"; exit 1; fi; echo "chaos-mutants: every mutant caught"
