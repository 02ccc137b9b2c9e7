# halftunesd — build, run and test. `make run` and `make test` work on a fresh machine.
SWIFT        ?= swift
BUILD_DIR    ?= .build
DEBUG_BIN    := $(BUILD_DIR)/debug
RELEASE_BIN  := $(BUILD_DIR)/release
APT_PACKAGES := libsystemd-dev libsqlite3-dev pkg-config systemd util-linux openssl
# What `make deb` needs besides: debhelper (dh_installsystemd, dh_installsysusers, dh_installtmpfiles), lintian.
DEB_PACKAGES := debhelper dpkg-dev lintian python3
# What the tests need besides: a private D-Bus with a fake NetworkManager and UPower (SystemConditionsTests),
# real proxies (tinyproxy, dante) and BusyBox httpd, an origin that ignores If-Range (LyingServerTests), OpenBSD
# netcat (`nc -U -N`: a client that shuts its write side, AvailabilityTests).
TEST_PACKAGES := netcat-openbsd dbus-daemon python3-dbus python3-gi tinyproxy dante-server busybox nginx apache2 lighttpd squid caddy
ARGS         ?=
# The version the binaries report (HalfTunes.version); debian/changelog must agree.
VERSION      := $(shell sed -n 's/.*static let version = "\(.*\)"/\1/p' Sources/HalfTunesProtocol/HalfTunesProtocol.swift)

.PHONY: all deps deb-deps build release run test unit-test clean bench man deb print-version print-release-flags fuzz

all: build

# System packages the build needs (installed only when missing). python3 writes the man pages (docs/man/).
deps:
	@missing=""; command -v python3 >/dev/null 2>&1 || missing=" python3"; for p in $(APT_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

print-version:
	@echo $(VERSION)

print-release-flags:
	@echo $(RELEASE_FLAGS)

deb-deps: deps
	@$(MAKE) --no-print-directory deps APT_PACKAGES="$(DEB_PACKAGES)"

build: deps
	$(SWIFT) build --scratch-path $(BUILD_DIR)

# Release binaries with the Swift runtime and Foundation linked statically: they need nothing from the
# toolchain at run time (ldd lists only Debian's libc, libstdc++, libsystemd, libsqlite3, zlib). Every function in
# a section of its own, so that the linker lays out halftunesd's code in the order of Sources/halftunesd/halftunesd.order
# (the code a running daemon uses, together: fewer pages mapped; Benchmarks/linkorder.py makes the file).
RELEASE_FLAGS := -c release --static-swift-stdlib -Xswiftc -Xfrontend -Xswiftc -function-sections
release: deps
	$(SWIFT) build $(RELEASE_FLAGS) --scratch-path $(BUILD_DIR)

# Man pages, into $(BUILD_DIR)/man (view with `man -l`): halftunesctl(1) and halftunesd(8) from the binaries'
# ArgumentParser definitions, halftunesd.conf(5) from docs/configuration.md. `make install` writes them too.
MAN_FROM ?= $(RELEASE_BIN)
man: $(if $(SKIP_BUILD),,release)
	$(call write-man-pages,$(BUILD_DIR)/man,$(MAN_FROM))
	@echo "Man pages in $(BUILD_DIR)/man: man -l $(BUILD_DIR)/man/man1/halftunesctl.1"

# $(call write-man-pages,DIR,BINDIR): DIR/man1/halftunesctl.1, DIR/man5/halftunesd.conf.5, DIR/man8/halftunesd.8.
define write-man-pages
	install -d "$(1)/man1" "$(1)/man5" "$(1)/man8"
	python3 docs/man/help-to-man.py "$(2)/halftunesctl" 1 "$(VERSION)" > "$(1)/man1/halftunesctl.1.tmp"
	python3 docs/man/help-to-man.py "$(2)/halftunesd" 8 "$(VERSION)" > "$(1)/man8/halftunesd.8.tmp"
	python3 docs/man/conf-to-man.py docs/configuration.md "$(VERSION)" > "$(1)/man5/halftunesd.conf.5.tmp"
	for f in man1/halftunesctl.1 man8/halftunesd.8 man5/halftunesd.conf.5; do \
	  chmod 0644 "$(1)/$$f.tmp" && mv -f "$(1)/$$f.tmp" "$(1)/$$f" || exit 1; done
endef

# The Debian package halftunesd_$(VERSION)_<arch>.deb, in this directory, from the release binaries with
# debhelper (debian/rules): `sudo apt install ./halftunesd_*.deb`. See docs/operations.md.
# SKIP_BUILD=1 INSTALL_FROM=DIR packages binaries built elsewhere; DEB_DESTDIR=DIR puts the .deb there.
DEB_DESTDIR ?= $(CURDIR)
DEB_RULES_ENV = HALFTUNES_BIN_DIR="$(if $(SKIP_BUILD),$(abspath $(INSTALL_FROM)))"
deb: deb-deps $(if $(SKIP_BUILD),,release)
	@v=$$(dpkg-parsechangelog -S Version); [ "$$v" = "$(VERSION)" ] || \
	  { echo "deb: debian/changelog says $$v, the binaries say $(VERSION): add a changelog entry (dch -v $(VERSION))" >&2; exit 1; }
	dpkg-checkbuilddeps
	debian/rules clean
	$(DEB_RULES_ENV) debian/rules build
	$(DEB_RULES_ENV) debian/rules binary DEB_DESTDIR="$(abspath $(DEB_DESTDIR))"
	@echo "Built $(DEB_DESTDIR)/halftunesd_$(VERSION)_$$(dpkg-architecture -qDEB_HOST_ARCH).deb"

# The daemon in the foreground with the default socket and state dir (pass more flags with ARGS=...).
run: build
	$(DEBUG_BIN)/halftunesd $(ARGS)

# The whole suite: unit tests and integration tests against the real binaries (debug build).
# One test at a time: many integration tests block on processes and sockets, and on a 2-core machine
# parallel runs starved the async tests of Swift's cooperative threads (timeouts, not bugs). Serial, the
# suite takes about 9 minutes. deb-deps: DebianPackageTests packages the debug binaries with debhelper.
# A warning in our own Sources/ or Tests/ fails it (the dependencies' are under checkouts/; only the files this
# build compiles are checked: CI's fresh clone compiles all of them).
test: deps deb-deps
	@$(MAKE) --no-print-directory deps APT_PACKAGES="$(TEST_PACKAGES)"
	@mkdir -p $(BUILD_DIR); log=$(BUILD_DIR)/build-tests.log; \
	{ $(SWIFT) build --build-tests --scratch-path $(BUILD_DIR) 2>&1; echo $$? > $$log.rc; } | tee $$log; \
	rc=$$(cat $$log.rc); [ "$$rc" = 0 ] || exit $$rc; \
	w=$$(grep -E '/(Sources|Tests)/[^:]*\.swift:[0-9]+:[0-9]+: warning:' $$log | grep -v '/checkouts/' | sort -u); \
	if [ -n "$$w" ]; then echo "$$w" >&2; \
	  echo "make test: our own code builds with the warnings above; fix them (a fresh clone builds every file)" >&2; exit 1; fi
	HALFTUNES_BIN_DIR=$(abspath $(DEBUG_BIN)) $(SWIFT) test --skip-build --no-parallel --scratch-path $(BUILD_DIR)

bench: deps
	Benchmarks/run.sh

# Coverage-guided fuzzing (libFuzzer, Fuzz/README.md): the harnesses over what reads outside input, built with
# HALFTUNES_FUZZ=1 into $(FUZZ_BUILD_DIR) (our modules instrumented). Each first replays its committed corpus
# (Fuzz/Corpus/<harness>: seeds and every crash found, kept as regressions), then runs FUZZ_SECONDS. A crash fails
# it and its input is left in $(FUZZ_BUILD_DIR)/artifacts. .ci/run runs it with FUZZ_SECONDS=60 (4 harnesses).
FUZZ_BUILD_DIR ?= .build-fuzz
FUZZ_SECONDS   ?= 300
FUZZ_HARNESSES := json heads params names rows
fuzz: deps
	HALFTUNES_FUZZ=1 $(SWIFT) build -c release --product halftunes-fuzz --scratch-path $(FUZZ_BUILD_DIR)
	@mkdir -p $(FUZZ_BUILD_DIR)/artifacts
	@for h in $(FUZZ_HARNESSES); do \
	  dict=""; [ -f Fuzz/$$h.dict ] && dict="-dict=Fuzz/$$h.dict"; \
	  work=$$(mktemp -d); \
	  echo "fuzz $$h: the corpus, then $(FUZZ_SECONDS) s"; \
	  SWIFT_BACKTRACE=enable=no $(FUZZ_BUILD_DIR)/release/halftunes-fuzz $$h -runs=0 Fuzz/Corpus/$$h \
	    > $(FUZZ_BUILD_DIR)/fuzz-$$h.log 2>&1 && \
	  SWIFT_BACKTRACE=enable=no $(FUZZ_BUILD_DIR)/release/halftunes-fuzz $$h -max_total_time=$(FUZZ_SECONDS) \
	    -max_len=4096 -print_final_stats=1 $$dict -artifact_prefix=$(FUZZ_BUILD_DIR)/artifacts/$$h- $$work Fuzz/Corpus/$$h \
	    >> $(FUZZ_BUILD_DIR)/fuzz-$$h.log 2>&1; rc=$$?; rm -rf "$$work"; \
	  grep -E '^stat::number_of_executed_units|^Done' $(FUZZ_BUILD_DIR)/fuzz-$$h.log | tail -2; \
	  if [ $$rc != 0 ]; then tail -40 $(FUZZ_BUILD_DIR)/fuzz-$$h.log; \
	    echo "fuzz $$h: a crash (input in $(FUZZ_BUILD_DIR)/artifacts/); add it to Fuzz/Corpus/$$h with a regression test" >&2; \
	    exit 1; fi; \
	done

clean:
	rm -rf $(BUILD_DIR)

# ---- install / uninstall ----------------------------------------------------------------------------
# `make install` builds the release binaries and installs them with the systemd units, sysusers.d and
# tmpfiles.d files, the example configuration, shell completions and man pages (the exact list of files is in
# docs/operations.md; .ci/check-install compares). PREFIX (default /usr/local) and
# DESTDIR (staging root for packages) are honoured; every directory below can be overridden.
# Units go to $(PREFIX)/lib/systemd/{system,user}: systemd searches /usr/local/lib/systemd/system and
# /usr/lib/systemd/system, so PREFIX=/usr/local or /usr need nothing else (see docs/operations.md).
# With an empty DESTDIR, as root, it also creates the user (systemd-sysusers), the directories
# (systemd-tmpfiles), enables the users' agent for every user (systemctl --global enable
# halftunesd-agent.service) and reloads systemd; POSTINSTALL=no skips that (a package enables it itself).
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
MANDIR           ?= $(DATADIR)/man
BASHCOMPDIR      ?= $(DATADIR)/bash-completion/completions
ZSHCOMPDIR       ?= $(DATADIR)/zsh/site-functions
FISHCOMPDIR      ?= $(DATADIR)/fish/vendor_completions.d
INSTALL_FROM     ?= $(RELEASE_BIN)
POSTINSTALL      ?= yes
INSTALLED_UNITS  := $(SYSTEMD_UNITDIR)/halftunesd.service $(SYSTEMD_UNITDIR)/halftunesd.socket \
                    $(SYSTEMD_USERDIR)/halftunesd.service $(SYSTEMD_USERDIR)/halftunesd.socket \
                    $(SYSTEMD_USERDIR)/halftunesd-agent.service
INSTALLED_FILES  := $(BINDIR)/halftunesd $(BINDIR)/halftunesctl $(INSTALLED_UNITS) \
                    $(SYSUSERSDIR)/halftunesd.conf $(TMPFILESDIR)/halftunesd.conf \
                    $(SYSCONFDIR)/halftunesd/halftunesd.conf.example \
                    $(foreach b,halftunesd halftunesctl,$(BASHCOMPDIR)/$(b) $(ZSHCOMPDIR)/_$(b) $(FISHCOMPDIR)/$(b).fish) \
                    $(MANDIR)/man1/halftunesctl.1 $(MANDIR)/man5/halftunesd.conf.5 $(MANDIR)/man8/halftunesd.8

.PHONY: install uninstall

install: $(if $(SKIP_BUILD),,release)
	@test -x "$(INSTALL_FROM)/halftunesd" -a -x "$(INSTALL_FROM)/halftunesctl" || \
	  { echo "install: no binaries in $(INSTALL_FROM) (run make release)" >&2; exit 1; }
	install -d "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(SYSTEMD_UNITDIR)" "$(DESTDIR)$(SYSTEMD_USERDIR)" \
	  "$(DESTDIR)$(SYSUSERSDIR)" "$(DESTDIR)$(TMPFILESDIR)" "$(DESTDIR)$(SYSCONFDIR)/halftunesd" \
	  "$(DESTDIR)$(BASHCOMPDIR)" "$(DESTDIR)$(ZSHCOMPDIR)" "$(DESTDIR)$(FISHCOMPDIR)"
	install -m 0755 "$(INSTALL_FROM)/halftunesd" "$(INSTALL_FROM)/halftunesctl" "$(DESTDIR)$(BINDIR)/"
	@# The units name /usr/local/bin/halftunesd and /usr/local/bin/halftunesctl; point them at $(BINDIR).
	for u in halftunesd.service halftunesd.socket; do \
	  sed 's|/usr/local/bin/|$(BINDIR)/|g' "systemd/$$u" > "$(DESTDIR)$(SYSTEMD_UNITDIR)/$$u" && \
	  chmod 0644 "$(DESTDIR)$(SYSTEMD_UNITDIR)/$$u" || exit 1; \
	done
	for u in halftunesd.service halftunesd.socket halftunesd-agent.service; do \
	  sed 's|/usr/local/bin/|$(BINDIR)/|g' "systemd/user/$$u" > "$(DESTDIR)$(SYSTEMD_USERDIR)/$$u" && \
	  chmod 0644 "$(DESTDIR)$(SYSTEMD_USERDIR)/$$u" || exit 1; \
	done
	install -m 0644 systemd/sysusers.d/halftunesd.conf "$(DESTDIR)$(SYSUSERSDIR)/halftunesd.conf"
	install -m 0644 systemd/tmpfiles.d/halftunesd.conf "$(DESTDIR)$(TMPFILESDIR)/halftunesd.conf"
	install -m 0644 systemd/halftunesd.conf.example "$(DESTDIR)$(SYSCONFDIR)/halftunesd/halftunesd.conf.example"
	@# Shell completions, generated by ArgumentParser from the binaries themselves.
	for b in halftunesd halftunesctl; do \
	  "$(INSTALL_FROM)/$$b" --generate-completion-script bash | sed '1{/^#!/d}' > "$(DESTDIR)$(BASHCOMPDIR)/$$b" && \
	  "$(INSTALL_FROM)/$$b" --generate-completion-script zsh > "$(DESTDIR)$(ZSHCOMPDIR)/_$$b" && \
	  "$(INSTALL_FROM)/$$b" --generate-completion-script fish > "$(DESTDIR)$(FISHCOMPDIR)/$$b.fish" && \
	  chmod 0644 "$(DESTDIR)$(BASHCOMPDIR)/$$b" "$(DESTDIR)$(ZSHCOMPDIR)/_$$b" "$(DESTDIR)$(FISHCOMPDIR)/$$b.fish" || exit 1; \
	done
	@# Man pages, generated from the binaries and docs/configuration.md.
	$(call write-man-pages,$(DESTDIR)$(MANDIR),$(INSTALL_FROM))
	@if [ -z "$(DESTDIR)" ] && [ "$(POSTINSTALL)" = yes ] && [ "$$(id -u)" = 0 ]; then \
	  set -x; \
	  systemd-sysusers "$(SYSUSERSDIR)/halftunesd.conf" && \
	  systemd-tmpfiles --create "$(TMPFILESDIR)/halftunesd.conf" || exit 1; \
	  systemctl --global enable halftunesd-agent.service || \
	    echo "make install: the users' agent is not enabled (is $(SYSTEMD_USERDIR) searched by systemd?)" >&2; \
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
	@if [ -z "$(DESTDIR)" ] && [ "$(POSTINSTALL)" = yes ] && [ "$$(id -u)" = 0 ]; then \
	  set -x; systemctl --global disable halftunesd-agent.service || true; \
	fi
	rm -f $(foreach f,$(INSTALLED_FILES),"$(DESTDIR)$(f)")
	-rmdir "$(DESTDIR)$(SYSCONFDIR)/halftunesd" 2>/dev/null
	@if [ -z "$(DESTDIR)" ] && [ "$(POSTINSTALL)" = yes ] && [ "$$(id -u)" = 0 ] && [ -d /run/systemd/system ]; then \
	  set -x; systemctl daemon-reload; \
	fi
	@echo "Kept: $(SYSCONFDIR)/halftunesd/halftunesd.conf (if any), /var/lib/halftunesd and the halftunesd user."
