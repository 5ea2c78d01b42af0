/*
 * fuzz_model.c - structure-aware libFuzzer target for the model loader and
 * the first forward pass. The input is not a GGUF file but a recipe of
 * edits applied to a small fixture model: the file stays parseable, so the
 * fuzzer spends its time on what the GGUF reader cannot check (hyperparameter
 * ranges and their consistency with tensor shapes, tokenizer arrays and
 * special ids, tensor types, missing or extra tensors) instead of on the
 * container format (fuzz_gguf.c covers that).
 *
 * Each run writes the edited model with the GGUF writer to a private
 * directory ($TMPDIR or /dev/shm), loads it with vx_model_load and, when
 * that succeeds, creates a context (n_ctx 16 or 64, n_batch 16, 1 thread)
 * and decodes a short batch of token ids taken from the input, then one
 * more token (before that, a fixed text is tokenized and detokenized
 * with the model's vocabulary). Invariants: no crash, leak or sanitizer report; every
 * rejection (load, context init, decode) has a non-empty message; a batch
 * with an id outside [0, n_vocab) is rejected.
 *
 * Input (all reads past the end yield zeros):
 *   byte 0   fixture: % 5 -> stories260K (llama F32), qwen2 Q4_K_M,
 *            qwen3 Q4_K_M, phi3 Q4_K_M, moe Q4_K_M (llama, 4 experts)
 *   byte 1   flags: bit 0 no mmap, 1 check_tensors, 2 no repack,
 *            3 f32_matmul, 4-5 KV type, 6 two sequences, 7 n_ctx 16
 *   then ops, each an opcode byte (% 12; 0 ends the list) and arguments:
 *     1 set "<arch>.<key>" (key table below) to a value (see read_value)
 *     2 set a global key (general.* / tokenizer.*) to a value
 *     3 delete an arch key     4 delete a global key
 *     5 patch elements of an existing array key (tokens, types, scores...)
 *     6 drop a tensor          7 change one dim of a tensor
 *     8 change a tensor's type (data resized: kept prefix or zeros)
 *     9 rename a tensor (replacing any tensor of that name)
 *    10 copy a tensor under a well-known name
 *    11 overwrite bytes of a tensor's data (NaN scales, ...)
 *   the rest: a count byte and up to 8 token ids, 2 bytes each (signed; a few values map
 *            to n_vocab, n_vocab - 1, INT32_MAX, INT32_MIN)
 *
 * Build (the library with coverage and sanitizers, then the target):
 *
 *   make CC=clang OPT=-O1 BUILD=/tmp/vx-fuzz SANFLAGS="-fsanitize=fuzzer-no-link,address,undefined \
 *       -fno-sanitize-recover=all -fno-omit-frame-pointer" /tmp/vx-fuzz/libvortex.a
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
 *       -Iinclude -Isrc tests/fuzz/fuzz_model.c /tmp/vx-fuzz/libvortex.a \
 *       -lpcre2-8 -lcjson -lmicrohttpd -lm -pthread -L/usr/lib/x86_64-linux-gnu/openmpi/lib -lmpi \
 *       -o /tmp/fuzz_model
 *
 * (clang compiles the library's SIMDe-emulated AVX-512 files slowly: the
 * whole build took ~35 minutes on this 2-CPU machine.)
 *
 * Run (fixtures from $VX_FIXTURES, default ../shared/fixtures; seeds are
 * short recipes, e.g. printf '\x00\x00\x00\x01\x00\x02\x00' > seeds/plain):
 *
 *   /tmp/fuzz_model -max_total_time=600 -max_len=512 -timeout=20 -rss_limit_mb=4096 \
 *       -artifact_prefix=/tmp/artifacts/ /tmp/corpus_model /tmp/seeds_model
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "quant.h"
#include "vortex.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz_model: check failed: %s\n", what);
        abort(); /* test harness only */
    }
}

/* ------------------------------------------------------------ fixtures */

static const struct {
    const char *path;
    const char *arch;
} g_models[] = {
    {"models/stories260K/stories260K.gguf", "llama"},
    {"models/qwen2/qwen2-Q4_K_M.gguf", "qwen2"},
    {"models/qwen3/qwen3-Q4_K_M.gguf", "qwen3"},
    {"models/phi3/phi3-Q4_K_M.gguf", "phi3"},
    {"models/moe/moe-Q4_K_M.gguf", "llama"},
};
#define N_MODELS (sizeof g_models / sizeof g_models[0])

static vx_gguf *g_src[N_MODELS]; /* opened once, kept for the process */
static char g_dir[400], g_path[512]; /* where each run writes its model */

static vx_gguf *source(size_t i) {
    if (g_src[i]) return g_src[i];
    const char *fx = getenv("VX_FIXTURES");
    char path[1024], err[VX_ERRMSG_MAX];
    snprintf(path, sizeof path, "%s/%s", fx && *fx ? fx : "../shared/fixtures", g_models[i].path);
    if (vx_gguf_open(path, &g_src[i], err, sizeof err) != VX_OK) {
        fprintf(stderr, "fuzz_model: cannot open %s: %s (set VX_FIXTURES)\n", path, err);
        exit(1);
    }
    return g_src[i];
}

static void cleanup(void) {
    unlink(g_path);
    rmdir(g_dir);
}

static void setup(void) {
    if (g_path[0]) return;
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(g_dir, sizeof g_dir, "%s/vx_fuzz_model.XXXXXX", tmp);
    if (!mkdtemp(g_dir)) {
        perror("fuzz_model: mkdtemp");
        exit(1);
    }
    snprintf(g_path, sizeof g_path, "%s/m.gguf", g_dir);
    atexit(cleanup);
}

/* --------------------------------------------------------- input bytes */

typedef struct reader {
    const uint8_t *p;
    size_t n, i;
} reader;

static uint8_t rd8(reader *r) { return r->i < r->n ? r->p[r->i++] : 0; }
static uint16_t rd16(reader *r) { return (uint16_t)(rd8(r) | rd8(r) << 8); }
static uint64_t rd64(reader *r) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)rd8(r) << (8 * i);
    return v;
}

/* Buffers of one run, freed at its end. */
typedef struct arena {
    void **p;
    size_t n, cap;
} arena;

static void *arena_alloc(arena *a, size_t size) {
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 32;
        a->p = realloc(a->p, a->cap * sizeof *a->p);
        check(a->p != NULL, "realloc");
    }
    void *p = calloc(1, size ? size : 1);
    check(p != NULL, "calloc");
    a->p[a->n++] = p;
    return p;
}

static void arena_free(arena *a) {
    for (size_t i = 0; i < a->n; i++) free(a->p[i]);
    free(a->p);
}

/* --------------------------------------------------------------- edits */

static const char *const arch_keys[] = {
    "block_count", "embedding_length", "feed_forward_length", "attention.head_count",
    "attention.head_count_kv", "attention.key_length", "attention.value_length",
    "rope.dimension_count", "rope.freq_base", "rope.scaling.type", "rope.scaling.factor",
    "context_length", "expert_count", "expert_used_count", "attention.layer_norm_rms_epsilon",
    "attention.sliding_window", "vocab_size", "rope.scaling.original_context_length",
    "attention.layer_norm_epsilon", "expert_shared_count",
};

static const char *const global_keys[] = {
    "general.architecture", "general.name", "general.alignment", "tokenizer.ggml.model",
    "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
    "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id",
    "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id",
    "tokenizer.ggml.padding_token_id", "tokenizer.ggml.mask_token_id",
    "tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_pad_token_id",
    "tokenizer.ggml.prefix_token_id", "tokenizer.ggml.add_bos_token",
    "tokenizer.ggml.add_eos_token", "tokenizer.ggml.add_space_prefix", "tokenizer.chat_template",
};

static const char *const strings[] = {
    "", "linear", "yarn", "none", "llama", "qwen2", "qwen3", "phi3", "mistral", "gpt2", "bert",
    "gpt-j", "default", "qwen2", "llama-bpe", "<s>", "</s>", "<|im_end|>", "<0x41>", "\xe2\x96\x81",
    "Phi-3 mini", "a b", "\xff\xfe", "<|endoftext|>",
};

static const char *const layer_tensors[] = {
    "attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_qkv.weight",
    "attn_output.weight", "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_qkv.bias",
    "attn_output.bias", "attn_q_norm.weight", "attn_k_norm.weight", "ffn_norm.weight",
    "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight", "ffn_gate_inp.weight",
    "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight",
};

static const char *const global_tensors[] = {
    "token_embd.weight", "output_norm.weight", "output.weight", "rope_freqs.weight",
    "rope_factors_long.weight",
};

static const int types[] = {
    VX_TYPE_F32, VX_TYPE_F16, VX_TYPE_BF16, VX_TYPE_Q4_0, VX_TYPE_Q4_1, VX_TYPE_Q5_0,
    VX_TYPE_Q5_1, VX_TYPE_Q8_0, VX_TYPE_Q8_1, VX_TYPE_Q2_K, VX_TYPE_Q3_K, VX_TYPE_Q4_K,
    VX_TYPE_Q5_K, VX_TYPE_Q6_K, VX_TYPE_Q8_K, VX_TYPE_IQ4_NL, VX_TYPE_I8, VX_TYPE_I16,
    VX_TYPE_I32, VX_TYPE_I64, VX_TYPE_F64, VX_TYPE_IQ4_XS, VX_TYPE_TQ1_0, VX_TYPE_TQ2_0,
    VX_TYPE_MXFP4, VX_TYPE_IQ1_S, VX_TYPE_IQ1_M, VX_TYPE_IQ2_XXS, VX_TYPE_IQ2_XS, VX_TYPE_IQ2_S,
    VX_TYPE_IQ3_XXS, VX_TYPE_IQ3_S,
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_KEYS 32
#define MAX_TENSORS 1024

/* An edited key: its new value (or deletion), applied after the copy. */
typedef struct kv_edit {
    char key[160];
    bool del;
    vx_gguf_type type;   /* value type, or ARRAY */
    vx_gguf_type etype;  /* element type of an array */
    uint64_t n;          /* array elements */
    const void *data;    /* scalar / numeric elements */
    const char **strs;   /* STRING value (strs[0]) or elements */
} kv_edit;

typedef struct tensor {
    char name[96];
    int type;
    uint32_t n_dims;
    int64_t ne[4];
    const void *data;
    uint64_t size;
    bool dropped;
} tensor;

typedef struct recipe {
    const vx_gguf *src;
    const char *arch;
    int32_t n_vocab; /* of the fixture */
    kv_edit kv[MAX_KEYS];
    int n_kv;
    tensor t[MAX_TENSORS];
    int n_t;
    arena mem;
} recipe;

static int64_t interesting_int(reader *r, int64_t orig) {
    static const int64_t tab[] = {0,    1,     -1,    2,     3,      4,     7,      8,
                                  16,   31,    32,    63,    64,     255,   256,    511,
                                  512,  513,   1023,  1024,  2048,   4096,  65535,  65536,
                                  1 << 20, 1 << 24, INT32_MAX, INT32_MIN, UINT32_MAX,
                                  INT64_MAX, INT64_MIN};
    uint8_t b = rd8(r);
    switch (b % 8) {
    case 0: return (int64_t)((uint64_t)orig + 1);
    case 1: return (int64_t)((uint64_t)orig - 1);
    case 2: return (int64_t)((uint64_t)orig * 2);
    case 3: return orig / 2;
    case 4: return (int64_t)rd64(r);
    case 5: return (int16_t)rd16(r);
    default: return tab[(b / 8) % NELEM(tab)];
    }
}

static double interesting_float(reader *r, double orig) {
    static const double tab[] = {0.0, -0.0, 1.0, -1.0, NAN, INFINITY, -INFINITY, 1e-45, 1e-38,
                                 1e-5, 0.5, 2.0, 1e30, 3.4e38, 1e300, -1e-6, 1e6, 4.0};
    uint8_t b = rd8(r);
    switch (b % 6) {
    case 0: return orig * 2;
    case 1: return -orig;
    case 2: {
        double d;
        uint64_t u = rd64(r);
        memcpy(&d, &u, sizeof d);
        return d;
    }
    default: return tab[(b / 6) % NELEM(tab)];
    }
}

static const char *any_string(recipe *R, reader *r) {
    uint8_t b = rd8(r);
    if (b < 160) return strings[b % NELEM(strings)];
    size_t len = b - 160u; /* 0..95 bytes from the input */
    if (b == 255) len = 300 + rd8(r) * 8; /* a long one */
    char *s = arena_alloc(&R->mem, len + 1);
    for (size_t i = 0; i < len; i++) {
        s[i] = (char)rd8(r);
        if (!s[i]) s[i] = 'x';
    }
    return s;
}

/* Writes one scalar of type t holding x (ints) / d (floats) into dst. */
static void put_scalar(vx_gguf_type t, int64_t x, double d, uint8_t *dst) {
    switch (t) {
    case VX_GGUF_UINT8: case VX_GGUF_INT8: dst[0] = (uint8_t)x; break;
    case VX_GGUF_BOOL: dst[0] = (uint8_t)(x & 1); break;
    case VX_GGUF_UINT16: case VX_GGUF_INT16: {
        uint16_t v = (uint16_t)x;
        memcpy(dst, &v, 2);
        break;
    }
    case VX_GGUF_UINT32: case VX_GGUF_INT32: {
        uint32_t v = (uint32_t)x;
        memcpy(dst, &v, 4);
        break;
    }
    case VX_GGUF_FLOAT32: {
        /* out-of-range doubles become infinities (the cast itself would be UB) */
        float v = isnan(d) ? NAN : d > FLT_MAX ? INFINITY : d < -FLT_MAX ? -INFINITY : (float)d;
        memcpy(dst, &v, 4);
        break;
    }
    case VX_GGUF_FLOAT64: memcpy(dst, &d, 8); break;
    default: memcpy(dst, &x, 8); break;
    }
}

/* The current value of a key in the fixture as an integer / double. */
static void orig_value(const recipe *R, const char *key, int64_t *x, double *d) {
    *x = 0;
    *d = 0;
    vx_gguf_get_i64(R->src, key, x);
    vx_gguf_get_f64(R->src, key, d);
}

/* Reads a value of any GGUF type into e (type byte, then payload). */
static void read_value(recipe *R, reader *r, kv_edit *e) {
    int64_t ox;
    double od;
    orig_value(R, e->key, &ox, &od);
    e->type = (vx_gguf_type)(rd8(r) % VX_GGUF_TYPE_COUNT);
    if (e->type == VX_GGUF_STRING) {
        e->strs = arena_alloc(&R->mem, sizeof *e->strs);
        e->strs[0] = any_string(R, r);
        return;
    }
    if (e->type != VX_GGUF_ARRAY) {
        uint8_t *v = arena_alloc(&R->mem, 8);
        put_scalar(e->type, interesting_int(r, ox), interesting_float(r, od), v);
        e->data = v;
        return;
    }
    e->etype = (vx_gguf_type)(rd8(r) % VX_GGUF_TYPE_COUNT);
    if (e->etype == VX_GGUF_ARRAY) e->etype = VX_GGUF_STRING;
    uint8_t c = rd8(r);
    switch (c % 4) {
    case 0: e->n = c / 4; break;                     /* 0..63 */
    case 1: e->n = (uint64_t)R->n_vocab; break;      /* a vocabulary's worth */
    case 2: e->n = (uint64_t)R->n_vocab + (c & 8 ? 1 : -1ull); break;
    default: e->n = 1 + rd16(r) % 4096; break;
    }
    if (e->etype == VX_GGUF_STRING) {
        e->strs = arena_alloc(&R->mem, (size_t)(e->n ? e->n : 1) * sizeof *e->strs);
        /* a few strings from the input, then numbered ones (distinct) */
        for (uint64_t i = 0; i < e->n; i++) {
            if (i < 8) {
                e->strs[i] = any_string(R, r);
            } else {
                char *s = arena_alloc(&R->mem, 24);
                snprintf(s, 24, "t%llu", (unsigned long long)i);
                e->strs[i] = s;
            }
        }
        return;
    }
    size_t es = vx_gguf_type_size(e->etype);
    uint8_t *v = arena_alloc(&R->mem, (size_t)e->n * es);
    int64_t x = interesting_int(r, ox);
    double d = interesting_float(r, od);
    uint8_t mode = rd8(r);
    for (uint64_t i = 0; i < e->n; i++) {
        /* all equal, counting up, or input bytes */
        int64_t xi = mode % 3 == 0 ? x : mode % 3 == 1 ? (int64_t)((uint64_t)x + i) : (int8_t)rd8(r);
        put_scalar(e->etype, xi, mode % 3 == 2 ? (double)xi : d, v + i * es);
    }
    e->data = v;
}

static kv_edit *new_edit(recipe *R, const char *key) {
    for (int i = 0; i < R->n_kv; i++)
        if (strcmp(R->kv[i].key, key) == 0) {
            memset(&R->kv[i], 0, sizeof R->kv[i]);
            snprintf(R->kv[i].key, sizeof R->kv[i].key, "%s", key);
            return &R->kv[i];
        }
    if (R->n_kv == MAX_KEYS) return NULL;
    kv_edit *e = &R->kv[R->n_kv++];
    memset(e, 0, sizeof *e);
    snprintf(e->key, sizeof e->key, "%s", key);
    return e;
}

static void key_name(const recipe *R, reader *r, bool arch, char *key, size_t size) {
    if (arch)
        snprintf(key, size, "%s.%s", R->arch, arch_keys[rd8(r) % NELEM(arch_keys)]);
    else
        snprintf(key, size, "%s", global_keys[rd8(r) % NELEM(global_keys)]);
}

/* Copies an existing array and changes a few of its elements. */
static void patch_array(recipe *R, reader *r) {
    char key[160];
    key_name(R, r, false, key, sizeof key);
    vx_gguf_type et;
    uint64_t n;
    const vx_gguf_kv *kv;
    if (vx_gguf_get_arr(R->src, key, &et, &n, &kv) != 1 || n == 0) return;
    kv_edit *e = new_edit(R, key);
    if (!e) return;
    e->type = VX_GGUF_ARRAY;
    e->etype = et;
    e->n = n;
    int np = 1 + rd8(r) % 8;
    if (et == VX_GGUF_STRING) {
        e->strs = arena_alloc(&R->mem, (size_t)n * sizeof *e->strs);
        for (uint64_t i = 0; i < n; i++) e->strs[i] = kv->v.arr.strs[i].s;
        for (int k = 0; k < np; k++) {
            uint16_t i = rd16(r);
            /* another element's text (a duplicate) or a new string */
            e->strs[i % n] = i & 0x8000 ? kv->v.arr.strs[rd16(r) % n].s : any_string(R, r);
        }
        return;
    }
    size_t es = vx_gguf_type_size(et);
    uint8_t *v = arena_alloc(&R->mem, (size_t)n * es);
    memcpy(v, kv->v.arr.data, (size_t)n * es);
    for (int k = 0; k < np; k++) {
        uint64_t i = rd16(r) % n;
        put_scalar(et, interesting_int(r, vx_gguf_arr_i64(kv, i)),
                   interesting_float(r, vx_gguf_arr_f64(kv, i)), v + i * es);
    }
    e->data = v;
}

static tensor *pick_tensor(recipe *R, reader *r) {
    return R->n_t ? &R->t[rd16(r) % R->n_t] : NULL;
}

static void tensor_name(reader *r, char *name, size_t size) {
    uint8_t b = rd8(r);
    if (b < 32)
        snprintf(name, size, "%s", global_tensors[b % NELEM(global_tensors)]);
    else
        snprintf(name, size, "blk.%d.%s", rd8(r) % 6, layer_tensors[b % NELEM(layer_tensors)]);
}

/* Bytes of a tensor of this type and shape; false when the writer would
 * refuse it (block size, unknown type) or it is too large to bother. */
static bool tensor_bytes(const tensor *t, uint64_t *size) {
    const vx_type_traits *tr = vx_type_get_traits(t->type);
    if (!tr || tr->blck_size <= 0) return false;
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if (t->ne[d] < 0 || t->ne[d] > (1 << 24)) return false;
        n *= (uint64_t)t->ne[d];
        if (n > (1ull << 26)) return false;
    }
    if (t->ne[0] % tr->blck_size) return false;
    *size = n / (uint64_t)tr->blck_size * tr->type_size;
    return true;
}

/* New size for a tensor: keep a prefix of its data or pad with zeros. */
static void resize_data(recipe *R, tensor *t, const tensor *old) {
    uint64_t size;
    if (!tensor_bytes(t, &size)) {
        *t = *old; /* not representable: undo */
        return;
    }
    if (size > old->size) {
        void *p = arena_alloc(&R->mem, (size_t)size);
        memcpy(p, old->data, (size_t)old->size);
        t->data = p;
    }
    t->size = size;
}

static void rename_tensor(recipe *R, tensor *t, const char *name) {
    for (int i = 0; i < R->n_t; i++)
        if (&R->t[i] != t && strcmp(R->t[i].name, name) == 0) R->t[i].dropped = true;
    snprintf(t->name, sizeof t->name, "%s", name);
}

static void apply_op(recipe *R, reader *r, int op) {
    char key[160];
    switch (op) {
    case 1:
    case 2: {
        key_name(R, r, op == 1, key, sizeof key);
        kv_edit *e = new_edit(R, key);
        if (e) read_value(R, r, e);
        break;
    }
    case 3:
    case 4: {
        key_name(R, r, op == 3, key, sizeof key);
        kv_edit *e = new_edit(R, key);
        if (e) e->del = true;
        break;
    }
    case 5: patch_array(R, r); break;
    case 6: {
        tensor *t = pick_tensor(R, r);
        if (t) t->dropped = true;
        break;
    }
    case 7: {
        tensor *t = pick_tensor(R, r);
        if (!t) break;
        tensor old = *t;
        uint32_t d = rd8(r) % 4;
        if (d >= t->n_dims) t->n_dims = d + 1;
        int64_t v = t->ne[d];
        uint8_t b = rd8(r);
        switch (b % 8) {
        case 0: v = v / 2; break;
        case 1: v = v * 2; break;
        case 2: v = v + 1; break;
        case 3: v = v - 1; break;
        case 4: v = 0; break;
        case 5: v = 1; break;
        case 6: v = 32 << (b / 8 % 4); break;
        default: v = rd16(r); break;
        }
        t->ne[d] = v;
        resize_data(R, t, &old);
        break;
    }
    case 8: {
        tensor *t = pick_tensor(R, r);
        if (!t) break;
        tensor old = *t;
        uint8_t b = rd8(r);
        t->type = b < 250 ? types[b % NELEM(types)] : (int)rd8(r);
        resize_data(R, t, &old);
        break;
    }
    case 9:
    case 10: {
        tensor *t = pick_tensor(R, r);
        char name[96];
        tensor_name(r, name, sizeof name);
        if (!t) break;
        if (op == 10) {
            if (R->n_t == MAX_TENSORS) break;
            R->t[R->n_t] = *t;
            t = &R->t[R->n_t++];
        }
        rename_tensor(R, t, name);
        break;
    }
    case 11: {
        tensor *t = pick_tensor(R, r);
        if (!t || t->size == 0) break;
        uint8_t *p = arena_alloc(&R->mem, (size_t)t->size);
        memcpy(p, t->data, (size_t)t->size);
        t->data = p;
        uint64_t off = (rd16(r) * 7919ull) % t->size;
        size_t n = 1 + rd8(r) % 16;
        for (size_t i = 0; i < n && off + i < t->size; i++) p[off + i] = rd8(r);
        break;
    }
    default: break;
    }
}

/* Copies one key of the fixture through the generic setters. */
static void copy_kv(vx_gguf_writer *w, const vx_gguf_kv *kv) {
    if (kv->type == VX_GGUF_STRING) {
        vx_gguf_set_str(w, kv->key, kv->v.str.s);
    } else if (kv->type == VX_GGUF_ARRAY && kv->v.arr.type == VX_GGUF_STRING) {
        const char **s = malloc((size_t)(kv->v.arr.n + 1) * sizeof *s);
        check(s != NULL, "malloc");
        for (uint64_t k = 0; k < kv->v.arr.n; k++) s[k] = kv->v.arr.strs[k].s;
        vx_gguf_set_arr_str(w, kv->key, s, kv->v.arr.n);
        free(s);
    } else if (kv->type == VX_GGUF_ARRAY) {
        vx_gguf_set_arr(w, kv->key, kv->v.arr.type, kv->v.arr.data, kv->v.arr.n);
    } else {
        uint8_t v[8];
        int64_t x = kv->v.i64;
        if (kv->type == VX_GGUF_BOOL) x = kv->v.b;
        put_scalar(kv->type, x, kv->v.f64, v);
        vx_gguf_set_val(w, kv->key, kv->type, v);
    }
}

static void apply_kv(vx_gguf_writer *w, const kv_edit *e) {
    if (e->del) return;
    if (e->type == VX_GGUF_STRING)
        vx_gguf_set_str(w, e->key, e->strs[0]);
    else if (e->type == VX_GGUF_ARRAY && e->etype == VX_GGUF_STRING)
        vx_gguf_set_arr_str(w, e->key, e->strs, e->n);
    else if (e->type == VX_GGUF_ARRAY)
        vx_gguf_set_arr(w, e->key, e->etype, e->data, e->n);
    else
        vx_gguf_set_val(w, e->key, e->type, e->data);
}

static bool edited(const recipe *R, const char *key) {
    for (int i = 0; i < R->n_kv; i++)
        if (strcmp(R->kv[i].key, key) == 0) return true;
    return false;
}

/* Writes the edited model to g_path. False when the writer refused it
 * (e.g. a general.alignment it cannot honour): nothing to load then. */
static bool write_model(recipe *R) {
    vx_gguf_writer *w = vx_gguf_writer_init();
    check(w != NULL, "writer_init");
    for (int64_t i = 0; i < vx_gguf_n_kv(R->src); i++) {
        const vx_gguf_kv *kv = vx_gguf_kv_at(R->src, i);
        if (!edited(R, kv->key)) copy_kv(w, kv);
    }
    for (int i = 0; i < R->n_kv; i++) apply_kv(w, &R->kv[i]);
    for (int i = 0; i < R->n_t; i++) {
        const tensor *t = &R->t[i];
        if (t->dropped) continue;
        vx_status st = vx_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data,
                                          t->size, true);
        check(st == VX_OK, "add_tensor of an edited tensor");
    }
    char err[VX_ERRMSG_MAX] = "";
    vx_status st = vx_gguf_write_file(w, g_path, err, sizeof err);
    vx_gguf_writer_free(w);
    if (st != VX_OK) check(err[0] != 0, "writer error has a message");
    return st == VX_OK;
}

/* ------------------------------------------------------------ the run */

static vx_token token_id(reader *r, int32_t n_vocab) {
    int16_t v = (int16_t)rd16(r);
    switch (v) {
    case 0x7fff: return n_vocab;
    case 0x7ffe: return n_vocab - 1;
    case 0x7ffd: return INT32_MAX;
    case -0x8000: return INT32_MIN;
    default: return v;
    }
}

/* The vocabulary's first use: tokenize a fixed text (special tokens on)
 * and detokenize it; every id must be inside the vocabulary. */
static void use_vocab(const vx_vocab *v) {
    static const char text[] = "<s>Hello, world! <|im_end|> \xe2\x96\x81x </s>\xff";
    vx_token ids[256];
    const int32_t nv = vx_vocab_n_tokens(v);
    int32_t n = vx_tokenize(v, text, -1, ids, 256, true, true);
    check(n != INT32_MIN && n <= 256, "tokenize");
    for (int32_t i = 0; i < n; i++) check(ids[i] >= 0 && ids[i] < nv, "token id in range");
    char out[1024];
    if (n > 0) vx_detokenize(v, ids, n, out, sizeof out, false, true);
    check(vx_vocab_bos(v) < nv && vx_vocab_eos(v) < nv && vx_vocab_eot(v) < nv, "special ids");
    for (vx_token t = 0; t < nv && t < 600; t++) {
        char piece[64];
        vx_token_to_piece(v, t, piece, sizeof piece, true);
        vx_vocab_is_eog(v, t);
    }
}

static void run_model(vx_model *m, uint8_t flags, reader *r) {
    vx_context_params cp = vx_context_default_params();
    cp.n_ctx = flags & 0x80 ? 16 : 64;
    cp.n_batch = 16;
    cp.n_threads = 1;
    cp.n_seq_max = flags & 0x40 ? 2 : 1;
    cp.kv_type = (vx_kv_type)((flags >> 4) % 3);
    cp.f32_matmul = flags & 8;
    vx_context *c = NULL;
    char err[VX_ERRMSG_MAX] = "";
    vx_status st = vx_context_init(m, &cp, &c, err, sizeof err);
    if (st != VX_OK) {
        check(c == NULL && err[0] != 0, "context_init failure has a message");
        return;
    }
    const int32_t n_vocab = vx_context_n_vocab(c);
    vx_token tok[9];
    vx_pos pos[9];
    vx_seq_id seq[9];
    int8_t want[9];
    int32_t n = 1 + rd8(r) % 8;
    bool bad = false;
    for (int32_t i = 0; i < n; i++) {
        tok[i] = token_id(r, n_vocab);
        bad |= tok[i] < 0 || tok[i] >= n_vocab;
        pos[i] = i;
        seq[i] = 0;
        want[i] = 1;
    }
    vx_batch b = {n, tok, pos, seq, want, NULL};
    st = vx_decode(c, &b);
    if (bad) check(st == VX_EINVAL, "out-of-range token rejected");
    if (st != VX_OK) {
        check(vx_context_errmsg(c)[0] != 0, "decode failure has a message");
    } else {
        float sum = 0;
        for (int32_t i = 0; i < n; i++) {
            const float *l = vx_get_logits_ith(c, i);
            check(l != NULL, "logits of a token that asked");
            for (int32_t k = 0; k < n_vocab; k++) sum += l[k];
        }
        (void)sum;
        /* one more token: the decode step, reading the cache */
        vx_token t1 = tok[n - 1];
        vx_pos p1 = n;
        vx_seq_id s1 = 0;
        vx_batch b1 = {1, &t1, &p1, &s1, NULL};
        st = vx_decode(c, &b1);
        if (st != VX_OK) check(vx_context_errmsg(c)[0] != 0, "decode failure has a message");
    }
    vx_context_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    reader r = {data, size, 0};
    static recipe R; /* large: not on the stack */
    size_t mi = rd8(&r) % N_MODELS;
    uint8_t flags = rd8(&r);
    memset(&R, 0, sizeof R);
    R.src = source(mi);
    R.arch = g_models[mi].arch;
    vx_gguf_type et;
    uint64_t nv = 0;
    const vx_gguf_kv *kv;
    vx_gguf_get_arr(R.src, "tokenizer.ggml.tokens", &et, &nv, &kv);
    R.n_vocab = (int32_t)nv;
    R.n_t = (int)vx_gguf_n_tensors(R.src);
    check(R.n_t <= MAX_TENSORS, "fixture tensor count");
    for (int i = 0; i < R.n_t; i++) {
        const vx_gguf_tensor *t = vx_gguf_tensor_at(R.src, i);
        tensor *d = &R.t[i];
        snprintf(d->name, sizeof d->name, "%s", t->name);
        d->type = t->type;
        d->n_dims = t->n_dims;
        for (int k = 0; k < 4; k++) d->ne[k] = t->ne[k];
        d->data = t->data;
        d->size = t->size;
    }
    for (int k = 0; k < 24; k++) {
        int op = rd8(&r) % 12;
        if (op == 0) break;
        apply_op(&R, &r, op);
    }
    if (write_model(&R)) {
        vx_model_params mp = vx_model_default_params();
        mp.use_mmap = !(flags & 1);
        mp.check_tensors = flags & 2;
        mp.repack = !(flags & 4);
        vx_model *m = (vx_model *)1;
        char err[VX_ERRMSG_MAX] = "";
        vx_status st = vx_model_load(g_path, &mp, &m, err, sizeof err);
        if (st != VX_OK) {
            check(m == NULL, "failed load leaves *out NULL");
            check(err[0] != 0, "load failure has a message");
            if (getenv("VX_FUZZ_VERBOSE")) fprintf(stderr, "load: %s\n", err);
        } else {
            char desc[4096];
            vx_model_describe(m, desc, sizeof desc);
            use_vocab(vx_model_get_vocab(m));
            run_model(m, flags, &r);
            vx_model_free(m);
        }
        unlink(g_path);
    }
    arena_free(&R.mem);
    return 0;
}
