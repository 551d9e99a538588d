# kvrouter build. `make help` lists the targets.
GO       ?= go
PKGS     := ./...
BIN      := bin/kvrouter
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
export GOTOOLCHAIN := local
export GOFLAGS ?= -buildvcs=false

# The packages whose tests exercise concurrency (raft, the node's request path, the relays, the
# event plane, the index's concurrent readers, the edge's body budget): `make test` runs them again
# under the race detector, in -short mode, which skips their slowest in-process clusters and
# federations (run plain in the same `make test`; docs/testing.md). `make test-race` runs every
# package so, without -short.
RACE_PKGS := ./consensus/... ./node/... ./relay/... ./fleet/... ./routing/index/... ./internal/oaiedge/...
# The plain test builds use the configuration of the shipped binary (CGO_ENABLED=0, as `make build`),
# which also selects Pebble's pure-Go zstd. The race detector needs cgo; the pebblegozstd tag keeps
# it on the same zstd, and keeps DataDog/zstd's C sources (about a minute of compile on 2 cores) out
# of the build. See docs/testing.md for what each phase costs.
# Test builds carry no debug information (DWARF): an eighth less compile and link time, and a
# failing test still prints its whole stack (that comes from the binary's own tables). GOFLAGS
# carries it, so that the kvrouter binary the process tests build shares the same compile.
TESTGOFLAGS := $(GOFLAGS) -gcflags=all=-dwarf=false -ldflags=-w
PLAIN    := env CGO_ENABLED=0 GOFLAGS="$(TESTGOFLAGS)"
RACE     := env CGO_ENABLED=1 GOFLAGS="$(TESTGOFLAGS)" $(GO) test -count=1 -race -short -vet=off -tags=pebblegozstd
PHASE    := PHASES=$(CURDIR)/bin/phases.txt $(CURDIR)/.ci/phase
BENCHTIME ?= 1s
CHAOS_SECONDS ?= 20
CHAOS_COUNT   ?= 3
CHAOS_SEED    ?= $(shell date +%s)
# Each scenario appends its figures as a markdown table row here (docs/reliability.md).
CHAOS_REPORT  ?= $(CURDIR)/bin/chaos-report.md
FUZZTIME  ?= 30s


.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/kvrouter (static, stripped).
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags="$(LDFLAGS)" -o $(BIN) ./cmd/kvrouter

.PHONY: test
test: ## The whole suite: lint, every package's tests once, deploy/ checks, race detector on concurrent packages; prints each phase's wall time.
	@mkdir -p bin && rm -f bin/phases.txt && start=$$(date +%s) && \
	  $(MAKE) --no-print-directory -j3 --output-sync=target test-phases && \
	  echo "make test passed in $$(( $$(date +%s) - start ))s; wall time of each phase (race, unit and deploy ran side by side after lint):" && \
	  cat bin/phases.txt

# The phases of `make test`. lint compiles the tree for the plain tests, which unit and deploy then
# reuse. The race build shares no compile with them (other flags, and cgo); it runs beside unit and
# deploy, whose process tests spend most of their time waiting (the unit phase alone keeps about
# one core busy), and not beside lint, whose compile keeps both cores busy: two CPU-bound builds at
# once took longer than one after the other (docs/testing.md). Each phase's output is printed whole
# when it ends.
.PHONY: test-phases test-lint test-unit test-deploy test-racepkgs
test-phases: test-lint test-unit test-deploy test-racepkgs
test-lint:
	@$(PHASE) lint $(MAKE) --no-print-directory lint-main
test-unit: test-lint
	@$(PHASE) unit $(PLAIN) $(GO) test -count=1 -vet=off $(PKGS)
test-deploy: test-lint
	@$(PHASE) deploy sh -c 'cd deploy && $(PLAIN) $(GO) vet ./... && $(PLAIN) $(GO) test -count=1 -vet=off ./...'
test-racepkgs: test-lint
	@$(PHASE) race $(RACE) $(RACE_PKGS)

.PHONY: test-race
test-race: ## Every package under the race detector.
	CGO_ENABLED=1 $(GO) test -count=1 -race -tags=pebblegozstd $(PKGS)

.PHONY: test-sdk
test-sdk: ## The official OpenAI Go SDK end to end through a node (the sdk tag; its compile is the largest in the tree, so make test drives the same wire with a small client).
	$(PLAIN) $(GO) vet -tags=sdk ./node/
	$(PLAIN) $(GO) test -count=1 -tags=sdk -run 'OpenAIClient' -v ./node/

.PHONY: chaos
chaos: ## Fault-injection scenarios S01-S22, multi-process and in-process (failpoints compiled in with -tags chaos), longer phases (CHAOS_SECONDS=20, CHAOS_COUNT=3, CHAOS_SEED=now; figures in bin/chaos-report.md).
	@mkdir -p $(dir $(CHAOS_REPORT))
	KVRTEST_CHAOS_SECONDS=$(CHAOS_SECONDS) KVRTEST_CHAOS_SEED=$(CHAOS_SEED) KVRTEST_CHAOS_REPORT=$(CHAOS_REPORT) $(GO) test -tags chaos -count=$(CHAOS_COUNT) -v -timeout 90m ./chaos/...

.PHONY: lint lint-main
lint: lint-main ## gofmt and go vet (with the plain test builds' configuration, so that they share one compile).
	cd deploy && $(PLAIN) $(GO) vet ./...
lint-main:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(PLAIN) $(GO) vet $(PKGS)

.PHONY: bench
bench: ## Benchmarks of every package (BENCHTIME=1s by default).
	$(GO) test -run '^$$' -bench . -benchmem -benchtime=$(BENCHTIME) $(PKGS)

# deploy/ is its own module too, so that kustomize's and Kubernetes' Go
# packages, which only its validation tests need, stay out of go.mod; `make
# test` and `make lint` run it explicitly.
# bench/ is its own module, so that the peer's dependencies stay out of go.mod; `go test ./...`
# here does not descend into it.
PEERS_SEED   ?= 1
PEERS_ROUNDS ?= 2

.PHONY: bench-peers
bench-peers: ## kvrouter's exact index beside llm-d's KV-block indexes: same events, same queries, interleaved rounds (PEERS_SEED=1, PEERS_ROUNDS=2).
	cd bench && $(GO) run ./cmd/peers -seed $(PEERS_SEED) -rounds $(PEERS_ROUNDS)

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (30s by default).
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime=$(FUZZTIME) $$pkg; \
	  done; \
	done

.PHONY: proto
proto: ## Regenerate proto/kvrpb from proto/kvr/v1 (needs protoc: apt-get install protobuf-compiler).
	PATH="$$(dirname $$($(GO) tool -n protoc-gen-go)):$$(dirname $$($(GO) tool -n protoc-gen-go-grpc)):$$PATH" \
	  protoc --go_out=. --go_opt=module=github.com/kvrouter/kvrouter \
	  --go-grpc_out=. --go-grpc_opt=module=github.com/kvrouter/kvrouter proto/kvr/v1/*.proto

.PHONY: demo
demo: ## Simulated policy comparison, then live replays through router clusters (ARGS=... passes options).
	@echo "make demo: building $(BIN) first (the same build as make build, so the two share one compile; a fresh clone compiles its dependencies once, a few minutes on 2 cores)"
	@$(MAKE) --no-print-directory build
	./$(BIN) demo $(ARGS)

.PHONY: clean
clean: ## Remove build outputs.
	rm -rf bin
