# Vortex build. `make` builds build/vx; `make test` builds and runs all tests.
# Options: WERROR=1 (warnings are errors), SAN=1 (ASan+UBSan, into build-san/),
# DEBUG=1 (-O0), CC=clang.
CC ?= cc
BUILD ?= build
OPT ?= -O2
ifeq ($(DEBUG),1)
OPT = -O0
endif
WARN = -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes -Wpointer-arith \
       -Wcast-align -Wformat=2 -Wundef -Wvla -Wno-unused-parameter
ifeq ($(WERROR),1)
WARN += -Werror
endif
SANFLAGS =
ifeq ($(SAN),1)
BUILD = build-san
SANFLAGS = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
# The SIMD kernel files at -O1 (ASan's recommended level): instrumented at
# -O2 they took GCC 12 five to ten times as long (avx512_gemm_k.c 280 s
# against 17 s), most of CI's sanitizer build. The rest stays at -O2: at
# -O1 the reference kernels made test_kernels three times slower.
# (X86_OPT comes after $(OPT) on the command line: the last -O wins.)
ifneq ($(DEBUG),1)
X86_OPT = -O1
endif
endif
CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -g $(OPT) $(WARN) $(SANFLAGS) -Iinclude -Isrc -Itools -pthread \
              $(shell pkg-config --cflags libpcre2-8 2>/dev/null)
LDLIBS = $(SANFLAGS) -pthread -lm -lpcre2-8 -lcjson -lmicrohttpd
# Open MPI (libopenmpi-dev) for pipeline parallelism across processes
# (src/dist.c), when pkg-config finds it; MPI=0 builds without it.
ifneq ($(MPI),0)
MPI_CFLAGS := $(shell pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBS := $(shell pkg-config --libs ompi-c 2>/dev/null)
endif
ifneq ($(MPI_LIBS),)
LDLIBS += $(MPI_LIBS)
DIST_FLAGS = -DVX_HAVE_MPI $(MPI_CFLAGS)
# test_dist starts itself under mpirun only where vx can run in a group
$(BUILD)/tests/test_dist.o: CFLAGS_BASE += -DVX_TEST_HAVE_MPI
endif

# Per-ISA kernel files get their own flags; everything else is portable C.
ISA_FLAGS_avx2 = -mavx2 -mfma -mf16c -mbmi2
# -mgfni: only the *_gfni_* kernels (Q6_K, Q5_K, Q3_K, Q2_K) use GFNI, and
# cpu.c registers them only where CPUID reports GFNI (AVX-512 VNNI CPUs
# without it exist: Cascade Lake). GCC 12 emits no GFNI anywhere else in these files (checked with
# objdump -d build/src/x86/*.o | grep gf2p8); recheck on a compiler change.
ISA_FLAGS_avx512 = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -mgfni -mfma -mf16c -mbmi2
ISA_FLAGS_amx = $(ISA_FLAGS_avx512) -mamx-tile -mamx-int8 -mamx-bf16

LIB_SRC = $(wildcard src/*.c) $(wildcard src/x86/*.c)
# The AVX-512 kernels are compiled a second time with -DVX_EMU and the AVX2
# flags: SIMD Everywhere (libsimde-dev) supplies the _mm512_* intrinsics, so
# that copy (suffix _avx512emu, src/x86/isa512.h) runs and is tested on any
# AVX2 machine (-fopenmp-simd: SIMDe's loops carry `omp simd` hints; no
# OpenMP runtime is involved). The AMX kernels likewise, with the tile
# instructions modelled by src/x86/amx_emu.h (suffix _amxemu).
# avx512_attn_tiles.c and avx512_gemm_half.c are native only: their
# emulated speed means nothing and their SIMDe compile would add to CI's
# time (the amx-emu table tests the tile attention's shared softmax,
# attn_tiles.h; the half GEMM gives the AVX2 GEMM's bits, which the
# emulated tier runs in its place).
EMU_NATIVE_ONLY = src/x86/avx512_attn_tiles.c src/x86/avx512_gemm_half.c
EMU_SRC = $(filter-out $(EMU_NATIVE_ONLY),$(wildcard src/x86/avx512_*.c)) $(wildcard src/x86/amx_*.c)
# The emulated objects carry no sanitizer instrumentation (below), so the
# sanitizer build links the plain build's copies instead of compiling its
# own: `make check` compiles the slow SIMDe code once, not twice.
PLAIN_BUILD ?= build
EMU_DIR = $(BUILD)/emu
ifeq ($(SAN),1)
EMU_DIR = $(PLAIN_BUILD)/emu
endif
LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/%.o) $(EMU_SRC:src/x86/%.c=$(EMU_DIR)/%.o)
# The slowest objects first (make -j starts prerequisites in order): the
# emulated avx512_gemm_k.c alone compiles for ~4 minutes, which used to
# start late and finish alone.
SLOW_OBJ = $(EMU_DIR)/avx512_gemm_k.o $(EMU_DIR)/amx_gemm.o $(EMU_DIR)/avx512_gemm.o
TOOL_SRC = $(wildcard tools/*.c)
TOOL_OBJ = $(TOOL_SRC:%.c=$(BUILD)/%.o)
TEST_SRC = $(wildcard tests/test_*.c)
TEST_BIN = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TEST_UTIL_OBJ = $(BUILD)/tests/testutil.o

.PHONY: all test clean check
all: $(SLOW_OBJ) $(BUILD)/vx $(BUILD)/simple

$(BUILD)/simple: $(BUILD)/examples/simple.o $(BUILD)/libvortex.a
	$(CC) -o $@ $< $(BUILD)/libvortex.a $(LDLIBS)

$(BUILD)/libvortex.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	ar rcs $@ $^

$(BUILD)/src/x86/%.o: src/x86/%.c $(wildcard src/*.h include/*.h src/x86/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(X86_OPT) $(ISA_FLAGS_$(firstword $(subst _, ,$*))) -c $< -o $@

# The emulated objects are built without the sanitizers' instrumentation:
# instrumented, the SIMDe code of avx512_gemm_k.c alone took 7.5 minutes to
# compile (-O1), most of CI's time, and on AVX-512/AMX machines the
# sanitizer pass runs the native tiers instead (the same source,
# instrumented; tests/testutil.h vx_test_skip_emulated). Objects without
# instrumentation link into an ASan binary as they are.
# -fno-gcse -g1: GCC 12 spent about half of these files' compile time in
# RTL GCSE ("PRE" in -ftime-report) and a third of the rest tracking
# variables for -g on SIMDe's inlined code; without both, the three slow
# files took 85/69/~70 s instead of 242/224/201 s (avx512_attn,
# avx512_gemm_k, avx512_gemm). -g1 keeps function names and line numbers.
EMU_CFLAGS = $(filter-out $(SANFLAGS),$(CFLAGS_BASE)) -g1 -fno-gcse
$(EMU_DIR)/%.o: src/x86/%.c $(wildcard src/*.h include/*.h src/x86/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(EMU_CFLAGS) -DVX_EMU -Wno-psabi -fopenmp-simd $(ISA_FLAGS_avx2) -c $< -o $@

$(BUILD)/%.o: %.c $(wildcard src/*.h include/*.h tests/*.h tools/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -c $< -o $@

# the only file that sees MPI's header (its warnings are not ours: -isystem)
$(BUILD)/src/dist.o: src/dist.c $(wildcard src/*.h include/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(subst -I/,-isystem /,$(DIST_FLAGS)) -c $< -o $@

$(BUILD)/vx: $(TOOL_OBJ) $(BUILD)/libvortex.a
	$(CC) -o $@ $(TOOL_OBJ) $(BUILD)/libvortex.a $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(TEST_UTIL_OBJ) $(BUILD)/libvortex.a
	$(CC) -o $@ $< $(TEST_UTIL_OBJ) $(BUILD)/libvortex.a $(LDLIBS)

test: $(SLOW_OBJ) $(BUILD)/vx $(BUILD)/simple $(TEST_BIN)
	@BUILD=$(BUILD) tests/run_tests.sh $(TEST_BIN)

clean:
	rm -rf build build-san

# Everything CI runs: warnings as errors, the test suite with the best
# kernels, with the generic kernels forced, and under ASan+UBSan.
check:
	$(MAKE) WERROR=1 test
	VX_FORCE_GENERIC=1 $(MAKE) WERROR=1 test
	$(MAKE) SAN=1 WERROR=1 test
.SECONDARY:
