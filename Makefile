# Mosaic: a garbage collector for CRuby 3.4's Modular GC API.
#
#   make              build librubygc.mosaic.so (and the cached Ruby toolchain if missing)
#   make demo         build everything, run a workload under default and mosaic, print a summary
#   make test         the project's test command (see README); make test-quick: its quick subset;
#                     make test-unit: the suite alone;
#                     make test-gate GATE=name: one gate alone
#   make install      build for this project's Ruby and install into its modular GC dir;
#                     make install RUBY=/path/to/bin/ruby: for that Ruby (3.4, --with-modular-gc),
#                     from its installed headers alone, into its modular GC dir (or GC_DIR=/path)
#   make CHECK=1      the checking variant: assertions, heap verification after every GC
#   make ASAN=1       the checking variant plus -fsanitize=address,undefined (see docs/BUILDING.md);
#                     make install-asan installs it as librubygc.mosaic_asan.so only
#   make TSAN=1       the checking variant plus -fsanitize=thread (see docs/BUILDING.md);
#                     make install-tsan installs it as librubygc.mosaic_tsan.so only
#   make HISTOGRAM=1 lib   the size-histogram variant (src/introspect/size_histogram.c) in build/histogram/;
#                     make install-histogram installs it as librubygc.mosaic_hist.so only
#   make env          print MOSAIC_RUBY=..., MOSAIC_RUBY_SRC=..., MOSAIC_GC_DIR=...
#   make test-c       the C unit tests of the collector's pure parts (test/c/), and the drift test
#                     of src/core/gc_abi.h against CRuby's gc/gc.h and gc/gc_impl.h

SHELL := /bin/bash
TOOLCHAIN := scripts/toolchain.sh

# Where the Ruby toolchain lives (computed by the toolchain script, without building).
TOOLCHAIN_ENV := $(shell $(TOOLCHAIN) paths)
MOSAIC_RUBY       ?= $(shell echo '$(TOOLCHAIN_ENV)' | tr ' ' '\n' | sed -n 's/^MOSAIC_RUBY=//p')
MOSAIC_RUBY_SRC   ?= $(shell echo '$(TOOLCHAIN_ENV)' | tr ' ' '\n' | sed -n 's/^MOSAIC_RUBY_SRC=//p')
MOSAIC_GC_DIR     ?= $(shell echo '$(TOOLCHAIN_ENV)' | tr ' ' '\n' | sed -n 's/^MOSAIC_GC_DIR=//p')

# The Ruby the library is built for: RUBY=/path/to/bin/ruby on the command line, else this
# project's own (the toolchain's, built when missing). A RUBY in the environment is not taken:
# too many shells set one for other purposes. The build needs only that Ruby's installed files:
# its headers (rubyhdrdir, rubyarchhdrdir) and, for make install, its modular GC directory;
# the Modular GC interface itself is declared by src/core/gc_abi.h. scripts/ruby-check.sh
# (target ruby-check, before anything compiles) refuses a Ruby that is not 3.4 or was not
# configured --with-modular-gc, in one line.
ifneq ($(origin RUBY),command line)
  RUBY := $(MOSAIC_RUBY)
endif
# RbConfig::CONFIG[$(1)] of that Ruby. The variables below ask once, when a recipe first needs
# them (so after ruby-check, and after the toolchain is built), and keep the answer.
rbconfig = $(shell '$(RUBY)' -rrbconfig -e 'print RbConfig::CONFIG["$(1)"]')
RUBY_HDRDIR     = $(eval RUBY_HDRDIR := $(call rbconfig,rubyhdrdir))$(RUBY_HDRDIR)
RUBY_ARCHHDRDIR = $(eval RUBY_ARCHHDRDIR := $(call rbconfig,rubyarchhdrdir))$(RUBY_ARCHHDRDIR)
RUBY_GC_DIR     = $(eval RUBY_GC_DIR := $(patsubst %/,%,$(call rbconfig,modular_gc_dir)))$(RUBY_GC_DIR)
RUBY_VERSION_OF = $(eval RUBY_VERSION_OF := $(shell '$(RUBY)' -e 'print RUBY_VERSION'))$(RUBY_VERSION_OF)
# Where make install puts the library: that Ruby's modular GC directory, or GC_DIR=/path.
GC_DIR ?= $(RUBY_GC_DIR)

# Headers: Mosaic's own, then the Ruby's installed ones (the architecture's config.h first).
# The version of that Ruby is compiled in for the load-time check's message (src/core/load_check.c).
INCLUDES = -Isrc -I$(RUBY_ARCHHDRDIR) -I$(RUBY_HDRDIR) -DMOSAIC_BUILT_RUBY_VERSION=\"$(RUBY_VERSION_OF)\"

CC ?= cc
WARN := -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wno-sign-compare -Werror=implicit-function-declaration
# Hidden by default: the library exports what src/core/gc_abi.h marks, the rb_gc_impl_* functions.
CFLAGS_BASE := -std=gnu11 -fPIC -DBUILDING_MODULAR_GC -fvisibility=hidden $(WARN)

ifeq ($(ASAN)$(TSAN),11)
  $(error ASAN=1 and TSAN=1 do not combine: the two runtimes cannot share a process)
endif
ifeq ($(ASAN),1)
  CHECK := 1
  SAN_NAME := asan
  # No stack redzones (asan-stack=0): Ruby leaves frames by its own longjmp (__builtin_longjmp,
  # which ASan does not see) and switches fiber stacks without telling ASan, so a Mosaic frame
  # a raise or a switch abandons leaves its redzones poisoned, and a later memcpy of the VM's
  # over that stack memory is reported (CRuby's test_objspace did, under mosaic_asan). Mosaic's
  # own accesses to malloc'd memory and globals stay checked.
  SAN := -fsanitize=address,undefined -fno-omit-frame-pointer --param asan-stack=0
endif
ifeq ($(TSAN),1)
  CHECK := 1
  SAN_NAME := tsan
  # ThreadSanitizer on Mosaic's own code only (the Ruby is not instrumented): its loads and
  # stores, its atomics, and the pthread calls of the whole process (intercepted), which is
  # what orders them. docs/BUILDING.md says what it does not see.
  SAN := -fsanitize=thread -fno-omit-frame-pointer
endif
ifeq ($(CHECK),1)
  VARIANT := check
  OPT := -O1 -g3 -DMOSAIC_CHECK=1 $(SAN)
else ifeq ($(HISTOGRAM),1)
  VARIANT := histogram
  OPT := -O3 -g -DMOSAIC_CHECK=0 -DMOSAIC_SIZE_HISTOGRAM=1
else
  VARIANT := release
  OPT := -O3 -g -DMOSAIC_CHECK=0
endif

BUILD := build/$(VARIANT)$(if $(SAN_NAME),-$(SAN_NAME),)
SRCS := $(wildcard src/*.c src/*/*.c)
# Files whose code runs once per collection or per call from Ruby (configuration, reports, heap
# walks), not on the allocation, marking or sweeping paths: built for size (-Os where the
# variant says -O3). The library's code is resident in every process (the
# kernel maps a file's pages around each one touched), so its size is memory: docs/DESIGN.md,
# "Code size".
COLD := collect enter incremental trigger config memory pace verify walk size_histogram load_check
obj_opt = $(if $(filter $(COLD),$(notdir $(1))),$(patsubst -O3,-Os,$(OPT)),$(OPT))
OBJS := $(patsubst src/%.c,$(BUILD)/%.o,$(SRCS))
LIB := $(BUILD)/librubygc.mosaic.so

.PHONY: all toolchain ruby-check lib install install-check install-asan install-tsan install-histogram env test test-quick test-unit test-gate test-all-full demo bench clean

all: install

toolchain:
	@$(TOOLCHAIN) build

# Refuses, in one line, a Ruby the library cannot be built for (scripts/ruby-check.sh). For this
# project's own Ruby, the toolchain is built first if missing.
ruby-check: $(if $(filter command line,$(origin RUBY)),,toolchain-ready)
	@scripts/ruby-check.sh '$(RUBY)'
	@command -v $(firstword $(CC)) >/dev/null || { echo "mosaic: no C compiler ($(CC)): install one (Debian and Ubuntu: apt-get install gcc), or give CC=/path/to/cc" >&2; exit 1; }

# The flags a build directory was compiled with: rewritten only when they change, so that a
# change of flags (make ASAN=1 after a Makefile edit, another OPT for a variant) recompiles.
FLAGS_STAMP := $(BUILD)/flags
FLAGS_TEXT = $(CC) $(CFLAGS_BASE) $(OPT) $(INCLUDES) cold=$(COLD)
.PHONY: FORCE
$(FLAGS_STAMP): FORCE | ruby-check
	@mkdir -p $(BUILD)
	@[ "$$(cat $@ 2>/dev/null)" = '$(FLAGS_TEXT)' ] || echo '$(FLAGS_TEXT)' > $@

# Each object depends on the headers its source includes (-MMD writes them to a .d file).
$(BUILD)/%.o: src/%.c $(FLAGS_STAMP) | ruby-check
	@mkdir -p $(dir $@)
	@echo "  CC $<"
	@$(CC) $(CFLAGS_BASE) $(call obj_opt,$*) $(INCLUDES) -MMD -MP -c $< -o $@

-include $(OBJS:.o=.d)

$(LIB): $(OBJS) $(FLAGS_STAMP)
	@echo "  LD $@"
	@$(CC) -shared $(OPT) -o $@ $(OBJS) -pthread

.PHONY: toolchain-ready
toolchain-ready:
	@$(TOOLCHAIN) build

lib: $(LIB)

# $(call install_as,LIBRARY,NAME,WHAT): LIBRARY installed as $(GC_DIR)/librubygc.NAME.so
# (RUBY_GC_LIBRARY=NAME). Copy then rename: processes that have the old library mapped keep
# their inode.
install_as = { mkdir -p $(GC_DIR) 2>/dev/null; [ -d $(GC_DIR) ] && [ -w $(GC_DIR) ]; } || \
	{ echo "mosaic: cannot write $(GC_DIR) (the modular GC directory): install as its owner, or give GC_DIR=/path" >&2; exit 1; }; \
	cp $(1) $(GC_DIR)/.librubygc.$(2).so.tmp && \
	mv -f $(GC_DIR)/.librubygc.$(2).so.tmp $(GC_DIR)/librubygc.$(2).so && \
	echo "installed $(GC_DIR)/librubygc.$(2).so$(if $(3), ($(3)),)"

install: $(LIB)
	@if [ "$(VARIANT)" = histogram ]; then echo "make install: the histogram variant installs only with make install-histogram" >&2; exit 1; fi
	@if [ "$(SAN_NAME)" = tsan ]; then echo "make install: the TSan variant installs only with make install-tsan (it loads only with libtsan preloaded)" >&2; exit 1; fi
	@$(call install_as,$(LIB),mosaic,$(VARIANT)$(if $(SAN_NAME), $(SAN_NAME),))

# The checking build installed beside the release one, as librubygc.mosaic_check.so
# (RUBY_GC_LIBRARY=mosaic_check; GC.config[:implementation] still says "mosaic").
install-check:
	@$(MAKE) --no-print-directory CHECK=1 lib
	@$(call install_as,build/check/librubygc.mosaic.so,mosaic_check,check)

# The sanitized checking build installed beside the others, as librubygc.mosaic_asan.so
# (RUBY_GC_LIBRARY=mosaic_asan, with libasan preloaded: docs/BUILDING.md; the test command's
# asan gate). GC::OPTS includes MOSAIC_ASAN; GC.config[:implementation] still says "mosaic".
install-asan:
	@$(MAKE) --no-print-directory ASAN=1 TSAN=0 lib
	@$(call install_as,build/check-asan/librubygc.mosaic.so,mosaic_asan,check asan)

# The checking build compiled with ThreadSanitizer, as librubygc.mosaic_tsan.so
# (RUBY_GC_LIBRARY=mosaic_tsan, with libtsan preloaded: docs/BUILDING.md; scripts/tsan-gate.sh).
# GC::OPTS includes MOSAIC_TSAN; GC.config[:implementation] still says "mosaic".
install-tsan:
	@$(MAKE) --no-print-directory TSAN=1 ASAN=0 lib
	@$(call install_as,build/check-tsan/librubygc.mosaic.so,mosaic_tsan,check tsan)

# The size-histogram build (issue 9) installed as librubygc.mosaic_hist.so only
# (RUBY_GC_LIBRARY=mosaic_hist; GC.config[:implementation] still says "mosaic"). It writes
# JSON histograms at exit to $$MOSAIC_SIZE_HISTOGRAM_OUT; bench/size_histogram.rb uses it.
install-histogram:
	@$(MAKE) --no-print-directory HISTOGRAM=1 CHECK=0 ASAN=0 TSAN=0 lib
	@$(call install_as,build/histogram/librubygc.mosaic.so,mosaic_hist,histogram)

env:
	@$(TOOLCHAIN) env

# A release build of the working tree installed under another name, librubygc.$(NAME).so
# (RUBY_GC_LIBRARY=$(NAME)), beside the installed mosaic: to compare two versions on one Ruby
# (bench/run.rb --gcs default,mosaic,$(NAME)). Remove it from $(GC_DIR) when done.
.PHONY: variant
variant:
	@[[ "$(NAME)" =~ ^[A-Za-z0-9_]{1,20}$$ ]] || { echo "usage: make variant NAME=name (letters, digits, _; at most 20: Ruby's limit for a GC name)"; exit 2; }
	@$(MAKE) --no-print-directory BUILD=build/variant-$(NAME) OPT='$(OPT) -DMOSAIC_GC_NAME=\"$(NAME)\"' lib
	@$(call install_as,build/variant-$(NAME)/librubygc.mosaic.so,$(NAME),)

# The README's test command (its stress and differential gates use the checking build too).
test: install install-check install-asan install-tsan install-histogram
	@scripts/test.sh

# The quick test command, for a contributor's inner loop: the C unit tests, Mosaic's suite,
# bootstraptest and the GC-critical test-all files under both GCs, the gem, prefix and server
# gates. CI runs
# make test.
test-quick: install
	@MOSAIC_GATES="ctest unit btest gem prefix server testall" scripts/test.sh

# Mosaic's own suite (test/*.rb) under default and mosaic: the unit gate alone.
test-unit: install
	@MOSAIC_GATES=unit scripts/test.sh

# One gate (or several) of the test command alone: make test-gate GATE=stress, GATE="diff races"
# (names as in scripts/test.sh).
test-gate: install install-check install-asan install-tsan install-histogram
	@[ -n "$(GATE)" ] || { echo "usage: make test-gate GATE='name ...' (gates: scripts/test.sh)"; exit 2; }
	@MOSAIC_GATES="$(GATE)" scripts/test.sh

# The C unit tests (test/c/, scripts/test-c.sh): the collector's pure parts tested in C, no
# Ruby process, no libruby. Each test/c/test_*.c is a binary of its own in build/test-c/, built
# with the library's warnings as errors, AddressSanitizer and UBSan (a leak, an overflow or
# undefined behaviour fails it). A test compiles with -Isrc alone (pure C: core/util.h,
# policy/pace_math.h) unless it links library sources, listed in TEST_C_LINK_<name>: those
# are compiled with the library's flags and include paths (the Ruby's installed headers) and
# linked alone; the test defines any Ruby function they call.
# Beside them, test/c/abi_check.sh, the drift test: Mosaic's src/core/gc_abi.h against CRuby
# 3.4.5's gc/gc.h and gc/gc_impl.h in the toolchain's source tree, and the library's exports.
TEST_C_DIR := build/test-c
TEST_C_BINS := $(patsubst test/c/%.c,$(TEST_C_DIR)/%,$(wildcard test/c/test_*.c))
TEST_C_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
TEST_C_CFLAGS := -std=gnu11 $(WARN) -Werror -O1 -g $(TEST_C_SAN)
TEST_C_LINK_test_weak_index := collect/weak_index
TEST_C_LINK_test_cpus := core/cpus

.PHONY: test-c
test-c: $(TEST_C_BINS) $(LIB)
	@MOSAIC_RUBY='$(MOSAIC_RUBY)' MOSAIC_RUBY_SRC='$(MOSAIC_RUBY_SRC)' ABI_CC='$(CC)' \
		ABI_CFLAGS='-std=gnu11 $(WARN) -Werror' ABI_LIB='$(LIB)' \
		scripts/test-c.sh $(TEST_C_BINS) test/c/abi_check.sh

.SECONDEXPANSION:
$(TEST_C_DIR)/test_%: test/c/test_%.c $$(addprefix $(TEST_C_DIR)/,$$(addsuffix .o,$$(TEST_C_LINK_test_$$*))) Makefile
	@mkdir -p $(dir $@)
	@echo "  CC $<"
	@$(CC) $(TEST_C_CFLAGS) $(if $(TEST_C_LINK_test_$*),-DBUILDING_MODULAR_GC -DMOSAIC_CHECK=1 $(INCLUDES),-Isrc) \
		-MMD -MP -o $@ $< $(filter %.o,$^) -lm

$(TEST_C_DIR)/%.o: src/%.c Makefile | ruby-check
	@mkdir -p $(dir $@)
	@echo "  CC $< (for the C unit tests)"
	@$(CC) $(CFLAGS_BASE) -Werror -O1 -g -DMOSAIC_CHECK=1 $(TEST_C_SAN) $(INCLUDES) -MMD -MP -c $< -o $@

# Library objects for the tests are intermediate files make would delete after each run.
.PRECIOUS: $(TEST_C_DIR)/%.o
-include $(TEST_C_BINS:=.d) $(wildcard $(TEST_C_DIR)/*/*.d)

demo: install
	@scripts/demo.sh

bench: install
	@bench/run.rb $(BENCH_ARGS)

# Differential stress test (test/diff/, scripts/difftest.sh): the CI budget of seeds, or
# DURATION=SECONDS of new seeds, or SEEDS=A..B; under default, mosaic and mosaic_check.
.PHONY: difftest
difftest: install install-check
	@DIFFTEST_DURATION=$(DURATION) DIFFTEST_SEEDS=$(SEEDS) scripts/difftest.sh $(DIFFTEST_ARGS)

test-all-full: install
	@scripts/test-all-full.sh $(GC)

clean:
	rm -rf build
