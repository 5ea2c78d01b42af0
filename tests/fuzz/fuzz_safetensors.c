/*
 * fuzz_safetensors.c - libFuzzer target for the safetensors reader
 * (safetensors.c): parses the input with vx_st_open_mem and, when it is
 * accepted, walks every tensor and metadata entry through the public
 * accessors, checking the invariants a loader relies on (lookups find what
 * iteration shows, shapes give the element count and the byte size, the
 * tensors tile the data buffer in order of offset and lie inside the
 * image, names and values are NUL-terminated). Rejected inputs must come
 * with a status and a message.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
 *       -Iinclude -Isrc tests/fuzz/fuzz_safetensors.c src/safetensors.c src/name_index.c \
 *       src/common.c -lcjson -lm -o /tmp/fuzz_safetensors
 *
 * Seeds: a few small valid files (tensors of several dtypes and shapes, a
 * scalar, a zero-element tensor, "__metadata__"), e.g. written with Python's
 * struct + json. A dictionary helps it find the field names and dtypes:
 *
 *   printf '%s\n' 'kw1="\"dtype\""' 'kw2="\"shape\""' 'kw3="\"data_offsets\""' \
 *       'kw4="\"__metadata__\""' 'kw5="\"F32\""' 'kw6="\"BF16\""' 'kw7="\"F8_E4M3\""' \
 *       'kw8="\\u00"' > /tmp/safetensors.dict
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz_safetensors: check failed: %s\n", what);
        abort(); /* test harness only */
    }
}

/* Reads every byte of a string so ASan sees a bad pointer. */
static unsigned touch(const char *s) {
    unsigned h = 0;
    for (; *s; s++) h = h * 31 + (uint8_t)*s;
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* an exact-size copy: ASan catches reads past the end of the image */
    uint8_t *img = malloc(size ? size : 1);
    if (!img) return 0;
    if (size) memcpy(img, data, size);
    vx_safetensors *st = (vx_safetensors *)1;
    char err[512];
    err[0] = 0;
    vx_status s = vx_st_open_mem(img, size, &st, err, sizeof err);
    if (s != VX_OK) {
        check(st == NULL, "no handle on failure");
        check(err[0] != 0, "failure has a message");
        check(s == VX_EFORMAT || s == VX_EUNSUPPORTED || s == VX_ENOMEM, "failure status");
        free(img);
        return 0;
    }
    check(size >= 10, "an accepted image holds at least the length and {}");
    uint64_t n_hdr = 0;
    for (int i = 7; i >= 0; i--) n_hdr = n_hdr << 8 | img[i];
    check(n_hdr >= 2 && n_hdr <= VX_ST_MAX_HEADER && n_hdr <= size - 8, "header length");
    check(img[8] == '{', "header starts with {");
    volatile unsigned h = 0;
    uint64_t at = 8 + n_hdr; /* where the next tensor must begin */
    const int64_t n = vx_st_n_tensors(st);
    check(n >= 0, "tensor count");
    for (int64_t i = 0; i < n; i++) {
        const vx_st_tensor *t = vx_st_tensor_at(st, i);
        check(t != NULL && t->name != NULL && t->name[0] != 0, "named tensor");
        h += touch(t->name);
        check(vx_st_find(st, t->name) == t, "find(name) returns the tensor");
        check((unsigned)t->dtype < VX_ST_DTYPE_COUNT, "dtype in range");
        check(strcmp(vx_st_dtype_name(t->dtype), "?") != 0, "dtype has a name");
        check(t->n_dims >= 0 && t->n_dims <= VX_ST_MAX_DIMS, "n_dims");
        uint64_t n_elem = 1, span = 1;
        for (int d = 0; d < VX_ST_MAX_DIMS; d++) {
            check(t->shape[d] >= 0, "dims are not negative");
            check(d < t->n_dims || t->shape[d] == 1, "unused dims are 1");
            const uint64_t v = (uint64_t)t->shape[d];
            check(!__builtin_mul_overflow(span, v ? v : 1, &span), "span fits");
            n_elem *= v;
        }
        const size_t es = vx_st_dtype_size(t->dtype);
        uint64_t span_bytes;
        check(!__builtin_mul_overflow(span, es, &span_bytes) && span_bytes <= INT64_MAX,
              "byte span fits in int64");
        check(t->n_elem == n_elem && t->size == n_elem * es, "n_elem and size");
        check(t->offset == at, "tensors tile the data buffer in order");
        check(t->offset <= size && t->size <= size - t->offset, "data inside the image");
        check((const uint8_t *)t->data == img + t->offset, "data = image + offset");
        if (t->size) h += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->size - 1];
        at += t->size;
    }
    check(at == size, "the last tensor ends the file");
    check(vx_st_tensor_at(st, n) == NULL && vx_st_tensor_at(st, -1) == NULL, "tensor_at range");
    check(vx_st_find(st, "") == NULL, "no empty name");
    const int64_t m = vx_st_n_metadata(st);
    for (int64_t i = 0; i < m; i++) {
        const char *k = vx_st_metadata_key(st, i);
        check(k != NULL, "metadata key");
        const char *v = vx_st_metadata(st, k);
        check(v != NULL, "metadata(key) finds it");
        h += touch(k) + touch(v);
    }
    check(vx_st_metadata_key(st, m) == NULL, "metadata_key range");
    (void)h;
    vx_st_close(st);
    free(img);
    return 0;
}
