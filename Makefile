# The codemode gateway. `make run` serves config.example.yaml on the embedded
# local backend; `make test` is the whole test suite, the same one CI runs.

GO      ?= go
# The release this tree is: `git describe` of the latest v* tag (v1.2.3, or
# v1.2.3-4-gabcdef0 past it, -dirty with local changes), or dev without one.
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
BIN     := bin/gateway

.PHONY: all build run test vet lint bench fuzz clean deps interop-deps e2e-deps peers-deps e2e

# npm packages for the tests that run the real capnweb JavaScript library.
INTEROP := capnweb/interop
E2E     := e2e
# The executor servers the capacity benchmark compares the gateway with
# (isolated-vm, a native addon): make bench only, never make test.
PEERS   := e2e/peers

all: build

# Static (no cgo), as the release and the image: a cgo binary maps an 8 MiB
# stack for each thread, and a worker holds a thread for each run computing
# on, against its address-space limit (docs/local-executor.md).
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/gateway

# make run LISTEN=127.0.0.1:9000 ADMIN=127.0.0.1:9001 serves the same file on
# other addresses (serve's --listen and --admin-listen).
run: build
	./$(BIN) serve --config config.example.yaml$(if $(LISTEN), --listen $(LISTEN))$(if $(ADMIN), --admin-listen $(ADMIN))

# The test command of the README and of CI: static checks, then every test
# with the race detector (but the sandbox's guard and bomb suites: see
# sandbox-test), the deployment files' (a module of their own) too, and the
# TypeScript client's (client-test, at the end of this file). The jobs
# (the client's first, go-test's five, deploy-test) run side by side, each
# line of output whole: the client's took a minute and a half, about 56
# CPU-s of it, most of the rest waiting on node and the browser, and run
# after the others it was the largest serial part of make test on two CPUs. The tests whose
# bounds the load beside them used to break (TestMemoryBudgetIsAskedFirst,
# TestHandlesTimerSpinningBetweenInvocations) have margins for it.
#
# The gateway binary e2e's tests and the client's run is built once, here,
# for both (CODEMODE_TEST_GATEWAY): each linked its own, about 4 CPU-s
# apiece, and a binary already up to date is not linked again. The remote
# backend's conformance suite runs it as its local workers, a plain build
# where the race-instrumented test binary took 7-18 s to fill the memory
# case's 128 MB. go test runs without its own vet pass (VET=off): the vet
# prerequisite ran every analyzer over the same packages, their tests
# included (but the files of the race tag, a constant each), and go test's
# pass, cached apart from go vet's, cost up to 50 CPU-s after a change low
# in the tree.
TEST_GATEWAY := bin/gateway-test
test: vet interop-deps e2e-deps client-test-deps
	$(GO) build -o $(TEST_GATEWAY) ./cmd/gateway
	CODEMODE_TEST_GATEWAY=$(CURDIR)/$(TEST_GATEWAY) VET=off \
	  $(MAKE) --no-print-directory -j4 --output-sync=line client-test-run go-test deploy-test

.PHONY: go-test go-test-race sandbox-test deploy-test client-test-run
# Every Go test of the module: go-test-race runs all packages but the
# local backend and its sandbox with the race detector; local-test and
# sandbox-test run those two in two processes each (below). make test runs
# them side by side.
go-test: go-test-race local-test sandbox-test

# go test starts its packages' tests in the order they are named (each
# once), by default the import paths' order, two at a time on two CPUs. The
# longest are named first, so that none starts near the end and runs alone
# there (gateway, third longest, started last but a few and ended the run).
GO_TEST_FIRST := ./gateway/ ./e2e/ ./backends/remote/
MODULE        := github.com/supolka/codemode-gateway
LOCAL         := ./backends/local/
SANDBOX       := ./backends/local/internal/sandbox/

# VET=off (make test) leaves go test's vet pass out, where go vet ran.
VET ?= on
GO_TEST_VET := $(if $(filter off,$(VET)),-vet=off)

go-test-race:
	$(GO) test -race -count=1 $(GO_TEST_VET) $(GO_TEST_FIRST) \
	  $(filter-out $(MODULE)/backends/local $(MODULE)/backends/local/internal/sandbox,$(shell $(GO) list ./...))

# The local backend's tests run one at a time (none is parallel: many
# account for a worker's CPU or hold a bound), most of their time waiting
# on bounds, graces and workers, and the package was the longest of make
# test (124 s alone, 185-257 s inside it) and its end. Its race build runs
# as two processes side by side, the tests split by name: LOCAL_SHARD is
# -run for one and -skip for the other, so that each test runs in exactly
# one. Both take their plain JavaScript workers from one build
# (CODEMODE_TEST_LOCAL_WORKER, jsWorkerCommand), where each linked its own.
LOCAL_SHARD := ^Test[A-H]
LOCAL_BIN   := bin/local
local-test: local-test-a local-test-b
local-test-a local-test-b: $(LOCAL_BIN)-race.test

.PHONY: local-test local-test-a local-test-b $(LOCAL_BIN)-race.test
$(LOCAL_BIN)-race.test:
	$(GO) test -race -c $(GO_TEST_VET) -o $(LOCAL_BIN)-race.test $(LOCAL)
	$(GO) test -c $(GO_TEST_VET) -o $(LOCAL_BIN)-plain.test $(LOCAL)

# A test binary runs in its package's directory, as go test runs it.
LOCAL_RUN = cd $(LOCAL) && CODEMODE_TEST_LOCAL_WORKER=$(CURDIR)/$(LOCAL_BIN)-plain.test \
	  $(CURDIR)/$(LOCAL_BIN)-race.test -test.count=1 -test.timeout=10m -test.paniconexit0
local-test-a:
	$(LOCAL_RUN) -test.run '$(LOCAL_SHARD)'
local-test-b:
	$(LOCAL_RUN) -test.skip '$(LOCAL_SHARD)'

# The sandbox's guard and bomb suites run without the race detector, the
# rest of its tests with it. They are JavaScript-heavy and run on one
# goroutine (the clock's timer and a context's cancel beside it, which the
# other tests cover under the race detector); the detector made them cost
# twice the CPU (85 CPU-s against 45 for the package), and under it the
# timeout bombs over a large string never reached the call they test:
# building their input took their whole 300 ms bound ('x'.repeat(2**23)
# 0.3 CPU-s, '\u0130'.repeat(2**25) 1.9, against 2-12 ms without it).
# Their pass runs the tests at the sandbox's shipped thresholds too
# (TestGuardsAtFullThresholds, 12 CPU-s), which the race pass skips. A
# test joins that pass by its name here.
SANDBOX_PLAIN_TESTS := \
	TestStringGuardsKeepGojasResults TestStringBombsEndTheirRun \
	TestArrayGuardsKeepGojasResults TestArrayBombsEndTheirRun TestGuardsMendGojasBreaks \
	TestTypedGuardsKeepGojasResults TestBufferBombsEndTheirRun \
	TestOtherGuardsKeepGojasResults TestOtherBombsEndTheirRun \
	TestRegExpGuardsKeepGojasResults TestRegExpBombsEndTheirRun \
	TestGuardsAtFullThresholds TestGuardsKeepTheShapeOfGojasFunctions \
	TestLargeJoinsOfPrimitivesKeepGojasResults TestAnHonestLargeJoinCompletes \
	TestAJoinPastTheLimitEndsBeforeWriting \
	TestLazyGuardsAreInPlaceHoweverAFamilyIsReached TestReflectRangeErrorAndStringIteratorAreGuardedLazily \
	TestMemoryBudgetIsAskedFirst
empty :=
space := $(empty) $(empty)
# The one pattern both passes take: -skip for the race pass, -run for the
# plain one, so that a test is in exactly one of them.
SANDBOX_PLAIN := ^($(subst $(space),|,$(strip $(SANDBOX_PLAIN_TESTS))))$$

# First the split is checked against go test -list: a name in the list
# that is no test of the package (renamed, deleted) fails, and each test
# listed must fall in exactly one pass.
sandbox-test:
	@all=$$($(GO) test -list . $(SANDBOX) | grep -E '^(Test|Example|Fuzz)'); \
	for n in $(SANDBOX_PLAIN_TESTS); do \
	  echo "$$all" | grep -qx "$$n" || { echo "SANDBOX_PLAIN_TESTS: $$n is no test of $(SANDBOX)" >&2; exit 1; }; \
	done; \
	plain=$$(echo "$$all" | grep -cE '$(SANDBOX_PLAIN)'); race=$$(echo "$$all" | grep -cvE '$(SANDBOX_PLAIN)'); \
	if [ $$((plain + race)) -ne $$(echo "$$all" | wc -l) ] || [ $$plain -ne $(words $(SANDBOX_PLAIN_TESTS)) ]; then \
	  echo "sandbox-test: the two passes do not cover the sandbox's tests once each" >&2; exit 1; fi; \
	echo "sandbox: $$race tests with the race detector, $$plain without"
	$(GO) test -race -count=1 $(GO_TEST_VET) -skip '$(SANDBOX_PLAIN)' $(SANDBOX)
	$(GO) test -count=1 $(GO_TEST_VET) -run '$(SANDBOX_PLAIN)' $(SANDBOX)

deploy-test:
	cd deploy && $(GO) test -race -count=1 $(GO_TEST_VET) ./...

deps: interop-deps e2e-deps
	$(GO) mod download
	cd deploy && $(GO) mod download

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
	cd deploy && $(GO) vet ./...

# staticcheck at a pinned version, fetched through the module proxy;
# staticcheck.conf says which checks run.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) ./...
	cd deploy && $(GO) run $(STATICCHECK) ./...

# Benchmarks, side by side in one run each: Go's testing.B across the tree,
# then the JavaScript client against the Go executor server and a capnweb +
# node:vm server, then the gateway's capacity and fairness against capnweb +
# node:vm and capnweb + isolated-vm, and crypto.subtle against Node's
# WebCrypto. Figures go in docs/benchmarks.md.
BENCHTIME ?= 1s
bench: build interop-deps e2e-deps peers-deps
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -benchmem ./...
	CAPNWEB_BENCH=1 $(GO) test -count=1 -run '^TestBenchReport$$' -v ./capnweb/
	CRYPTO_BENCH=1 $(GO) test -count=1 -run '^TestCryptoBenchReport$$' -v ./backends/local/internal/webplatform/
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
	rm -rf bin $(DIST)

# ---- Release artifacts: static binaries with checksums, the container image ----

.PHONY: release release-test rootfs image image-test

DIST      := dist
PLATFORMS := linux/amd64 linux/arm64
# Static (no cgo), reproducible paths, no debug tables: the binary runs on
# any Linux of its architecture, and alone in the image.
STATIC_BUILD = CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)"

# dist/: one static binary per platform, LICENSE, NOTICE and SHA256SUMS.
release:
	rm -rf $(DIST) && mkdir -p $(DIST)
	@set -e; for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; out=$(DIST)/gateway_$(VERSION)_$${os}_$${arch}; \
	  echo "building $$out"; GOOS=$$os GOARCH=$$arch $(STATIC_BUILD) -o $$out ./cmd/gateway; \
	done
	cp LICENSE NOTICE $(DIST)/
	cd $(DIST) && sha256sum gateway_* LICENSE NOTICE > SHA256SUMS

# Checks what make release built: the files, their checksums, each binary's
# platform, static linking and version (CI: PLATFORMS=linux/amd64, which
# reuses the image's build).
release-test: release
	cd deploy && DIST=../$(DIST) RELEASE_VERSION=$(VERSION) RELEASE_PLATFORMS="$(PLATFORMS)" \
	  $(GO) test -count=1 -run '^TestRelease' -v .

# bin/rootfs: every file of the container image: the static binary (for
# GOARCH, the host's by default), CA certificates, a passwd and group file
# naming the unprivileged user it runs as, LICENSE and NOTICE. The
# Dockerfile's build stage runs this target too.
ROOTFS   := bin/rootfs
CA_CERTS ?= /etc/ssl/certs/ca-certificates.crt
rootfs:
	rm -rf $(ROOTFS)
	mkdir -p $(ROOTFS)/etc/ssl/certs $(ROOTFS)/usr/share/doc/codemode-gateway
	$(STATIC_BUILD) -o $(ROOTFS)/gateway ./cmd/gateway
	cp $(CA_CERTS) $(ROOTFS)/etc/ssl/certs/ca-certificates.crt
	cp deploy/image/passwd deploy/image/group $(ROOTFS)/etc/
	cp LICENSE NOTICE $(ROOTFS)/usr/share/doc/codemode-gateway/

# The image, built with podman or docker, whichever answers, from the
# Dockerfile's final stage over bin/rootfs (no compiler image is pulled).
ENGINE ?= $(shell for e in podman docker; do $$e info >/dev/null 2>&1 && { echo $$e; break; }; done)
IMAGE  ?= localhost/codemode-gateway:$(VERSION)
image: rootfs
	@test -n "$(ENGINE)" || { echo "make image needs podman or docker with a working engine" >&2; exit 1; }
	$(ENGINE) build --build-arg ROOTFS=prebuilt --build-arg VERSION=$(VERSION) \
	  --build-arg TARGETARCH=$$($(GO) env GOARCH) -t $(IMAGE) .

# Inspects the image make image built: its user, entrypoint, files and
# size, and runs the gateway and a worker process in it.
image-test: image
	cd deploy && ENGINE=$(ENGINE) IMAGE=$(IMAGE) IMAGE_VERSION=$(VERSION) $(GO) test -count=1 -run '^TestImage' -v .

# ---- TypeScript client (clients/typescript) and its examples ----------------
# make client-deps: npm ci of the package (its adapters' upstream packages
# and playwright-core are dev dependencies) and of examples/, which links it.
# make client: the package built and packed, bin/codemode-gateway-client-X.tgz,
# for an application's `npm install ./that.tgz`.
# make client-test (make test runs it beside the Go tests): tsc, tsc
# --noEmit of every example, the package's node --test files against the
# real gateway binary, then the AI SDK adapter's on ai 7 under Node.js 22
# (test/ai7: ai 7 and, on Linux x64, that Node.js, from the npm registry),
# the browser test in headless Chromium (Debian's, or on Linux x64 without
# it @sparticuz/chromium's from the npm registry: test/browser; with neither
# it skips saying what to install, and fails under CODEMODE_REQUIRE_BROWSER=1,
# as CI runs it), and the packed tarball installed into a new npm project.
# Its vectors test (no tag) runs with the rest of the tree.
CLIENT   := clients/typescript
EXAMPLES := examples
AI7      := $(CLIENT)/test/ai7
BROWSER  := $(CLIENT)/test/browser
CLIENT_VERSION = $(shell node -p "require('./$(CLIENT)/package.json').version")
CLIENT_TGZ     = bin/codemode-gateway-client-$(CLIENT_VERSION).tgz

.PHONY: client client-deps client-test-deps browser-deps client-test

client-deps: $(CLIENT)/node_modules/.package-lock.json $(EXAMPLES)/node_modules/.package-lock.json

$(CLIENT)/node_modules/.package-lock.json: $(CLIENT)/package.json $(CLIENT)/package-lock.json
	cd $(CLIENT) && npm ci --no-audit --no-fund

$(EXAMPLES)/node_modules/.package-lock.json: $(EXAMPLES)/package.json $(EXAMPLES)/package-lock.json $(CLIENT)/node_modules/.package-lock.json
	cd $(EXAMPLES) && npm ci --no-audit --no-fund

# dist/ afresh (tsc leaves the output of deleted sources), then npm pack.
client: $(CLIENT)/node_modules/.package-lock.json
	rm -rf $(CLIENT)/dist
	cd $(CLIENT) && npm run build
	mkdir -p bin
	cd $(CLIENT) && npm pack --silent --pack-destination ../../bin >/dev/null
	@echo "$(CLIENT_TGZ): npm install $$(pwd)/$(CLIENT_TGZ)"

client-test-deps: client-deps $(AI7)/node_modules/.package-lock.json browser-deps

# ai 7's engines say Node.js 22: npm ci under Node.js 20 warns, and installs.
$(AI7)/node_modules/.package-lock.json: $(AI7)/package.json $(AI7)/package-lock.json
	cd $(AI7) && npm ci --no-audit --no-fund

# A Chromium from the npm registry only where the test would find none:
# no CHROMIUM, no Debian chromium, and a Linux x64 machine (the package's
# only build). Its own code wants Node.js 22 (npm ci warns): unpack.mjs
# uses the binary alone.
DEBIAN_CHROMIUM ?= /usr/bin/chromium
browser-deps:
	@if [ -z "$$CHROMIUM" ] && [ ! -f $(DEBIAN_CHROMIUM) ] && [ "$$(uname -sm)" = "Linux x86_64" ]; then \
	  $(MAKE) --no-print-directory $(BROWSER)/chromium/chromium; fi

$(BROWSER)/chromium/chromium: $(BROWSER)/package.json $(BROWSER)/package-lock.json $(BROWSER)/unpack.mjs
	cd $(BROWSER) && npm ci --no-audit --no-fund && node unpack.mjs

# The client's tests alone (make test runs them too), in local directory
# mode so that the browser test's skip line shows.
client-test: client-test-deps
	$(MAKE) --no-print-directory client-test-run

# go vet just ran over the package with its tag: go test's own pass
# would repeat a part of it.
client-test-run:
	$(GO) vet -tags clienttest ./$(CLIENT)/
	cd $(CLIENT) && $(GO) test -tags clienttest -count=1 -vet=off
