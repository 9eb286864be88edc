# kovn — two commands for users: `make demo` and `make test`. Everything else is a building block.
SHELL := /bin/bash
BIN   := $(CURDIR)/_output/bin
HELM  := $(BIN)/helm
GO    ?= go
# Binaries built from this module, all static, stripped and -trimpath: the test images' so they
# run in an empty image, kovn's so the rig's processes and kovn's image run the same files,
# linked once (a second link of each for the image cost CI 15 s).
STATIC_BUILD = CGO_ENABLED=0 $(GO) build -trimpath -ldflags="-s -w"
CMDS  := kovn-rig kovn-controller kovn-daemon kovn-cni kovn-speaker kovn-ovsdb kovn-pinger kovn-ovn-monitor kubectl-kovn
IMAGES := kovn-pause:./test/images/pause kovn-testbox:./test/images/testbox kovn-coredns:./test/images/coredns kovn-probe:./cmd/kovn-probe
# Delegate plugins of attachment networks, built static from their Go module: kovn-daemon calls
# them (the rig from _output/bin/cni-plugins, the image from /opt/kovn/cni).
CNI_PLUGINS_VERSION := v1.10.0
CNI_PLUGINS := main/macvlan main/ipvlan main/bridge main/host-device ipam/static
install-cni-plugins = CGO_ENABLED=0 GOBIN=$(1) $(GO) install -trimpath -ldflags="-s -w" $(foreach p,$(CNI_PLUGINS),github.com/containernetworking/plugins/plugins/$(p)@$(CNI_PLUGINS_VERSION))
RIG_DIR ?= $(CURDIR)/_output/rig
export KOVN_RIG_DIR := $(RIG_DIR)

.PHONY: all deps build helm images upstream-images generate vet unit e2e upstream-e2e cnp-conformance test bench demo demo-down rig-up rig-down rig-status clean

all: build

## deps: install apt packages and build the pinned Kubernetes binaries (idempotent)
deps:
	hack/install-deps.sh

## build: compile every kovn binary into _output/bin (and helm: the rig renders kovn's RBAC from the chart).
## The binaries are relinked only when one of their inputs changed (a fresh clone builds all):
## linking them all again costs half a minute, which make demo on a warm machine need not pay.
BUILD_STAMP  := $(BIN)/.build-stamp
BUILD_INPUTS := $(shell find api cmd pkg test deploy -type f -not -name '*_test.go' 2>/dev/null) go.mod go.sum Makefile
build: $(BUILD_STAMP)
$(BUILD_STAMP): $(HELM) $(BUILD_INPUTS)
	@mkdir -p $(BIN)
	$(STATIC_BUILD) -o $(BIN)/ $(addprefix ./cmd/,$(CMDS))
	@for img in $(IMAGES); do $(STATIC_BUILD) -o $(BIN)/$${img%%:*} $${img#*:} || exit 1; done
	$(call install-cni-plugins,$(BIN)/cni-plugins)
	@touch $@

## helm: the helm CLI, built from its Go module pinned in hack/tools (its own go.mod, so helm's
## dependencies never move kovn's); the chart tests (`make unit`) and `kovn-rig up --install chart` use it
helm: $(HELM)
$(HELM): hack/tools/go.mod hack/tools/go.sum
	@mkdir -p $(BIN)
	cd hack/tools && $(GO) build -o $(HELM) helm.sh/helm/v3/cmd/helm

## images: kovn's container image (_output/images/kovn.tar, docker-archive, linux/amd64), built
## offline from kovn's binaries (the files `make build` wrote: static, stripped, -trimpath) and
## this machine's OVS/OVN Debian packages; reproducible
images: build
	$(GO) run ./hack/images -bin-dir $(BIN) -out $(CURDIR)/_output/images

## upstream-images: the images Kubernetes' e2e suite runs (agnhost, busybox, ...), written locally
## as one archive (_output/images/upstream-e2e.tar) from the binaries hack/install-deps.sh builds
## beside e2e.test, kovn's lab CoreDNS and this host's Debian packages (hack/images/upstream.go)
K8S_E2E_DIR ?= $(or $(KOVN_K8S_BIN_DIR),$(HOME)/.cache/kovn/k8s-v1.31.4)/e2e
upstream-images: build
	$(GO) run ./hack/images -upstream-e2e $(K8S_E2E_DIR) -bin-dir $(BIN) -out $(CURDIR)/_output/images

## generate: regenerate libovsdb models, deepcopy and CRD manifests
generate:
	hack/update-codegen.sh

## golangci-lint, built from its Go module pinned in hack/tools/golangci (its own go.mod, as helm's)
GOLANGCI := $(BIN)/golangci-lint
$(GOLANGCI): hack/tools/golangci/go.mod hack/tools/golangci/go.sum
	@mkdir -p $(BIN)
	cd hack/tools/golangci && $(GO) build -o $(GOLANGCI) github.com/golangci/golangci-lint/v2/cmd/golangci-lint

## vet: golangci-lint with the linters .golangci.yml keeps (govet among them), and gofmt
vet: $(GOLANGCI)
	@unformatted=$$(gofmt -l api cmd pkg test hack docs deploy); [ -z "$$unformatted" ] || { echo "gofmt needed: $$unformatted"; exit 1; }
	$(GOLANGCI) run ./...


## unit: unit tests (no rig); deploy/'s render the chart with the real helm
unit: $(HELM)
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /test/e2e)

## e2e: end-to-end tests on a real rig (needs root); the chart labs install kovn's image
## (make images) with the chart. The output goes through hack/testsummary:
## the same -v text, then (on failure) each failing test's last messages, so the tail of a long
## run names what failed even after the rig diagnostics a failed test prints at its cleanup.
## The 75 min timeout is a backstop below CI's 90 min kill (the suite takes 30-40 min when the
## machine is not starved), so a slow machine shows which test ran long instead of a kill.
SUMMARY = $(GO) run ./hack/testsummary
e2e: build images upstream-images
	hack/install-deps.sh --check
	set -o pipefail; KOVN_BIN_DIR=$(BIN) $(GO) test -json -count=1 -parallel 4 -timeout 75m \
	  -skip 'TestUpstreamSigNetwork$$' ./test/e2e/... | $(SUMMARY)

## upstream-e2e: Kubernetes' own sig-network e2e on a 2-node lab (needs root): the conformance,
## NetworkPolicy and wider sets (UPSTREAM_SETS picks; `make e2e` runs the "ci" set in TestServices), reports in
## _output/upstream-e2e/<set>; docs/upstream-e2e.md records a full run
UPSTREAM_SETS ?= conformance,netpol,wider
upstream-e2e: deps build images upstream-images
	set -o pipefail; KOVN_UPSTREAM_E2E=$(UPSTREAM_SETS) KOVN_BIN_DIR=$(BIN) $(GO) test -json -count=1 -timeout 170m \
	  -run 'TestUpstreamSigNetwork$$' ./test/e2e/ | $(SUMMARY)

## cnp-conformance: network-policy-api's ClusterNetworkPolicy conformance suite (v0.3.0) on a
## 2-node lab (needs root), its report written to docs/conformance/ (`make e2e` runs it too,
## reporting to a temporary file)
cnp-conformance: deps build images upstream-images
	mkdir -p docs/conformance
	set -o pipefail; KOVN_CNP_REPORT=$(CURDIR)/docs/conformance/cnp-v0.3.0-kovn.yaml KOVN_BIN_DIR=$(BIN) $(GO) test -json -count=1 \
	  -timeout 60m -run 'TestClusterNetworkPolicyConformance$$' ./test/e2e/ | $(SUMMARY)

## test: what CI runs — install deps, unit tests, then e2e on the rig
test: deps build vet unit e2e

## bench: benchmarks on a real rig; they print figures and assert nothing about speed.
## Knobs: KOVN_BENCH_PODS (10000), KOVN_BENCH_FAKE_NODES (200), KOVN_BENCH_RATE (pods/s, 20),
## KOVN_BENCH_BAND (1000), KOVN_BENCH_IP_FAMILY (ipv4); Services: KOVN_BENCH_SERVICES (1000),
## KOVN_BENCH_ENDPOINTS (10), KOVN_BENCH_CHANGES (50); figures, plot and profiles go to _output/bench. One package (the
## report helpers are unit-tested by `make unit`), so -v output streams while it runs.
## BENCH_RUN picks scenarios (go test -run), e.g. only the Services one:
##   make bench BENCH_RUN=TestServiceScale
BENCH_RUN ?= .
bench: deps build
	KOVN_BIN_DIR=$(BIN) $(GO) test -tags bench -count=1 -timeout 90m -v -run '$(BENCH_RUN)' ./test/bench

## demo: bring up a rig and show it working; leaves it up for kubectl
demo: deps build
	hack/demo.sh

demo-down rig-down: build
	$(BIN)/kovn-rig down --dir $(RIG_DIR)

rig-up: deps build
	$(BIN)/kovn-rig up --dir $(RIG_DIR) --clusters $${CLUSTERS:-2} --nodes $${NODES:-2}

rig-status: build
	$(BIN)/kovn-rig status --dir $(RIG_DIR)

clean:
	rm -rf _output/bin
