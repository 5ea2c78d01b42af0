/*
 * gguf.c - GGUF reader: maps a file and validates its header, metadata and
 * tensor table. Everything read from the file is untrusted: every length,
 * count and offset is checked against the remaining bytes with overflow-safe
 * arithmetic before use. The writer lives in gguf_write.c.
 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "name_index.h"
#include "quant.h"

/* Hard limits well above any real model, so hostile counts fail early
 * instead of asking for absurd allocations. */
#define GGUF_MAX_KV (1u << 20)
#define GGUF_MAX_TENSORS (1u << 20)
#define GGUF_MAX_STR (1ull << 30)

struct vx_gguf {
    const uint8_t *base; /* whole file */
    uint64_t size;
    bool mapped;         /* base is an mmap we own */
    bool owns_base;      /* base is a malloc'd header image (detached) */
    /* detached readers: each tensor's bytes, in table order, and what to
     * release with the reader */
    const void *const *ext_data;
    uint64_t ext_bytes;
    void (*release)(void *);
    void *owner;
    uint32_t version;
    size_t alignment;
    uint64_t data_offset;
    int64_t n_kv;
    vx_gguf_kv *kv;
    int64_t n_tensors;
    vx_gguf_tensor *tensors;
    /* open-addressing hash tables of indices (-1 = empty) for name lookup */
    vx_name_index kv_ix, t_ix;
    /* owned allocations: one arena of copied strings and string tables */
    char *strpool;
    uint64_t strpool_used, strpool_cap;
    vx_gguf_str **str_arrays;
    int64_t n_str_arrays;
};

typedef struct cursor {
    const uint8_t *p;
    uint64_t off, size;
    char *err;
    size_t err_size;
} cursor;

static vx_status need(cursor *c, uint64_t n, const char *what) {
    if (n > c->size - c->off)
        return vx_seterr(c->err, c->err_size, VX_EFORMAT,
                         "truncated file: %s needs %llu bytes at offset %llu, file has %llu",
                         what, (unsigned long long)n, (unsigned long long)c->off,
                         (unsigned long long)c->size);
    return VX_OK;
}

static vx_status rd(cursor *c, void *dst, uint64_t n, const char *what) {
    vx_status s = need(c, n, what);
    if (s) return s;
    memcpy(dst, c->p + c->off, n);
    c->off += n;
    return VX_OK;
}

static vx_status rd_u32(cursor *c, uint32_t *v, const char *what) { return rd(c, v, 4, what); }
static vx_status rd_u64(cursor *c, uint64_t *v, const char *what) { return rd(c, v, 8, what); }

/* First pass sizes the string pool; strings are copied so they can be
 * NUL-terminated. The pool is sized up front so pointers stay stable. */
static char *pool_put(vx_gguf *g, const uint8_t *src, uint64_t len) {
    VX_ASSERT(g->strpool_used + len + 1 <= g->strpool_cap);
    char *d = g->strpool + g->strpool_used;
    if (len) memcpy(d, src, len);
    d[len] = 0;
    g->strpool_used += len + 1;
    return d;
}

/* Reads a string header and returns a pointer to its bytes in the file. */
static vx_status rd_str_raw(cursor *c, const uint8_t **s, uint64_t *len, const char *what) {
    vx_status st = rd_u64(c, len, what);
    if (st) return st;
    if (*len > GGUF_MAX_STR)
        return vx_seterr(c->err, c->err_size, VX_EFORMAT, "%s: string length %llu is too large",
                         what, (unsigned long long)*len);
    st = need(c, *len, what);
    if (st) return st;
    *s = c->p + c->off;
    c->off += *len;
    return VX_OK;
}

size_t vx_gguf_type_size(vx_gguf_type t) {
    switch (t) {
    case VX_GGUF_UINT8: case VX_GGUF_INT8: case VX_GGUF_BOOL: return 1;
    case VX_GGUF_UINT16: case VX_GGUF_INT16: return 2;
    case VX_GGUF_UINT32: case VX_GGUF_INT32: case VX_GGUF_FLOAT32: return 4;
    case VX_GGUF_UINT64: case VX_GGUF_INT64: case VX_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

const char *vx_gguf_type_name(vx_gguf_type t) {
    static const char *const names[VX_GGUF_TYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"};
    return (unsigned)t < VX_GGUF_TYPE_COUNT ? names[t] : "?";
}

static bool is_signed(vx_gguf_type t) {
    return t == VX_GGUF_INT8 || t == VX_GGUF_INT16 || t == VX_GGUF_INT32 || t == VX_GGUF_INT64;
}

/* Decodes a scalar at p (little-endian, maybe unaligned) into the kv union. */
static void scalar_decode(vx_gguf_kv *kv, vx_gguf_type t, const uint8_t *p) {
    switch (t) {
    case VX_GGUF_UINT8: kv->v.u64 = p[0]; break;
    case VX_GGUF_INT8: kv->v.i64 = (int8_t)p[0]; break;
    case VX_GGUF_BOOL: kv->v.b = p[0] != 0; break;
    case VX_GGUF_UINT16: { uint16_t x; memcpy(&x, p, 2); kv->v.u64 = x; break; }
    case VX_GGUF_INT16: { int16_t x; memcpy(&x, p, 2); kv->v.i64 = x; break; }
    case VX_GGUF_UINT32: { uint32_t x; memcpy(&x, p, 4); kv->v.u64 = x; break; }
    case VX_GGUF_INT32: { int32_t x; memcpy(&x, p, 4); kv->v.i64 = x; break; }
    case VX_GGUF_FLOAT32: { float x; memcpy(&x, p, 4); kv->v.f64 = x; break; }
    case VX_GGUF_UINT64: { uint64_t x; memcpy(&x, p, 8); kv->v.u64 = x; break; }
    case VX_GGUF_INT64: { int64_t x; memcpy(&x, p, 8); kv->v.i64 = x; break; }
    case VX_GGUF_FLOAT64: { double x; memcpy(&x, p, 8); kv->v.f64 = x; break; }
    default: break;
    }
}

/* Skips (pass 1) or decodes (pass 2) one value. In pass 1 it only validates
 * and accumulates the string pool size and the string-table count. */
static vx_status value(vx_gguf *g, cursor *c, vx_gguf_kv *kv, vx_gguf_type t, bool decode,
                       uint64_t *pool, int64_t *n_arrays, const char *key) {
    if (t == VX_GGUF_STRING) {
        const uint8_t *s;
        uint64_t len;
        vx_status st = rd_str_raw(c, &s, &len, key);
        if (st) return st;
        if (decode) {
            kv->v.str.s = pool_put(g, s, len);
            kv->v.str.len = len;
        } else {
            *pool += len + 1;
        }
        return VX_OK;
    }
    if (t == VX_GGUF_ARRAY) {
        uint32_t et;
        uint64_t n;
        vx_status st = rd_u32(c, &et, key);
        if (!st) st = rd_u64(c, &n, key);
        if (st) return st;
        if (et == VX_GGUF_ARRAY)
            return vx_seterr(c->err, c->err_size, VX_EUNSUPPORTED,
                             "key '%s': nested arrays are not supported", key);
        if (et >= VX_GGUF_TYPE_COUNT)
            return vx_seterr(c->err, c->err_size, VX_EFORMAT,
                             "key '%s': unknown array element type %u", key, et);
        if (decode) {
            kv->v.arr.type = (vx_gguf_type)et;
            kv->v.arr.n = n;
        }
        if (et == VX_GGUF_STRING) {
            /* every element needs at least its 8-byte length */
            uint64_t minb;
            if (vx_mul_ovf(n, 8, &minb) || minb > c->size - c->off)
                return vx_seterr(c->err, c->err_size, VX_EFORMAT,
                                 "key '%s': string array of %llu elements exceeds the file", key,
                                 (unsigned long long)n);
            vx_gguf_str *tab = NULL;
            if (decode) {
                tab = malloc((n ? n : 1) * sizeof *tab);
                if (!tab)
                    return vx_seterr(c->err, c->err_size, VX_ENOMEM,
                                     "out of memory for string array '%s'", key);
                g->str_arrays[g->n_str_arrays++] = tab;
                kv->v.arr.strs = tab;
            } else {
                (*n_arrays)++;
            }
            for (uint64_t i = 0; i < n; i++) {
                const uint8_t *s;
                uint64_t len;
                st = rd_str_raw(c, &s, &len, key);
                if (st) return st;
                if (decode) {
                    tab[i].s = pool_put(g, s, len);
                    tab[i].len = len;
                } else {
                    *pool += len + 1;
                }
            }
            return VX_OK;
        }
        uint64_t bytes;
        if (vx_mul_ovf(n, vx_gguf_type_size((vx_gguf_type)et), &bytes))
            return vx_seterr(c->err, c->err_size, VX_EFORMAT, "key '%s': array size overflows",
                             key);
        st = need(c, bytes, key);
        if (st) return st;
        if (decode) kv->v.arr.data = c->p + c->off;
        c->off += bytes;
        return VX_OK;
    }
    size_t sz = vx_gguf_type_size(t);
    if (sz == 0)
        return vx_seterr(c->err, c->err_size, VX_EFORMAT, "key '%s': unknown value type %u", key,
                         (unsigned)t);
    vx_status st = need(c, sz, key);
    if (st) return st;
    if (decode) scalar_decode(kv, t, c->p + c->off);
    c->off += sz;
    return VX_OK;
}

/* The alignment a type's data needs to be read in place: elements their
 * own size up to 8 bytes, blocks their fp16 scales' 2 (1 for odd sizes). */
static size_t data_align(const vx_type_traits *tr) {
    return tr->blck_size == 1 ? (tr->type_size < 8 ? tr->type_size : 8) : tr->type_size % 2 ? 1 : 2;
}

static const char *kv_name(const void *g, int64_t i) { return ((const vx_gguf *)g)->kv[i].key; }
static const char *t_name(const void *g, int64_t i) { return ((const vx_gguf *)g)->tensors[i].name; }

typedef struct offset_ref {
    uint64_t offset;
    int64_t i;
} offset_ref;

static int offset_ref_cmp(const void *pa, const void *pb) {
    const offset_ref *a = pa, *b = pb;
    if (a->offset != b->offset) return a->offset < b->offset ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i; /* ties by index: deterministic messages */
}

/* Parses header, metadata and tensor infos in two passes over the image:
 * the first validates and sizes, the second copies. */
static vx_status parse(vx_gguf *g, char *err, size_t err_size) {
    cursor c = {g->base, 0, g->size, err, err_size};
    char magic[4];
    vx_status st = rd(&c, magic, 4, "magic");
    if (st) return st;
    if (memcmp(magic, "GGUF", 4) != 0)
        return vx_seterr(err, err_size, VX_EFORMAT,
                         "not a GGUF file (magic is %02x %02x %02x %02x, expected 'GGUF')",
                         (uint8_t)magic[0], (uint8_t)magic[1], (uint8_t)magic[2],
                         (uint8_t)magic[3]);
    if ((st = rd_u32(&c, &g->version, "version"))) return st;
    if (g->version == 1)
        return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                         "GGUF version 1 is not supported (re-convert the model to v3)");
    if (g->version != 2 && g->version != 3)
        return vx_seterr(err, err_size, VX_EFORMAT, "unknown GGUF version %u", g->version);
    uint64_t n_tensors, n_kv;
    if ((st = rd_u64(&c, &n_tensors, "tensor count"))) return st;
    if ((st = rd_u64(&c, &n_kv, "metadata count"))) return st;
    if (n_kv > GGUF_MAX_KV)
        return vx_seterr(err, err_size, VX_EFORMAT, "metadata count %llu is implausibly large",
                         (unsigned long long)n_kv);
    if (n_tensors > GGUF_MAX_TENSORS)
        return vx_seterr(err, err_size, VX_EFORMAT, "tensor count %llu is implausibly large",
                         (unsigned long long)n_tensors);

    /* pass 1: validate metadata, size the string pool */
    uint64_t pool = 0;
    int64_t n_arrays = 0;
    uint64_t kv_start = c.off;
    for (uint64_t i = 0; i < n_kv; i++) {
        const uint8_t *ks;
        uint64_t klen;
        uint32_t t;
        if ((st = rd_str_raw(&c, &ks, &klen, "metadata key"))) return st;
        pool += klen + 1;
        char kbuf[128];
        snprintf(kbuf, sizeof kbuf, "%.*s", (int)VX_MIN(klen, 100), (const char *)ks);
        if ((st = rd_u32(&c, &t, kbuf))) return st;
        if (t >= VX_GGUF_TYPE_COUNT)
            return vx_seterr(err, err_size, VX_EFORMAT, "key '%s': unknown value type %u", kbuf,
                             t);
        if ((st = value(g, &c, NULL, (vx_gguf_type)t, false, &pool, &n_arrays, kbuf))) return st;
    }
    uint64_t ti_start = c.off;
    for (uint64_t i = 0; i < n_tensors; i++) {
        const uint8_t *ns;
        uint64_t nlen;
        uint32_t nd;
        if ((st = rd_str_raw(&c, &ns, &nlen, "tensor name"))) return st;
        pool += nlen + 1;
        if ((st = rd_u32(&c, &nd, "tensor dims"))) return st;
        if (nd == 0 || nd > VX_GGUF_MAX_DIMS)
            return vx_seterr(err, err_size, VX_EFORMAT, "tensor '%.*s': %u dimensions (1..%d)",
                             (int)VX_MIN(nlen, 100), (const char *)ns, nd, VX_GGUF_MAX_DIMS);
        if ((st = need(&c, (uint64_t)nd * 8 + 4 + 8, "tensor info"))) return st;
        c.off += (uint64_t)nd * 8 + 4 + 8;
    }

    /* allocate everything at once */
    g->n_kv = (int64_t)n_kv;
    g->n_tensors = (int64_t)n_tensors;
    g->kv = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    g->strpool_cap = pool + 1;
    g->strpool = malloc(g->strpool_cap);
    g->str_arrays = calloc((size_t)n_arrays + 1, sizeof *g->str_arrays);
    if (!g->kv || !g->tensors || !g->strpool || !g->str_arrays || !vx_name_index_reserve(&g->kv_ix, n_kv, kv_name, g) ||
        !vx_name_index_reserve(&g->t_ix, n_tensors, t_name, g))
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory reading GGUF metadata");

    /* pass 2: decode (already validated, so errors here are not expected) */
    c.off = kv_start;
    g->alignment = VX_GGUF_DEFAULT_ALIGNMENT;
    for (int64_t i = 0; i < g->n_kv; i++) {
        vx_gguf_kv *kv = &g->kv[i];
        const uint8_t *ks;
        uint64_t klen;
        uint32_t t;
        if ((st = rd_str_raw(&c, &ks, &klen, "metadata key"))) return st;
        kv->key = pool_put(g, ks, klen);
        if (strlen(kv->key) != klen)
            return vx_seterr(err, err_size, VX_EFORMAT, "metadata key %lld contains a NUL byte",
                             (long long)i);
        /* nothing can look an empty key up, and no writer (ours included)
         * accepts one: the file was accepted, then vx quantize failed */
        if (klen == 0)
            return vx_seterr(err, err_size, VX_EFORMAT, "metadata key %lld is empty", (long long)i);
        if ((st = rd_u32(&c, &t, kv->key))) return st;
        kv->type = (vx_gguf_type)t;
        if ((st = value(g, &c, kv, kv->type, true, NULL, NULL, kv->key))) return st;
        if (vx_name_index_add(&g->kv_ix, i, kv_name, g) != 1) /* reserved: 0, a duplicate */
            return vx_seterr(err, err_size, VX_EFORMAT, "duplicate metadata key '%s'", kv->key);
    }
    VX_ASSERT(c.off == ti_start);

    const vx_gguf_kv *al = vx_gguf_find(g, "general.alignment");
    if (al) {
        if (al->type != VX_GGUF_UINT32)
            return vx_seterr(err, err_size, VX_EFORMAT, "general.alignment has type %s, not u32",
                             vx_gguf_type_name(al->type));
        uint64_t a = al->v.u64;
        if (a == 0 || (a & (a - 1)) || a > (1u << 16))
            return vx_seterr(err, err_size, VX_EFORMAT,
                             "general.alignment %llu is not a power of two <= 65536",
                             (unsigned long long)a);
        g->alignment = (size_t)a;
    }

    for (int64_t i = 0; i < g->n_tensors; i++) {
        vx_gguf_tensor *t = &g->tensors[i];
        const uint8_t *ns;
        uint64_t nlen;
        if ((st = rd_str_raw(&c, &ns, &nlen, "tensor name"))) return st;
        t->name = pool_put(g, ns, nlen);
        if (strlen(t->name) != nlen)
            return vx_seterr(err, err_size, VX_EFORMAT, "tensor %lld name contains a NUL byte",
                             (long long)i);
        if (nlen == 0) return vx_seterr(err, err_size, VX_EFORMAT, "tensor %lld has an empty name", (long long)i);
        if ((st = rd_u32(&c, &t->n_dims, t->name))) return st;
        /* span = product of the dims with 0 counted as 1: a zero dim must
         * not hide an overflowing product of the others (a [2^62, 0, 2^62]
         * tensor holds no bytes, but ne0 * ne2 or its row size would wrap
         * in any consumer that computes them) */
        uint64_t nelem = 1, span = 1;
        for (uint32_t d = 0; d < VX_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            uint64_t ne;
            if ((st = rd_u64(&c, &ne, t->name))) return st;
            if (ne > INT64_MAX || vx_mul_ovf(span, ne ? ne : 1, &span) || span > INT64_MAX)
                return vx_seterr(err, err_size, VX_EFORMAT,
                                 "tensor '%s': dimensions overflow the element count", t->name);
            nelem *= ne; /* <= span */
            t->ne[d] = (int64_t)ne;
        }
        uint32_t type;
        if ((st = rd_u32(&c, &type, t->name))) return st;
        if ((st = rd_u64(&c, &t->offset, t->name))) return st;
        t->type = (int)type;
        const vx_type_traits *tr = vx_type_get_traits((int)type);
        if (!tr)
            return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                             "tensor '%s' has unsupported type id %u", t->name, type);
        if (t->ne[0] % tr->blck_size != 0)
            return vx_seterr(err, err_size, VX_EFORMAT,
                             "tensor '%s': row length %lld is not a multiple of the %s block "
                             "size %lld",
                             t->name, (long long)t->ne[0], tr->name, (long long)tr->blck_size);
        uint64_t span_bytes;
        if (vx_mul_ovf(span / (uint64_t)tr->blck_size, tr->type_size, &span_bytes))
            return vx_seterr(err, err_size, VX_EFORMAT, "tensor '%s': byte size overflows",
                             t->name);
        t->size = nelem / (uint64_t)tr->blck_size * tr->type_size; /* <= span_bytes */
        if (t->offset % g->alignment != 0)
            return vx_seterr(err, err_size, VX_EFORMAT,
                             "tensor '%s': offset %llu is not aligned to %zu", t->name,
                             (unsigned long long)t->offset, g->alignment);
        if (vx_name_index_add(&g->t_ix, i, t_name, g) != 1)
            return vx_seterr(err, err_size, VX_EFORMAT, "duplicate tensor name '%s'", t->name);
    }

    uint64_t data = c.off;
    uint64_t rem = data % g->alignment;
    if (rem) data += g->alignment - rem;
    g->data_offset = data;
    if (g->ext_data) {
        /* detached: the bytes live in other buffers (vx_gguf_open_detached) */
        for (int64_t i = 0; i < g->n_tensors; i++) {
            vx_gguf_tensor *t = &g->tensors[i];
            const vx_type_traits *tr = vx_type_get_traits((int)t->type);
            const size_t need = data_align(tr);
            t->data = g->ext_data[i];
            if (t->size && (!t->data || (uintptr_t)t->data % need != 0))
                return vx_seterr(err, err_size, VX_EFORMAT, "tensor '%s' (%s): its data is %s", t->name,
                                 tr->name, t->data ? "misaligned for its type" : "missing");
            g->ext_bytes += t->size;
        }
        return VX_OK;
    }
    for (int64_t i = 0; i < g->n_tensors; i++) {
        vx_gguf_tensor *t = &g->tensors[i];
        uint64_t start, end;
        if (vx_add_ovf(data, t->offset, &start) || vx_add_ovf(start, t->size, &end) ||
            end > g->size)
            return vx_seterr(err, err_size, VX_EFORMAT,
                             "tensor '%s': data at offset %llu of the data section (byte %llu of the file), "
                             "%llu bytes, lies beyond the end of the file (%llu bytes): the file is truncated "
                             "or corrupt",
                             t->name, (unsigned long long)t->offset, (unsigned long long)(data + t->offset),
                             (unsigned long long)t->size, (unsigned long long)g->size);
        /* The kernels read values in place: an F32 tensor at an odd byte
         * (general.alignment 1 or 2; GGUF asks for multiples of 8) was a
         * misaligned load (UBSan). */
        const vx_type_traits *tr = vx_type_get_traits((int)t->type);
        const size_t need = data_align(tr);
        if (start % need != 0)
            return vx_seterr(err, err_size, VX_EFORMAT,
                             "tensor '%s' (%s) starts at byte %llu of the file, not a multiple of %zu, so its "
                             "values cannot be read in place (general.alignment = %zu; GGUF writers use 32)",
                             t->name, tr->name, (unsigned long long)start, need, g->alignment);
        t->data = g->base + start;
    }
    /* Overlapping tensor data is a corrupt file: check on offsets sorted. */
    if (g->n_tensors > 1) {
        /* sorted (offset, index) pairs: qsort, since a hostile file can list
         * a million tensors in reverse order (quadratic sorts hang on it) */
        offset_ref *ord = malloc((size_t)g->n_tensors * sizeof *ord);
        if (!ord) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
        for (int64_t i = 0; i < g->n_tensors; i++) ord[i] = (offset_ref){g->tensors[i].offset, i};
        qsort(ord, (size_t)g->n_tensors, sizeof *ord, offset_ref_cmp);
        for (int64_t i = 1; i < g->n_tensors; i++) {
            const vx_gguf_tensor *a = &g->tensors[ord[i - 1].i], *b = &g->tensors[ord[i].i];
            if (a->offset + a->size > b->offset) {
                st = vx_seterr(err, err_size, VX_EFORMAT,
                               "tensors '%s' and '%s' overlap in the data section", a->name,
                               b->name);
                free(ord);
                return st;
            }
        }
        free(ord);
    }
    return VX_OK;
}

static vx_status open_common(vx_gguf *g, vx_gguf **out, char *err, size_t err_size) {
    vx_status st = parse(g, err, err_size);
    if (st) {
        vx_gguf_close(g);
        return st;
    }
    *out = g;
    return VX_OK;
}

vx_status vx_gguf_open_mem(const void *data, size_t size, vx_gguf **out, char *err,
                           size_t err_size) {
    *out = NULL;
    vx_gguf *g = calloc(1, sizeof *g);
    if (!g) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    g->base = data;
    g->size = size;
    return open_common(g, out, err, err_size);
}

vx_status vx_gguf_open_detached(void *image, size_t size, const void *const *data, int64_t n_data,
                                void (*release)(void *), void *owner, vx_gguf **out, char *err,
                                size_t err_size) {
    *out = NULL;
    vx_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        free(image);
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    }
    g->base = image;
    g->size = size;
    g->owns_base = true;
    g->ext_data = data;
    vx_status st = parse(g, err, err_size);
    if (!st && g->n_tensors != n_data)
        st = vx_seterr(err, err_size, VX_EINVAL, "%lld tensor data pointers for %lld tensors",
                       (long long)n_data, (long long)g->n_tensors);
    g->ext_data = NULL;
    if (st) {
        vx_gguf_close(g); /* frees the image, not the owner */
        return st;
    }
    g->release = release;
    g->owner = owner;
    *out = g;
    return VX_OK;
}

vx_status vx_gguf_open(const char *path, vx_gguf **out, char *err, size_t err_size) {
    *out = NULL;
    const void *p;
    uint64_t size;
    vx_status st0 = vx_map_file(path, 24, "GGUF", &p, &size, err, err_size);
    if (st0) return st0;
    vx_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        munmap((void *)p, (size_t)size);
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    }
    g->base = p;
    g->size = size;
    g->mapped = true;
    vx_status st = open_common(g, out, err, err_size);
    if (st && err && err_size > 0) {
        /* prefix the path to the message */
        char tmp[VX_ERRMSG_MAX];
        snprintf(tmp, sizeof tmp, "%s", err);
        snprintf(err, err_size, "%s: %s", path, tmp);
    }
    return st;
}

void vx_gguf_close(vx_gguf *g) {
    if (!g) return;
    if (g->mapped) munmap((void *)g->base, g->size);
    if (g->owns_base) free((void *)g->base);
    if (g->release) g->release(g->owner);
    for (int64_t i = 0; i < g->n_str_arrays; i++) free(g->str_arrays[i]);
    free(g->str_arrays);
    free(g->kv);
    free(g->tensors);
    free(g->strpool);
    vx_name_index_free(&g->kv_ix);
    vx_name_index_free(&g->t_ix);
    free(g);
}

uint32_t vx_gguf_version(const vx_gguf *g) { return g->version; }
size_t vx_gguf_alignment(const vx_gguf *g) { return g->alignment; }
uint64_t vx_gguf_file_size(const vx_gguf *g) { return g->size + g->ext_bytes; }
uint64_t vx_gguf_data_offset(const vx_gguf *g) { return g->data_offset; }
int64_t vx_gguf_n_kv(const vx_gguf *g) { return g->n_kv; }
int64_t vx_gguf_n_tensors(const vx_gguf *g) { return g->n_tensors; }

const vx_gguf_kv *vx_gguf_kv_at(const vx_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? &g->kv[i] : NULL;
}

const vx_gguf_tensor *vx_gguf_tensor_at(const vx_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const vx_gguf_kv *vx_gguf_find(const vx_gguf *g, const char *key) {
    int64_t i = vx_name_index_find(&g->kv_ix, key, kv_name, g);
    return i >= 0 ? &g->kv[i] : NULL;
}

const vx_gguf_tensor *vx_gguf_find_tensor(const vx_gguf *g, const char *name) {
    int64_t i = vx_name_index_find(&g->t_ix, name, t_name, g);
    return i >= 0 ? &g->tensors[i] : NULL;
}

static int kv_to_i64(const vx_gguf_kv *kv, int64_t *out) {
    switch (kv->type) {
    case VX_GGUF_UINT8: case VX_GGUF_UINT16: case VX_GGUF_UINT32: case VX_GGUF_UINT64:
        if (kv->v.u64 > INT64_MAX) return -1;
        *out = (int64_t)kv->v.u64;
        return 1;
    case VX_GGUF_INT8: case VX_GGUF_INT16: case VX_GGUF_INT32: case VX_GGUF_INT64:
        *out = kv->v.i64;
        return 1;
    default: return -1;
    }
}

int vx_gguf_get_i64(const vx_gguf *g, const char *key, int64_t *out) {
    const vx_gguf_kv *kv = vx_gguf_find(g, key);
    if (!kv) return 0;
    return kv_to_i64(kv, out);
}

int vx_gguf_get_f64(const vx_gguf *g, const char *key, double *out) {
    const vx_gguf_kv *kv = vx_gguf_find(g, key);
    if (!kv) return 0;
    if (kv->type == VX_GGUF_FLOAT32 || kv->type == VX_GGUF_FLOAT64) {
        *out = kv->v.f64;
        return 1;
    }
    int64_t i;
    if (kv_to_i64(kv, &i) == 1) {
        *out = (double)i;
        return 1;
    }
    return -1;
}

int vx_gguf_get_bool(const vx_gguf *g, const char *key, bool *out) {
    const vx_gguf_kv *kv = vx_gguf_find(g, key);
    if (!kv) return 0;
    if (kv->type != VX_GGUF_BOOL) return -1;
    *out = kv->v.b;
    return 1;
}

int vx_gguf_get_str(const vx_gguf *g, const char *key, const char **out) {
    const vx_gguf_kv *kv = vx_gguf_find(g, key);
    if (!kv) return 0;
    if (kv->type != VX_GGUF_STRING) return -1;
    *out = kv->v.str.s;
    return 1;
}

int vx_gguf_get_arr(const vx_gguf *g, const char *key, vx_gguf_type *type, uint64_t *n,
                    const vx_gguf_kv **kvp) {
    const vx_gguf_kv *kv = vx_gguf_find(g, key);
    if (!kv) return 0;
    if (kv->type != VX_GGUF_ARRAY) return -1;
    if (type) *type = kv->v.arr.type;
    if (n) *n = kv->v.arr.n;
    if (kvp) *kvp = kv;
    return 1;
}

/* Float to int64 without UB: truncates toward zero, saturates out-of-range
 * values and maps NaN to 0 (the values come from the file). */
static int64_t f64_to_i64_sat(double x) {
    if (x != x) return 0;
    if (x >= 9223372036854775808.0) return INT64_MAX;
    if (x <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)x;
}

int64_t vx_gguf_arr_i64(const vx_gguf_kv *kv, uint64_t i) {
    vx_gguf_kv tmp;
    vx_gguf_type t = kv->v.arr.type;
    size_t sz = vx_gguf_type_size(t);
    if (sz == 0) return 0;
    scalar_decode(&tmp, t, (const uint8_t *)kv->v.arr.data + i * sz);
    if (t == VX_GGUF_FLOAT32 || t == VX_GGUF_FLOAT64) return f64_to_i64_sat(tmp.v.f64);
    if (t == VX_GGUF_BOOL) return tmp.v.b;
    return is_signed(t) ? tmp.v.i64 : (int64_t)tmp.v.u64;
}

double vx_gguf_arr_f64(const vx_gguf_kv *kv, uint64_t i) {
    vx_gguf_kv tmp;
    vx_gguf_type t = kv->v.arr.type;
    size_t sz = vx_gguf_type_size(t);
    if (sz == 0) return 0;
    scalar_decode(&tmp, t, (const uint8_t *)kv->v.arr.data + i * sz);
    if (t == VX_GGUF_FLOAT32 || t == VX_GGUF_FLOAT64) return tmp.v.f64;
    if (t == VX_GGUF_BOOL) return tmp.v.b;
    return is_signed(t) ? (double)tmp.v.i64 : (double)tmp.v.u64;
}
