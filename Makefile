# tobe-body: build, run on the simulated board, test, cross-build, lint.
#
#   make run     build and run the body on the sim board, data under ./var
#   make test    the whole test suite with the race detector
#   make cross   pure-Go builds for linux/arm64, linux/arm (GOARM=7), amd64;
#                tests run under qemu-user (installed by scripts/deps.sh)
#   make lint    gofmt, go vet, staticcheck, systemd-analyze verify
#   make docs    regenerate the README's config reference from the schema
#   make lab     the hardware tests in a VM with real kernel drivers

GO      ?= go
# Host tools always build for this machine, whatever GOOS/GOARCH say.
HOSTGO  := env -u GOOS -u GOARCH -u GOARM -- $(GO)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BOARD   ?= auto
TAGS    ?=
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildBoard=$(BOARD) -X main.buildTags=$(TAGS)
BIN     := bin/tobe-body
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

CROSS := linux/arm64 linux/arm/7 linux/amd64

.PHONY: all build run test deps cross lint docs footprint lab clean

all: build

deps:
	@scripts/deps.sh

build:
	$(HOSTGO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/tobe-body

run: build
	$(BIN) run --board sim --data ./var

test: deps
	$(HOSTGO) test -race ./...

cross:
	@scripts/deps.sh cross
	@mkdir -p dist
	@set -e; for t in $(CROSS); do \
		os=$${t%%/*}; rest=$${t#*/}; arch=$${rest%%/*}; arm=""; \
		[ "$$arch" = arm ] && arm=$${rest#*/}; \
		out=dist/tobe-body-$$os-$$arch$${arm:+v$$arm}; \
		echo "cross $$t -> $$out"; \
		env -u GOARM CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $${arm:+GOARM=$$arm} \
			$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $$out ./cmd/tobe-body; \
		file $$out | sed 's/^/  /'; \
		exe=true; \
		case $$arch in arm64) q=qemu-aarch64-static;; arm) q=qemu-arm-static;; *) q="";; esac; \
		if [ -n "$$q" ] && command -v $$q >/dev/null 2>&1; then exe=$$q; fi; \
		echo "  tests for $$t $${exe:+(exec: $$exe)}"; \
		env -u GOARM CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $${arm:+GOARM=$$arm} \
			$(GO) test -count=1 $${exe:+-exec "$$exe"} ./... >dist/test-$$arch$$arm.log 2>&1 \
			|| { cat dist/test-$$arch$$arm.log; exit 1; }; \
		if [ "$$exe" = true ]; then echo "  tests compiled (make test runs them natively)"; \
		else echo "  $$(grep -c '^ok' dist/test-$$arch$$arm.log) packages ok under $$exe"; \
			echo "  $$($$exe $$out version | head -1) (run under $$exe)"; fi; \
	done

lint: build
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(HOSTGO) vet ./...
	$(HOSTGO) run $(STATICCHECK) ./...
	scripts/verify-units.sh

docs:
	$(HOSTGO) run ./scripts/configdoc README.md

footprint:
	scripts/bench/footprint.sh

# The hardware lab: the packages with lab tests, run in a VM against real
# kernel drivers (gpio-sim, vivid, uinput, snd-aloop). The first run
# prepares a kernel and modules into ~/.cache/tobe-body-lab.
LAB_PKGS ?= $(sort $(dir $(shell git ls-files '*lab_test.go')))
lab:
	scripts/lab/run.sh $(addprefix ./,$(LAB_PKGS))

clean:
	rm -rf bin dist
