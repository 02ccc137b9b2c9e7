# halftunesd — build, run and test. `make run` and `make test` work on a fresh machine.
SWIFT        ?= swift
BUILD_DIR    ?= .build
DEBUG_BIN    := $(BUILD_DIR)/debug
RELEASE_BIN  := $(BUILD_DIR)/release
APT_PACKAGES := libsystemd-dev libsqlite3-dev pkg-config
ARGS         ?=

.PHONY: all deps build release run test unit-test clean bench

all: build

# System packages the build needs (installed only when missing).
deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFT) build --scratch-path $(BUILD_DIR)

release: deps
	$(SWIFT) build -c release --scratch-path $(BUILD_DIR)

# The daemon in the foreground with the default socket and state dir (pass more flags with ARGS=...).
run: build
	$(DEBUG_BIN)/halftunesd $(ARGS)

# The whole suite: unit tests and integration tests against the real binaries (debug build).
test: deps
	$(SWIFT) build --build-tests --scratch-path $(BUILD_DIR)
	HALFTUNES_BIN_DIR=$(abspath $(DEBUG_BIN)) $(SWIFT) test --skip-build --scratch-path $(BUILD_DIR)

bench: deps
	Benchmarks/run.sh

clean:
	rm -rf $(BUILD_DIR)
