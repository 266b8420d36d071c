# gsymprof - build, test, fuzz, bench.
#   make            build build/gsymprof and the libraries
#   make test       install missing Debian packages, build, run every test
#   make demo       profile the bundled demo workload (needs root)
#                   (test, demo and sanitize build with JOBS=$(nproc) jobs
#                   unless make itself was given -jN)
#   make sanitize   ASan+UBSan build running the same tests
#   make test-kernels  gsymprof under Debian 12's 6.1 and bookworm's 6.12
#                   kernels, booted under qemu (also part of make test)
#   make fuzz       build the libFuzzer targets and run each FUZZ_SECONDS
#   make bench      benchmarks (never part of make test); results -> tests/bench/RESULTS.md
#   make install    gsymprof and its manual page under PREFIX (/usr/local)
#   make flame-png  docs/flame.png, the README's picture: the demo's flame
#                   graph rendered by headless Chromium (needs root, as demo)

BUILD      ?= build
CXX        ?= g++
CLANG      ?= clang
BPFTOOL    ?= bpftool
PREFIX     ?= /usr/local
FUZZ_SECONDS ?= 60
JOBS       ?= $(shell nproc 2>/dev/null || echo 1)
# What --version prints: the version and the git revision built ("-dirty"
# with uncommitted changes). A tree without git can give GIT_REVISION=...
VERSION    ?= 0.1.0
GIT_REVISION ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(shell \
                  git rev-parse --git-dir >/dev/null 2>&1 && { git diff --quiet HEAD -- 2>/dev/null || echo -dirty; })

ARCH       := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
CXXSTD     := -std=c++20
WARN       := -Wall -Wextra -Werror
OPT        ?= -O2 -g
SAN_FLAGS  :=
CPPFLAGS   += -I. -I$(BUILD) -MMD -MP
CXXFLAGS   += $(CXXSTD) $(WARN) $(OPT) $(SAN_FLAGS) -pthread
# cpp-httplib (the agent's HTTP endpoint, serve, OTLP/HTTP): Debian builds
# libcpp-httplib with these features, and its header must see the same.
# Only the HTTP module links it (userspace/http/http.h says why); both sides
# of that module's interface are compiled with the header's hash, so a
# module from another build is refused.
CPPFLAGS   += -DCPPHTTPLIB_OPENSSL_SUPPORT -DCPPHTTPLIB_ZLIB_SUPPORT -DCPPHTTPLIB_BROTLI_SUPPORT
HTTP_INTERFACE := $(shell sha256sum userspace/http/http.h | cut -c1-16)
CPPFLAGS   += -DGSYMPROF_HTTP_INTERFACE='"$(HTTP_INTERFACE)"'
# libdebuginfod is not linked: loaded on first use (dlopen), so its libcurl
# chain is not mapped at every start (userspace/symbolize/debuginfod_client.cpp).
# The libraries with the most symbol relocations come first in DT_NEEDED:
# the dynamic linker looks every symbol up along that list from its start,
# and libcrypto's and libstdc++'s ~4,200 relocations each bind mostly to
# themselves. 19% fewer start-up instructions for every command (13.7 to
# 11.1 million for `gsymprof --version`). -l:libc.so.6, as -lc (a linker
# script) does not move libc's place.
LDLIBS     += -lcrypto -lstdc++ -l:libc.so.6 -lssl
LDLIBS     += -lbpf -ldw -lelf -lz -ldeflate -liberty -lzstd -llzma
# gRPC (the agent's OTLP/gRPC export, serve's symbolize service) with its
# abseil, and protobuf, are linked from Debian's static archives (the list
# from pkg-config --static): as shared libraries their ~16k symbol
# relocations and loading cost every command 3.4 ms of start-up (6.5 ms for
# `gsymprof --version` against 3.1), a tenth of a small conversion. The
# price: a Debian update of libgrpc++ or libprotobuf needs a rebuild of
# gsymprof; OpenSSL, zlib and the rest stay shared.
# (Expanded when a link runs: `make test` installs the packages first.)
STATIC_LIBS = $(or $(shell pkg-config --static --libs-only-l grpc++ protobuf 2>/dev/null | tr ' ' '\n' | grep -E '^-l(grpc|gpr|address_sorting|re2|upb|cares|absl_|protobuf)' | awk '!seen[$$0]++'),$(error pkg-config finds no grpc++ and protobuf: run scripts/install-deps.sh))
LDLIBS     += -Wl,-Bstatic $(STATIC_LIBS) -Wl,-Bdynamic -lssl -lcrypto -lz -latomic -lrt -ldl -pthread

# gsym/ (gsym/README.md): libgsym.a is every sub-folder but the converter
# (base, format, reader, builder: nothing beyond libc); libgsym_convert.a is
# gsym/convert/, the ELF/DWARF converter (libdw, libelf, zlib, ...).
GSYM_CONVERT_SRCS := $(wildcard gsym/convert/*.cpp)
GSYM_SRCS  := $(filter-out $(GSYM_CONVERT_SRCS),$(wildcard gsym/*/*.cpp))
USER_SRCS  := $(wildcard userspace/*/*.cpp)
# Protocol buffer schemas (pprof's profile.proto): protoc writes
# $(BUILD)/DIR/NAME.pb.{h,cc}, compiled into libgsymprof.a.
PROTO_SRCS := $(wildcard userspace/*/*.proto)
PROTO_CCS  := $(PROTO_SRCS:%.proto=$(BUILD)/%.pb.cc)
PROTO_HDRS := $(PROTO_SRCS:%.proto=$(BUILD)/%.pb.h)
# OTLP Profiles (opentelemetry-proto, vendored: userspace/export/proto/README.md):
# imports are relative to OTLP_PROTO_DIR, so protoc runs with it as the
# root, writing $(BUILD)/$(OTLP_PROTO_DIR)/opentelemetry/...{.pb,.grpc.pb}.{h,cc}
# (included as "opentelemetry/proto/...pb.h").
OTLP_PROTO_DIR   := userspace/export/proto
OTLP_PROTO_SRCS  := $(shell find $(OTLP_PROTO_DIR) -name '*.proto' 2>/dev/null | sort)
OTLP_PROTO_CCS   := $(OTLP_PROTO_SRCS:%.proto=$(BUILD)/%.pb.cc)
OTLP_PROTO_HDRS  := $(OTLP_PROTO_SRCS:%.proto=$(BUILD)/%.pb.h)
OTLP_GRPC_SRCS   := $(filter %_service.proto,$(OTLP_PROTO_SRCS))
OTLP_GRPC_CCS    := $(OTLP_GRPC_SRCS:%.proto=$(BUILD)/%.grpc.pb.cc)
OTLP_GRPC_HDRS   := $(OTLP_GRPC_SRCS:%.proto=$(BUILD)/%.grpc.pb.h)
GRPC_CPP_PLUGIN  ?= $(shell command -v grpc_cpp_plugin 2>/dev/null || echo /usr/bin/grpc_cpp_plugin)
CPPFLAGS   += -I$(BUILD)/$(OTLP_PROTO_DIR)
# Unit tests mirror the source tree: tests/unit/STAGE/NAME_test.cpp (main.cpp
# and shared headers at the top).
UNIT_SRCS  := $(wildcard tests/unit/*.cpp tests/unit/*/*.cpp)
BPF_SRCS   := $(wildcard bpf/*.bpf.c)
FUZZ_SRCS  := $(wildcard tests/fuzz/fuzz_*.cpp)
# Test-only code shared by units, fuzz targets and tools; the tools run by
# the test scripts (tests/tools/NAME.cpp -> $(BUILD)/test-tools/NAME).
TEST_SUPPORT_SRCS := $(wildcard tests/support/*.cpp)
TEST_TOOL_SRCS    := $(wildcard tests/tools/*.cpp)

GSYM_OBJS  := $(GSYM_SRCS:%.cpp=$(BUILD)/%.o)
GSYM_CONVERT_OBJS := $(GSYM_CONVERT_SRCS:%.cpp=$(BUILD)/%.o)
USER_OBJS  := $(USER_SRCS:%.cpp=$(BUILD)/%.o) $(PROTO_CCS:%.cc=%.o) $(OTLP_PROTO_CCS:%.cc=%.o) $(OTLP_GRPC_CCS:%.cc=%.o)
UNIT_OBJS  := $(UNIT_SRCS:%.cpp=$(BUILD)/%.o)
BPF_OBJS   := $(BPF_SRCS:bpf/%.bpf.c=$(BUILD)/bpf/%.bpf.o)
BPF_SKELS  := $(BPF_SRCS:bpf/%.bpf.c=$(BUILD)/bpf/%.skel.h)
FUZZ_BINS  := $(FUZZ_SRCS:tests/fuzz/%.cpp=$(BUILD)/fuzz/%)
REPLAY_BINS:= $(FUZZ_SRCS:tests/fuzz/%.cpp=$(BUILD)/fuzz-replay/%)
TEST_SUPPORT_OBJS := $(TEST_SUPPORT_SRCS:%.cpp=$(BUILD)/%.o)
TEST_TOOLS := $(TEST_TOOL_SRCS:tests/tools/%.cpp=$(BUILD)/test-tools/%)

.PHONY: all deps test unit test-tools sanitize fuzz fuzz-build bench demo install clean test-kernels flame-png FORCE
.DELETE_ON_ERROR:

all: $(BUILD)/gsymprof $(BUILD)/gsymprof-http.so $(BUILD)/gsymprof.1 $(BUILD)/libgsym.a $(BUILD)/libgsym_convert.a

deps:
	@scripts/install-deps.sh

# --- BPF: a CO-RE object built against bpf/kernel_types.h (no vmlinux.h from
# the build machine's kernel), and its skeleton. The uapi headers' asm/ lives
# in the multiarch directory, which clang -target bpf does not search.
MULTIARCH  := $(shell $(CXX) -print-multiarch 2>/dev/null)
$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.h)
	@mkdir -p $(@D)
	$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -I. $(if $(MULTIARCH),-I/usr/include/$(MULTIARCH)) -c $< -o $@
	llvm-strip -g $@

$(BUILD)/bpf/%.skel.h: $(BUILD)/bpf/%.bpf.o
	$(BPFTOOL) gen skeleton $< > $@

# --- C++ ---
$(BUILD)/%.o: %.cpp
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

$(BUILD)/%.pb.cc $(BUILD)/%.pb.h: %.proto
	@mkdir -p $(@D)
	protoc --cpp_out=$(BUILD) $<

# The OTLP protos (static pattern rules: they win over the rule above,
# whose protoc root would be wrong for their imports). One protoc run
# writes both files; the header is the .cc's by-product.
$(OTLP_PROTO_CCS): $(BUILD)/%.pb.cc: %.proto
	@mkdir -p $(@D)
	protoc -I$(OTLP_PROTO_DIR) --cpp_out=$(BUILD)/$(OTLP_PROTO_DIR) $<
$(OTLP_PROTO_HDRS): %.pb.h: %.pb.cc ;

$(OTLP_GRPC_CCS): $(BUILD)/%.grpc.pb.cc: %.proto
	@mkdir -p $(@D)
	protoc -I$(OTLP_PROTO_DIR) --grpc_out=$(BUILD)/$(OTLP_PROTO_DIR) --plugin=protoc-gen-grpc=$(GRPC_CPP_PLUGIN) $<
$(OTLP_GRPC_HDRS): %.grpc.pb.h: %.grpc.pb.cc ;

$(BUILD)/%.pb.o: $(BUILD)/%.pb.cc
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

# The version header, rewritten only when the version or the revision
# changed, so that only what includes it is rebuilt.
VERSION_HDR := $(BUILD)/userspace/cli/version.h
$(VERSION_HDR): FORCE
	@mkdir -p $(@D)
	@printf '#pragma once\n#define GSYMPROF_VERSION "%s"\n#define GSYMPROF_GIT_REVISION "%s"\n' \
	  '$(VERSION)' '$(GIT_REVISION)' > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi
FORCE:

# Only the sampler includes a skeleton (pprof_output the protobuf header,
# program.cpp the version), but every userspace object waits for the
# generated headers so that they exist before dependency files do.
$(USER_OBJS) $(UNIT_OBJS) $(BUILD)/userspace/main.o: | $(BPF_SKELS) $(PROTO_HDRS) $(OTLP_PROTO_HDRS) $(OTLP_GRPC_HDRS) $(VERSION_HDR)

$(BUILD)/libgsym.a: $(GSYM_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libgsym_convert.a: $(GSYM_CONVERT_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libgsymprof.a: $(USER_OBJS)
	@rm -f $@
	ar rcs $@ $^

# The HTTP module, loaded by gsymprof on first use from beside it
# (userspace/http/http.h): cpp-httplib's code and nothing of gsymprof's
# (-z defs: every symbol it uses is cpp-httplib's or the C++ runtime's);
# only its entry point is exported. Built with every gsymprof.
HTTP_MODULE_SRCS := $(wildcard userspace/http/module/*.cpp)
HTTP_MODULE_OBJS := $(HTTP_MODULE_SRCS:%.cpp=$(BUILD)/%.pic.o)
$(BUILD)/%.pic.o: %.cpp
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -fPIC -fvisibility=hidden -c $< -o $@
$(BUILD)/gsymprof-http.so: $(HTTP_MODULE_OBJS)
	$(CXX) $(CXXFLAGS) -shared -fPIC -Wl,-z,defs $^ -lcpp-httplib -o $@

$(BUILD)/gsymprof: $(BUILD)/userspace/main.o $(BUILD)/libgsymprof.a $(BUILD)/libgsym_convert.a $(BUILD)/libgsym.a | $(BUILD)/gsymprof-http.so
	$(CXX) $(CXXFLAGS) $^ $(LDLIBS) -o $@

# The manual page, written by gsymprof from the same option tables as --help.
$(BUILD)/gsymprof.1: $(BUILD)/gsymprof
	$(BUILD)/gsymprof --man > $@

$(BUILD)/libtest_support.a: $(TEST_SUPPORT_OBJS)
	@rm -f $@
	ar rcs $@ $^

TEST_LIBS := $(BUILD)/libtest_support.a $(BUILD)/libgsymprof.a $(BUILD)/libgsym_convert.a $(BUILD)/libgsym.a

$(BUILD)/unit_tests: $(UNIT_OBJS) $(TEST_LIBS) | $(BUILD)/gsymprof-http.so
	$(CXX) $(CXXFLAGS) $^ $(LDLIBS) -o $@

# Fuzz targets replayed over their corpora as ordinary tests (no clang needed).
$(BUILD)/fuzz-replay/%: tests/fuzz/%.cpp tests/fuzz/replay_main.cpp $(TEST_LIBS)
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) $^ $(LDLIBS) -o $@

# Tools the test scripts run, with the project's flags (and SAN_FLAGS).
$(TEST_TOOLS): $(BUILD)/test-tools/%: $(BUILD)/tests/tools/%.o $(TEST_LIBS)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) $^ $(LDLIBS) -o $@

test-tools: $(TEST_TOOLS)

# --- tests ---
unit: $(BUILD)/unit_tests
	$(BUILD)/unit_tests

# The recursive makes below build with every CPU (-j$(JOBS)) unless make
# was given -jN itself (then they share its job slots).
SUBMAKE_JOBS = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(JOBS))

test: deps
	$(MAKE) $(SUBMAKE_JOBS) all $(BUILD)/unit_tests $(REPLAY_BINS) $(TEST_TOOLS)
	BUILD=$(BUILD) tests/run-all.sh

# Kernel matrix: boots other kernels under qemu (TCG) and runs gsymprof in
# them (tests/kernels/run-all.sh; installs qemu/busybox-static/cpio if
# missing, caches the kernels in /var/cache/gsymprof-tests).
test-kernels: all
	BUILD=$(BUILD) tests/kernels/run-all.sh

sanitize: deps
	$(MAKE) $(SUBMAKE_JOBS) BUILD=build-san OPT="-O1 -g -fno-omit-frame-pointer" \
	  SAN_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all" \
	  all build-san/unit_tests $(REPLAY_BINS:$(BUILD)/%=build-san/%) $(TEST_TOOLS:$(BUILD)/%=build-san/%)
	BUILD=build-san ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 tests/run-all.sh

# --- fuzz (clang + libFuzzer) ---
# The library is compiled once for every target (instrumented, not linked
# with libFuzzer's main: fuzzer-no-link) into $(FUZZ_OBJ)/ and archived;
# each target is its one source linked against that archive, so a new or
# changed target costs a link, not a rebuild of the whole tree.
FUZZ_CXXFLAGS := $(CXXSTD) -O1 -g -fno-omit-frame-pointer -pthread
FUZZ_OBJ      := $(BUILD)/fuzz-obj
FUZZ_CPP_OBJS := $(patsubst %.cpp,$(FUZZ_OBJ)/%.o,$(GSYM_SRCS) $(GSYM_CONVERT_SRCS) $(USER_SRCS) $(TEST_SUPPORT_SRCS))
FUZZ_PB_OBJS  := $(patsubst $(BUILD)/%.cc,$(FUZZ_OBJ)/%.o,$(PROTO_CCS) $(OTLP_PROTO_CCS) $(OTLP_GRPC_CCS))
$(FUZZ_CPP_OBJS): $(FUZZ_OBJ)/%.o: %.cpp | $(BPF_SKELS) $(PROTO_HDRS) $(OTLP_PROTO_HDRS) $(OTLP_GRPC_HDRS) $(VERSION_HDR)
	@mkdir -p $(@D)
	clang++ $(CPPFLAGS) $(FUZZ_CXXFLAGS) -fsanitize=fuzzer-no-link,address,undefined -c $< -o $@
$(FUZZ_PB_OBJS): $(FUZZ_OBJ)/%.o: $(BUILD)/%.cc | $(PROTO_HDRS) $(OTLP_PROTO_HDRS) $(OTLP_GRPC_HDRS)
	@mkdir -p $(@D)
	clang++ $(CPPFLAGS) $(FUZZ_CXXFLAGS) -fsanitize=fuzzer-no-link,address,undefined -c $< -o $@
$(BUILD)/fuzz/libfuzz_targets.a: $(FUZZ_CPP_OBJS) $(FUZZ_PB_OBJS)
	@mkdir -p $(@D)
	@rm -f $@
	ar rcs $@ $^
$(FUZZ_BINS): $(BUILD)/fuzz/%: tests/fuzz/%.cpp $(BUILD)/fuzz/libfuzz_targets.a
	clang++ $(filter-out -MMD -MP,$(CPPFLAGS)) $(FUZZ_CXXFLAGS) -fsanitize=fuzzer,address,undefined $^ $(LDLIBS) -o $@

fuzz-build: deps
	$(MAKE) $(SUBMAKE_JOBS) $(FUZZ_BINS)

fuzz: fuzz-build
	@for f in $(FUZZ_BINS); do \
	  name=$$(basename $$f); mkdir -p tests/fuzz/corpus/$$name $(BUILD)/fuzz/new-$$name; \
	  echo "== $$name for $(FUZZ_SECONDS)s"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -max_len=65536 $(BUILD)/fuzz/new-$$name tests/fuzz/corpus/$$name || exit 1; \
	done

# --- bench, demo, install ---
bench: all
	scripts/install-deps.sh --bench
	tests/bench/run.sh

demo: deps
	$(MAKE) $(SUBMAKE_JOBS) all
	scripts/demo.sh

install: all
	install -D -m 0755 $(BUILD)/gsymprof $(DESTDIR)$(PREFIX)/bin/gsymprof
	install -D -m 0644 $(BUILD)/gsymprof-http.so $(DESTDIR)$(PREFIX)/lib/gsymprof/gsymprof-http.so
	install -D -m 0644 $(BUILD)/gsymprof.1 $(DESTDIR)$(PREFIX)/share/man/man1/gsymprof.1
	install -D -m 0644 scripts/gsymprof-agent.service $(DESTDIR)$(PREFIX)/lib/systemd/system/gsymprof-agent.service
	sed -i 's|/usr/local/bin/gsymprof|$(PREFIX)/bin/gsymprof|' $(DESTDIR)$(PREFIX)/lib/systemd/system/gsymprof-agent.service

# docs/flame.png: the demo profiled (scripts/demo.sh), its SVG rendered by
# headless Chromium (scripts/flame-png.sh). Kept in the repository.
flame-png: demo
	scripts/flame-png.sh out/demo.svg docs/flame.png

clean:
	rm -rf build build-san out

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
