# The codemode gateway. `make run` serves config.example.yaml on the embedded
# local backend; `make test` is the whole test suite, the same one CI runs.

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
BIN     := bin/gateway

.PHONY: all build run test vet lint bench fuzz clean deps interop-deps e2e-deps peers-deps e2e

# npm packages for the tests that run the real capnweb JavaScript library.
INTEROP := protocol/capnweb/interop
E2E     := e2e
# The executor servers the capacity benchmark compares the gateway with
# (isolated-vm, a native addon): make bench only, never make test.
PEERS   := e2e/peers

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/gateway

run: build
	./$(BIN) serve --config config.example.yaml

# The test command of the README and of CI: static checks, then every test
# with the race detector.
test: vet interop-deps e2e-deps
	$(GO) test -race -count=1 ./...

deps: interop-deps e2e-deps
	$(GO) mod download

# Installs capnweb and ws exactly as package-lock.json pins them, again only
# when the lock file changed.
interop-deps: $(INTEROP)/node_modules/.package-lock.json

$(INTEROP)/node_modules/.package-lock.json: $(INTEROP)/package.json $(INTEROP)/package-lock.json
	cd $(INTEROP) && npm ci --no-audit --no-fund

e2e-deps: $(E2E)/node_modules/.package-lock.json

$(E2E)/node_modules/.package-lock.json: $(E2E)/package.json $(E2E)/package-lock.json
	cd $(E2E) && npm ci --no-audit --no-fund

# isolated-vm builds a native addon (about a minute on two CPUs), so only
# the benchmark installs it.
peers-deps: $(PEERS)/node_modules/.package-lock.json

$(PEERS)/node_modules/.package-lock.json: $(PEERS)/package.json $(PEERS)/package-lock.json
	cd $(PEERS) && npm ci --no-audit --no-fund

# The end-to-end tests alone (make test runs them too).
e2e: e2e-deps
	$(GO) test -race -count=1 ./e2e/

vet:
	$(GO) vet ./...

# staticcheck at a pinned version, fetched through the module proxy;
# staticcheck.conf says which checks run.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) ./...

# Benchmarks, side by side in one run each: Go's testing.B across the tree,
# then the JavaScript client against the Go executor server and a capnweb +
# node:vm server, then the gateway's capacity and fairness against capnweb +
# node:vm and capnweb + isolated-vm. Figures go in docs/benchmarks.md.
BENCHTIME ?= 1s
bench: build interop-deps e2e-deps peers-deps
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -benchmem ./...
	CAPNWEB_BENCH=1 $(GO) test -count=1 -run '^TestBenchReport$$' -v ./protocol/capnweb/
	cd $(E2E) && node bench-executors.mjs ../$(BIN)
	cd $(E2E) && node bench-capacity.mjs ../$(BIN)

# A short fuzzing pass over every fuzz target (FUZZTIME per target).
FUZZTIME ?= 20s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$t"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

clean:
	rm -rf bin

# ---- TypeScript client (clients/typescript) and its examples ----------------
# npm ci of the package (its adapters' upstream packages and playwright-core
# are dev dependencies) and of examples/, which links the package. make test
# runs client-test first, alone (clients/typescript/client_test.go, build tag
# clienttest): tsc, tsc --noEmit of every example, and the package's node
# --test files against the real gateway binary and headless Chromium. Its
# vectors test (no tag) runs with the rest of the tree.
CLIENT   := clients/typescript
EXAMPLES := examples

.PHONY: client-deps client-test

client-deps: $(CLIENT)/node_modules/.package-lock.json $(EXAMPLES)/node_modules/.package-lock.json

$(CLIENT)/node_modules/.package-lock.json: $(CLIENT)/package.json $(CLIENT)/package-lock.json
	cd $(CLIENT) && npm ci --no-audit --no-fund

$(EXAMPLES)/node_modules/.package-lock.json: $(EXAMPLES)/package.json $(EXAMPLES)/package-lock.json $(CLIENT)/node_modules/.package-lock.json
	cd $(EXAMPLES) && npm ci --no-audit --no-fund

# The client's tests alone (make test runs them too).
client-test: client-deps
	$(GO) vet -tags clienttest ./$(CLIENT)/
	$(GO) test -tags clienttest -count=1 ./$(CLIENT)/

test: client-test
