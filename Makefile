# Airlock: the two commands of the quick start are `make run` and `make test`.
# Both install what is missing first (tools/deps.sh).

BUILD        ?= build
ASAN_BUILD   ?= build-asan
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 15
JOBS         ?= $(shell nproc)
DATA         ?=

.PHONY: all deps build asan fuzz-build run test check bench soak clean install uninstall deb

all: build

deps:
	@tools/deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DAIRLOCK_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)

fuzz-build: deps
	CC=clang-14 cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DAIRLOCK_FUZZ=ON >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS)

# `make run`: builds, starts airlockd on SQLite in DATA with a local sandbox
# and a terminal running $$SHELL (or AGENT=cmd), and attaches to it.
run: build
	@tools/run.sh $(BUILD) $(DATA)

# Everything: normal suite, ASan+UBSan suite, clang's unit tests, each fuzz
# target for FUZZ_SECONDS, then format, banned-function, clang-tidy, cppcheck
# and eslint checks.
# The last line is "N passed, N failed".
test: deps
	@BUILD=$(BUILD) ASAN_BUILD=$(ASAN_BUILD) FUZZ_BUILD=$(FUZZ_BUILD) \
	  FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) tools/test-all.sh

# Benchmarks print tables beside the bare-PTY and loopback limits.
# bench_peers.mjs ends within BENCH_PEERS_LIMIT_S seconds (default 900).
BENCH_MB   ?= 200
BENCH_RUNS ?= 5
BENCH_PROXY_MB ?= 100
BENCH_PEERS_MB ?= 50
bench: build
	$(BUILD)/bench_channel $(BENCH_MB) $(BENCH_RUNS)
	$(BUILD)/bench_runner $(BENCH_MB) $(BENCH_RUNS) $(BUILD)/airlock-runner
	$(BUILD)/bench_vt $(BENCH_MB) $(BENCH_RUNS)
	$(BUILD)/bench_relay $(BENCH_MB) $(BENCH_RUNS) $(BUILD)
	$(BUILD)/bench_proxy $(BENCH_PROXY_MB) $(BENCH_RUNS) $(BUILD)
	$(BUILD)/bench_resume 4 $(BENCH_MB) $(BENCH_RUNS)
	AL_BIN=$(BUILD) AL_SRC=. node bench/bench_peers.mjs $(BENCH_PEERS_MB) $(BENCH_RUNS)

# The soak (tests/soak/soak.mjs): SOAK_S seconds (default 600) of paced,
# checksummed output through random cuts of both hops, viewers coming and
# going, airlockd restarted twice and the runner's link replaced once; ends
# with its summary table.
SOAK_S ?= 600
soak: build
	@AL_BIN=$(BUILD) AL_SRC=. SOAK_S=$(SOAK_S) node tests/soak/soak.mjs

# make install [PREFIX=/usr/local] [DESTDIR=...]: the programs (libexec/airlock,
# linked from bin/ and sbin/), the web page, man pages, completions, the
# systemd unit and an example config (docs/install.md). make uninstall
# removes what the last install wrote.
PREFIX  ?= /usr/local
DESTDIR ?=
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

uninstall:
	DESTDIR="$(DESTDIR)" cmake --build $(BUILD) --target uninstall

# The Debian packages airlockd, airlock-runner and airlock in ../ (debian/).
deb: deps
	dpkg-buildpackage -us -uc -b

check: deps
	@tools/check-format.sh && tools/check-banned.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
