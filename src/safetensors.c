/*
 * safetensors.c - safetensors reader (format in safetensors.h). The header
 * is untrusted: a lexical pass here holds it to strict JSON (what the
 * reference's serde_json accepts, which cJSON alone does not), cJSON builds
 * the tree, and every tensor's dtype, shape and byte range is checked with
 * overflow-safe arithmetic before a pointer into the image is formed.
 * Names, keys and values are copied into one pool, so the cJSON tree is
 * freed before vx_st_open returns.
 */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "name_index.h"

/* Shapes and offsets arrive as doubles (cJSON): integers are exact up to 2^53. */
#define ST_MAX_INT 9007199254740992.0

typedef struct st_meta {
    const char *key, *value;
} st_meta;

struct vx_safetensors {
    const uint8_t *base; /* whole file */
    uint64_t size;
    bool mapped;         /* base is an mmap we own */
    int64_t n_tensors;
    vx_st_tensor *tensors; /* sorted by offset */
    int64_t n_meta;
    st_meta *meta;         /* "__metadata__" in file order */
    vx_name_index t_ix, m_ix;
    char *pool; /* names, keys and values, NUL-terminated */
    size_t pool_used, pool_cap;
};

static const struct {
    const char *name;
    size_t size;
} dtype_traits[VX_ST_DTYPE_COUNT] = {
    [VX_ST_BOOL] = {"BOOL", 1},       [VX_ST_U8] = {"U8", 1},     [VX_ST_I8] = {"I8", 1},
    [VX_ST_F8_E5M2] = {"F8_E5M2", 1}, [VX_ST_F8_E4M3] = {"F8_E4M3", 1},
    [VX_ST_I16] = {"I16", 2},         [VX_ST_U16] = {"U16", 2},   [VX_ST_F16] = {"F16", 2},
    [VX_ST_BF16] = {"BF16", 2},       [VX_ST_I32] = {"I32", 4},   [VX_ST_U32] = {"U32", 4},
    [VX_ST_F32] = {"F32", 4},         [VX_ST_F64] = {"F64", 8},   [VX_ST_I64] = {"I64", 8},
    [VX_ST_U64] = {"U64", 8},
};

const char *vx_st_dtype_name(vx_st_dtype t) {
    return (unsigned)t < VX_ST_DTYPE_COUNT ? dtype_traits[t].name : "?";
}

size_t vx_st_dtype_size(vx_st_dtype t) {
    return (unsigned)t < VX_ST_DTYPE_COUNT ? dtype_traits[t].size : 0;
}

/* ------------------------------------------------------- strict JSON lexing */

/* Length (1..4) of the well-formed UTF-8 sequence at s[0..n), or 0 for an
 * invalid one (stray continuation, overlong, surrogate, above U+10FFFF,
 * truncated). */
static size_t utf8_len(const uint8_t *s, size_t n) {
    uint32_t c = s[0], min;
    size_t len;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        c &= 0x1f;
        min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3;
        c &= 0x0f;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        c &= 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        c = c << 6 | (s[i] & 0x3f);
    }
    return c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff) ? 0 : len;
}

static bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* Checks the tokens of h[0..n) (h[0] is '{'): strings (escapes, no raw
 * control characters, valid UTF-8, no \u0000), numbers in JSON's grammar
 * (no 01, +1, 1., .5), true/false/null, and nothing but whitespace after the
 * object closes. cJSON accepts all of those; the reference does not. The
 * structure (commas, colons, which bracket closes which) is cJSON's job. */
static vx_status json_lex(const uint8_t *h, size_t n, char *err, size_t err_size) {
    size_t i = 0, depth = 0;
    bool closed = false;
    while (i < n) {
        const size_t at = i;
        uint8_t c = h[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            i++;
            continue;
        }
        if (closed)
            return vx_seterr(err, err_size, VX_EFORMAT,
                             "header: byte 0x%02x at header byte %zu follows the end of the JSON "
                             "object (only whitespace may pad it)",
                             c, at);
        if (c == '{' || c == '[') {
            depth++;
            i++;
        } else if (c == '}' || c == ']') {
            /* depth > 0: h[0] opened it, and nothing is read once it closed */
            if (--depth == 0) closed = true;
            i++;
        } else if (c == ':' || c == ',') {
            i++;
        } else if (c == '"') {
            for (i++;;) {
                if (i >= n)
                    return vx_seterr(err, err_size, VX_EFORMAT,
                                     "header: the string at header byte %zu is not terminated", at);
                c = h[i];
                if (c == '"') {
                    i++;
                    break;
                }
                if (c == '\\') {
                    const uint8_t e = i + 1 < n ? h[i + 1] : 0;
                    if (e == 'u') {
                        uint32_t v = 0;
                        for (size_t k = 2; k < 6; k++) {
                            int x = i + k < n ? vx_hex_digit(h[i + k]) : -1;
                            if (x < 0)
                                return vx_seterr(err, err_size, VX_EFORMAT,
                                                 "header: bad \\u escape at header byte %zu", i);
                            v = v << 4 | (uint32_t)x;
                        }
                        if (v == 0)
                            return vx_seterr(err, err_size, VX_EFORMAT,
                                             "header: \\u0000 (a NUL character) at header byte %zu: "
                                             "names and values containing NUL are not supported",
                                             i);
                        i += 6;
                    } else if (e && strchr("\"\\/bfnrt", e)) {
                        i += 2;
                    } else {
                        return vx_seterr(err, err_size, VX_EFORMAT,
                                         "header: invalid escape (backslash then byte 0x%02x) at "
                                         "header byte %zu",
                                         e, i);
                    }
                } else if (c < 0x20) {
                    return vx_seterr(err, err_size, VX_EFORMAT,
                                     "header: control character 0x%02x inside a string at header "
                                     "byte %zu (JSON needs it escaped)",
                                     c, i);
                } else {
                    const size_t len = utf8_len(h + i, n - i);
                    if (!len)
                        return vx_seterr(err, err_size, VX_EFORMAT,
                                         "header: invalid UTF-8 at header byte %zu", i);
                    i += len;
                }
            }
        } else if (c == '-' || is_digit(c)) {
            bool ok = true;
            if (c == '-') i++;
            if (i < n && h[i] == '0') {
                i++;
            } else if (i < n && is_digit(h[i])) {
                while (i < n && is_digit(h[i])) i++;
            } else {
                ok = false;
            }
            if (ok && i < n && h[i] == '.') {
                i++;
                ok = i < n && is_digit(h[i]);
                while (i < n && is_digit(h[i])) i++;
            }
            if (ok && i < n && (h[i] == 'e' || h[i] == 'E')) {
                i++;
                if (i < n && (h[i] == '+' || h[i] == '-')) i++;
                ok = i < n && is_digit(h[i]);
                while (i < n && is_digit(h[i])) i++;
            }
            if (ok && i < n && (is_digit(h[i]) || h[i] == '.' || h[i] == 'e' || h[i] == 'E' ||
                                h[i] == '+' || h[i] == '-'))
                ok = false; /* 01, 1.2.3, 1e5e5 */
            if (!ok)
                return vx_seterr(err, err_size, VX_EFORMAT,
                                 "header: malformed number at header byte %zu", at);
        } else if (c == 't' || c == 'f' || c == 'n') {
            const char *lit = c == 't' ? "true" : c == 'f' ? "false" : "null";
            const size_t len = strlen(lit);
            if (n - i < len || memcmp(h + i, lit, len) != 0)
                return vx_seterr(err, err_size, VX_EFORMAT,
                                 "header: unexpected byte 0x%02x at header byte %zu", c, at);
            i += len;
        } else {
            return vx_seterr(err, err_size, VX_EFORMAT,
                             "header: unexpected byte 0x%02x at header byte %zu (not JSON)", c, at);
        }
    }
    if (!closed)
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "header: the JSON object is not closed (%zu brackets still open at the end "
                         "of the %zu-byte header)",
                         depth, n);
    return VX_OK;
}

/* ---------------------------------------------------------------- parsing */

static const char *json_type(const cJSON *x) {
    if (cJSON_IsObject(x)) return "an object";
    if (cJSON_IsArray(x)) return "an array";
    if (cJSON_IsString(x)) return "a string";
    if (cJSON_IsNumber(x)) return "a number";
    if (cJSON_IsBool(x)) return "a boolean";
    if (cJSON_IsNull(x)) return "null";
    return "invalid";
}

/* A number's value, or the item's type, for messages. */
static const char *json_what(const cJSON *x, char *buf, size_t size) {
    if (!cJSON_IsNumber(x)) return json_type(x);
    snprintf(buf, size, "%.17g", x->valuedouble);
    return buf;
}

/* An integer in [0, 2^53] (NaN and infinities fail the range test). */
static bool json_uint(const cJSON *x, uint64_t *v) {
    if (!cJSON_IsNumber(x)) return false;
    const double d = x->valuedouble;
    if (!(d >= 0 && d <= ST_MAX_INT)) return false;
    const uint64_t u = (uint64_t)d;
    if ((double)u != d) return false;
    *v = u;
    return true;
}

static const char *pool_put(vx_safetensors *st, const char *s) {
    const size_t n = strlen(s);
    VX_ASSERT(n + 1 <= st->pool_cap - st->pool_used); /* sized by the first pass */
    char *d = st->pool + st->pool_used;
    memcpy(d, s, n + 1);
    st->pool_used += n + 1;
    return d;
}

static const char *t_name(const void *st, int64_t i) {
    return ((const vx_safetensors *)st)->tensors[i].name;
}
static const char *m_name(const void *st, int64_t i) {
    return ((const vx_safetensors *)st)->meta[i].key;
}

/* "[2, 3]" */
static const char *shape_str(const int64_t *shape, int n_dims, char *buf, size_t size) {
    size_t k = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < n_dims && k < size; d++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (k < size) snprintf(buf + k, size - k, "]");
    return buf;
}

/* Names are cut in messages so that two fit in VX_ERRMSG_MAX. */
#define NM "'%.100s'"

/* One tensor entry: dtype, shape and byte range, checked against the data
 * buffer [data_start, data_start + buf_size) of the image. */
static vx_status parse_tensor(vx_safetensors *st, const cJSON *it, int64_t index, vx_st_tensor *t,
                              uint64_t data_start, uint64_t buf_size, char *err, size_t err_size) {
    char num[40], shp[200];
    t->name = pool_put(st, it->string);
    const char *nm = t->name;
    if (!*nm)
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "tensor %lld (in header order) has an empty name", (long long)index);
    if (!cJSON_IsObject(it))
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "tensor " NM " is %s, not an object with dtype, shape and data_offsets",
                         nm, json_type(it));
    const cJSON *dt = NULL, *sh = NULL, *off = NULL;
    for (const cJSON *f = it->child; f; f = f->next) {
        const char *k = f->string ? f->string : "";
        const cJSON **slot = !strcmp(k, "dtype") ? &dt
                             : !strcmp(k, "shape") ? &sh
                             : !strcmp(k, "data_offsets") ? &off
                                                           : NULL;
        if (!slot) continue; /* unknown fields are ignored, as the reference does */
        if (*slot)
            return vx_seterr(err, err_size, VX_EFORMAT, "tensor " NM ": duplicate field \"%s\"",
                             nm, k);
        *slot = f;
    }
    const char *missing = !dt ? "dtype" : !sh ? "shape" : !off ? "data_offsets" : NULL;
    if (missing)
        return vx_seterr(err, err_size, VX_EFORMAT, "tensor " NM " lacks \"%s\"", nm, missing);

    if (!cJSON_IsString(dt) || !dt->valuestring)
        return vx_seterr(err, err_size, VX_EFORMAT, "tensor " NM ": \"dtype\" is %s, not a string",
                         nm, json_type(dt));
    int ty = 0;
    while (ty < VX_ST_DTYPE_COUNT && strcmp(dt->valuestring, dtype_traits[ty].name) != 0) ty++;
    if (ty == VX_ST_DTYPE_COUNT)
        return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                         "tensor " NM " has unsupported dtype '%.40s' (known: BOOL U8 I8 F8_E5M2 "
                         "F8_E4M3 I16 U16 F16 BF16 I32 U32 F32 F64 I64 U64)",
                         nm, dt->valuestring);
    t->dtype = (vx_st_dtype)ty;
    const size_t esize = dtype_traits[ty].size;

    if (!cJSON_IsArray(sh))
        return vx_seterr(err, err_size, VX_EFORMAT, "tensor " NM ": \"shape\" is %s, not an array",
                         nm, json_type(sh));
    int nd = 0;
    for (const cJSON *d = sh->child; d; d = d->next, nd++) {
        if (nd == VX_ST_MAX_DIMS) {
            long long total = nd;
            for (; d; d = d->next) total++;
            return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                             "tensor " NM " has %lld dimensions; at most %d are supported", nm,
                             total, VX_ST_MAX_DIMS);
        }
        uint64_t v;
        if (!json_uint(d, &v))
            return vx_seterr(err, err_size, VX_EFORMAT,
                             "tensor " NM ": shape[%d] is %s, not an integer in [0, 2^53]", nm, nd,
                             json_what(d, num, sizeof num));
        t->shape[nd] = (int64_t)v;
    }
    t->n_dims = nd;
    for (int d = nd; d < VX_ST_MAX_DIMS; d++) t->shape[d] = 1;
    /* span = the product with zeros counted as 1: a zero must not hide an
     * overflowing product of the other dimensions ([2^40, 2^40, 0] holds no
     * bytes, but a consumer's row size or stride would wrap) */
    uint64_t n_elem = 1, span = 1, span_bytes = 0;
    bool ovf = false;
    for (int d = 0; d < nd && !ovf; d++) {
        const uint64_t v = (uint64_t)t->shape[d];
        ovf = vx_mul_ovf(span, v ? v : 1, &span);
        n_elem *= v; /* <= span */
    }
    if (ovf || vx_mul_ovf(span, esize, &span_bytes) || span_bytes > INT64_MAX)
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "tensor " NM ": shape %s of %s overflows (elements x %zu bytes exceed "
                         "2^63)",
                         nm, shape_str(t->shape, nd, shp, sizeof shp), dtype_traits[ty].name, esize);
    t->n_elem = n_elem;
    t->size = n_elem * esize; /* <= span_bytes */

    if (!cJSON_IsArray(off))
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "tensor " NM ": \"data_offsets\" is %s, not an array [begin, end]", nm,
                         json_type(off));
    long long n_off = 0;
    for (const cJSON *o = off->child; o; o = o->next) n_off++;
    if (n_off != 2)
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "tensor " NM ": \"data_offsets\" has %lld entries, not 2 [begin, end]", nm,
                         n_off);
    uint64_t be[2];
    const cJSON *o = off->child;
    for (int k = 0; k < 2; k++, o = o->next)
        if (!json_uint(o, &be[k]))
            return vx_seterr(err, err_size, VX_EFORMAT,
                             "tensor " NM ": data_offsets[%d] is %s, not an integer in [0, 2^53]",
                             nm, k, json_what(o, num, sizeof num));
    const unsigned long long b = be[0], e = be[1];
    if (b > e)
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "tensor " NM ": data_offsets [%llu, %llu] end before they begin", nm, b, e);
    if (e - b != t->size)
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "tensor " NM ": data_offsets [%llu, %llu] hold %llu bytes, but shape %s "
                         "of %s needs %llu",
                         nm, b, e, e - b, shape_str(t->shape, nd, shp, sizeof shp),
                         dtype_traits[ty].name, (unsigned long long)t->size);
    if (e > buf_size)
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "tensor " NM ": data_offsets [%llu, %llu] extend past the end of the "
                         "%llu-byte data buffer (the file is truncated or corrupt)",
                         nm, b, e, (unsigned long long)buf_size);
    t->offset = data_start + b;
    t->data = st->base + t->offset;
    return VX_OK;
}

static int tensor_cmp(const void *pa, const void *pb) {
    const vx_st_tensor *a = pa, *b = pb;
    if (a->offset != b->offset) return a->offset < b->offset ? -1 : 1;
    if (a->size != b->size) return a->size < b->size ? -1 : 1;
    return strcmp(a->name, b->name); /* zero-size tensors at one offset */
}

/* The tensors sorted by offset must tile the data buffer: the first at 0,
 * each where the previous ends, the last at the buffer's end. */
static vx_status check_coverage(const vx_safetensors *st, uint64_t data_start, uint64_t buf_size,
                                char *err, size_t err_size) {
    uint64_t at = 0;
    const vx_st_tensor *prev = NULL;
    for (int64_t i = 0; i < st->n_tensors; i++) {
        const vx_st_tensor *t = &st->tensors[i];
        const unsigned long long b = t->offset - data_start;
        if (b != at) {
            if (!prev)
                return vx_seterr(err, err_size, VX_EFORMAT,
                                 "the first tensor " NM " begins at byte %llu of the data buffer, "
                                 "not 0: %llu bytes belong to no tensor",
                                 t->name, b, b);
            const unsigned long long pb = prev->offset - data_start;
            if (b < at)
                return vx_seterr(err, err_size, VX_EFORMAT,
                                 "tensors " NM " [%llu, %llu) and " NM " [%llu, %llu) overlap in "
                                 "the data buffer",
                                 prev->name, pb, (unsigned long long)at, t->name, b, b + t->size);
            return vx_seterr(err, err_size, VX_EFORMAT,
                             "gap of %llu bytes between tensor " NM " (ends at %llu) and tensor " NM
                             " (begins at %llu): the tensors must cover the data buffer exactly",
                             b - at, prev->name, (unsigned long long)at, t->name, b);
        }
        at = b + t->size;
        prev = t;
    }
    if (at != buf_size) {
        if (!prev)
            return vx_seterr(err, err_size, VX_EFORMAT,
                             "%llu bytes of data follow the header, which lists no tensors",
                             (unsigned long long)buf_size);
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "the last tensor " NM " ends at byte %llu of the %llu-byte data buffer: "
                         "the %llu bytes after it belong to no tensor",
                         prev->name, (unsigned long long)at, (unsigned long long)buf_size,
                         (unsigned long long)(buf_size - at));
    }
    return VX_OK;
}

static vx_status parse_tree(vx_safetensors *st, const cJSON *root, uint64_t hdr_size, char *err,
                            size_t err_size) {
    if (!cJSON_IsObject(root))
        return vx_seterr(err, err_size, VX_EFORMAT, "header is %s, not a JSON object",
                         json_type(root));
    const uint64_t data_start = 8 + hdr_size, buf_size = st->size - data_start;

    /* pass 1: find "__metadata__", count the tensors, size the pool */
    const cJSON *meta = NULL;
    uint64_t n_t = 0, n_m = 0, pool = 1;
    for (const cJSON *it = root->child; it; it = it->next) {
        if (!it->string) /* cJSON names every member; kept for safety */
            return vx_seterr(err, err_size, VX_EFORMAT, "header: an object member has no key");
        if (strcmp(it->string, "__metadata__") != 0) {
            pool += strlen(it->string) + 1;
            n_t++;
            continue;
        }
        if (meta)
            return vx_seterr(err, err_size, VX_EFORMAT, "header: duplicate \"__metadata__\"");
        if (!cJSON_IsObject(it))
            return vx_seterr(err, err_size, VX_EFORMAT,
                             "\"__metadata__\" is %s, not an object of strings", json_type(it));
        meta = it;
        for (const cJSON *m = it->child; m; m = m->next) {
            if (!m->string)
                return vx_seterr(err, err_size, VX_EFORMAT, "header: an object member has no key");
            if (!cJSON_IsString(m) || !m->valuestring)
                return vx_seterr(err, err_size, VX_EFORMAT,
                                 "\"__metadata__\": the value of " NM " is %s, not a string",
                                 m->string, json_type(m));
            pool += strlen(m->string) + strlen(m->valuestring) + 2;
            n_m++;
        }
    }

    st->tensors = calloc(n_t ? n_t : 1, sizeof *st->tensors);
    st->meta = calloc(n_m ? n_m : 1, sizeof *st->meta);
    st->pool = pool <= SIZE_MAX ? malloc((size_t)pool) : NULL;
    st->pool_cap = (size_t)pool;
    if (!st->tensors || !st->meta || !st->pool || !vx_name_index_reserve(&st->m_ix, n_m, m_name, st) ||
        !vx_name_index_reserve(&st->t_ix, n_t, t_name, st))
        return vx_seterr(err, err_size, VX_ENOMEM,
                         "out of memory for a header of %llu tensors and %llu metadata entries",
                         (unsigned long long)n_t, (unsigned long long)n_m);

    if (meta) {
        for (const cJSON *m = meta->child; m; m = m->next) {
            st_meta *e = &st->meta[st->n_meta];
            e->key = pool_put(st, m->string);
            e->value = pool_put(st, m->valuestring);
            if (vx_name_index_add(&st->m_ix, st->n_meta, m_name, st) != 1) /* reserved: a duplicate */
                return vx_seterr(err, err_size, VX_EFORMAT, "duplicate \"__metadata__\" key " NM,
                                 e->key);
            st->n_meta++;
        }
    }

    /* pass 2: every tensor in header order, then the order of the data */
    for (const cJSON *it = root->child; it; it = it->next) {
        if (it == meta) continue;
        vx_status s = parse_tensor(st, it, st->n_tensors, &st->tensors[st->n_tensors], data_start,
                                   buf_size, err, err_size);
        if (s) return s;
        st->n_tensors++;
    }
    /* qsort: a hostile header can list millions of tensors in any order */
    if (st->n_tensors > 1) qsort(st->tensors, (size_t)st->n_tensors, sizeof *st->tensors, tensor_cmp);
    for (int64_t i = 0; i < st->n_tensors; i++)
        if (vx_name_index_add(&st->t_ix, i, t_name, st) != 1)
            return vx_seterr(err, err_size, VX_EFORMAT, "duplicate tensor name " NM,
                             st->tensors[i].name);
    return check_coverage(st, data_start, buf_size, err, err_size);
}

static vx_status parse(vx_safetensors *st, char *err, size_t err_size) {
    if (st->size < 8)
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "file is %llu bytes, too short for a safetensors header (8 bytes)",
                         (unsigned long long)st->size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | st->base[i];
    if (n == 0)
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "header length is 0 (the JSON header needs at least 2 bytes: {})");
    if (n > VX_ST_MAX_HEADER)
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "header length %llu is above the limit of %u bytes (not a safetensors "
                         "file?)",
                         (unsigned long long)n, VX_ST_MAX_HEADER);
    if (n > st->size - 8)
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "header length %llu exceeds the %llu bytes after the length field: the "
                         "file is truncated or not a safetensors file",
                         (unsigned long long)n, (unsigned long long)(st->size - 8));
    const uint8_t *h = st->base + 8;
    if (h[0] != '{')
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "header does not start with '{' (its first byte is 0x%02x): not a "
                         "safetensors file",
                         h[0]);
    vx_status s = json_lex(h, (size_t)n, err, err_size);
    if (s) return s;
    /* cJSON gets a NUL-terminated copy: 1.7.15 can read a byte past the end
     * of some truncated inputs (CVE-2023-53154) */
    char *copy = malloc((size_t)n + 1);
    if (!copy) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory for a %llu-byte header",
                                (unsigned long long)n);
    memcpy(copy, h, (size_t)n);
    copy[n] = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(copy, (size_t)n, &end, false);
    const size_t pos = end && end >= copy && end <= copy + n ? (size_t)(end - copy) : 0;
    free(copy);
    if (!root)
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "header is not valid JSON (error at header byte %zu; or nested deeper "
                         "than %d, or out of memory)",
                         pos, CJSON_NESTING_LIMIT);
    /* json_lex allowed only whitespace after the object, so cJSON ended there */
    for (size_t i = pos; i < n; i++)
        if (h[i] != ' ' && h[i] != '\t' && h[i] != '\n' && h[i] != '\r') {
            cJSON_Delete(root);
            return vx_seterr(err, err_size, VX_EFORMAT,
                             "header: unexpected data at header byte %zu after the JSON object", i);
        }
    s = parse_tree(st, root, n, err, err_size);
    cJSON_Delete(root);
    return s;
}

/* ------------------------------------------------------------------- API */

static vx_status open_common(vx_safetensors *st, vx_safetensors **out, char *err,
                             size_t err_size) {
    vx_status s = parse(st, err, err_size);
    if (s) {
        vx_st_close(st);
        return s;
    }
    *out = st;
    return VX_OK;
}

vx_status vx_st_open_mem(const void *data, size_t size, vx_safetensors **out, char *err,
                         size_t err_size) {
    if (!out) return vx_seterr(err, err_size, VX_EINVAL, "vx_st_open_mem: out is NULL");
    *out = NULL;
    if (!data && size) return vx_seterr(err, err_size, VX_EINVAL, "vx_st_open_mem: data is NULL");
    vx_safetensors *st = calloc(1, sizeof *st);
    if (!st) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    st->base = data;
    st->size = size;
    return open_common(st, out, err, err_size);
}

vx_status vx_st_open(const char *path, vx_safetensors **out, char *err, size_t err_size) {
    if (!out || !path)
        return vx_seterr(err, err_size, VX_EINVAL, "vx_st_open: %s is NULL", out ? "path" : "out");
    *out = NULL;
    const void *p;
    uint64_t size;
    vx_status s0 = vx_map_file(path, 8, "safetensors", &p, &size, err, err_size);
    if (s0) return s0;
    vx_safetensors *st = calloc(1, sizeof *st);
    if (!st) {
        munmap((void *)p, (size_t)size);
        return vx_seterr(err, err_size, VX_ENOMEM, "%s: out of memory", path);
    }
    st->base = p;
    st->size = size;
    st->mapped = true;
    vx_status s = open_common(st, out, err, err_size);
    if (s && err && err_size > 0) {
        char tmp[VX_ERRMSG_MAX];
        snprintf(tmp, sizeof tmp, "%s", err);
        snprintf(err, err_size, "%s: %s", path, tmp);
    }
    return s;
}

void vx_st_close(vx_safetensors *st) {
    if (!st) return;
    if (st->mapped) munmap((void *)st->base, (size_t)st->size);
    vx_name_index_free(&st->t_ix);
    vx_name_index_free(&st->m_ix);
    free(st->tensors);
    free(st->meta);
    free(st->pool);
    free(st);
}

int64_t vx_st_n_tensors(const vx_safetensors *st) { return st ? st->n_tensors : 0; }

const vx_st_tensor *vx_st_tensor_at(const vx_safetensors *st, int64_t i) {
    return st && i >= 0 && i < st->n_tensors ? &st->tensors[i] : NULL;
}

const vx_st_tensor *vx_st_find(const vx_safetensors *st, const char *name) {
    if (!st || !name) return NULL;
    const int64_t i = vx_name_index_find(&st->t_ix, name, t_name, st);
    return i >= 0 ? &st->tensors[i] : NULL;
}

int64_t vx_st_n_metadata(const vx_safetensors *st) { return st ? st->n_meta : 0; }

const char *vx_st_metadata(const vx_safetensors *st, const char *key) {
    if (!st || !key) return NULL;
    const int64_t i = vx_name_index_find(&st->m_ix, key, m_name, st);
    return i >= 0 ? st->meta[i].value : NULL;
}

const char *vx_st_metadata_key(const vx_safetensors *st, int64_t i) {
    return st && i >= 0 && i < st->n_meta ? st->meta[i].key : NULL;
}
