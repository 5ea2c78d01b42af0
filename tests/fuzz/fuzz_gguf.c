/*
 * fuzz_gguf.c - libFuzzer target for the GGUF reader (gguf.c): parses the
 * input with vx_gguf_open_mem and, when it is accepted, walks every key and
 * tensor through the public accessors and typed getters, checking the
 * invariants a loader relies on (lookups find what iteration shows, tensor
 * data lies inside the image, sizes match the type's row size, offsets are
 * aligned). Rejected inputs must come with a status and a message.
 *
 * Built with -DFUZZ_GGUF_WRITER (and src/gguf_write.c) it also feeds every
 * accepted file to the writer (copy_kv + add_tensor), which must accept it.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
 *       -Iinclude -Isrc tests/fuzz/fuzz_gguf.c src/gguf.c src/quant*.c src/common.c \
 *       -lm -o /tmp/fuzz_gguf
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz_gguf: check failed: %s\n", what);
        abort(); /* test harness only */
    }
}

/* Reads every byte of a string so ASan sees a bad pointer or length. */
static unsigned touch(const char *s, uint64_t len) {
    unsigned h = 0;
    for (uint64_t i = 0; i < len; i++) h = h * 31 + (uint8_t)s[i];
    check(s[len] == 0, "string is NUL-terminated");
    return h;
}

static unsigned walk_kv(const vx_gguf *g, const vx_gguf_kv *kv) {
    unsigned h = touch(kv->key, strlen(kv->key));
    check(vx_gguf_find(g, kv->key) == kv, "find(key) returns the entry");
    check((unsigned)kv->type < VX_GGUF_TYPE_COUNT, "value type in range");
    int64_t i;
    double d;
    bool b;
    const char *s;
    int ri = vx_gguf_get_i64(g, kv->key, &i);
    int rf = vx_gguf_get_f64(g, kv->key, &d);
    int rb = vx_gguf_get_bool(g, kv->key, &b);
    int rs = vx_gguf_get_str(g, kv->key, &s);
    check(ri != 0 && rf != 0 && rb != 0 && rs != 0, "getters find a present key");
    check((rb == 1) == (kv->type == VX_GGUF_BOOL), "get_bool only for BOOL");
    check((rs == 1) == (kv->type == VX_GGUF_STRING), "get_str only for STRING");
    if (ri == 1) check(rf == 1, "an integer also reads as a double");
    if (rs == 1) h += touch(s, kv->v.str.len);
    vx_gguf_type et;
    uint64_t n;
    const vx_gguf_kv *akv;
    int ra = vx_gguf_get_arr(g, kv->key, &et, &n, &akv);
    check((ra == 1) == (kv->type == VX_GGUF_ARRAY), "get_arr only for ARRAY");
    if (ra == 1) {
        check(akv == kv && et == kv->v.arr.type && n == kv->v.arr.n, "get_arr outputs");
        check(et != VX_GGUF_ARRAY && (unsigned)et < VX_GGUF_TYPE_COUNT, "element type");
        /* every element: the image is small, so the count is bounded by it */
        for (uint64_t k = 0; k < n; k++) {
            if (et == VX_GGUF_STRING) {
                h += touch(kv->v.arr.strs[k].s, kv->v.arr.strs[k].len);
            } else {
                h += (unsigned)vx_gguf_arr_i64(kv, k);
                double x = vx_gguf_arr_f64(kv, k);
                h += x == x; /* NaN is allowed, just read it */
            }
        }
    }
    h += (unsigned)strlen(vx_gguf_type_name(kv->type));
    return h;
}

static unsigned walk_tensor(const vx_gguf *g, const vx_gguf_tensor *t, const uint8_t *base,
                            size_t size) {
    unsigned h = touch(t->name, strlen(t->name));
    check(vx_gguf_find_tensor(g, t->name) == t, "find_tensor(name) returns the tensor");
    check(t->n_dims >= 1 && t->n_dims <= VX_GGUF_MAX_DIMS, "n_dims");
    const vx_type_traits *tr = vx_type_get_traits(t->type);
    check(tr != NULL, "tensor type has traits");
    uint64_t nelem = 1;
    for (int d = 0; d < VX_GGUF_MAX_DIMS; d++) {
        check(t->ne[d] >= 0, "dims are not negative");
        check(d < (int)t->n_dims || t->ne[d] == 1, "unused dims are 1");
        check(!__builtin_mul_overflow(nelem, (uint64_t)t->ne[d], &nelem), "element count");
    }
    check(t->ne[0] % tr->blck_size == 0, "whole blocks per row");
    uint64_t rows = nelem && t->ne[0] ? nelem / (uint64_t)t->ne[0] : 0;
    if (t->ne[0] > 0) {
        size_t rs = vx_row_size((vx_type)t->type, t->ne[0]);
        check(rs > 0 && t->size == (uint64_t)rs * rows, "size == row size x rows");
    } else {
        check(t->size == 0, "empty tensor has no bytes");
    }
    check(t->offset % vx_gguf_alignment(g) == 0, "offset aligned");
    const uint8_t *p = t->data;
    check(p >= base && (uint64_t)(p - base) <= size && t->size <= size - (size_t)(p - base),
          "tensor data inside the image");
    check((uint64_t)(p - base) == vx_gguf_data_offset(g) + t->offset, "data = start + offset");
    if (t->size) h += p[0] + p[t->size - 1];
    return h;
}

#ifdef FUZZ_GGUF_WRITER
static void feed_writer(const vx_gguf *g) {
    vx_gguf_writer *w = vx_gguf_writer_init();
    if (!w) return;
    bool names_ok = true; /* the writer refuses empty and > 64 KiB names */
    for (int64_t i = 0; i < vx_gguf_n_kv(g); i++) {
        size_t n = strlen(vx_gguf_kv_at(g, i)->key);
        names_ok &= n > 0 && n <= 65535;
    }
    vx_status st = vx_gguf_copy_kv(w, g);
    check(st == VX_OK || (!names_ok && st == VX_EINVAL) || st == VX_ENOMEM, "copy_kv accepts");
    for (int64_t i = 0; i < vx_gguf_n_tensors(g); i++) {
        const vx_gguf_tensor *t = vx_gguf_tensor_at(g, i);
        size_t n = strlen(t->name);
        st = vx_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size, true);
        check(st == VX_OK || ((n == 0 || n > 65535) && st == VX_EINVAL), "add_tensor accepts");
    }
    vx_gguf_writer_free(w);
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* an exact-size copy: ASan catches reads past the end of the image */
    uint8_t *img = malloc(size ? size : 1);
    if (!img) return 0;
    if (size) memcpy(img, data, size);
    vx_gguf *g = NULL;
    char err[512];
    err[0] = 0;
    vx_status st = vx_gguf_open_mem(img, size, &g, err, sizeof err);
    if (st != VX_OK) {
        check(g == NULL, "no handle on failure");
        check(err[0] != 0, "failure has a message");
        check(st == VX_EFORMAT || st == VX_EUNSUPPORTED || st == VX_ENOMEM, "failure status");
        free(img);
        return 0;
    }
    check(vx_gguf_version(g) == 2 || vx_gguf_version(g) == 3, "version");
    size_t al = vx_gguf_alignment(g);
    check(al > 0 && (al & (al - 1)) == 0, "alignment is a power of two");
    check(vx_gguf_file_size(g) == size, "file size");
    volatile unsigned h = 0;
    for (int64_t i = 0; i < vx_gguf_n_kv(g); i++) h += walk_kv(g, vx_gguf_kv_at(g, i));
    check(vx_gguf_kv_at(g, vx_gguf_n_kv(g)) == NULL && vx_gguf_kv_at(g, -1) == NULL, "kv_at range");
    for (int64_t i = 0; i < vx_gguf_n_tensors(g); i++)
        h += walk_tensor(g, vx_gguf_tensor_at(g, i), img, size);
    check(vx_gguf_tensor_at(g, vx_gguf_n_tensors(g)) == NULL, "tensor_at range");
    check(vx_gguf_find(g, "") == NULL || vx_gguf_find(g, "")->key[0] == 0, "find empty key");
#ifdef FUZZ_GGUF_WRITER
    feed_writer(g);
#endif
    (void)h;
    vx_gguf_close(g);
    free(img);
    return 0;
}
