# halftunesd — build, run and test. `make run` and `make test` work on a fresh machine.
SWIFT        ?= swift
BUILD_DIR    ?= .build
DEBUG_BIN    := $(BUILD_DIR)/debug
RELEASE_BIN  := $(BUILD_DIR)/release
APT_PACKAGES := libsystemd-dev libsqlite3-dev pkg-config systemd util-linux openssl
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
# One test at a time: many integration tests block on processes and sockets, and on a 2-core machine
# parallel runs starved the async tests of Swift's cooperative threads (timeouts, not bugs). Serial, the
# suite takes about 1.5 minutes.
test: deps
	$(SWIFT) build --build-tests --scratch-path $(BUILD_DIR)
	HALFTUNES_BIN_DIR=$(abspath $(DEBUG_BIN)) $(SWIFT) test --skip-build --no-parallel --scratch-path $(BUILD_DIR)

bench: deps
	Benchmarks/run.sh

clean:
	rm -rf $(BUILD_DIR)

# ---- install / uninstall ----------------------------------------------------------------------------
# `make install` builds the release binaries and installs them with the systemd units, sysusers.d and
# tmpfiles.d files, the example configuration and shell completions. PREFIX (default /usr/local) and
# DESTDIR (staging root for packages) are honoured; every directory below can be overridden.
# Units go to $(PREFIX)/lib/systemd/{system,user}: systemd searches /usr/local/lib/systemd/system and
# /usr/lib/systemd/system, so PREFIX=/usr/local or /usr need nothing else (see docs/operations.md).
# With an empty DESTDIR, as root, it also creates the user (systemd-sysusers), the directories
# (systemd-tmpfiles) and reloads systemd; POSTINSTALL=no skips that.
# SKIP_BUILD=1 INSTALL_FROM=DIR installs already-built binaries from DIR (the tests use it).
PREFIX           ?= /usr/local
DESTDIR          ?=
BINDIR           ?= $(PREFIX)/bin
SYSCONFDIR       ?= /etc
DATADIR          ?= $(PREFIX)/share
SYSTEMD_UNITDIR  ?= $(PREFIX)/lib/systemd/system
SYSTEMD_USERDIR  ?= $(PREFIX)/lib/systemd/user
SYSUSERSDIR      ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR      ?= $(PREFIX)/lib/tmpfiles.d
BASHCOMPDIR      ?= $(DATADIR)/bash-completion/completions
ZSHCOMPDIR       ?= $(DATADIR)/zsh/site-functions
FISHCOMPDIR      ?= $(DATADIR)/fish/vendor_completions.d
INSTALL_FROM     ?= $(RELEASE_BIN)
POSTINSTALL      ?= yes
INSTALLED_UNITS  := $(SYSTEMD_UNITDIR)/halftunesd.service $(SYSTEMD_UNITDIR)/halftunesd.socket \
                    $(SYSTEMD_USERDIR)/halftunesd.service $(SYSTEMD_USERDIR)/halftunesd.socket
INSTALLED_FILES  := $(BINDIR)/halftunesd $(BINDIR)/halftunesctl $(INSTALLED_UNITS) \
                    $(SYSUSERSDIR)/halftunesd.conf $(TMPFILESDIR)/halftunesd.conf \
                    $(SYSCONFDIR)/halftunesd/halftunesd.conf.example \
                    $(foreach b,halftunesd halftunesctl,$(BASHCOMPDIR)/$(b) $(ZSHCOMPDIR)/_$(b) $(FISHCOMPDIR)/$(b).fish)

.PHONY: install uninstall

install: $(if $(SKIP_BUILD),,release)
	@test -x "$(INSTALL_FROM)/halftunesd" -a -x "$(INSTALL_FROM)/halftunesctl" || \
	  { echo "install: no binaries in $(INSTALL_FROM) (run make release)" >&2; exit 1; }
	install -d "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(SYSTEMD_UNITDIR)" "$(DESTDIR)$(SYSTEMD_USERDIR)" \
	  "$(DESTDIR)$(SYSUSERSDIR)" "$(DESTDIR)$(TMPFILESDIR)" "$(DESTDIR)$(SYSCONFDIR)/halftunesd" \
	  "$(DESTDIR)$(BASHCOMPDIR)" "$(DESTDIR)$(ZSHCOMPDIR)" "$(DESTDIR)$(FISHCOMPDIR)"
	install -m 0755 "$(INSTALL_FROM)/halftunesd" "$(INSTALL_FROM)/halftunesctl" "$(DESTDIR)$(BINDIR)/"
	@# The units name /usr/local/bin/halftunesd; point them at $(BINDIR).
	for u in halftunesd.service halftunesd.socket; do \
	  sed 's|/usr/local/bin/halftunesd|$(BINDIR)/halftunesd|g' "systemd/$$u" > "$(DESTDIR)$(SYSTEMD_UNITDIR)/$$u" && \
	  sed 's|/usr/local/bin/halftunesd|$(BINDIR)/halftunesd|g' "systemd/user/$$u" > "$(DESTDIR)$(SYSTEMD_USERDIR)/$$u" && \
	  chmod 0644 "$(DESTDIR)$(SYSTEMD_UNITDIR)/$$u" "$(DESTDIR)$(SYSTEMD_USERDIR)/$$u" || exit 1; \
	done
	install -m 0644 systemd/sysusers.d/halftunesd.conf "$(DESTDIR)$(SYSUSERSDIR)/halftunesd.conf"
	install -m 0644 systemd/tmpfiles.d/halftunesd.conf "$(DESTDIR)$(TMPFILESDIR)/halftunesd.conf"
	install -m 0644 systemd/halftunesd.conf.example "$(DESTDIR)$(SYSCONFDIR)/halftunesd/halftunesd.conf.example"
	@# Shell completions, generated by ArgumentParser from the binaries themselves.
	for b in halftunesd halftunesctl; do \
	  "$(INSTALL_FROM)/$$b" --generate-completion-script bash > "$(DESTDIR)$(BASHCOMPDIR)/$$b" && \
	  "$(INSTALL_FROM)/$$b" --generate-completion-script zsh > "$(DESTDIR)$(ZSHCOMPDIR)/_$$b" && \
	  "$(INSTALL_FROM)/$$b" --generate-completion-script fish > "$(DESTDIR)$(FISHCOMPDIR)/$$b.fish" && \
	  chmod 0644 "$(DESTDIR)$(BASHCOMPDIR)/$$b" "$(DESTDIR)$(ZSHCOMPDIR)/_$$b" "$(DESTDIR)$(FISHCOMPDIR)/$$b.fish" || exit 1; \
	done
	@if [ -z "$(DESTDIR)" ] && [ "$(POSTINSTALL)" = yes ] && [ "$$(id -u)" = 0 ]; then \
	  set -x; \
	  systemd-sysusers "$(SYSUSERSDIR)/halftunesd.conf" && \
	  systemd-tmpfiles --create "$(TMPFILESDIR)/halftunesd.conf" || exit 1; \
	  if [ -d /run/systemd/system ]; then systemctl daemon-reload; fi; \
	fi
	@echo "Installed. System daemon: systemctl enable --now halftunesd.socket halftunesd.service"
	@echo "           Per-user:      systemctl --user enable --now halftunesd.socket halftunesd.service"

# Removes what `make install` installed (same PREFIX/DESTDIR). Keeps /etc/halftunesd/halftunesd.conf,
# /var/lib/halftunesd (journal and downloads) and the halftunesd user: remove those by hand.
uninstall:
	@if [ -z "$(DESTDIR)" ] && [ "$(POSTINSTALL)" = yes ] && [ "$$(id -u)" = 0 ] && [ -d /run/systemd/system ]; then \
	  set -x; systemctl disable --now halftunesd.socket halftunesd.service || true; \
	fi
	rm -f $(foreach f,$(INSTALLED_FILES),"$(DESTDIR)$(f)")
	-rmdir "$(DESTDIR)$(SYSCONFDIR)/halftunesd" 2>/dev/null
	@if [ -z "$(DESTDIR)" ] && [ "$(POSTINSTALL)" = yes ] && [ "$$(id -u)" = 0 ] && [ -d /run/systemd/system ]; then \
	  set -x; systemctl daemon-reload; \
	fi
	@echo "Kept: $(SYSCONFDIR)/halftunesd/halftunesd.conf (if any), /var/lib/halftunesd and the halftunesd user."
