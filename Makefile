# The codemode gateway. `make run` serves config.example.yaml on the embedded
# local backend; `make test` is the whole test suite, the same one CI runs.

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
BIN     := bin/gateway

.PHONY: all build run test vet lint bench fuzz clean deps interop-deps

# npm packages for the tests that run the real capnweb JavaScript library.
INTEROP := protocol/capnweb/interop

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/gateway

run: build
	./$(BIN) serve --config config.example.yaml

# The test command of the README and of CI: static checks, then every test
# with the race detector.
test: vet interop-deps
	$(GO) test -race -count=1 ./...

deps: interop-deps
	$(GO) mod download

# Installs capnweb and ws exactly as package-lock.json pins them, again only
# when the lock file changed.
interop-deps: $(INTEROP)/node_modules/.package-lock.json

$(INTEROP)/node_modules/.package-lock.json: $(INTEROP)/package.json $(INTEROP)/package-lock.json
	cd $(INTEROP) && npm ci --no-audit --no-fund

vet:
	$(GO) vet ./...

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

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
