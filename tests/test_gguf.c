/*
 * test_gguf.c - GGUF reader (gguf.c) and writer (gguf_write.c):
 *   - round trip of every metadata type and several tensor types/shapes with
 *     a custom alignment, through vx_gguf_open and vx_gguf_open_mem;
 *   - writer argument validation and write-failure behaviour (temp file +
 *     rename: a failed write leaves neither a partial nor a temp file);
 *   - the real fixture models and vocabularies: counts, and a copy_kv + same
 *     tensors rewrite that must reproduce the file byte for byte;
 *   - corrupt and hostile files (every truncation of a small file, absurd
 *     counts and lengths, bad types, bad tensor geometry, ...): each must
 *     fail with the right status and a message naming the problem;
 *   - model-level errors through vx_model_load on files built by the writer.
 * Temporary files go to a private directory under /tmp, removed at the end.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "quant.h"
#include "testutil.h"
#include "vortex.h"

static char g_dir[256];

static const char *tpath(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "%s/%s", g_dir, name);
    return buf;
}

static bool file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Names in the temp directory that look like writer temp files. */
static int count_temp_files(void) {
    DIR *d = opendir(g_dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp")) n++;
    closedir(d);
    return n;
}

static void remove_dir(void) {
    DIR *d = opendir(g_dir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlink(tpath(p, sizeof p, e->d_name));
    closedir(d);
    rmdir(g_dir);
}

/* --------------------------------------------------------- byte builder */

typedef struct bb {
    uint8_t *p;
    size_t n, cap;
} bb;

static void bb_put(bb *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        uint8_t *np = realloc(b->p, cap);
        if (!np) {
            fprintf(stderr, "test_gguf: out of memory\n");
            exit(2);
        }
        b->p = np;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void bb_u32(bb *b, uint32_t v) { bb_put(b, &v, 4); }
static void bb_u64(bb *b, uint64_t v) { bb_put(b, &v, 8); }
static void bb_strn(bb *b, const char *s, size_t n) {
    bb_u64(b, n);
    bb_put(b, s, n);
}
static void bb_str(bb *b, const char *s) { bb_strn(b, s, strlen(s)); }
static void bb_zeros(bb *b, size_t n) {
    for (size_t i = 0; i < n; i++) bb_put(b, "", 1);
}
static void bb_pad(bb *b, size_t align) {
    while (b->n % align) bb_put(b, "", 1);
}
static void bb_hdr(bb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b->n = 0;
    bb_put(b, "GGUF", 4);
    bb_u32(b, version);
    bb_u64(b, n_tensors);
    bb_u64(b, n_kv);
}
static void bb_kv_u32(bb *b, const char *key, uint32_t v) {
    bb_str(b, key);
    bb_u32(b, VX_GGUF_UINT32);
    bb_u32(b, v);
}
/* One tensor info: n_dims dims from ne. */
static void bb_tinfo(bb *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                     uint64_t offset) {
    bb_str(b, name);
    bb_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) bb_u64(b, ne[i]);
    bb_u32(b, type);
    bb_u64(b, offset);
}

/* ------------------------------------------------------ expectation helpers */

/* Parses data[0..n) from an exact-size heap copy, so ASan sees any read past
 * the end, and checks the status and that the message contains want_msg. */
static void expect_mem(const char *label, const uint8_t *data, size_t n, vx_status want,
                       const char *want_msg) {
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, data, n);
    vx_gguf *g = (vx_gguf *)1;
    char err[VX_ERRMSG_MAX] = "";
    vx_status st = vx_gguf_open_mem(copy, n, &g, err, sizeof err);
    CHECKF(st == want, "%s: status %d (%s), want %d; message: %s", label, st, vx_status_str(st),
           want, err);
    if (want != VX_OK) {
        CHECKF(g == NULL, "%s: handle not NULL on failure", label);
        CHECKF(want_msg == NULL || strstr(err, want_msg), "%s: message '%s' lacks '%s'", label,
               err, want_msg);
    }
    if (st == VX_OK) vx_gguf_close(g);
    free(copy);
}

/* Same through a real file: the message must also name the file. */
static void expect_file(const char *label, const uint8_t *data, size_t n, vx_status want,
                        const char *want_msg) {
    char path[512];
    tpath(path, sizeof path, "crafted.gguf");
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    if (n) CHECK(fwrite(data, 1, n, f) == n);
    fclose(f);
    vx_gguf *g = NULL;
    char err[VX_ERRMSG_MAX] = "";
    vx_status st = vx_gguf_open(path, &g, err, sizeof err);
    CHECKF(st == want, "%s (file): status %d (%s), want %d; message: %s", label, st,
           vx_status_str(st), want, err);
    if (want != VX_OK) {
        CHECKF(strstr(err, want_msg) && strstr(err, path), "%s (file): message '%s'", label, err);
    }
    if (st == VX_OK) vx_gguf_close(g);
    /* the model loader reports the same problem (or, for files the reader
     * accepts, that it is not a model) and never crashes */
    vx_model *m = (vx_model *)1;
    err[0] = 0;
    st = vx_model_load(path, NULL, &m, err, sizeof err);
    CHECKF(st != VX_OK && m == NULL && err[0], "%s (model): status %d: %s", label, st, err);
    if (want != VX_OK)
        CHECKF(st == want && strstr(err, want_msg), "%s (model): status %d, message '%s'", label,
               st, err);
    if (st == VX_OK) vx_model_free(m);
    unlink(path);
}

static void expect_both(const char *label, const bb *b, vx_status want, const char *want_msg) {
    expect_mem(label, b->p, b->n, want, want_msg);
    expect_file(label, b->p, b->n, want, want_msg);
}

/* Deep equality of two metadata entries. */
static bool kv_equal(const vx_gguf_kv *a, const vx_gguf_kv *b) {
    if (strcmp(a->key, b->key) != 0 || a->type != b->type) return false;
    switch (a->type) {
    case VX_GGUF_STRING:
        return a->v.str.len == b->v.str.len && memcmp(a->v.str.s, b->v.str.s, a->v.str.len) == 0;
    case VX_GGUF_ARRAY:
        if (a->v.arr.type != b->v.arr.type || a->v.arr.n != b->v.arr.n) return false;
        if (a->v.arr.type == VX_GGUF_STRING) {
            for (uint64_t i = 0; i < a->v.arr.n; i++) {
                const vx_gguf_str *x = &a->v.arr.strs[i], *y = &b->v.arr.strs[i];
                if (x->len != y->len || memcmp(x->s, y->s, x->len) != 0) return false;
            }
            return true;
        }
        return a->v.arr.n == 0 ||
               memcmp(a->v.arr.data, b->v.arr.data,
                      a->v.arr.n * vx_gguf_type_size(a->v.arr.type)) == 0;
    case VX_GGUF_BOOL: return a->v.b == b->v.b;
    case VX_GGUF_FLOAT32:
    case VX_GGUF_FLOAT64: return memcmp(&a->v.f64, &b->v.f64, sizeof(double)) == 0;
    default: return a->v.u64 == b->v.u64;
    }
}

static bool tensor_equal(const vx_gguf_tensor *a, const vx_gguf_tensor *b) {
    return strcmp(a->name, b->name) == 0 && a->type == b->type && a->n_dims == b->n_dims &&
           memcmp(a->ne, b->ne, sizeof a->ne) == 0 && a->size == b->size &&
           a->offset == b->offset && memcmp(a->data, b->data, a->size) == 0;
}

/* ------------------------------------------------------------ round trip */

/* Deterministic filler so tensor data differs byte by byte. */
static void fill_bytes(uint8_t *p, size_t n, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
}

typedef struct rt_tensor {
    const char *name;
    int type;
    uint32_t n_dims;
    int64_t ne[4];
    bool borrow;
    uint8_t *data;
    uint64_t size;
} rt_tensor;

static rt_tensor rt_tensors[] = {
    {"odd.f32", VX_TYPE_F32, 1, {7, 1, 1, 1}, false, NULL, 0},
    {"blk.0.attn_q.weight", VX_TYPE_F16, 2, {64, 3, 1, 1}, true, NULL, 0},
    {"experts.q8_0", VX_TYPE_Q8_0, 3, {64, 2, 3, 1}, false, NULL, 0},
    {"k.q4_k", VX_TYPE_Q4_K, 2, {512, 2, 1, 1}, true, NULL, 0},
    {"four.d.i8", VX_TYPE_I8, 4, {3, 2, 2, 2}, false, NULL, 0},
    {"empty.bf16", VX_TYPE_BF16, 2, {0, 4, 1, 1}, false, NULL, 0},
    {"iq4", VX_TYPE_IQ4_NL, 2, {32, 5, 1, 1}, false, NULL, 0},
};
#define N_RT (sizeof rt_tensors / sizeof rt_tensors[0])

static const char *const rt_strs[] = {"", "plain", "h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93",
                                      "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", ""};

static const uint8_t a_u8[] = {0, 1, 255};
static const int8_t a_i8[] = {-128, 0, 127};
static const uint16_t a_u16[] = {0, 65535, 12345};
static const int16_t a_i16[] = {-32768, 32767, -1};
static const uint32_t a_u32[] = {0, 4294967295u, 7};
static const int32_t a_i32[] = {INT32_MIN, INT32_MAX, -5};
static const float a_f32[] = {-0.0f, 1.5f, 3.4e38f, 1e-45f, NAN, -INFINITY};
static const uint8_t a_bool[] = {1, 0, 1, 1};
static const uint64_t a_u64[] = {UINT64_MAX, 0, 1ull << 40};
static const int64_t a_i64[] = {INT64_MIN, INT64_MAX, -3};
static const double a_f64[] = {3.141592653589793, -2.5e300, 5e-324};

static vx_gguf_writer *build_roundtrip(void) {
    vx_gguf_writer *w = vx_gguf_writer_init();
    CHECK(w != NULL);
    /* one of each scalar, through set_val and the typed setters */
    uint8_t u8 = 200;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    uint64_t u64 = (1ull << 63) + 5;
    int64_t i64 = -(1ll << 62);
    double f64 = 3.141592653589793;
    uint8_t bfalse = 0;
    CHECK(vx_gguf_set_u32(w, "general.alignment", 64) == VX_OK);
    CHECK(vx_gguf_set_val(w, "t.u8", VX_GGUF_UINT8, &u8) == VX_OK);
    CHECK(vx_gguf_set_val(w, "t.i8", VX_GGUF_INT8, &i8) == VX_OK);
    CHECK(vx_gguf_set_val(w, "t.u16", VX_GGUF_UINT16, &u16) == VX_OK);
    CHECK(vx_gguf_set_val(w, "t.i16", VX_GGUF_INT16, &i16) == VX_OK);
    CHECK(vx_gguf_set_u32(w, "t.u32", 4000000000u) == VX_OK);
    CHECK(vx_gguf_set_i32(w, "t.i32", -2000000000) == VX_OK);
    CHECK(vx_gguf_set_f32(w, "t.f32", 1.5f) == VX_OK);
    CHECK(vx_gguf_set_bool(w, "t.bool", true) == VX_OK);
    CHECK(vx_gguf_set_val(w, "t.bool_false", VX_GGUF_BOOL, &bfalse) == VX_OK);
    CHECK(vx_gguf_set_u64(w, "t.u64", u64) == VX_OK);
    CHECK(vx_gguf_set_val(w, "t.i64", VX_GGUF_INT64, &i64) == VX_OK);
    CHECK(vx_gguf_set_val(w, "t.f64", VX_GGUF_FLOAT64, &f64) == VX_OK);
    CHECK(vx_gguf_set_str(w, "t.str_empty", "") == VX_OK);
    CHECK(vx_gguf_set_val(w, "t.str_utf8", VX_GGUF_STRING, rt_strs[2]) == VX_OK);
    CHECK(vx_gguf_set_arr(w, "a.u8", VX_GGUF_UINT8, a_u8, 3) == VX_OK);
    CHECK(vx_gguf_set_arr(w, "a.i8", VX_GGUF_INT8, a_i8, 3) == VX_OK);
    CHECK(vx_gguf_set_arr(w, "a.u16", VX_GGUF_UINT16, a_u16, 3) == VX_OK);
    CHECK(vx_gguf_set_arr(w, "a.i16", VX_GGUF_INT16, a_i16, 3) == VX_OK);
    CHECK(vx_gguf_set_arr(w, "a.u32", VX_GGUF_UINT32, a_u32, 3) == VX_OK);
    CHECK(vx_gguf_set_arr(w, "a.i32", VX_GGUF_INT32, a_i32, 3) == VX_OK);
    CHECK(vx_gguf_set_arr(w, "a.f32", VX_GGUF_FLOAT32, a_f32, 6) == VX_OK);
    CHECK(vx_gguf_set_arr(w, "a.bool", VX_GGUF_BOOL, a_bool, 4) == VX_OK);
    CHECK(vx_gguf_set_arr(w, "a.u64", VX_GGUF_UINT64, a_u64, 3) == VX_OK);
    CHECK(vx_gguf_set_arr(w, "a.i64", VX_GGUF_INT64, a_i64, 3) == VX_OK);
    CHECK(vx_gguf_set_arr(w, "a.f64", VX_GGUF_FLOAT64, a_f64, 3) == VX_OK);
    CHECK(vx_gguf_set_arr(w, "a.empty_u32", VX_GGUF_UINT32, NULL, 0) == VX_OK);
    CHECK(vx_gguf_set_arr_str(w, "a.str", rt_strs, 5) == VX_OK);
    CHECK(vx_gguf_set_arr_str(w, "a.str_empty", NULL, 0) == VX_OK);
    /* replacing keeps one entry, in the original position, with the new type */
    CHECK(vx_gguf_set_u32(w, "t.replaced", 1) == VX_OK);
    CHECK(vx_gguf_set_arr(w, "t.replaced", VX_GGUF_UINT8, a_u8, 3) == VX_OK);
    CHECK(vx_gguf_set_str(w, "t.replaced", "final") == VX_OK);
    CHECK(vx_gguf_set_f32(w, "t.f32", 2.25f) == VX_OK);
    /* longest key allowed */
    char *longkey = malloc(65536);
    memset(longkey, 'k', 65535);
    longkey[65535] = 0;
    CHECK(vx_gguf_set_u32(w, longkey, 9) == VX_OK);
    free(longkey);

    for (size_t i = 0; i < N_RT; i++) {
        rt_tensor *t = &rt_tensors[i];
        int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
        t->size = vx_row_size((vx_type)t->type, t->ne[0]) * (uint64_t)rows;
        free(t->data);
        t->data = malloc(t->size ? t->size : 1);
        fill_bytes(t->data, t->size, (uint32_t)i + 1);
        CHECKF(vx_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size,
                                  t->borrow) == VX_OK,
               "add %s", t->name);
    }
    return w;
}

static void check_roundtrip(const vx_gguf *g, const char *how) {
    CHECKF(vx_gguf_version(g) == 3, "%s: version", how);
    CHECKF(vx_gguf_alignment(g) == 64, "%s: alignment %zu", how, vx_gguf_alignment(g));
    CHECKF(vx_gguf_n_kv(g) == 31, "%s: n_kv %lld", how, (long long)vx_gguf_n_kv(g));
    const vx_gguf_kv *kv;
    int64_t i;
    double d;
    bool b;
    const char *s;
#define KV(key, t) ((kv = vx_gguf_find(g, key)) != NULL && kv->type == (t))
    CHECK(KV("t.u8", VX_GGUF_UINT8) && kv->v.u64 == 200);
    CHECK(KV("t.i8", VX_GGUF_INT8) && kv->v.i64 == -100);
    CHECK(KV("t.u16", VX_GGUF_UINT16) && kv->v.u64 == 60000);
    CHECK(KV("t.i16", VX_GGUF_INT16) && kv->v.i64 == -30000);
    CHECK(KV("t.u32", VX_GGUF_UINT32) && kv->v.u64 == 4000000000u);
    CHECK(KV("t.i32", VX_GGUF_INT32) && kv->v.i64 == -2000000000);
    CHECK(KV("t.f32", VX_GGUF_FLOAT32) && kv->v.f64 == 2.25);
    CHECK(KV("t.bool", VX_GGUF_BOOL) && kv->v.b);
    CHECK(KV("t.bool_false", VX_GGUF_BOOL) && !kv->v.b);
    CHECK(KV("t.u64", VX_GGUF_UINT64) && kv->v.u64 == (1ull << 63) + 5);
    CHECK(KV("t.i64", VX_GGUF_INT64) && kv->v.i64 == -(1ll << 62));
    CHECK(KV("t.f64", VX_GGUF_FLOAT64) && kv->v.f64 == 3.141592653589793);
    CHECK(KV("t.str_empty", VX_GGUF_STRING) && kv->v.str.len == 0 && kv->v.str.s[0] == 0);
    CHECK(KV("t.str_utf8", VX_GGUF_STRING) && strcmp(kv->v.str.s, rt_strs[2]) == 0 &&
          kv->v.str.len == strlen(rt_strs[2]));
    CHECK(KV("t.replaced", VX_GGUF_STRING) && strcmp(kv->v.str.s, "final") == 0);
    /* a replaced key keeps its place */
    CHECK(strcmp(vx_gguf_kv_at(g, 0)->key, "general.alignment") == 0);
    CHECK(strcmp(vx_gguf_kv_at(g, 7)->key, "t.f32") == 0);
    CHECK(strcmp(vx_gguf_kv_at(g, 29)->key, "t.replaced") == 0);
    CHECK(strlen(vx_gguf_kv_at(g, 30)->key) == 65535);
    /* typed getters */
    CHECK(vx_gguf_get_i64(g, "t.u32", &i) == 1 && i == 4000000000ll);
    CHECK(vx_gguf_get_i64(g, "t.u64", &i) == -1); /* > INT64_MAX */
    CHECK(vx_gguf_get_i64(g, "t.str_utf8", &i) == -1);
    CHECK(vx_gguf_get_i64(g, "nope", &i) == 0);
    CHECK(vx_gguf_get_f64(g, "t.i16", &d) == 1 && d == -30000.0);
    CHECK(vx_gguf_get_bool(g, "t.bool", &b) == 1 && b);
    CHECK(vx_gguf_get_bool(g, "t.u8", &b) == -1);
    CHECK(vx_gguf_get_str(g, "t.str_empty", &s) == 1 && s[0] == 0);

    /* arrays: element type, count and every element */
    struct {
        const char *key;
        vx_gguf_type t;
        const void *data;
        uint64_t n;
    } arrs[] = {
        {"a.u8", VX_GGUF_UINT8, a_u8, 3},      {"a.i8", VX_GGUF_INT8, a_i8, 3},
        {"a.u16", VX_GGUF_UINT16, a_u16, 3},   {"a.i16", VX_GGUF_INT16, a_i16, 3},
        {"a.u32", VX_GGUF_UINT32, a_u32, 3},   {"a.i32", VX_GGUF_INT32, a_i32, 3},
        {"a.f32", VX_GGUF_FLOAT32, a_f32, 6},  {"a.bool", VX_GGUF_BOOL, a_bool, 4},
        {"a.u64", VX_GGUF_UINT64, a_u64, 3},   {"a.i64", VX_GGUF_INT64, a_i64, 3},
        {"a.f64", VX_GGUF_FLOAT64, a_f64, 3},  {"a.empty_u32", VX_GGUF_UINT32, NULL, 0},
    };
    for (size_t k = 0; k < sizeof arrs / sizeof arrs[0]; k++) {
        vx_gguf_type t;
        uint64_t n;
        int r = vx_gguf_get_arr(g, arrs[k].key, &t, &n, &kv);
        CHECKF(r == 1 && t == arrs[k].t && n == arrs[k].n, "%s: array %s", how, arrs[k].key);
        if (r == 1 && n == arrs[k].n && n)
            CHECKF(memcmp(kv->v.arr.data, arrs[k].data, n * vx_gguf_type_size(t)) == 0,
                   "%s: array %s data", how, arrs[k].key);
    }
    CHECK(vx_gguf_get_arr(g, "a.i16", NULL, NULL, &kv) == 1 && vx_gguf_arr_i64(kv, 0) == -32768 &&
          vx_gguf_arr_f64(kv, 1) == 32767.0);
    CHECK(vx_gguf_get_arr(g, "a.u64", NULL, NULL, &kv) == 1 &&
          vx_gguf_arr_f64(kv, 2) == (double)(1ull << 40));
    CHECK(vx_gguf_get_arr(g, "a.f32", NULL, NULL, &kv) == 1 && vx_gguf_arr_f64(kv, 1) == 1.5 &&
          signbit(vx_gguf_arr_f64(kv, 0)));
    /* float elements read as integers truncate and saturate; NaN gives 0 */
    CHECK(vx_gguf_arr_i64(kv, 1) == 1 && vx_gguf_arr_i64(kv, 2) == INT64_MAX &&
          vx_gguf_arr_i64(kv, 4) == 0 && vx_gguf_arr_i64(kv, 5) == INT64_MIN &&
          isnan(vx_gguf_arr_f64(kv, 4)));
    CHECK(vx_gguf_get_arr(g, "a.f64", NULL, NULL, &kv) == 1 && vx_gguf_arr_i64(kv, 0) == 3 &&
          vx_gguf_arr_i64(kv, 1) == INT64_MIN);
    CHECK(vx_gguf_get_arr(g, "a.bool", NULL, NULL, &kv) == 1 && vx_gguf_arr_i64(kv, 1) == 0 &&
          vx_gguf_arr_i64(kv, 3) == 1);
    CHECK(vx_gguf_get_arr(g, "t.u8", NULL, NULL, &kv) == -1);
    if (KV("a.str", VX_GGUF_ARRAY) && kv->v.arr.type == VX_GGUF_STRING && kv->v.arr.n == 5) {
        for (int k = 0; k < 5; k++)
            CHECKF(kv->v.arr.strs[k].len == strlen(rt_strs[k]) &&
                       strcmp(kv->v.arr.strs[k].s, rt_strs[k]) == 0,
                   "%s: a.str[%d]", how, k);
    } else {
        CHECKF(0, "%s: a.str missing", how);
    }
    CHECK(KV("a.str_empty", VX_GGUF_ARRAY) && kv->v.arr.type == VX_GGUF_STRING &&
          kv->v.arr.n == 0);
#undef KV

    /* tensors: order, geometry, alignment and bytes */
    CHECKF(vx_gguf_n_tensors(g) == (int64_t)N_RT, "%s: n_tensors", how);
    CHECK(vx_gguf_data_offset(g) % 64 == 0);
    uint64_t expect_off = 0;
    for (size_t k = 0; k < N_RT && k < (size_t)vx_gguf_n_tensors(g); k++) {
        const rt_tensor *e = &rt_tensors[k];
        const vx_gguf_tensor *t = vx_gguf_tensor_at(g, (int64_t)k);
        CHECKF(strcmp(t->name, e->name) == 0 && t->type == e->type && t->n_dims == e->n_dims,
               "%s: tensor %zu header", how, k);
        CHECKF(memcmp(t->ne, e->ne, sizeof t->ne) == 0, "%s: tensor %s shape", how, e->name);
        CHECKF(t->size == e->size && t->offset % 64 == 0 && t->offset == expect_off,
               "%s: tensor %s size %llu offset %llu", how, e->name,
               (unsigned long long)t->size, (unsigned long long)t->offset);
        CHECKF(((uintptr_t)t->data - (uintptr_t)vx_gguf_tensor_at(g, 0)->data) % 64 == 0,
               "%s: %s data alignment", how, e->name);
        CHECKF(e->size == 0 || memcmp(t->data, e->data, e->size) == 0, "%s: tensor %s bytes",
               how, e->name);
        CHECK(vx_gguf_find_tensor(g, e->name) == t);
        expect_off = (t->offset + t->size + 63) / 64 * 64;
    }
    CHECK(vx_gguf_find_tensor(g, "absent") == NULL);
    CHECKF(vx_gguf_file_size(g) == vx_gguf_data_offset(g) + expect_off, "%s: file size", how);
}

static void test_roundtrip(void) {
    char path[512], err[VX_ERRMSG_MAX];
    tpath(path, sizeof path, "roundtrip.gguf");
    vx_gguf_writer *w = build_roundtrip();
    CHECK(vx_gguf_write_file(w, path, err, sizeof err) == VX_OK);
    vx_gguf_writer_free(w);
    CHECK(count_temp_files() == 0);

    vx_gguf *g = NULL;
    vx_status st = vx_gguf_open(path, &g, err, sizeof err);
    CHECKF(st == VX_OK, "open: %s", err);
    if (st == VX_OK) {
        check_roundtrip(g, "file");
        vx_gguf_close(g);
    }
    size_t n;
    char *img = vx_test_read_file(path, &n);
    CHECK(img != NULL);
    if (img) {
        /* open_mem on an image at a 64-aligned address: data stays aligned */
        void *mem = aligned_alloc(64, (n + 63) / 64 * 64);
        memcpy(mem, img, n);
        st = vx_gguf_open_mem(mem, n, &g, err, sizeof err);
        CHECKF(st == VX_OK, "open_mem: %s", err);
        if (st == VX_OK) {
            check_roundtrip(g, "mem");
            vx_gguf_close(g);
        }
        free(mem);
        free(img);
    }

    /* copied data survives the caller's buffer changing before the write */
    w = vx_gguf_writer_init();
    uint8_t buf[64];
    int64_t ne[1] = {16};
    memset(buf, 0x11, sizeof buf);
    CHECK(vx_gguf_add_tensor(w, "copied", VX_TYPE_F32, 1, ne, buf, 64, false) == VX_OK);
    memset(buf, 0x22, sizeof buf);
    CHECK(vx_gguf_add_tensor(w, "borrowed", VX_TYPE_F32, 1, ne, buf, 64, true) == VX_OK);
    memset(buf, 0x33, sizeof buf);
    CHECK(vx_gguf_write_file(w, path, err, sizeof err) == VX_OK);
    vx_gguf_writer_free(w);
    if (vx_gguf_open(path, &g, err, sizeof err) == VX_OK) {
        const vx_gguf_tensor *a = vx_gguf_find_tensor(g, "copied");
        const vx_gguf_tensor *b2 = vx_gguf_find_tensor(g, "borrowed");
        CHECK(a && ((const uint8_t *)a->data)[0] == 0x11 && ((const uint8_t *)a->data)[63] == 0x11);
        CHECK(b2 && ((const uint8_t *)b2->data)[0] == 0x33);
        CHECK(vx_gguf_alignment(g) == 32 && b2 && b2->offset == 64);
        vx_gguf_close(g);
    } else {
        CHECKF(0, "reopen: %s", err);
    }

    /* an empty writer makes a valid empty file: header only */
    w = vx_gguf_writer_init();
    CHECK(vx_gguf_write_file(w, path, err, sizeof err) == VX_OK);
    vx_gguf_writer_free(w);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size == 24);
    if (vx_gguf_open(path, &g, err, sizeof err) == VX_OK) {
        CHECK(vx_gguf_n_kv(g) == 0 && vx_gguf_n_tensors(g) == 0);
        vx_gguf_close(g);
    } else {
        CHECKF(0, "empty: %s", err);
    }
    unlink(path);
    for (size_t k = 0; k < N_RT; k++) {
        free(rt_tensors[k].data);
        rt_tensors[k].data = NULL;
    }
}

/* ------------------------------------------------------ writer validation */

static void test_writer_validation(void) {
    vx_gguf_writer *w = vx_gguf_writer_init();
    uint32_t v = 1;
    uint8_t data[4096] = {0};
    int64_t ne[5] = {32, 2, 1, 1, 1};
    char *toolong = malloc(65537);
    memset(toolong, 'x', 65536);
    toolong[65536] = 0;

    CHECK(vx_gguf_set_u32(NULL, "k", 1) == VX_EINVAL);
    CHECK(vx_gguf_set_u32(w, NULL, 1) == VX_EINVAL);
    CHECK(vx_gguf_set_u32(w, "", 1) == VX_EINVAL);
    CHECK(vx_gguf_set_u32(w, toolong, 1) == VX_EINVAL);
    CHECK(vx_gguf_set_str(w, "k", NULL) == VX_EINVAL);
    CHECK(vx_gguf_set_val(w, "k", VX_GGUF_ARRAY, &v) == VX_EINVAL);
    CHECK(vx_gguf_set_val(w, "k", (vx_gguf_type)13, &v) == VX_EINVAL);
    CHECK(vx_gguf_set_val(w, "k", VX_GGUF_UINT32, NULL) == VX_EINVAL);
    CHECK(vx_gguf_set_arr(w, "k", VX_GGUF_ARRAY, &v, 1) == VX_EINVAL);
    CHECK(vx_gguf_set_arr(w, "k", VX_GGUF_STRING, &v, 1) == VX_EINVAL);
    CHECK(vx_gguf_set_arr(w, "k", (vx_gguf_type)-1, &v, 1) == VX_EINVAL);
    CHECK(vx_gguf_set_arr(w, "k", VX_GGUF_UINT32, NULL, 3) == VX_EINVAL);
    CHECK(vx_gguf_set_arr(w, "k", VX_GGUF_UINT64, &v, UINT64_MAX / 4) == VX_ENOMEM);
    const char *with_null[] = {"a", NULL};
    CHECK(vx_gguf_set_arr_str(w, "k", with_null, 2) == VX_EINVAL);
    CHECK(vx_gguf_set_arr_str(w, "k", NULL, 1) == VX_EINVAL);
    CHECK(vx_gguf_copy_kv(w, NULL) == VX_EINVAL);

    /* tensors */
    size_t q8 = vx_row_size(VX_TYPE_Q8_0, 32) * 2;
    CHECK(vx_gguf_add_tensor(w, "t", VX_TYPE_Q8_0, 2, ne, data, q8, false) == VX_OK);
    CHECK(vx_gguf_add_tensor(w, "t", VX_TYPE_Q8_0, 2, ne, data, q8, false) == VX_EINVAL); /* dup */
    CHECK(vx_gguf_add_tensor(w, "t2", VX_TYPE_Q8_0, 2, ne, data, q8 - 1, false) == VX_EINVAL);
    CHECK(vx_gguf_add_tensor(w, "t2", VX_TYPE_Q8_0, 2, ne, data, q8 + 1, false) == VX_EINVAL);
    CHECK(vx_gguf_add_tensor(w, "t2", 4, 2, ne, data, q8, false) == VX_EINVAL); /* removed id */
    CHECK(vx_gguf_add_tensor(w, "t2", 99, 2, ne, data, q8, false) == VX_EINVAL);
    CHECK(vx_gguf_add_tensor(w, "t2", -1, 2, ne, data, q8, false) == VX_EINVAL);
    CHECK(vx_gguf_add_tensor(w, "t2", VX_TYPE_Q8_0, 0, ne, data, q8, false) == VX_EINVAL);
    CHECK(vx_gguf_add_tensor(w, "t2", VX_TYPE_Q8_0, 5, ne, data, q8, false) == VX_EINVAL);
    CHECK(vx_gguf_add_tensor(w, "t2", VX_TYPE_Q8_0, 2, ne, NULL, q8, false) == VX_EINVAL);
    CHECK(vx_gguf_add_tensor(w, "", VX_TYPE_Q8_0, 2, ne, data, q8, false) == VX_EINVAL);
    CHECK(vx_gguf_add_tensor(w, NULL, VX_TYPE_Q8_0, 2, ne, data, q8, false) == VX_EINVAL);
    CHECK(vx_gguf_add_tensor(w, toolong, VX_TYPE_Q8_0, 2, ne, data, q8, false) == VX_EINVAL);
    CHECK(vx_gguf_add_tensor(w, "t2", VX_TYPE_Q8_0, 2, NULL, data, q8, false) == VX_EINVAL);
    int64_t bad_row[2] = {33, 2}; /* not a multiple of 32 */
    CHECK(vx_gguf_add_tensor(w, "t2", VX_TYPE_Q8_0, 2, bad_row, data, 68, false) == VX_EINVAL);
    int64_t neg[2] = {32, -2};
    CHECK(vx_gguf_add_tensor(w, "t2", VX_TYPE_F32, 2, neg, data, 0, false) == VX_EINVAL);
    int64_t huge[3] = {1ll << 32, 1ll << 32, 1};
    CHECK(vx_gguf_add_tensor(w, "t2", VX_TYPE_F32, 3, huge, data, 0, false) == VX_EINVAL);
    int64_t big[2] = {1ll << 40, 1ll << 20}; /* 2^60 elements: fine; 2^62 bytes: wrong size */
    CHECK(vx_gguf_add_tensor(w, "t2", VX_TYPE_F32, 2, big, data, 64, true) == VX_EINVAL);
    int64_t hidden[3] = {1ll << 62, 0, 1ll << 62}; /* no bytes, but ne0 * ne2 overflows */
    CHECK(vx_gguf_add_tensor(w, "t2", VX_TYPE_F32, 3, hidden, data, 0, true) == VX_EINVAL);
    int64_t wide[2] = {1ll << 62, 0}; /* 2^62 F64 elements per row: 2^65 bytes */
    CHECK(vx_gguf_add_tensor(w, "t2", VX_TYPE_F64, 2, wide, data, 0, true) == VX_EINVAL);
    wide[0] = 1ll << 60; /* 2^63 bytes per row, zero rows: a valid empty tensor */
    CHECK(vx_gguf_add_tensor(w, "t3", VX_TYPE_F64, 2, wide, NULL, 0, true) == VX_OK);
    free(toolong);

    /* an invalid general.alignment is refused at write time */
    char path[512], err[VX_ERRMSG_MAX];
    tpath(path, sizeof path, "badalign.gguf");
    const uint32_t bad[] = {0, 3, 48, 1u << 17};
    for (size_t i = 0; i < 4; i++) {
        CHECK(vx_gguf_set_u32(w, "general.alignment", bad[i]) == VX_OK);
        err[0] = 0;
        CHECK(vx_gguf_write_file(w, path, err, sizeof err) == VX_EINVAL);
        CHECKF(strstr(err, "general.alignment"), "message: %s", err);
    }
    uint64_t a64 = 32;
    CHECK(vx_gguf_set_val(w, "general.alignment", VX_GGUF_UINT64, &a64) == VX_OK);
    CHECK(vx_gguf_write_file(w, path, err, sizeof err) == VX_EINVAL);
    CHECK(!file_exists(path) && count_temp_files() == 0);
    CHECK(vx_gguf_set_u32(w, "general.alignment", 1) == VX_OK); /* 1 is a power of two */
    CHECK(vx_gguf_write_file(w, path, err, sizeof err) == VX_OK);
    CHECK(vx_gguf_write_file(NULL, path, err, sizeof err) == VX_EINVAL);
    CHECK(vx_gguf_write_file(w, "", err, sizeof err) == VX_EINVAL);
    vx_gguf *g = NULL;
    if (vx_gguf_open(path, &g, err, sizeof err) == VX_OK) {
        CHECK(vx_gguf_alignment(g) == 1 && vx_gguf_n_tensors(g) == 2);
        vx_gguf_close(g);
    } else {
        CHECKF(0, "align 1: %s", err);
    }
    unlink(path);
    vx_gguf_writer_free(w);
    vx_gguf_writer_free(NULL);
}

/* The writer's name index (hashed since session 25; it was a linear scan,
 * quadratic in the keys and tensors of a file): 5000 keys set twice keep
 * their first position and take the second value, and a tensor name
 * repeated after the index has grown several times is refused. */
static void test_writer_index(void) {
    enum { NK = 5000, NT = 3000 };
    vx_gguf_writer *w = vx_gguf_writer_init();
    char key[32], err[VX_ERRMSG_MAX], path[512];
    int bad = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < NK; i++) {
            snprintf(key, sizeof key, "k.%d", (i * 7919) % NK);
            bad += vx_gguf_set_u32(w, key, (uint32_t)((i * 7919) % NK + 100000 * pass)) != VX_OK;
        }
    const int64_t ne[1] = {1};
    static const float one = 1.0f;
    for (int i = 0; i < NT; i++) {
        snprintf(key, sizeof key, "t.%d", i);
        bad += vx_gguf_add_tensor(w, key, VX_TYPE_F32, 1, ne, &one, sizeof one, true) != VX_OK;
    }
    CHECKF(bad == 0, "%d calls failed", bad);
    CHECK(vx_gguf_add_tensor(w, "t.1234", VX_TYPE_F32, 1, ne, &one, sizeof one, true) == VX_EINVAL);
    CHECK(vx_gguf_add_tensor(w, "t.0", VX_TYPE_F32, 1, ne, &one, sizeof one, true) == VX_EINVAL);
    tpath(path, sizeof path, "index.gguf");
    CHECK(vx_gguf_write_file(w, path, err, sizeof err) == VX_OK);
    vx_gguf_writer_free(w);
    vx_gguf *g = NULL;
    if (vx_gguf_open(path, &g, err, sizeof err) != VX_OK) {
        CHECKF(0, "index file: %s", err);
        unlink(path);
        return;
    }
    CHECK(vx_gguf_n_kv(g) == NK && vx_gguf_n_tensors(g) == NT);
    bad = 0;
    for (int i = 0; i < NK && vx_gguf_n_kv(g) == NK; i++) {
        const int k = (i * 7919) % NK;
        int64_t v = -1;
        snprintf(key, sizeof key, "k.%d", k);
        bad += strcmp(vx_gguf_kv_at(g, i)->key, key) != 0 || vx_gguf_get_i64(g, key, &v) != 1 || v != k + 100000;
    }
    CHECKF(bad == 0, "%d keys out of place or with the first value", bad);
    vx_gguf_close(g);
    unlink(path);
}

/* Write failures: missing directory, file-size limit mid-write. The final
 * name must keep its old content and no temp file may be left behind. */
static void test_write_errors(void) {
    char path[512], err[VX_ERRMSG_MAX];
    vx_gguf_writer *w = vx_gguf_writer_init();
    CHECK(vx_gguf_set_str(w, "general.architecture", "llama") == VX_OK);

    tpath(path, sizeof path, "no/such/dir/x.gguf");
    err[0] = 0;
    CHECK(vx_gguf_write_file(w, path, err, sizeof err) == VX_EIO);
    CHECKF(strstr(err, "ENOENT") && strstr(err, path), "message: %s", err);

    tpath(path, sizeof path, "limit.gguf");
    CHECK(vx_gguf_write_file(w, path, err, sizeof err) == VX_OK);
    size_t old_n;
    char *old = vx_test_read_file(path, &old_n);

    size_t big = 256 * 1024;
    uint8_t *data = calloc(1, big);
    int64_t ne[1] = {(int64_t)(big / 4)};
    CHECK(vx_gguf_add_tensor(w, "big", VX_TYPE_F32, 1, ne, data, big, true) == VX_OK);
    struct rlimit lim, small;
    CHECK(getrlimit(RLIMIT_FSIZE, &lim) == 0);
    small = lim;
    small.rlim_cur = 64 * 1024;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &small) == 0) {
        err[0] = 0;
        vx_status st = vx_gguf_write_file(w, path, err, sizeof err);
        setrlimit(RLIMIT_FSIZE, &lim);
        CHECKF(st == VX_EIO && strstr(err, "EFBIG") && strstr(err, "writing"), "status %d: %s",
               st, err);
        size_t now_n;
        char *now = vx_test_read_file(path, &now_n);
        CHECK(old && now && now_n == old_n && memcmp(old, now, old_n) == 0);
        free(now);
        CHECK(count_temp_files() == 0);
    } else {
        printf("test_gguf: setrlimit failed, file-size-limit check skipped\n");
    }
    signal(SIGXFSZ, prev);
    /* and with the limit gone the same writer succeeds and replaces the file */
    CHECK(vx_gguf_write_file(w, path, err, sizeof err) == VX_OK);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && (size_t)sb.st_size > big);
    /* a directory in the way of the final name: refused before any writing
     * (it was the rename that failed, after all of it) */
    char dpath[512];
    tpath(dpath, sizeof dpath, "adir.gguf");
    CHECK(mkdir(dpath, 0755) == 0);
    char inner[600];
    snprintf(inner, sizeof inner, "%s/keep", dpath);
    FILE *f = fopen(inner, "w");
    if (f) fclose(f);
    err[0] = 0;
    CHECK(vx_gguf_write_file(w, dpath, err, sizeof err) == VX_EIO);
    CHECKF(strstr(err, "not a regular file") && strstr(err, dpath), "message: %s", err);
    CHECK(count_temp_files() == 0);
    unlink(inner);
    rmdir(dpath);
    unlink(path);
    free(old);
    free(data);
    vx_gguf_writer_free(w);
}

/* -------------------------------------------------------------- fixtures */

/* Rewrites src with copy_kv + the same tensors (borrowed from the mapping)
 * and checks that the result reads back identically; real files written by
 * llama.cpp's gguf writer use the same layout, so the bytes match too. */
static void rewrite_and_compare(const char *src_path, const char *label) {
    char path[512], err[VX_ERRMSG_MAX];
    tpath(path, sizeof path, "rewrite.gguf");
    vx_gguf *g = NULL;
    vx_status st = vx_gguf_open(src_path, &g, err, sizeof err);
    CHECKF(st == VX_OK, "%s: %s", label, err);
    if (st) return;
    vx_gguf_writer *w = vx_gguf_writer_init();
    CHECK(vx_gguf_copy_kv(w, g) == VX_OK);
    for (int64_t i = 0; i < vx_gguf_n_tensors(g); i++) {
        const vx_gguf_tensor *t = vx_gguf_tensor_at(g, i);
        CHECK(vx_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size, true) ==
              VX_OK);
    }
    st = vx_gguf_write_file(w, path, err, sizeof err);
    CHECKF(st == VX_OK, "%s: write: %s", label, err);
    vx_gguf_writer_free(w);

    vx_gguf *h = NULL;
    st = vx_gguf_open(path, &h, err, sizeof err);
    CHECKF(st == VX_OK, "%s: reopen: %s", label, err);
    if (st == VX_OK) {
        CHECKF(vx_gguf_n_kv(h) == vx_gguf_n_kv(g) && vx_gguf_n_tensors(h) == vx_gguf_n_tensors(g),
               "%s: counts", label);
        for (int64_t i = 0; i < vx_gguf_n_kv(g) && i < vx_gguf_n_kv(h); i++)
            CHECKF(kv_equal(vx_gguf_kv_at(g, i), vx_gguf_kv_at(h, i)), "%s: kv %s", label,
                   vx_gguf_kv_at(g, i)->key);
        for (int64_t i = 0; i < vx_gguf_n_tensors(g) && i < vx_gguf_n_tensors(h); i++)
            CHECKF(tensor_equal(vx_gguf_tensor_at(g, i), vx_gguf_tensor_at(h, i)),
                   "%s: tensor %s", label, vx_gguf_tensor_at(g, i)->name);
        CHECK(vx_gguf_data_offset(h) == vx_gguf_data_offset(g));
        vx_gguf_close(h);
    }
    size_t na, nb;
    char *a = vx_test_read_file(src_path, &na), *b = vx_test_read_file(path, &nb);
    CHECKF(a && b && na == nb && memcmp(a, b, na) == 0, "%s: rewrite is not byte-identical",
           label);
    free(a);
    free(b);
    vx_gguf_close(g);
    unlink(path);
}

static void test_fixtures(void) {
    static const struct {
        const char *rel;
        int64_t n_tensors, n_kv;
    } fx[] = {
        {"models/llama/llama-Q4_K_M.gguf", 39, 23},
        {"models/llama/llama-Q2_K.gguf", 39, 23},
        {"models/qwen2/qwen2-Q8_0.gguf", 50, 23},
        {"models/moe/moe-Q4_K_M.gguf", 23, 25},
        {"models/phi3/phi3-Q4_K_M.gguf", 27, 25},
        {"models/stories260K/stories260K.gguf", 47, 22},
        {"tokenizer/ggml-vocab-llama-spm.gguf", 0, 22},
        {"tokenizer/ggml-vocab-bert-bge.gguf", 0, 20},
    };
    char err[VX_ERRMSG_MAX];
    for (size_t i = 0; i < sizeof fx / sizeof fx[0]; i++) {
        const char *p = vx_test_fixture_path(fx[i].rel);
        char path[1024];
        snprintf(path, sizeof path, "%s", p);
        vx_gguf *g = NULL;
        vx_status st = vx_gguf_open(path, &g, err, sizeof err);
        CHECKF(st == VX_OK, "%s: %s", fx[i].rel, err);
        if (st) continue;
        CHECKF(vx_gguf_n_tensors(g) == fx[i].n_tensors && vx_gguf_n_kv(g) == fx[i].n_kv,
               "%s: %lld tensors, %lld kv", fx[i].rel, (long long)vx_gguf_n_tensors(g),
               (long long)vx_gguf_n_kv(g));
        CHECK(vx_gguf_version(g) == 3 && vx_gguf_alignment(g) == 32);
        vx_gguf_close(g);
        rewrite_and_compare(path, fx[i].rel);
    }

    /* a closer look at one mixed-type file (see the fixtures' manifest) */
    vx_gguf *g = NULL;
    if (vx_gguf_open(vx_test_fixture_path("models/llama/llama-Q4_K_M.gguf"), &g, err,
                     sizeof err) == VX_OK) {
        int count[VX_TYPE_COUNT] = {0};
        for (int64_t i = 0; i < vx_gguf_n_tensors(g); i++) count[vx_gguf_tensor_at(g, i)->type]++;
        CHECK(count[VX_TYPE_F32] == 9 && count[VX_TYPE_Q4_K] == 25 && count[VX_TYPE_Q6_K] == 5);
        const char *s;
        int64_t v;
        CHECK(vx_gguf_get_str(g, "general.architecture", &s) == 1 && strcmp(s, "llama") == 0);
        CHECK(vx_gguf_get_i64(g, "general.file_type", &v) == 1 && v == 15);
        const vx_gguf_tensor *t = vx_gguf_find_tensor(g, "blk.2.ffn_down.weight");
        CHECK(t && t->type == VX_TYPE_Q6_K && t->ne[0] == 768 && t->ne[1] == 256);
        const vx_gguf_kv *kv;
        vx_gguf_type et;
        uint64_t n;
        CHECK(vx_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, &kv) == 1 &&
              et == VX_GGUF_STRING && n == 512 && strcmp(kv->v.arr.strs[1].s, "<s>") == 0);
        vx_gguf_close(g);
    } else {
        CHECKF(0, "%s", err);
    }
}

/* ------------------------------------------------------- corrupt files */

/* A small valid file from the writer: strings, a string array, two tensors,
 * the last one ending on the alignment so there is no trailing padding
 * (a prefix that cuts only padding would still be a valid file). */
static uint8_t *small_valid(size_t *n) {
    char path[512], err[VX_ERRMSG_MAX];
    tpath(path, sizeof path, "small.gguf");
    vx_gguf_writer *w = vx_gguf_writer_init();
    const char *toks[] = {"a", "", "\xc3\xa9t\xc3\xa9"};
    float f[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t q[68];
    fill_bytes(q, sizeof q, 7);
    int64_t ne1[1] = {8}, ne2[2] = {32, 2};
    vx_gguf_set_str(w, "general.architecture", "llama");
    vx_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
    vx_gguf_set_arr(w, "x.f32s", VX_GGUF_FLOAT32, f, 3);
    vx_gguf_set_u32(w, "x.count", 3);
    vx_gguf_add_tensor(w, "b", VX_TYPE_Q8_0, 2, ne2, q, sizeof q, false);
    vx_gguf_add_tensor(w, "a", VX_TYPE_F32, 1, ne1, f, sizeof f, false);
    CHECK(vx_gguf_write_file(w, path, err, sizeof err) == VX_OK);
    vx_gguf_writer_free(w);
    uint8_t *img = (uint8_t *)vx_test_read_file(path, n);
    unlink(path);
    return img;
}

static void test_truncations(void) {
    size_t n = 0;
    uint8_t *img = small_valid(&n);
    CHECK(img != NULL && n > 100);
    if (!img) return;
    expect_mem("small valid", img, n, VX_OK, NULL);
    int bad = 0;
    for (size_t len = 0; len < n; len++) {
        uint8_t *copy = malloc(len ? len : 1);
        memcpy(copy, img, len);
        vx_gguf *g = (vx_gguf *)1;
        char err[VX_ERRMSG_MAX] = "";
        vx_status st = vx_gguf_open_mem(copy, len, &g, err, sizeof err);
        if (st != VX_EFORMAT || g != NULL ||
            !(strstr(err, "truncated") || strstr(err, "beyond the end") ||
              strstr(err, "exceeds the file"))) {
            if (bad++ < 5)
                CHECKF(0, "prefix %zu of %zu: status %d, message '%s'", len, n, st, err);
            if (st == VX_OK) vx_gguf_close(g);
        }
        free(copy);
    }
    CHECKF(bad == 0, "%d of %zu prefixes misbehaved", bad, n);
    /* a few through files: short ones are caught before mapping */
    expect_file("empty file", img, 0, VX_EFORMAT, "too short");
    expect_file("23 bytes", img, 23, VX_EFORMAT, "too short");
    expect_file("header only", img, 24, VX_EFORMAT, "truncated");
    expect_file("last byte missing", img, n - 1, VX_EFORMAT, "beyond the end");
    free(img);
}

static void test_corrupt(void) {
    bb b = {0};
    const uint64_t huge = 1ull << 60;

    /* header */
    bb_hdr(&b, 3, 0, 0);
    expect_both("minimal valid", &b, VX_OK, NULL);
    memcpy(b.p, "GGUX", 4);
    expect_both("bad magic", &b, VX_EFORMAT, "not a GGUF file");
    bb_hdr(&b, 1, 0, 0);
    expect_both("version 1", &b, VX_EUNSUPPORTED, "version 1");
    bb_hdr(&b, 99, 0, 0);
    expect_both("version 99", &b, VX_EFORMAT, "version 99");
    bb_hdr(&b, 0, 0, 0);
    expect_mem("version 0", b.p, b.n, VX_EFORMAT, "version 0");
    bb_hdr(&b, 2, 0, 0);
    expect_mem("version 2", b.p, b.n, VX_OK, NULL);
    bb_hdr(&b, 3, 0, huge);
    expect_both("n_kv 2^60", &b, VX_EFORMAT, "metadata count");
    bb_hdr(&b, 3, huge, 0);
    expect_both("n_tensors 2^60", &b, VX_EFORMAT, "tensor count");
    bb_hdr(&b, 3, UINT64_MAX, UINT64_MAX);
    expect_mem("counts UINT64_MAX", b.p, b.n, VX_EFORMAT, "count");
    bb_hdr(&b, 3, 0, 1000);
    expect_mem("n_kv beyond data", b.p, b.n, VX_EFORMAT, "truncated");
    bb_hdr(&b, 3, 1000, 0);
    expect_mem("n_tensors beyond data", b.p, b.n, VX_EFORMAT, "truncated");

    /* strings */
    bb_hdr(&b, 3, 0, 1);
    bb_u64(&b, huge);
    expect_both("key length 2^60", &b, VX_EFORMAT, "too large");
    bb_hdr(&b, 3, 0, 1);
    bb_u64(&b, UINT64_MAX);
    expect_mem("key length 2^64-1", b.p, b.n, VX_EFORMAT, "too large");
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "k");
    bb_u32(&b, VX_GGUF_STRING);
    bb_u64(&b, huge);
    expect_both("string value length 2^60", &b, VX_EFORMAT, "too large");
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "k");
    bb_u32(&b, VX_GGUF_STRING);
    bb_u64(&b, 1000);
    bb_put(&b, "abc", 3);
    expect_mem("string value past end", b.p, b.n, VX_EFORMAT, "truncated");
    bb_hdr(&b, 3, 0, 1);
    bb_strn(&b, "ab\0cd", 5);
    bb_u32(&b, VX_GGUF_UINT32);
    bb_u32(&b, 1);
    expect_both("key with NUL", &b, VX_EFORMAT, "contains a NUL byte");
    bb_hdr(&b, 3, 0, 1); /* NULs inside string values are fine (they carry a length) */
    bb_str(&b, "k");
    bb_u32(&b, VX_GGUF_STRING);
    bb_strn(&b, "x\0y", 3);
    expect_mem("value with NUL", b.p, b.n, VX_OK, NULL);

    /* value types */
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "k");
    bb_u32(&b, 13);
    bb_u32(&b, 0);
    expect_both("unknown value type 13", &b, VX_EFORMAT, "unknown value type 13");
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "k");
    bb_u32(&b, UINT32_MAX);
    expect_mem("value type 2^32-1", b.p, b.n, VX_EFORMAT, "unknown value type");
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "k");
    bb_u32(&b, VX_GGUF_ARRAY);
    bb_u32(&b, 13);
    bb_u64(&b, 1);
    bb_u32(&b, 0);
    expect_both("unknown array element type", &b, VX_EFORMAT, "unknown array element type 13");
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "k");
    bb_u32(&b, VX_GGUF_ARRAY);
    bb_u32(&b, VX_GGUF_ARRAY);
    bb_u64(&b, 1);
    bb_u32(&b, VX_GGUF_UINT8);
    bb_u64(&b, 0);
    expect_both("nested array", &b, VX_EUNSUPPORTED, "nested arrays");

    /* array counts */
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "k");
    bb_u32(&b, VX_GGUF_ARRAY);
    bb_u32(&b, VX_GGUF_UINT32);
    bb_u64(&b, huge);
    bb_u32(&b, 5);
    expect_both("u32 array count 2^60", &b, VX_EFORMAT, "truncated");
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "k");
    bb_u32(&b, VX_GGUF_ARRAY);
    bb_u32(&b, VX_GGUF_UINT64);
    bb_u64(&b, 1ull << 62);
    expect_both("u64 array bytes overflow", &b, VX_EFORMAT, "overflows");
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "k");
    bb_u32(&b, VX_GGUF_ARRAY);
    bb_u32(&b, VX_GGUF_STRING);
    bb_u64(&b, huge);
    bb_str(&b, "only one");
    expect_both("string array count 2^60", &b, VX_EFORMAT, "exceeds the file");
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "k");
    bb_u32(&b, VX_GGUF_ARRAY);
    bb_u32(&b, VX_GGUF_STRING);
    bb_u64(&b, 2);
    bb_str(&b, "one");
    bb_u64(&b, huge);
    expect_mem("string array element length 2^60", b.p, b.n, VX_EFORMAT, "too large");

    /* empty key, empty tensor name: nothing can find them, and the writer
     * refuses both (vx quantize failed on a file the reader had taken) */
    bb_hdr(&b, 3, 0, 1);
    bb_kv_u32(&b, "", 1);
    expect_both("empty key", &b, VX_EFORMAT, "metadata key 0 is empty");
    {
        const uint64_t ne1[1] = {1};
        bb_hdr(&b, 3, 1, 0);
        bb_tinfo(&b, "", 1, ne1, VX_TYPE_F32, 0);
        bb_pad(&b, 32);
        bb_zeros(&b, 32);
        expect_both("empty tensor name", &b, VX_EFORMAT, "tensor 0 has an empty name");
    }

    /* duplicate keys, general.alignment */
    bb_hdr(&b, 3, 0, 2);
    bb_kv_u32(&b, "dup", 1);
    bb_kv_u32(&b, "dup", 2);
    expect_both("duplicate keys", &b, VX_EFORMAT, "duplicate metadata key 'dup'");
    const uint32_t bad_align[] = {0, 3, 96, 1u << 17};
    for (size_t i = 0; i < 4; i++) {
        char label[64];
        snprintf(label, sizeof label, "general.alignment %u", bad_align[i]);
        bb_hdr(&b, 3, 0, 1);
        bb_kv_u32(&b, "general.alignment", bad_align[i]);
        expect_both(label, &b, VX_EFORMAT, "not a power of two");
    }
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "general.alignment");
    bb_u32(&b, VX_GGUF_UINT64);
    bb_u64(&b, 32);
    expect_both("general.alignment u64", &b, VX_EFORMAT, "not u32");
    bb_hdr(&b, 3, 0, 1);
    bb_str(&b, "general.alignment");
    bb_u32(&b, VX_GGUF_STRING);
    bb_str(&b, "32");
    expect_mem("general.alignment string", b.p, b.n, VX_EFORMAT, "not u32");
    /* general.alignment 1: F32 values at a byte that is not a multiple of 4
     * (a misaligned load in the kernels, UBSan). Data offsets 1 and 6: one
     * of them is misaligned whatever the header's length. */
    {
        const uint64_t ne1[1] = {1};
        bb_hdr(&b, 3, 2, 1);
        bb_kv_u32(&b, "general.alignment", 1);
        bb_tinfo(&b, "a", 1, ne1, VX_TYPE_F32, 1);
        bb_tinfo(&b, "b", 1, ne1, VX_TYPE_F32, 6);
        bb_zeros(&b, 10);
        expect_both("F32 data at an unaligned byte", &b, VX_EFORMAT, "not a multiple of 4, so its values cannot be read in place");
    }

    /* tensor infos: one tensor, data right after the aligned header */
    const uint64_t ne8[1] = {8};
#define ONE_TENSOR(name, nd, ne, type, off, data_bytes) \
    do {                                                \
        bb_hdr(&b, 3, 1, 0);                            \
        bb_tinfo(&b, name, nd, ne, type, off);          \
        bb_pad(&b, 32);                                 \
        bb_zeros(&b, data_bytes);                       \
    } while (0)
    ONE_TENSOR("t", 1, ne8, VX_TYPE_F32, 0, 32);
    expect_both("one valid tensor", &b, VX_OK, NULL);
    ONE_TENSOR("t", 1, ne8, 4, 0, 32);
    expect_both("tensor type 4", &b, VX_EUNSUPPORTED, "unsupported type id 4");
    ONE_TENSOR("t", 1, ne8, 1000, 0, 32);
    expect_mem("tensor type 1000", b.p, b.n, VX_EUNSUPPORTED, "unsupported type id 1000");
    ONE_TENSOR("t", 0, ne8, VX_TYPE_F32, 0, 32);
    expect_both("n_dims 0", &b, VX_EFORMAT, "0 dimensions");
    const uint64_t ne5[5] = {1, 1, 1, 1, 8};
    ONE_TENSOR("t", 5, ne5, VX_TYPE_F32, 0, 32);
    expect_both("n_dims 5", &b, VX_EFORMAT, "5 dimensions");
    const uint64_t ovf[2] = {1ull << 32, 1ull << 32};
    ONE_TENSOR("t", 2, ovf, VX_TYPE_F32, 0, 32);
    expect_both("dims product overflow", &b, VX_EFORMAT, "overflow");
    const uint64_t ovf2[4] = {1ull << 16, 1ull << 16, 1ull << 16, 1ull << 16};
    ONE_TENSOR("t", 4, ovf2, VX_TYPE_F32, 0, 32);
    expect_mem("dims product 2^64", b.p, b.n, VX_EFORMAT, "overflow");
    const uint64_t negdim[1] = {1ull << 63};
    ONE_TENSOR("t", 1, negdim, VX_TYPE_F32, 0, 32);
    expect_mem("dim 2^63", b.p, b.n, VX_EFORMAT, "overflow");
    const uint64_t bytes_ovf[2] = {1ull << 31, 1ull << 31}; /* 2^62 F64 elements: 2^65 bytes */
    ONE_TENSOR("t", 2, bytes_ovf, VX_TYPE_F64, 0, 32);
    expect_mem("tensor bytes overflow", b.p, b.n, VX_EFORMAT, "overflow");
    const uint64_t hidden[3] = {1ull << 62, 0, 1ull << 62};
    ONE_TENSOR("t", 3, hidden, VX_TYPE_F32, 0, 32);
    expect_mem("zero dim hiding an overflow", b.p, b.n, VX_EFORMAT, "overflow");
    const uint64_t wide[2] = {1ull << 62, 0};
    ONE_TENSOR("t", 2, wide, VX_TYPE_F64, 0, 32);
    expect_mem("row bytes overflow, zero rows", b.p, b.n, VX_EFORMAT, "byte size overflows");
    const uint64_t wide_ok[2] = {1ull << 60, 0};
    ONE_TENSOR("t", 2, wide_ok, VX_TYPE_F64, 0, 32);
    expect_mem("huge empty tensor", b.p, b.n, VX_OK, NULL);
    const uint64_t ne33[2] = {33, 2};
    ONE_TENSOR("t", 2, ne33, VX_TYPE_Q8_0, 0, 256);
    expect_both("row not multiple of block", &b, VX_EFORMAT, "not a multiple of the Q8_0 block");
    ONE_TENSOR("t", 1, ne8, VX_TYPE_F32, 4, 64);
    expect_both("misaligned offset", &b, VX_EFORMAT, "not aligned to 32");
    ONE_TENSOR("t", 1, ne8, VX_TYPE_F32, 0, 31);
    expect_both("data past EOF", &b, VX_EFORMAT, "beyond the end of the file");
    ONE_TENSOR("t", 1, ne8, VX_TYPE_F32, 1ull << 63, 32);
    expect_mem("offset 2^63", b.p, b.n, VX_EFORMAT, "beyond the end of the file");
    ONE_TENSOR("t", 1, ne8, VX_TYPE_F32, UINT64_MAX - 31, 32);
    expect_mem("offset near 2^64", b.p, b.n, VX_EFORMAT, "beyond the end of the file");
    bb_hdr(&b, 3, 1, 0);
    bb_tinfo(&b, "t", 1, ne8, VX_TYPE_F32, 0);
    /* no padding and no data: the data section starts past the end */
    expect_mem("infos end the file", b.p, b.n, VX_EFORMAT, "beyond the end of the file");
    bb_hdr(&b, 3, 1, 0);
    bb_strn(&b, "a\0b", 3);
    bb_u32(&b, 1);
    bb_u64(&b, 8);
    bb_u32(&b, VX_TYPE_F32);
    bb_u64(&b, 0);
    bb_pad(&b, 32);
    bb_zeros(&b, 32);
    expect_both("tensor name with NUL", &b, VX_EFORMAT, "contains a NUL byte");
#undef ONE_TENSOR

    /* two tensors */
    const uint64_t ne16[1] = {16};
    bb_hdr(&b, 3, 2, 0);
    bb_tinfo(&b, "a", 1, ne16, VX_TYPE_F32, 0);
    bb_tinfo(&b, "b", 1, ne16, VX_TYPE_F32, 32);
    bb_pad(&b, 32);
    bb_zeros(&b, 128);
    expect_both("overlapping tensors", &b, VX_EFORMAT, "overlap");
    bb_hdr(&b, 3, 2, 0);
    bb_tinfo(&b, "a", 1, ne16, VX_TYPE_F32, 64);
    bb_tinfo(&b, "b", 1, ne16, VX_TYPE_F32, 0);
    bb_pad(&b, 32);
    bb_zeros(&b, 128);
    expect_mem("two tensors out of order", b.p, b.n, VX_OK, NULL);
    bb_hdr(&b, 3, 2, 0);
    bb_tinfo(&b, "a", 1, ne16, VX_TYPE_F32, 64);
    bb_tinfo(&b, "b", 1, ne16, VX_TYPE_F32, 32);
    bb_pad(&b, 32);
    bb_zeros(&b, 128);
    expect_mem("overlap out of order", b.p, b.n, VX_EFORMAT, "overlap");
    bb_hdr(&b, 3, 2, 0);
    bb_tinfo(&b, "same", 1, ne16, VX_TYPE_F32, 0);
    bb_tinfo(&b, "same", 1, ne16, VX_TYPE_F32, 64);
    bb_pad(&b, 32);
    bb_zeros(&b, 128);
    expect_both("duplicate tensor names", &b, VX_EFORMAT, "duplicate tensor name 'same'");

    /* alignment 64 from metadata governs tensor offsets and the data start */
    bb_hdr(&b, 3, 1, 1);
    bb_kv_u32(&b, "general.alignment", 64);
    bb_tinfo(&b, "t", 1, ne16, VX_TYPE_F32, 32);
    bb_pad(&b, 64);
    bb_zeros(&b, 128);
    expect_mem("offset aligned to 32 but not 64", b.p, b.n, VX_EFORMAT, "not aligned to 64");
    free(b.p);

    /* file-level errors */
    char path[512], err[VX_ERRMSG_MAX];
    vx_gguf *g = (vx_gguf *)1;
    tpath(path, sizeof path, "does-not-exist.gguf");
    CHECK(vx_gguf_open(path, &g, err, sizeof err) == VX_EIO && g == NULL &&
          strstr(err, "No such file") && strstr(err, path));
    CHECK(vx_gguf_open(g_dir, &g, err, sizeof err) == VX_EIO && strstr(err, "not a regular file"));
    CHECK(vx_gguf_open_mem(NULL, 0, &g, NULL, 0) == VX_EFORMAT); /* no message buffer: fine */
}

/* --------------------------------------------------------- model errors */

/* Copies every kv of src except skip (the writer has no delete), through
 * the generic setters rather than copy_kv, to exercise them. */
static void copy_kv_except(vx_gguf_writer *w, const vx_gguf *src, const char *skip) {
    for (int64_t i = 0; i < vx_gguf_n_kv(src); i++) {
        const vx_gguf_kv *kv = vx_gguf_kv_at(src, i);
        if (skip && strcmp(kv->key, skip) == 0) continue;
        vx_status st;
        if (kv->type == VX_GGUF_STRING) {
            st = vx_gguf_set_str(w, kv->key, kv->v.str.s);
        } else if (kv->type == VX_GGUF_ARRAY && kv->v.arr.type == VX_GGUF_STRING) {
            const char **s = malloc((kv->v.arr.n + 1) * sizeof *s);
            for (uint64_t k = 0; k < kv->v.arr.n; k++) s[k] = kv->v.arr.strs[k].s;
            st = vx_gguf_set_arr_str(w, kv->key, s, kv->v.arr.n);
            free(s);
        } else if (kv->type == VX_GGUF_ARRAY) {
            st = vx_gguf_set_arr(w, kv->key, kv->v.arr.type, kv->v.arr.data, kv->v.arr.n);
        } else {
            union {
                uint8_t u8;
                uint16_t u16;
                uint32_t u32;
                uint64_t u64;
                float f32;
                double f64;
            } x;
            switch (vx_gguf_type_size(kv->type)) {
            case 1: x.u8 = kv->type == VX_GGUF_BOOL ? kv->v.b : (uint8_t)kv->v.u64; break;
            case 2: x.u16 = (uint16_t)kv->v.u64; break;
            case 4:
                if (kv->type == VX_GGUF_FLOAT32) x.f32 = (float)kv->v.f64;
                else x.u32 = (uint32_t)kv->v.u64;
                break;
            default:
                if (kv->type == VX_GGUF_FLOAT64) x.f64 = kv->v.f64;
                else x.u64 = kv->v.u64;
                break;
            }
            st = vx_gguf_set_val(w, kv->key, kv->type, &x);
        }
        CHECKF(st == VX_OK, "copy %s", kv->key);
    }
}

typedef struct model_case {
    const char *label;
    const char *skip_kv;     /* key left out */
    const char *skip_tensor; /* tensor left out */
    void (*edit)(vx_gguf_writer *w);
    const char *half_rows;   /* tensor written with half its rows */
    vx_status want;
    const char *want_msg;
    const char *retype;      /* tensor written as retype_to (zero data of the new size) */
    int retype_to;
    bool check_tensors;      /* load with vx_model_params.check_tensors */
} model_case;

static void edit_arch_gptj(vx_gguf_writer *w) { vx_gguf_set_str(w, "general.architecture", "gpt-j"); }
static void edit_arch_u32(vx_gguf_writer *w) { vx_gguf_set_u32(w, "general.architecture", 7); }
static void edit_blocks_absurd(vx_gguf_writer *w) { vx_gguf_set_u32(w, "llama.block_count", 1000000); }
static void edit_blocks_5(vx_gguf_writer *w) { vx_gguf_set_u32(w, "llama.block_count", 5); }
static void edit_blocks_3(vx_gguf_writer *w) { vx_gguf_set_u32(w, "llama.block_count", 3); }
static void edit_rope_type_u32(vx_gguf_writer *w) {
    vx_gguf_set_u32(w, "llama.rope.scaling.type", 3);
    vx_gguf_set_f32(w, "llama.rope.scaling.factor", 4.0f);
}
static void edit_rope_linear_negative(vx_gguf_writer *w) {
    vx_gguf_set_str(w, "llama.rope.scaling.type", "linear");
    vx_gguf_set_f32(w, "llama.rope.scaling.factor", -4.0f);
}
/* rope_freqs.weight (n_rot / 2 = 32 factors for the fixture) with a zero:
 * RoPE divides by them */
static void edit_rope_freqs_zero(vx_gguf_writer *w) {
    static float f[32];
    for (int i = 0; i < 32; i++) f[i] = i == 7 ? 0.0f : 1.0f;
    const int64_t ne[1] = {32};
    vx_gguf_add_tensor(w, "rope_freqs.weight", VX_TYPE_F32, 1, ne, f, sizeof f, true);
}
static void edit_rope_freqs_ok(vx_gguf_writer *w) {
    static float f[32];
    for (int i = 0; i < 32; i++) f[i] = 1.0f + (float)i / 8;
    const int64_t ne[1] = {32};
    vx_gguf_add_tensor(w, "rope_freqs.weight", VX_TYPE_F32, 1, ne, f, sizeof f, true);
}
static void edit_heads_0(vx_gguf_writer *w) { vx_gguf_set_u32(w, "llama.attention.head_count", 0); }
static void edit_embd_str(vx_gguf_writer *w) { vx_gguf_set_str(w, "llama.embedding_length", "256"); }
static void edit_eps_huge(vx_gguf_writer *w) {
    const double v = 1e300; /* finite as a double, not as a float */
    vx_gguf_set_val(w, "llama.attention.layer_norm_rms_epsilon", VX_GGUF_FLOAT64, &v);
}
static void edit_eps_negative(vx_gguf_writer *w) {
    vx_gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", -1e-5f);
}
/* An extra empty tensor whose rows are 2^40 floats: the reader accepts it
 * (no bytes), so check_tensors must not size a row buffer by it. */
static void edit_huge_empty(vx_gguf_writer *w) {
    const int64_t ne[2] = {(int64_t)1 << 40, 0};
    vx_gguf_add_tensor(w, "extra.weight", VX_TYPE_F32, 2, ne, NULL, 0, true);
}

static void test_model_errors(void) {
    /* designated fields: a case names only what it changes */
    static const model_case cases[] = {
        {.label = "unchanged", .want = VX_OK},
        {.label = "no architecture", .skip_kv = "general.architecture", .want = VX_EFORMAT,
         .want_msg = "general.architecture"},
        {.label = "architecture not a string", .edit = edit_arch_u32, .want = VX_EFORMAT,
         .want_msg = "general.architecture"},
        {.label = "architecture gpt-j", .edit = edit_arch_gptj, .want = VX_EUNSUPPORTED,
         .want_msg = "'gpt-j'"},
        {.label = "missing tensor", .skip_tensor = "blk.1.attn_k.weight", .want = VX_EFORMAT,
         .want_msg = "missing tensor 'blk.1.attn_k.weight'"},
        {.label = "missing output_norm", .skip_tensor = "output_norm.weight", .want = VX_EFORMAT,
         .want_msg = "output_norm.weight"},
        {.label = "wrong shape", .half_rows = "blk.0.attn_q.weight", .want = VX_EFORMAT,
         .want_msg = "tensor 'blk.0.attn_q.weight' has shape"},
        {.label = "block_count absurd", .edit = edit_blocks_absurd, .want = VX_EFORMAT,
         .want_msg = "block_count"},
        {.label = "block_count > layers", .edit = edit_blocks_5, .want = VX_EFORMAT,
         .want_msg = "blk.4."},
        {.label = "no block_count", .skip_kv = "llama.block_count", .want = VX_EFORMAT,
         .want_msg = "block_count"},
        /* fewer layers than the file has: its last layer went unused */
        {.label = "block_count < layers", .edit = edit_blocks_3, .want = VX_EFORMAT,
         .want_msg = "belongs to layer 3, but llama.block_count is 3"},
        {.label = "rope scaling type u32", .edit = edit_rope_type_u32, .want = VX_EFORMAT,
         .want_msg = "llama.rope.scaling.type is not a string"},
        {.label = "linear rope scaling factor -4", .edit = edit_rope_linear_negative, .want = VX_EFORMAT,
         .want_msg = "linear scaling needs a positive factor"},
        {.label = "rope_freqs with a zero", .edit = edit_rope_freqs_zero, .want = VX_EFORMAT,
         .want_msg = "'rope_freqs.weight': factor 7 is 0"},
        {.label = "rope_freqs positive", .edit = edit_rope_freqs_ok, .want = VX_OK},
        {.label = "head_count 0", .edit = edit_heads_0, .want = VX_EFORMAT,
         .want_msg = "head_count"},
        {.label = "embedding_length string", .edit = edit_embd_str, .want = VX_EFORMAT,
         .want_msg = "embedding_length"},
        {.label = "no vocabulary", .skip_kv = "tokenizer.ggml.tokens", .want = VX_EFORMAT,
         .want_msg = "token"},
        /* activation formats dequantize but have no matmul kernel (fuzz_model:
         * a NULL GEMV called at the first decode) */
        {.label = "Q8_K weight", .retype = "blk.0.attn_q.weight", .retype_to = VX_TYPE_Q8_K,
         .want = VX_EUNSUPPORTED,
         .want_msg = "'blk.0.attn_q.weight': type Q8_K is not supported for matrix multiplication"},
        {.label = "Q8_1 weight", .retype = "blk.1.ffn_down.weight", .retype_to = VX_TYPE_Q8_1,
         .want = VX_EUNSUPPORTED, .want_msg = "'blk.1.ffn_down.weight': type Q8_1 is not supported"},
        {.label = "Q8_1 output", .retype = "output.weight", .retype_to = VX_TYPE_Q8_1,
         .want = VX_EUNSUPPORTED, .want_msg = "'output.weight': type Q8_1 is not supported"},
        {.label = "rms epsilon beyond float", .edit = edit_eps_huge, .want = VX_EFORMAT,
         .want_msg = "layer_norm_rms_epsilon = 1e+300 is not a finite float"},
        {.label = "rms epsilon negative", .edit = edit_eps_negative, .want = VX_EFORMAT,
         .want_msg = "llama.attention.layer_norm_rms_epsilon = -1e-05 is negative"},
        {.label = "check_tensors, huge empty tensor", .edit = edit_huge_empty,
         .check_tensors = true, .want = VX_OK},
    };
    char err[VX_ERRMSG_MAX], path[512];
    vx_gguf *src = NULL;
    if (vx_gguf_open(vx_test_fixture_path("models/llama/llama-Q4_K_M.gguf"), &src, err,
                     sizeof err) != VX_OK) {
        CHECKF(0, "model fixture: %s", err);
        return;
    }
    tpath(path, sizeof path, "model.gguf");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const model_case *mc = &cases[c];
        vx_gguf_writer *w = vx_gguf_writer_init();
        void *zeros = NULL; /* data of a retyped tensor */
        copy_kv_except(w, src, mc->skip_kv);
        if (mc->edit) mc->edit(w);
        for (int64_t i = 0; i < vx_gguf_n_tensors(src); i++) {
            const vx_gguf_tensor *t = vx_gguf_tensor_at(src, i);
            if (mc->skip_tensor && strcmp(t->name, mc->skip_tensor) == 0) continue;
            int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
            uint64_t size = t->size;
            int type = t->type;
            const void *data = t->data;
            if (mc->half_rows && strcmp(t->name, mc->half_rows) == 0) {
                ne[1] /= 2;
                size /= 2;
            }
            if (mc->retype && strcmp(t->name, mc->retype) == 0) {
                type = mc->retype_to;
                size = vx_row_size((vx_type)type, ne[0]) * (uint64_t)(ne[1] * ne[2] * ne[3]);
                free(zeros);
                zeros = calloc(1, (size_t)size);
                data = zeros;
            }
            CHECK(vx_gguf_add_tensor(w, t->name, type, t->n_dims, ne, data, size, true) ==
                  VX_OK);
        }
        vx_status st = vx_gguf_write_file(w, path, err, sizeof err);
        vx_gguf_writer_free(w);
        free(zeros);
        zeros = NULL;
        CHECKF(st == VX_OK, "%s: write: %s", mc->label, err);
        vx_model *m = (vx_model *)1;
        err[0] = 0;
        vx_model_params mp = vx_model_default_params();
        mp.check_tensors = mc->check_tensors;
        st = vx_model_load(path, &mp, &m, err, sizeof err);
        CHECKF(st == mc->want, "%s: status %d (%s), want %d: %s", mc->label, st,
               vx_status_str(st), mc->want, err);
        if (mc->want != VX_OK)
            CHECKF(m == NULL && strstr(err, mc->want_msg), "%s: message '%s' lacks '%s'",
                   mc->label, err, mc->want_msg);
        if (st == VX_OK) vx_model_free(m);
    }
    /* a corrupt file goes through the GGUF reader's message */
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite("GGUF\x03\0\0\0", 1, 8, f);
        fclose(f);
    }
    vx_model *m = (vx_model *)1;
    CHECK(vx_model_load(path, NULL, &m, err, sizeof err) == VX_EFORMAT && m == NULL &&
          strstr(err, "too short"));
    unlink(path);
    vx_gguf_close(src);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/vx_test_gguf.XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_roundtrip();
    test_writer_validation();
    test_writer_index();
    test_write_errors();
    test_fixtures();
    test_truncations();
    test_corrupt();
    test_model_errors();
    CHECK(count_temp_files() == 0);
    remove_dir();
    return vx_test_finish("test_gguf");
}
