/*
 * test_safetensors.c - safetensors reader (safetensors.c):
 *   - a valid image with every dtype, a scalar, zero-element tensors, eight
 *     dimensions, escaped names, an unknown field and metadata, listed out of
 *     order: every field, the order by offset, lookups, data pointers and
 *     values, through vx_st_open_mem and through a real file;
 *   - one case per validation rule (header length, strict JSON, entry
 *     fields, dtype, shape, data_offsets, coverage of the data buffer,
 *     duplicate and empty names, \u0000, "__metadata__"): the status and a
 *     substring of the message;
 *   - files: a temporary file, a missing path, a directory, short files;
 *   - every truncation of the valid image and single-byte corruptions of its
 *     header: an error with a message or a consistent handle, never a crash
 *     (run it under the sanitizers);
 *   - headers of 100,000 tensors in reverse order and 50,000 zero-size ones
 *     at one offset (sorting and lookup must not be quadratic).
 * Headers are written with ' for " (see q()) to keep the JSON readable.
 * Temporary files go to a private directory under /tmp, removed at the end.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "safetensors.h"
#include "testutil.h"
#include "vortex.h"

static char g_dir[256];

/* --------------------------------------------------------- byte builder */

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static void buf_put(buf *b, const void *src, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            fprintf(stderr, "test_safetensors: out of memory\n");
            exit(2);
        }
        b->p = np;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
    b->p[b->n] = 0; /* text stays NUL-terminated (not counted in n) */
}

static void buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(buf *b, const char *fmt, ...) {
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        fprintf(stderr, "test_safetensors: buf_printf overflow\n");
        exit(2);
    }
    buf_put(b, tmp, (size_t)n);
}

/* The header text with every ' turned into " (malloc'd). */
static char *q(const char *s) {
    char *r = strdup(s);
    if (!r) exit(2);
    for (char *p = r; *p; p++)
        if (*p == '\'') *p = '"';
    return r;
}

/* A file image: u64 N, hdr[0..hlen), spaces up to a multiple of 8 (all
 * counted in N, as writers do), then data[0..data_n) (zeros if data is NULL). */
static buf image_n(const char *hdr, size_t hlen, const void *data, size_t data_n) {
    buf b = {0};
    uint64_t n = (hlen + 7) / 8 * 8;
    buf_put(&b, &n, 8);
    buf_put(&b, hdr, hlen);
    while (b.n < 8 + n) buf_put(&b, " ", 1);
    if (data) {
        buf_put(&b, data, data_n);
    } else {
        for (size_t i = 0; i < data_n; i++) buf_put(&b, "", 1);
    }
    return b;
}

/* Same, from a header written with ' for ". */
static buf image(const char *hdr_q, const void *data, size_t data_n) {
    char *h = q(hdr_q);
    buf b = image_n(h, strlen(h), data, data_n);
    free(h);
    return b;
}

static void set_n(buf *b, uint64_t n) { memcpy(b->p, &n, 8); }

/* ------------------------------------------------------ invariant checks */

/* What a consumer relies on for an accepted image; returns false (after
 * reporting) when something does not hold. */
static bool consistent(const vx_safetensors *st, const uint8_t *img, size_t size,
                       const char *label) {
    bool ok = true;
    uint64_t n_hdr = 0;
    memcpy(&n_hdr, img, 8);
    uint64_t at = 8 + n_hdr;
    for (int64_t i = 0; i < vx_st_n_tensors(st); i++) {
        const vx_st_tensor *t = vx_st_tensor_at(st, i);
        uint64_t n_elem = 1;
        for (int d = 0; d < t->n_dims; d++) n_elem *= (uint64_t)t->shape[d];
        ok &= t->name[0] != 0 && vx_st_find(st, t->name) == t;
        ok &= (unsigned)t->dtype < VX_ST_DTYPE_COUNT && t->n_dims >= 0 &&
              t->n_dims <= VX_ST_MAX_DIMS;
        ok &= t->n_elem == n_elem && t->size == n_elem * vx_st_dtype_size(t->dtype);
        ok &= t->offset == at && (const uint8_t *)t->data == img + t->offset;
        ok &= t->offset <= size && t->size <= size - t->offset;
        at += t->size;
    }
    ok &= at == size && vx_st_tensor_at(st, vx_st_n_tensors(st)) == NULL &&
          vx_st_tensor_at(st, -1) == NULL;
    for (int64_t i = 0; i < vx_st_n_metadata(st); i++) {
        const char *k = vx_st_metadata_key(st, i);
        ok &= k != NULL && vx_st_metadata(st, k) != NULL;
    }
    CHECKF(ok, "%s: accepted image is inconsistent", label);
    return ok;
}

/* ------------------------------------------------------ expectation helpers */

/* Parses data[0..n) from an exact-size heap copy, so ASan sees any read past
 * the end, and checks the status and that the message contains want_msg. */
static void expect_mem(const char *label, const void *data, size_t n, vx_status want,
                       const char *want_msg) {
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, data, n);
    vx_safetensors *st = (vx_safetensors *)1;
    char err[VX_ERRMSG_MAX] = "";
    vx_status s = vx_st_open_mem(copy, n, &st, err, sizeof err);
    CHECKF(s == want, "%s: status %d (%s), want %d; message: %s", label, s, vx_status_str(s), want,
           err);
    if (s != VX_OK) {
        CHECKF(st == NULL, "%s: handle not NULL on failure", label);
        CHECKF(err[0] != 0, "%s: no message", label);
    }
    if (want != VX_OK && want_msg)
        CHECKF(strstr(err, want_msg) != NULL, "%s: message '%s' lacks '%s'", label, err, want_msg);
    if (s == VX_OK) {
        consistent(st, copy, n, label);
        vx_st_close(st);
    }
    free(copy);
}

/* A header (' for ") followed by data_n zero bytes. */
static void expect_hdr(const char *label, const char *hdr_q, size_t data_n, vx_status want,
                       const char *want_msg) {
    buf b = image(hdr_q, NULL, data_n);
    expect_mem(label, b.p, b.n, want, want_msg);
    free(b.p);
}

static const char *tpath(char *p, size_t size, const char *name) {
    snprintf(p, size, "%s/%s", g_dir, name);
    return p;
}

static bool write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

/* Same through a real file: the message must also start with the path. */
static void expect_file(const char *label, const void *data, size_t n, vx_status want,
                        const char *want_msg) {
    char path[512];
    tpath(path, sizeof path, "crafted.safetensors");
    CHECK(write_file(path, data, n));
    vx_safetensors *st = (vx_safetensors *)1;
    char err[VX_ERRMSG_MAX] = "";
    vx_status s = vx_st_open(path, &st, err, sizeof err);
    CHECKF(s == want, "%s (file): status %d (%s), want %d; message: %s", label, s,
           vx_status_str(s), want, err);
    if (want != VX_OK)
        CHECKF(st == NULL && strncmp(err, path, strlen(path)) == 0 &&
                   (!want_msg || strstr(err, want_msg)),
               "%s (file): message '%s'", label, err);
    if (s == VX_OK) vx_st_close(st);
    unlink(path);
}

/* ---------------------------------------------------------- valid image */

typedef struct want_t {
    const char *name;
    vx_st_dtype dtype;
    int n_dims;
    int64_t shape[VX_ST_MAX_DIMS];
    uint64_t begin, size;
} want_t;

/* In order of offset; the header lists them otherwise. */
static const want_t g_want[] = {
    {"w", VX_ST_F32, 2, {2, 3}, 0, 24},
    {"d", VX_ST_F64, 1, {1}, 24, 8},
    {"s", VX_ST_I64, 0, {0}, 32, 8},
    {"u64", VX_ST_U64, 1, {1}, 40, 8},
    {"i32", VX_ST_I32, 1, {2}, 48, 8},
    {"u32", VX_ST_U32, 1, {1}, 56, 4},
    {"h", VX_ST_F16, 1, {3}, 60, 6},
    {"bf", VX_ST_BF16, 2, {2, 1}, 66, 4},
    {"i16", VX_ST_I16, 1, {1}, 70, 2},
    {"na\xc3\xafve/\"x\"", VX_ST_U16, 1, {1}, 72, 2},
    {"empty", VX_ST_F32, 2, {4, 0}, 74, 0},
    {"z2", VX_ST_U8, 1, {0}, 74, 0},
    {"e5", VX_ST_F8_E5M2, 1, {1}, 74, 1},
    {"e4", VX_ST_F8_E4M3, 1, {1}, 75, 1},
    {"i8", VX_ST_I8, 8, {1, 1, 1, 1, 1, 1, 1, 2}, 76, 2},
    {"u8", VX_ST_U8, 1, {3}, 78, 3},
    {"flags", VX_ST_BOOL, 1, {2}, 81, 2},
};
#define N_WANT ((int)(sizeof g_want / sizeof g_want[0]))

static const char g_valid_hdr[] =
    "{'u8':{'dtype':'U8','shape':[3],'data_offsets':[78,81]},\n"
    " 'h': {'dtype':'F16','shape':[3],'data_offsets':[60,66]},\n"
    " 'z2':{'dtype':'U8','shape':[0],'data_offsets':[74,74]},\n"
    " 'i8':{'dtype':'I8','shape':[1,1,1,1,1,1,1,2],'data_offsets':[76,78]},\n"
    " '__metadata__':{'format':'pt','note':'caf\\u00e9\\n\\ttab','empty':''},\n"
    " 'w': {'shape':[2,3],'data_offsets':[0,24],'dtype':'F32','extra':{'x':[1,2.5,null,true]}},\n"
    " 'flags':{'dtype':'BOOL','shape':[2],'data_offsets':[81,83]},\n"
    " 'empty':{'dtype':'F32','shape':[4,0],'data_offsets':[74,74]},\n"
    " 'e4':{'dtype':'F8_E4M3','shape':[1],'data_offsets':[75,76]},\n"
    " 'e5':{'dtype':'F8_E5M2','shape':[1],'data_offsets':[74,75]},\n"
    " 's':{'dtype':'I64','shape':[],'data_offsets':[32,40]},\n"
    " 'i16':{'dtype':'I16','shape':[1],'data_offsets':[70,72]},\n"
    " 'na\\u00efve\\/\\\"x\\\"':{'dtype':'U16','shape':[1],'data_offsets':[72,74]},\n"
    " 'bf':{'dtype':'BF16','shape':[2,1],'data_offsets':[66,70]},\n"
    " 'u32':{'dtype':'U32','shape':[1],'data_offsets':[56,60]},\n"
    " 'i32':{'dtype':'I32','shape':[2],'data_offsets':[48,56]},\n"
    " 'u64':{'dtype':'U64','shape':[1],'data_offsets':[40,48]},\n"
    " 'd':{'dtype':'F64','shape':[1],'data_offsets':[24,32]}\n"
    "}";

/* The 83 data bytes matching g_want. */
static buf valid_data(void) {
    buf d = {0};
    for (int i = 0; i < 6; i++) {
        float f = 0.5f * (float)i - 1;
        buf_put(&d, &f, 4);
    }
    double dv = 3.25;
    buf_put(&d, &dv, 8);
    int64_t s = -7;
    buf_put(&d, &s, 8);
    uint64_t u64 = UINT64_MAX;
    buf_put(&d, &u64, 8);
    int32_t i32[2] = {-5, 7};
    buf_put(&d, i32, 8);
    uint32_t u32 = 4000000000u;
    buf_put(&d, &u32, 4);
    uint16_t h[3] = {0x3c00, 0xc000, 0x3800}; /* 1, -2, 0.5 */
    buf_put(&d, h, 6);
    uint16_t bf[2] = {0x3fc0, 0xc040}; /* 1.5, -3 */
    buf_put(&d, bf, 4);
    int16_t i16 = -300;
    buf_put(&d, &i16, 2);
    uint16_t u16 = 60000;
    buf_put(&d, &u16, 2);
    buf_put(&d, "\x3c\x38", 2); /* e5, e4 */
    buf_put(&d, "\xff\x02", 2); /* i8: -1, 2 */
    buf_put(&d, "\x01\x02\xff", 3);
    buf_put(&d, "\x01\x00", 2);
    return d;
}

static buf valid_image(void) {
    buf d = valid_data();
    buf b = image(g_valid_hdr, d.p, d.n);
    free(d.p);
    return b;
}

static void check_valid(const vx_safetensors *st, const uint8_t *img, size_t size,
                        const char *label) {
    uint64_t n_hdr;
    memcpy(&n_hdr, img, 8);
    CHECKF(vx_st_n_tensors(st) == N_WANT, "%s: %lld tensors", label,
           (long long)vx_st_n_tensors(st));
    for (int i = 0; i < N_WANT && i < vx_st_n_tensors(st); i++) {
        const want_t *w = &g_want[i];
        const vx_st_tensor *t = vx_st_tensor_at(st, i);
        CHECKF(strcmp(t->name, w->name) == 0, "%s: tensor %d is '%s', want '%s'", label, i,
               t->name, w->name);
        CHECKF(vx_st_find(st, w->name) == t, "%s: find('%s')", label, w->name);
        CHECKF(t->dtype == w->dtype && t->n_dims == w->n_dims, "%s: '%s' dtype %s dims %d", label,
               w->name, vx_st_dtype_name(t->dtype), t->n_dims);
        uint64_t n_elem = 1;
        for (int d = 0; d < VX_ST_MAX_DIMS; d++) {
            int64_t want = d < w->n_dims ? w->shape[d] : 1;
            CHECKF(t->shape[d] == want, "%s: '%s' shape[%d] = %lld", label, w->name, d,
                   (long long)t->shape[d]);
            n_elem *= (uint64_t)want;
        }
        CHECKF(t->n_elem == n_elem && t->size == w->size, "%s: '%s' n_elem %llu size %llu", label,
               w->name, (unsigned long long)t->n_elem, (unsigned long long)t->size);
        CHECKF(t->offset == 8 + n_hdr + w->begin && (const uint8_t *)t->data == img + t->offset,
               "%s: '%s' offset %llu", label, w->name, (unsigned long long)t->offset);
    }
    CHECK(vx_st_find(st, "nope") == NULL && vx_st_find(st, "") == NULL &&
          vx_st_find(st, "__metadata__") == NULL && vx_st_find(st, NULL) == NULL);
    CHECK(vx_st_tensor_at(st, -1) == NULL && vx_st_tensor_at(st, N_WANT) == NULL);
    CHECK(vx_st_find(st, "z2")->n_elem == 0 && vx_st_find(st, "s")->n_elem == 1);
    consistent(st, img, size, label);

    /* values (read with memcpy: the format does not promise alignment) */
    float f[6];
    memcpy(f, vx_st_find(st, "w")->data, sizeof f);
    for (int i = 0; i < 6; i++) CHECK(f[i] == 0.5f * (float)i - 1);
    double dv;
    memcpy(&dv, vx_st_find(st, "d")->data, 8);
    CHECK(dv == 3.25);
    int64_t s;
    memcpy(&s, vx_st_find(st, "s")->data, 8);
    CHECK(s == -7);
    uint64_t u64;
    memcpy(&u64, vx_st_find(st, "u64")->data, 8);
    CHECK(u64 == UINT64_MAX);
    int32_t i32[2];
    memcpy(i32, vx_st_find(st, "i32")->data, 8);
    CHECK(i32[0] == -5 && i32[1] == 7);
    uint32_t u32;
    memcpy(&u32, vx_st_find(st, "u32")->data, 4);
    CHECK(u32 == 4000000000u);
    uint16_t h[3];
    memcpy(h, vx_st_find(st, "h")->data, 6);
    CHECK(vx_fp16_to_fp32(h[0]) == 1.0f && vx_fp16_to_fp32(h[1]) == -2.0f &&
          vx_fp16_to_fp32(h[2]) == 0.5f);
    uint16_t bf[2];
    memcpy(bf, vx_st_find(st, "bf")->data, 4);
    CHECK(vx_bf16_to_fp32(bf[0]) == 1.5f && vx_bf16_to_fp32(bf[1]) == -3.0f);
    int16_t i16;
    memcpy(&i16, vx_st_find(st, "i16")->data, 2);
    CHECK(i16 == -300);
    uint16_t u16;
    memcpy(&u16, vx_st_find(st, "na\xc3\xafve/\"x\"")->data, 2);
    CHECK(u16 == 60000);
    const uint8_t *p = vx_st_find(st, "e5")->data;
    CHECK(p[0] == 0x3c && p[1] == 0x38);
    const int8_t *i8 = vx_st_find(st, "i8")->data;
    CHECK(i8[0] == -1 && i8[1] == 2);
    p = vx_st_find(st, "u8")->data;
    CHECK(p[0] == 1 && p[1] == 2 && p[2] == 255);
    p = vx_st_find(st, "flags")->data;
    CHECK(p[0] == 1 && p[1] == 0 && p + 2 == img + size);

    /* metadata */
    CHECK(vx_st_n_metadata(st) == 3);
    CHECK(vx_st_metadata(st, "format") && strcmp(vx_st_metadata(st, "format"), "pt") == 0);
    CHECK(vx_st_metadata(st, "note") &&
          strcmp(vx_st_metadata(st, "note"), "caf\xc3\xa9\n\ttab") == 0);
    CHECK(vx_st_metadata(st, "empty") && vx_st_metadata(st, "empty")[0] == 0);
    CHECK(vx_st_metadata(st, "w") == NULL && vx_st_metadata(st, "nope") == NULL &&
          vx_st_metadata(st, NULL) == NULL);
    CHECK(vx_st_metadata_key(st, 0) && strcmp(vx_st_metadata_key(st, 0), "format") == 0);
    CHECK(vx_st_metadata_key(st, 2) && strcmp(vx_st_metadata_key(st, 2), "empty") == 0);
    CHECK(vx_st_metadata_key(st, 3) == NULL && vx_st_metadata_key(st, -1) == NULL);
}

static void test_dtypes(void) {
    static const char *const names[] = {"BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3",
                                        "I16", "U16", "F16", "BF16", "I32",
                                        "U32", "F32", "F64", "I64", "U64"};
    static const size_t sizes[] = {1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8};
    CHECK(sizeof names / sizeof names[0] == VX_ST_DTYPE_COUNT);
    for (int t = 0; t < VX_ST_DTYPE_COUNT; t++) {
        CHECKF(strcmp(vx_st_dtype_name((vx_st_dtype)t), names[t]) == 0, "dtype %d name %s", t,
               vx_st_dtype_name((vx_st_dtype)t));
        CHECKF(vx_st_dtype_size((vx_st_dtype)t) == sizes[t], "dtype %d size", t);
        /* and each one parses as the file spells it */
        char hdr[160];
        snprintf(hdr, sizeof hdr, "{'t':{'dtype':'%s','shape':[3],'data_offsets':[0,%zu]}}",
                 names[t], 3 * sizes[t]);
        buf b = image(hdr, NULL, 3 * sizes[t]);
        vx_safetensors *st = NULL;
        char err[VX_ERRMSG_MAX] = "";
        CHECKF(vx_st_open_mem(b.p, b.n, &st, err, sizeof err) == VX_OK, "%s: %s", names[t], err);
        if (st) {
            CHECK(vx_st_find(st, "t")->dtype == (vx_st_dtype)t);
            vx_st_close(st);
        }
        free(b.p);
    }
    CHECK(strcmp(vx_st_dtype_name(VX_ST_DTYPE_COUNT), "?") == 0 &&
          strcmp(vx_st_dtype_name((vx_st_dtype)-1), "?") == 0);
    CHECK(vx_st_dtype_size(VX_ST_DTYPE_COUNT) == 0 && vx_st_dtype_size((vx_st_dtype)-1) == 0);
    vx_st_close(NULL);
    CHECK(vx_st_n_tensors(NULL) == 0 && vx_st_n_metadata(NULL) == 0 &&
          vx_st_find(NULL, "a") == NULL && vx_st_metadata(NULL, "a") == NULL &&
          vx_st_tensor_at(NULL, 0) == NULL && vx_st_metadata_key(NULL, 0) == NULL);
}

static void test_valid(void) {
    buf b = valid_image();
    /* an exact-size heap copy, so ASan sees reads past the end */
    uint8_t *img = malloc(b.n);
    memcpy(img, b.p, b.n);
    vx_safetensors *st = NULL;
    char err[VX_ERRMSG_MAX] = "";
    vx_status s = vx_st_open_mem(img, b.n, &st, err, sizeof err);
    CHECKF(s == VX_OK && st != NULL, "valid image: %s", err);
    if (st) {
        check_valid(st, img, b.n, "mem");
        vx_st_close(st);
    }

    char path[512];
    tpath(path, sizeof path, "valid.safetensors");
    CHECK(write_file(path, b.p, b.n));
    st = NULL;
    s = vx_st_open(path, &st, err, sizeof err);
    CHECKF(s == VX_OK && st != NULL, "valid file: %s", err);
    if (st) {
        const uint8_t *base = (const uint8_t *)vx_st_tensor_at(st, 0)->data -
                              vx_st_tensor_at(st, 0)->offset;
        CHECK(base != img && memcmp(base, img, b.n) == 0); /* the mapping */
        check_valid(st, base, b.n, "file");
        vx_st_close(st);
    }
    unlink(path);

    /* the smallest files: no tensors, maybe padded with any JSON whitespace */
    expect_mem("{}", "\x02\0\0\0\0\0\0\0{}", 10, VX_OK, NULL);
    expect_mem("{} padded", "\x08\0\0\0\0\0\0\0{} \t\r\n  ", 16, VX_OK, NULL);
    expect_hdr("metadata only", "{'__metadata__':{}}", 0, VX_OK, NULL);
    expect_hdr("only zero-element tensors",
               "{'z':{'dtype':'F32','shape':[0,5],'data_offsets':[0,0]},"
               " 'y':{'dtype':'F32','shape':[5,0],'data_offsets':[0,0]}}",
               0, VX_OK, NULL);
    /* the largest zero-element shape: elements (zeros as 1) x 4 bytes = 2^62 */
    expect_hdr("zero-element, 2^60 span",
               "{'z':{'dtype':'F32','shape':[1073741824,0,1073741824],'data_offsets':[0,0]}}", 0,
               VX_OK, NULL);
    /* documented leniency: integral numbers written as floats */
    expect_hdr("shape 2.0", "{'a':{'dtype':'U8','shape':[2.0],'data_offsets':[0,2e0]}}", 2, VX_OK,
               NULL);
    /* an escaped backslash before u0000 is not a NUL */
    buf e = image("{'a\\\\u0000b':{'dtype':'U8','shape':[],'data_offsets':[0,1]}}", NULL, 1);
    st = NULL;
    CHECK(vx_st_open_mem(e.p, e.n, &st, err, sizeof err) == VX_OK && st &&
          vx_st_find(st, "a\\u0000b") != NULL);
    vx_st_close(st);
    free(e.p);
    free(b.p);
    free(img);
}

/* ------------------------------------------------------- validation rules */

static void test_header_length(void) {
    buf b = image("{}", NULL, 0); /* 16 bytes: N = 8 */
    for (size_t n = 0; n < 8; n++) {
        char label[32];
        snprintf(label, sizeof label, "%zu-byte file", n);
        expect_mem(label, b.p, n, VX_EFORMAT, "too short");
    }
    set_n(&b, 0);
    expect_mem("N = 0", b.p, b.n, VX_EFORMAT, "header length is 0");
    set_n(&b, 9);
    expect_mem("N = size - 7", b.p, b.n, VX_EFORMAT, "header length 9 exceeds the 8 bytes");
    set_n(&b, VX_ST_MAX_HEADER);
    expect_mem("N = cap", b.p, b.n, VX_EFORMAT, "truncated");
    set_n(&b, VX_ST_MAX_HEADER + 1ull);
    expect_mem("N = cap + 1", b.p, b.n, VX_EFORMAT, "above the limit of 100000000");
    set_n(&b, UINT64_MAX);
    expect_mem("N = 2^64 - 1", b.p, b.n, VX_EFORMAT, "above the limit");
    set_n(&b, 8);
    expect_mem("N restored", b.p, b.n, VX_OK, NULL);
    free(b.p);
    /* a GGUF file is not mistaken for one */
    expect_mem("GGUF magic", "GGUF\x03\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 24, VX_EFORMAT,
               "above the limit");
}

/* Strict JSON: what cJSON would let through and serde_json refuses, and
 * what cJSON refuses itself. */
static void test_json(void) {
    static const struct {
        const char *hdr, *msg;
    } cases[] = {
        {" {}", "does not start with '{'"},
        {"[]", "does not start with '{'"},
        {"'x'", "does not start with '{'"},
        {"{'a':", "not closed"},
        {"{'abc", "not terminated"},
        {"{'a':1,}", "not valid JSON"},
        {"{'a' 1}", "not valid JSON"},
        {"{'a':{]}", "not valid JSON"},
        {"{} x", "follows the end of the JSON object"},
        {"{}}", "follows the end of the JSON object"},
        {"{}{}", "follows the end of the JSON object"},
        {"{'a':01}", "malformed number"},
        {"{'a':1.}", "malformed number"},
        {"{'a':1e}", "malformed number"},
        {"{'a':-}", "malformed number"},
        {"{'a':1.2.3}", "malformed number"},
        {"{'a':+1}", "unexpected byte 0x2b"},
        {"{'a':.5}", "unexpected byte 0x2e"},
        {"{'a':tru}", "unexpected byte 0x74"},
        {"{'a':nul}", "unexpected byte 0x6e"},
        {"{'a':NaN}", "unexpected byte 0x4e"},
        {"{'a':'x\ty'}", "control character 0x09"},
        {"{'a\x01':1}", "control character 0x01"},
        {"{'\xff':1}", "invalid UTF-8 at header byte 2"},
        {"{'\xc0\xaf':1}", "invalid UTF-8"},           /* overlong '/' */
        {"{'\xed\xa0\x80':1}", "invalid UTF-8"},       /* surrogate */
        {"{'\xf4\x90\x80\x80':1}", "invalid UTF-8"},   /* above U+10FFFF */
        {"{'\xe2\x82':1}", "invalid UTF-8"},           /* cut short */
        {"{'a':1}\xff", "follows the end"},
        {"{'\\x':1}", "invalid escape"},
        {"{'\\u12g4':1}", "bad \\u escape"},
        {"{'\\ud800':1}", "not valid JSON"},           /* lone surrogate (cJSON) */
        {"{'\\udc00\\ud800':1}", "not valid JSON"},
        {"{'a\\u0000b':{'dtype':'U8','shape':[],'data_offsets':[0,1]}}", "\\u0000"},
        {"{'__metadata__':{'k':'v\\u0000'}}", "\\u0000"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_hdr(cases[i].hdr, cases[i].hdr, 0, VX_EFORMAT, cases[i].msg);

    /* nesting deeper than cJSON's limit fails cleanly (no stack overflow) */
    buf deep = {0};
    buf_printf(&deep, "{'a':");
    for (int i = 0; i < 5000; i++) buf_put(&deep, "[", 1);
    for (int i = 0; i < 5000; i++) buf_put(&deep, "]", 1);
    buf_put(&deep, "}", 1);
    expect_hdr("nested 5000 deep", deep.p, 0, VX_EFORMAT, "nested deeper");
    free(deep.p);

    /* the valid UTF-8 forms pass (as names of zero-element tensors) */
    expect_hdr("UTF-8 names",
               "{'\xc3\xa9':{'dtype':'U8','shape':[0],'data_offsets':[0,0]},"
               " '\xe2\x82\xac':{'dtype':'U8','shape':[0],'data_offsets':[0,0]},"
               " '\xf0\x9f\x98\x80':{'dtype':'U8','shape':[0],'data_offsets':[0,0]},"
               " '\\ud83d\\ude00x':{'dtype':'U8','shape':[0],'data_offsets':[0,0]}}",
               0, VX_OK, NULL);
}

static void test_entries(void) {
    /* entries and their fields */
    expect_hdr("entry is an array", "{'a':[1]}", 0, VX_EFORMAT,
               "tensor 'a' is an array, not an object");
    expect_hdr("entry is a string", "{'a':'x'}", 0, VX_EFORMAT, "tensor 'a' is a string");
    expect_hdr("entry is null", "{'a':null}", 0, VX_EFORMAT, "tensor 'a' is null");
    expect_hdr("no dtype", "{'a':{'shape':[1],'data_offsets':[0,1]}}", 1, VX_EFORMAT,
               "tensor 'a' lacks \"dtype\"");
    expect_hdr("no shape", "{'a':{'dtype':'U8','data_offsets':[0,1]}}", 1, VX_EFORMAT,
               "tensor 'a' lacks \"shape\"");
    expect_hdr("no data_offsets", "{'a':{'dtype':'U8','shape':[1]}}", 1, VX_EFORMAT,
               "tensor 'a' lacks \"data_offsets\"");
    expect_hdr("dtype number", "{'a':{'dtype':5,'shape':[1],'data_offsets':[0,1]}}", 1,
               VX_EFORMAT, "tensor 'a': \"dtype\" is a number, not a string");
    expect_hdr("shape string", "{'a':{'dtype':'U8','shape':'1','data_offsets':[0,1]}}", 1,
               VX_EFORMAT, "tensor 'a': \"shape\" is a string, not an array");
    expect_hdr("shape object", "{'a':{'dtype':'U8','shape':{},'data_offsets':[0,1]}}", 1,
               VX_EFORMAT, "\"shape\" is an object");
    expect_hdr("data_offsets null", "{'a':{'dtype':'U8','shape':[1],'data_offsets':null}}", 1,
               VX_EFORMAT, "tensor 'a': \"data_offsets\" is null, not an array");
    expect_hdr("duplicate field",
               "{'a':{'dtype':'U8','shape':[1],'dtype':'U8','data_offsets':[0,1]}}", 1, VX_EFORMAT,
               "tensor 'a': duplicate field \"dtype\"");
    expect_hdr("unknown fields ignored",
               "{'a':{'dtype':'U8','shape':[1],'data_offsets':[0,1],'x':{'y':[]},'dtypes':1}}", 1,
               VX_OK, NULL);
    expect_hdr("dtype F4", "{'a':{'dtype':'F4','shape':[1],'data_offsets':[0,1]}}", 1,
               VX_EUNSUPPORTED, "tensor 'a' has unsupported dtype 'F4'");
    expect_hdr("dtype f16", "{'a':{'dtype':'f16','shape':[1],'data_offsets':[0,2]}}", 2,
               VX_EUNSUPPORTED, "unsupported dtype 'f16'");
    expect_hdr("dtype empty", "{'a':{'dtype':'','shape':[1],'data_offsets':[0,1]}}", 1,
               VX_EUNSUPPORTED, "unsupported dtype ''");

    /* shape */
    static const struct {
        const char *shape, *msg;
    } bad_shapes[] = {
        {"[1.5]", "shape[0] is 1.5, not an integer"},
        {"[2,-1]", "shape[1] is -1, not an integer"},
        {"[1e16]", "shape[0] is 10000000000000000, not an integer in [0, 2^53]"},
        {"[9007199254740994]", "shape[0] is 9007199254740994"},
        {"[1e999]", "shape[0] is inf"},
        {"['2']", "shape[0] is a string"},
        {"[true]", "shape[0] is a boolean"},
        {"[null]", "shape[0] is null"},
        {"[[1]]", "shape[0] is an array"},
    };
    for (size_t i = 0; i < sizeof bad_shapes / sizeof bad_shapes[0]; i++) {
        char hdr[200];
        snprintf(hdr, sizeof hdr, "{'a':{'dtype':'U8','shape':%s,'data_offsets':[0,1]}}",
                 bad_shapes[i].shape);
        expect_hdr(bad_shapes[i].shape, hdr, 1, VX_EFORMAT, bad_shapes[i].msg);
    }
    expect_hdr("9 dims", "{'a':{'dtype':'U8','shape':[1,1,1,1,1,1,1,1,1],'data_offsets':[0,1]}}",
               1, VX_EUNSUPPORTED, "tensor 'a' has 9 dimensions; at most 8");
    expect_hdr("8 dims", "{'a':{'dtype':'U8','shape':[1,1,1,1,1,1,1,1],'data_offsets':[0,1]}}", 1,
               VX_OK, NULL);
    static const struct {
        const char *dtype, *shape;
    } overflows[] = {
        {"U8", "[4294967296,4294967296]"},               /* 2^64 elements */
        {"I64", "[2147483648,2147483648]"},              /* 2^62 x 8 bytes */
        {"F64", "[1073741824,1073741824]"},              /* 2^60 x 8 = 2^63 */
        {"U8", "[9007199254740992,9007199254740992,0]"}, /* zero elements, huge span */
        {"F32", "[0,4294967296,4294967296]"},
    };
    for (size_t i = 0; i < sizeof overflows / sizeof overflows[0]; i++) {
        char hdr[200];
        snprintf(hdr, sizeof hdr, "{'a':{'dtype':'%s','shape':%s,'data_offsets':[0,0]}}",
                 overflows[i].dtype, overflows[i].shape);
        expect_hdr(overflows[i].shape, hdr, 0, VX_EFORMAT, "overflows");
    }

    /* data_offsets */
    static const struct {
        const char *offsets, *msg;
    } bad_offsets[] = {
        {"[]", "\"data_offsets\" has 0 entries, not 2"},
        {"[0]", "\"data_offsets\" has 1 entries, not 2"},
        {"[0,4,4]", "\"data_offsets\" has 3 entries, not 2"},
        {"{'b':0,'e':4}", "\"data_offsets\" is an object"},
        {"['0',4]", "data_offsets[0] is a string"},
        {"[0.5,4]", "data_offsets[0] is 0.5"},
        {"[0,-4]", "data_offsets[1] is -4"},
        {"[0,1e300]", "data_offsets[1] is 1.0000000000000001e+300"},
        {"[4,0]", "data_offsets [4, 0] end before they begin"},
        {"[0,3]", "data_offsets [0, 3] hold 3 bytes, but shape [2, 2] of U8 needs 4"},
        {"[0,8]", "data_offsets [0, 8] hold 8 bytes"},
        {"[2,6]", "data_offsets [2, 6] extend past the end of the 4-byte data buffer"},
    };
    for (size_t i = 0; i < sizeof bad_offsets / sizeof bad_offsets[0]; i++) {
        char hdr[200];
        snprintf(hdr, sizeof hdr, "{'a':{'dtype':'U8','shape':[2,2],'data_offsets':%s}}",
                 bad_offsets[i].offsets);
        expect_hdr(bad_offsets[i].offsets, hdr, 4, VX_EFORMAT, bad_offsets[i].msg);
    }
    expect_hdr("size mismatch F32", "{'a':{'dtype':'F32','shape':[2],'data_offsets':[0,4]}}", 4,
               VX_EFORMAT, "hold 4 bytes, but shape [2] of F32 needs 8");
    expect_hdr("scalar size", "{'a':{'dtype':'F64','shape':[],'data_offsets':[0,4]}}", 4,
               VX_EFORMAT, "shape [] of F64 needs 8");
}

#define U8T(name, n, b, e) \
    "'" name "':{'dtype':'U8','shape':[" #n "],'data_offsets':[" #b "," #e "]}"

static void test_coverage(void) {
    expect_hdr("two tensors", "{" U8T("a", 4, 0, 4) "," U8T("b", 4, 4, 8) "}", 8, VX_OK, NULL);
    expect_hdr("overlap", "{" U8T("a", 4, 0, 4) "," U8T("b", 4, 2, 6) "}", 6, VX_EFORMAT,
               "tensors 'a' [0, 4) and 'b' [2, 6) overlap in the data buffer");
    expect_hdr("same range", "{" U8T("b", 4, 0, 4) "," U8T("a", 4, 0, 4) "}", 4, VX_EFORMAT,
               "tensors 'a' [0, 4) and 'b' [0, 4) overlap");
    expect_hdr("empty inside another", "{" U8T("a", 4, 0, 4) "," U8T("z", 0, 2, 2) "}", 4,
               VX_EFORMAT, "tensors 'a' [0, 4) and 'z' [2, 2) overlap");
    expect_hdr("gap", "{" U8T("b", 4, 6, 10) "," U8T("a", 4, 0, 4) "}", 10, VX_EFORMAT,
               "gap of 2 bytes between tensor 'a' (ends at 4) and tensor 'b' (begins at 6)");
    expect_hdr("first not at 0", "{" U8T("a", 4, 2, 6) "}", 6, VX_EFORMAT,
               "the first tensor 'a' begins at byte 2 of the data buffer, not 0");
    expect_hdr("trailing bytes", "{" U8T("a", 4, 0, 4) "," U8T("z", 0, 4, 4) "}", 6, VX_EFORMAT,
               "the last tensor 'z' ends at byte 4 of the 6-byte data buffer: the 2 bytes");
    expect_hdr("data but no tensors", "{}", 3, VX_EFORMAT,
               "3 bytes of data follow the header, which lists no tensors");
    expect_hdr("data, only metadata", "{'__metadata__':{'a':'b'}}", 1, VX_EFORMAT,
               "1 bytes of data follow");
    /* zero-size tensors between others, at the start and at the end */
    expect_hdr("zero-size anywhere",
               "{" U8T("z0", 0, 0, 0) "," U8T("a", 4, 0, 4) "," U8T("z1", 0, 4, 4) "," U8T(
                   "b", 2, 4, 6) "," U8T("z2", 0, 6, 6) "}",
               6, VX_OK, NULL);

    /* names */
    expect_hdr("duplicate name", "{" U8T("a", 1, 0, 1) "," U8T("a", 1, 1, 2) "}", 2, VX_EFORMAT,
               "duplicate tensor name 'a'");
    expect_hdr("duplicate zero-size name", "{" U8T("a", 0, 0, 0) "," U8T("a", 0, 0, 0) "}", 0,
               VX_EFORMAT, "duplicate tensor name 'a'");
    expect_hdr("empty name", "{" U8T("a", 1, 0, 1) "," U8T("", 1, 1, 2) "}", 2, VX_EFORMAT,
               "tensor 1 (in header order) has an empty name");
    expect_hdr("name __metadata__ is metadata", "{'__metadata__':{" U8T("dtype", 1, 0, 1) "}}", 1,
               VX_EFORMAT, "the value of 'dtype' is an object, not a string");

    /* __metadata__ */
    expect_hdr("metadata string", "{'__metadata__':'x'}", 0, VX_EFORMAT,
               "\"__metadata__\" is a string, not an object");
    expect_hdr("metadata array", "{'__metadata__':[]}", 0, VX_EFORMAT,
               "\"__metadata__\" is an array");
    expect_hdr("metadata null", "{'__metadata__':null}", 0, VX_EFORMAT,
               "\"__metadata__\" is null");
    expect_hdr("metadata number value", "{'__metadata__':{'a':'b','k':1}}", 0, VX_EFORMAT,
               "the value of 'k' is a number, not a string");
    expect_hdr("metadata object value", "{'__metadata__':{'k':{}}}", 0, VX_EFORMAT,
               "the value of 'k' is an object");
    expect_hdr("duplicate metadata", "{'__metadata__':{},'__metadata__':{}}", 0, VX_EFORMAT,
               "duplicate \"__metadata__\"");
    expect_hdr("duplicate metadata key", "{'__metadata__':{'k':'1','j':'2','k':'3'}}", 0,
               VX_EFORMAT, "duplicate \"__metadata__\" key 'k'");
    expect_hdr("empty metadata key", "{'__metadata__':{'':'v'}}", 0, VX_OK, NULL);

    /* a long name is cut in the message, which still ends properly */
    buf b = {0};
    buf_put(&b, "{'", 2);
    for (int i = 0; i < 5000; i++) buf_put(&b, "n", 1);
    buf_printf(&b, "':{'dtype':'U8','shape':[1],'data_offsets':[0,2]}}");
    expect_hdr("long name", b.p, 2, VX_EFORMAT, "nnnnn");
    free(b.p);
}

/* --------------------------------------------------------------- files */

static void test_files(void) {
    char path[512], err[VX_ERRMSG_MAX];
    vx_safetensors *st = (vx_safetensors *)1;
    tpath(path, sizeof path, "missing.safetensors");
    vx_status s = vx_st_open(path, &st, err, sizeof err);
    CHECKF(s == VX_EIO && st == NULL && strstr(err, path) && strstr(err, "No such file"),
           "missing: %d %s", s, err);
    st = (vx_safetensors *)1;
    s = vx_st_open(g_dir, &st, err, sizeof err);
    CHECKF(s == VX_EIO && st == NULL && strstr(err, g_dir) && strstr(err, "not a regular file"),
           "directory: %d %s", s, err);
    s = vx_st_open("/dev/null", &st, err, sizeof err);
    CHECKF(s == VX_EIO && st == NULL && strstr(err, "not a regular file"), "/dev/null: %d %s", s,
           err);
    CHECK(vx_st_open(NULL, &st, err, sizeof err) == VX_EINVAL);
    CHECK(vx_st_open(path, NULL, err, sizeof err) == VX_EINVAL);
    CHECK(vx_st_open_mem(NULL, 8, &st, err, sizeof err) == VX_EINVAL && st == NULL);
    CHECK(vx_st_open_mem("x", 1, NULL, NULL, 0) == VX_EINVAL);
    /* NULL message buffer is fine */
    CHECK(vx_st_open_mem("x", 1, &st, NULL, 0) == VX_EFORMAT && st == NULL);

    expect_file("empty file", "", 0, VX_EFORMAT, "file is 0 bytes, too short");
    expect_file("7-byte file", "\x02\0\0\0\0\0\0", 7, VX_EFORMAT, "too short");
    expect_file("header only", "\x02\0\0\0\0\0\0\0{}", 10, VX_OK, NULL);
    buf b = image("{" U8T("a", 4, 0, 4) "}", NULL, 6);
    expect_file("trailing bytes", b.p, b.n, VX_EFORMAT, "the 2 bytes after it");
    expect_file("cut", b.p, b.n - 3, VX_EFORMAT, "extend past the end of the 3-byte data buffer");
    free(b.p);
    b = image("{" U8T("a", 4, 0, 4) "}", NULL, 4);
    expect_file("one tensor", b.p, b.n, VX_OK, NULL);
    free(b.p);
}

/* ------------------------------------------- truncations and corruptions */

static void test_truncations(void) {
    buf b = valid_image();
    int bad = 0;
    for (size_t len = 0; len < b.n; len++) {
        uint8_t *copy = malloc(len ? len : 1);
        memcpy(copy, b.p, len);
        vx_safetensors *st = (vx_safetensors *)1;
        char err[VX_ERRMSG_MAX] = "";
        vx_status s = vx_st_open_mem(copy, len, &st, err, sizeof err);
        if (s != VX_EFORMAT || st != NULL || !err[0]) {
            if (bad++ < 5) CHECKF(0, "prefix %zu of %zu: status %d, message '%s'", len, b.n, s, err);
            if (s == VX_OK) vx_st_close(st);
        }
        free(copy);
    }
    CHECKF(bad == 0, "%d of %zu prefixes misbehaved", bad, b.n);
    free(b.p);
}

/* Every byte of the length field and the header, changed in several ways:
 * each result is an error with a message, or an image the reader describes
 * consistently. Some changes keep the file valid (a letter of a name). */
static void test_corruptions(void) {
    buf b = valid_image();
    uint64_t n_hdr;
    memcpy(&n_hdr, b.p, 8);
    static const uint8_t flips[] = {0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xff};
    uint8_t *copy = malloc(b.n);
    int n_ok = 0, n_fail = 0, bad = 0;
    for (size_t pos = 0; pos < 8 + n_hdr; pos++) {
        for (size_t f = 0; f < sizeof flips + 3; f++) {
            memcpy(copy, b.p, b.n);
            if (f < sizeof flips) copy[pos] ^= flips[f];
            else copy[pos] = (const uint8_t[]){'"', '\\', 0}[f - sizeof flips];
            vx_safetensors *st = (vx_safetensors *)1;
            char err[VX_ERRMSG_MAX] = "";
            vx_status s = vx_st_open_mem(copy, b.n, &st, err, sizeof err);
            if (s == VX_OK) {
                n_ok++;
                char label[64];
                snprintf(label, sizeof label, "byte %zu ^ %zu", pos, f);
                if (!consistent(st, copy, b.n, label)) bad++;
                vx_st_close(st);
            } else {
                n_fail++;
                if ((s != VX_EFORMAT && s != VX_EUNSUPPORTED) || st != NULL || !err[0]) {
                    if (bad++ < 5)
                        CHECKF(0, "byte %zu change %zu: status %d, message '%s'", pos, f, s, err);
                }
            }
        }
    }
    CHECKF(bad == 0, "%d corruptions misbehaved", bad);
    CHECKF(n_ok > 0 && n_fail > n_ok, "%d accepted, %d refused", n_ok, n_fail);
    free(copy);
    free(b.p);
}

/* ---------------------------------------------------------- large headers */

static void test_many(void) {
    enum { N = 100000, Z = 50000 };
    buf h = {0};
    buf_put(&h, "{", 1);
    for (int i = N - 1; i >= 0; i--)
        buf_printf(&h, "%s\"t%06d\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[%d,%d]}",
                   i == N - 1 ? "" : ",", i, i, i + 1);
    buf_put(&h, "}", 1);
    buf b = image_n(h.p, h.n, NULL, N);
    vx_safetensors *st = NULL;
    char err[VX_ERRMSG_MAX] = "";
    vx_status s = vx_st_open_mem(b.p, b.n, &st, err, sizeof err);
    CHECKF(s == VX_OK, "%d tensors in reverse: %s", N, err);
    if (st) {
        CHECK(vx_st_n_tensors(st) == N);
        bool ok = true;
        for (int i = 0; i < N; i++) {
            char name[16];
            snprintf(name, sizeof name, "t%06d", i);
            const vx_st_tensor *t = vx_st_tensor_at(st, i);
            ok &= strcmp(t->name, name) == 0 && vx_st_find(st, name) == t;
        }
        CHECK(ok);
        consistent(st, (const uint8_t *)b.p, b.n, "many");
        vx_st_close(st);
    }
    free(b.p);

    /* zero-size tensors at one offset sort by name (the comparator's tie) */
    h.n = 0;
    buf_put(&h, "{", 1);
    for (int i = Z - 1; i >= 0; i--)
        buf_printf(&h, "\"z%06d\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},", i);
    buf_printf(&h, "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}");
    b = image_n(h.p, h.n, NULL, 1);
    st = NULL;
    s = vx_st_open_mem(b.p, b.n, &st, err, sizeof err);
    CHECKF(s == VX_OK, "%d zero-size tensors: %s", Z, err);
    if (st) {
        CHECK(vx_st_n_tensors(st) == Z + 1);
        CHECK(strcmp(vx_st_tensor_at(st, 0)->name, "z000000") == 0);
        CHECK(strcmp(vx_st_tensor_at(st, Z - 1)->name, "z049999") == 0);
        CHECK(strcmp(vx_st_tensor_at(st, Z)->name, "a") == 0);
        vx_st_close(st);
    }
    free(b.p);
    free(h.p);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/vx_test_safetensors.XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_dtypes();
    test_valid();
    test_header_length();
    test_json();
    test_entries();
    test_coverage();
    test_files();
    test_truncations();
    test_corruptions();
    test_many();
    CHECKF(rmdir(g_dir) == 0, "temporary directory %s not empty", g_dir);
    return vx_test_finish("test_safetensors");
}
