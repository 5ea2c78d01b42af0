/*
 * gguf_write.c - GGUF v3 writer (the vx_gguf_writer_* / vx_gguf_set_* API of
 * gguf.h): collects metadata and tensors in memory, then writes the file to
 * a temporary name in the destination directory and renames it into place,
 * so a failed or interrupted write never leaves a partial file under the
 * final name.
 *
 * Values are kept pre-serialized (the bytes that follow the value-type field
 * in the file), so replacing a key is freeing one blob and writing is a copy.
 * The layout matches what gguf.c reads: tensor data starts at the first
 * multiple of the alignment after the tensor infos, every tensor starts at a
 * multiple of the alignment (offsets relative to the data section), and each
 * tensor's data is padded to the alignment, including the last one.
 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "name_index.h"
#include "quant.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf_write.c stores values in host order: it needs a little-endian host"
#endif

/* Keys and tensor names longer than this are refused: the GGUF spec caps
 * keys at 65535 bytes, and a longer name is a caller bug, not data. */
#define WR_MAX_NAME 65535u

typedef struct wr_kv {
    char *key;
    uint64_t key_len;
    vx_gguf_type type;
    uint8_t *blob; /* serialized value */
    uint64_t blob_len;
} wr_kv;

typedef struct wr_tensor {
    char *name;
    uint64_t name_len;
    int type;
    uint32_t n_dims;
    int64_t ne[VX_GGUF_MAX_DIMS];
    const void *data;
    uint64_t size;
    bool owned; /* data is our copy */
    uint64_t offset; /* assigned at write time */
} wr_tensor;

struct vx_gguf_writer {
    wr_kv *kv;
    size_t n_kv, cap_kv;
    wr_tensor *t;
    size_t n_t, cap_t;
    /* names to entries: finding a key to replace and the duplicate-tensor
     * check were linear scans, so `vx quantize` of a file with 100k keys
     * took 21 s (2^20, which the reader allows, ~40 minutes) */
    vx_name_index kv_ix, t_ix;
};

vx_gguf_writer *vx_gguf_writer_init(void) { return calloc(1, sizeof(vx_gguf_writer)); }

static const char *kv_name(const void *w, int64_t i) { return ((const vx_gguf_writer *)w)->kv[i].key; }
static const char *t_name(const void *w, int64_t i) { return ((const vx_gguf_writer *)w)->t[i].name; }

void vx_gguf_writer_free(vx_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].blob);
    }
    for (size_t i = 0; i < w->n_t; i++) {
        free(w->t[i].name);
        if (w->t[i].owned) free((void *)w->t[i].data);
    }
    free(w->kv);
    free(w->t);
    vx_name_index_free(&w->kv_ix);
    vx_name_index_free(&w->t_ix);
    free(w);
}

/* ------------------------------------------------------------ metadata */

static bool name_ok(const char *s, uint64_t *len) {
    if (!s) return false;
    size_t n = strnlen(s, WR_MAX_NAME + 1);
    if (n == 0 || n > WR_MAX_NAME) return false;
    *len = n;
    return true;
}

static bool scalar_type(vx_gguf_type t) {
    return (unsigned)t < VX_GGUF_TYPE_COUNT && vx_gguf_type_size(t) > 0;
}

/* Stores key -> (type, blob), taking ownership of blob (freed on error).
 * An existing key keeps its position and gets the new type and value. */
static vx_status put_kv(vx_gguf_writer *w, const char *key, vx_gguf_type type, uint8_t *blob,
                        uint64_t blob_len) {
    uint64_t klen;
    if (!w || !name_ok(key, &klen)) {
        free(blob);
        return VX_EINVAL;
    }
    const int64_t at = vx_name_index_find(&w->kv_ix, key, kv_name, w);
    if (at >= 0) {
        free(w->kv[at].blob);
        w->kv[at].type = type;
        w->kv[at].blob = blob;
        w->kv[at].blob_len = blob_len;
        return VX_OK;
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? w->cap_kv * 2 : 16;
        wr_kv *nk = realloc(w->kv, cap * sizeof *nk);
        if (!nk) {
            free(blob);
            return VX_ENOMEM;
        }
        w->kv = nk;
        w->cap_kv = cap;
    }
    char *k = malloc(klen + 1);
    if (!k) {
        free(blob);
        return VX_ENOMEM;
    }
    memcpy(k, key, klen + 1);
    w->kv[w->n_kv] = (wr_kv){k, klen, type, blob, blob_len};
    if (vx_name_index_add(&w->kv_ix, (int64_t)w->n_kv, kv_name, w) != 1) {
        free(k);
        free(blob);
        return VX_ENOMEM;
    }
    w->n_kv++;
    return VX_OK;
}

/* Copies n scalars of type t; bools are normalised to 0/1 so the file never
 * holds a byte that is not a valid bool. */
static void put_scalars(uint8_t *dst, vx_gguf_type t, const void *src, uint64_t n) {
    size_t sz = vx_gguf_type_size(t);
    if (n) memcpy(dst, src, n * sz);
    if (t == VX_GGUF_BOOL)
        for (uint64_t i = 0; i < n; i++) dst[i] = dst[i] != 0;
}

static vx_status set_scalar(vx_gguf_writer *w, const char *key, vx_gguf_type t, const void *v) {
    if (!v || !scalar_type(t)) return VX_EINVAL;
    size_t sz = vx_gguf_type_size(t);
    uint8_t *b = malloc(sz);
    if (!b) return VX_ENOMEM;
    put_scalars(b, t, v, 1);
    return put_kv(w, key, t, b, sz);
}

/* Strings may hold NUL bytes (copy_kv carries them over), hence the length. */
static vx_status set_str_len(vx_gguf_writer *w, const char *key, const char *s, uint64_t len) {
    if (!s && len) return VX_EINVAL;
    uint64_t total;
    if (vx_add_ovf(len, 8, &total) || total > SIZE_MAX) return VX_ENOMEM;
    uint8_t *b = malloc((size_t)total);
    if (!b) return VX_ENOMEM;
    memcpy(b, &len, 8);
    if (len) memcpy(b + 8, s, (size_t)len);
    return put_kv(w, key, VX_GGUF_STRING, b, total);
}

vx_status vx_gguf_set_u32(vx_gguf_writer *w, const char *key, uint32_t v) {
    return set_scalar(w, key, VX_GGUF_UINT32, &v);
}
vx_status vx_gguf_set_i32(vx_gguf_writer *w, const char *key, int32_t v) {
    return set_scalar(w, key, VX_GGUF_INT32, &v);
}
vx_status vx_gguf_set_u64(vx_gguf_writer *w, const char *key, uint64_t v) {
    return set_scalar(w, key, VX_GGUF_UINT64, &v);
}
vx_status vx_gguf_set_f32(vx_gguf_writer *w, const char *key, float v) {
    return set_scalar(w, key, VX_GGUF_FLOAT32, &v);
}
vx_status vx_gguf_set_bool(vx_gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return set_scalar(w, key, VX_GGUF_BOOL, &b);
}
vx_status vx_gguf_set_str(vx_gguf_writer *w, const char *key, const char *v) {
    if (!v) return VX_EINVAL;
    return set_str_len(w, key, v, strlen(v));
}

/* Scalars: v points at one packed little-endian value (BOOL: one byte).
 * STRING: v is the NUL-terminated string itself. ARRAY: use set_arr. */
vx_status vx_gguf_set_val(vx_gguf_writer *w, const char *key, vx_gguf_type type, const void *v) {
    if (type == VX_GGUF_STRING) return vx_gguf_set_str(w, key, v);
    return set_scalar(w, key, type, v);
}

vx_status vx_gguf_set_arr(vx_gguf_writer *w, const char *key, vx_gguf_type elem_type,
                          const void *data, uint64_t n) {
    if (!scalar_type(elem_type) || (!data && n)) return VX_EINVAL;
    uint64_t bytes, total;
    if (vx_mul_ovf(n, vx_gguf_type_size(elem_type), &bytes) || vx_add_ovf(bytes, 12, &total) ||
        total > SIZE_MAX)
        return VX_ENOMEM;
    uint8_t *b = malloc((size_t)total);
    if (!b) return VX_ENOMEM;
    uint32_t et = (uint32_t)elem_type;
    memcpy(b, &et, 4);
    memcpy(b + 4, &n, 8);
    put_scalars(b + 12, elem_type, data, n);
    return put_kv(w, key, VX_GGUF_ARRAY, b, total);
}

/* Array of n strings; lens == NULL means NUL-terminated strings. */
static vx_status set_arr_str_len(vx_gguf_writer *w, const char *key, const char *const *strs,
                                 const uint64_t *lens, uint64_t n) {
    if (!strs && n) return VX_EINVAL;
    uint64_t total = 12;
    for (uint64_t i = 0; i < n; i++) {
        if (!strs[i] && (!lens || lens[i])) return VX_EINVAL;
        uint64_t len = lens ? lens[i] : strlen(strs[i]);
        if (vx_add_ovf(total, 8, &total) || vx_add_ovf(total, len, &total)) return VX_ENOMEM;
    }
    if (total > SIZE_MAX) return VX_ENOMEM;
    uint8_t *b = malloc((size_t)total);
    if (!b) return VX_ENOMEM;
    uint32_t et = VX_GGUF_STRING;
    memcpy(b, &et, 4);
    memcpy(b + 4, &n, 8);
    uint8_t *p = b + 12;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len = lens ? lens[i] : strlen(strs[i]);
        memcpy(p, &len, 8);
        if (len) memcpy(p + 8, strs[i], (size_t)len);
        p += 8 + len;
    }
    return put_kv(w, key, VX_GGUF_ARRAY, b, total);
}

vx_status vx_gguf_set_arr_str(vx_gguf_writer *w, const char *key, const char *const *strs,
                              uint64_t n) {
    return set_arr_str_len(w, key, strs, NULL, n);
}

/* Re-packs a decoded scalar into its file width. */
static vx_status copy_scalar(vx_gguf_writer *w, const vx_gguf_kv *kv) {
    union {
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        float f32;
        uint64_t u64;
        int64_t i64;
        double f64;
    } x;
    switch (kv->type) {
    case VX_GGUF_UINT8: x.u8 = (uint8_t)kv->v.u64; break;
    case VX_GGUF_INT8: x.i8 = (int8_t)kv->v.i64; break;
    case VX_GGUF_UINT16: x.u16 = (uint16_t)kv->v.u64; break;
    case VX_GGUF_INT16: x.i16 = (int16_t)kv->v.i64; break;
    case VX_GGUF_UINT32: x.u32 = (uint32_t)kv->v.u64; break;
    case VX_GGUF_INT32: x.i32 = (int32_t)kv->v.i64; break;
    case VX_GGUF_FLOAT32: x.f32 = (float)kv->v.f64; break; /* exact: it was a float */
    case VX_GGUF_BOOL: x.u8 = kv->v.b; break;
    case VX_GGUF_UINT64: x.u64 = kv->v.u64; break;
    case VX_GGUF_INT64: x.i64 = kv->v.i64; break;
    case VX_GGUF_FLOAT64: x.f64 = kv->v.f64; break;
    default: return VX_EINVAL;
    }
    return set_scalar(w, kv->key, kv->type, &x);
}

static vx_status copy_one(vx_gguf_writer *w, const vx_gguf_kv *kv) {
    if (kv->type == VX_GGUF_STRING) return set_str_len(w, kv->key, kv->v.str.s, kv->v.str.len);
    if (kv->type != VX_GGUF_ARRAY) return copy_scalar(w, kv);
    if (kv->v.arr.type != VX_GGUF_STRING)
        return vx_gguf_set_arr(w, kv->key, kv->v.arr.type, kv->v.arr.data, kv->v.arr.n);
    uint64_t n = kv->v.arr.n;
    if (n > SIZE_MAX / (sizeof(char *) + sizeof(uint64_t))) return VX_ENOMEM;
    const char **strs = malloc((n ? n : 1) * sizeof *strs);
    uint64_t *lens = malloc((n ? n : 1) * sizeof *lens);
    vx_status st = VX_ENOMEM;
    if (strs && lens) {
        for (uint64_t i = 0; i < n; i++) {
            strs[i] = kv->v.arr.strs[i].s;
            lens[i] = kv->v.arr.strs[i].len;
        }
        st = set_arr_str_len(w, kv->key, strs, lens, n);
    }
    free(strs);
    free(lens);
    return st;
}

vx_status vx_gguf_copy_kv(vx_gguf_writer *w, const vx_gguf *src) {
    if (!w || !src) return VX_EINVAL;
    for (int64_t i = 0; i < vx_gguf_n_kv(src); i++) {
        vx_status st = copy_one(w, vx_gguf_kv_at(src, i));
        if (st) return st;
    }
    return VX_OK;
}

/* -------------------------------------------------------------- tensors */

vx_status vx_gguf_add_tensor(vx_gguf_writer *w, const char *name, int type, uint32_t n_dims,
                             const int64_t *ne, const void *data, uint64_t size, bool borrow) {
    uint64_t nlen;
    if (!w || !name_ok(name, &nlen) || !ne || n_dims == 0 || n_dims > VX_GGUF_MAX_DIMS)
        return VX_EINVAL;
    const vx_type_traits *tr = vx_type_get_traits(type);
    if (!tr) return VX_EINVAL;
    /* the reader's geometry rules: the product of the dims, with zero dims
     * counted as 1, must fit in int64 elements and in uint64 bytes */
    uint64_t nelem = 1, span = 1, span_bytes;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 0 || vx_mul_ovf(span, ne[d] ? (uint64_t)ne[d] : 1, &span) || span > INT64_MAX)
            return VX_EINVAL;
        nelem *= (uint64_t)ne[d]; /* <= span */
    }
    if (ne[0] % tr->blck_size != 0 ||
        vx_mul_ovf(span / (uint64_t)tr->blck_size, tr->type_size, &span_bytes))
        return VX_EINVAL;
    /* whole rows of whole blocks: nelem / blck_size blocks in all */
    if (nelem / (uint64_t)tr->blck_size * tr->type_size != size) return VX_EINVAL;
    if (!data && size) return VX_EINVAL;
    if (vx_name_index_find(&w->t_ix, name, t_name, w) >= 0) return VX_EINVAL;
    if (size > SIZE_MAX) return VX_ENOMEM;
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? w->cap_t * 2 : 64;
        wr_tensor *nt = realloc(w->t, cap * sizeof *nt);
        if (!nt) return VX_ENOMEM;
        w->t = nt;
        w->cap_t = cap;
    }
    wr_tensor t = {0};
    t.name = malloc(nlen + 1);
    if (!t.name) return VX_ENOMEM;
    memcpy(t.name, name, nlen + 1);
    t.name_len = nlen;
    t.type = type;
    t.n_dims = n_dims;
    for (uint32_t d = 0; d < VX_GGUF_MAX_DIMS; d++) t.ne[d] = d < n_dims ? ne[d] : 1;
    t.size = size;
    if (borrow || size == 0) {
        t.data = data;
    } else {
        void *copy = malloc((size_t)size);
        if (!copy) {
            free(t.name);
            return VX_ENOMEM;
        }
        memcpy(copy, data, (size_t)size);
        t.data = copy;
        t.owned = true;
    }
    w->t[w->n_t] = t;
    if (vx_name_index_add(&w->t_ix, (int64_t)w->n_t, t_name, w) != 1) {
        free(t.name);
        if (t.owned) free((void *)t.data);
        return VX_ENOMEM;
    }
    w->n_t++;
    return VX_OK;
}

/* --------------------------------------------------------------- output */

/* Buffered writer over a file descriptor; the first error sticks (errno
 * value in err) and later writes are no-ops, so callers check once. */
typedef struct wr_out {
    int fd;  /* -1: into mem */
    int err;
    uint64_t pos;
    size_t used;
    uint8_t *mem;
    size_t mem_len, mem_cap;
    uint8_t buf[1 << 16];
} wr_out;

static void raw_write(wr_out *o, const uint8_t *p, size_t n) {
    if (o->fd < 0 && n > 0 && !o->err) {
        if (n > o->mem_cap - o->mem_len) {
            size_t cap = o->mem_cap ? o->mem_cap : 4096;
            while (cap - o->mem_len < n) {
                if (cap > SIZE_MAX / 2) {
                    o->err = ENOMEM;
                    return;
                }
                cap *= 2;
            }
            uint8_t *m = realloc(o->mem, cap);
            if (!m) {
                o->err = ENOMEM;
                return;
            }
            o->mem = m;
            o->mem_cap = cap;
        }
        memcpy(o->mem + o->mem_len, p, n);
        o->mem_len += n;
        return;
    }
    while (n > 0 && !o->err) {
        /* cap single writes: some systems refuse counts above 2 GiB */
        size_t chunk = VX_MIN(n, (size_t)1 << 30);
        ssize_t k = write(o->fd, p, chunk);
        if (k < 0) {
            if (errno == EINTR) continue;
            o->err = errno;
        } else if (k == 0) {
            o->err = EIO; /* no progress and no errno: treat as an I/O error */
        } else {
            p += k;
            n -= (size_t)k;
        }
    }
}

static void out_flush(wr_out *o) {
    raw_write(o, o->buf, o->used);
    o->used = 0;
}

static void out_put(wr_out *o, const void *src, uint64_t n) {
    const uint8_t *p = src;
    o->pos += n;
    if (n > sizeof o->buf - o->used) {
        out_flush(o);
        if (n >= sizeof o->buf) { /* large tensor data: skip the copy */
            while (n > 0 && !o->err) {
                size_t chunk = (size_t)VX_MIN(n, (uint64_t)SIZE_MAX);
                raw_write(o, p, chunk);
                p += chunk;
                n -= chunk;
            }
            return;
        }
    }
    memcpy(o->buf + o->used, p, (size_t)n);
    o->used += (size_t)n;
}

static void out_u32(wr_out *o, uint32_t v) { out_put(o, &v, 4); }
static void out_u64(wr_out *o, uint64_t v) { out_put(o, &v, 8); }

static void out_pad(wr_out *o, uint64_t align) {
    static const uint8_t zeros[256];
    uint64_t rem = o->pos % align;
    if (!rem) return;
    for (uint64_t n = align - rem; n > 0;) {
        uint64_t k = VX_MIN(n, (uint64_t)sizeof zeros);
        out_put(o, zeros, k);
        n -= k;
    }
}

static const char *errno_name(int e) {
    switch (e) {
    case ENOSPC: return "ENOSPC";
    case EIO: return "EIO";
    case EDQUOT: return "EDQUOT";
    case EFBIG: return "EFBIG";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case EROFS: return "EROFS";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    default: return NULL;
    }
}

static vx_status io_err(char *err, size_t err_size, const char *what, const char *path, int e) {
    const char *nm = errno_name(e);
    return vx_seterr(err, err_size, VX_EIO, "%s %s: %s%s%s%s", what, path, strerror(e),
                     nm ? " (" : "", nm ? nm : "", nm ? ")" : "");
}

/* Alignment the file will use: general.alignment if set, which must then
 * be a u32 power of two the reader accepts (<= 65536). */
static vx_status writer_alignment(const vx_gguf_writer *w, uint64_t *align, char *err,
                                  size_t err_size) {
    *align = VX_GGUF_DEFAULT_ALIGNMENT;
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, "general.alignment") != 0) continue;
        uint32_t a = 0;
        if (w->kv[i].type == VX_GGUF_UINT32) memcpy(&a, w->kv[i].blob, 4);
        if (w->kv[i].type != VX_GGUF_UINT32 || a == 0 || (a & (a - 1)) || a > (1u << 16))
            return vx_seterr(err, err_size, VX_EINVAL,
                             "general.alignment must be a u32 power of two <= 65536 (it is %s "
                             "%u)",
                             vx_gguf_type_name(w->kv[i].type), (unsigned)a);
        *align = a;
    }
    return VX_OK;
}

/* Lays out the data section: offsets relative to its start, each aligned. */
static vx_status assign_offsets(vx_gguf_writer *w, uint64_t align, char *err, size_t err_size) {
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        w->t[i].offset = off;
        uint64_t end, rem;
        if (vx_add_ovf(off, w->t[i].size, &end) ||
            ((rem = end % align) && vx_add_ovf(end, align - rem, &end)))
            return vx_seterr(err, err_size, VX_EINVAL, "tensor data size overflows");
        off = end;
    }
    return VX_OK;
}

static void write_header(const vx_gguf_writer *w, wr_out *o, uint64_t align) {
    out_put(o, "GGUF", 4);
    out_u32(o, 3);
    out_u64(o, (uint64_t)w->n_t);
    out_u64(o, (uint64_t)w->n_kv);
    for (size_t i = 0; i < w->n_kv && !o->err; i++) {
        const wr_kv *kv = &w->kv[i];
        out_u64(o, kv->key_len);
        out_put(o, kv->key, kv->key_len);
        out_u32(o, (uint32_t)kv->type);
        out_put(o, kv->blob, kv->blob_len);
    }
    for (size_t i = 0; i < w->n_t && !o->err; i++) {
        const wr_tensor *t = &w->t[i];
        out_u64(o, t->name_len);
        out_put(o, t->name, t->name_len);
        out_u32(o, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) out_u64(o, (uint64_t)t->ne[d]);
        out_u32(o, (uint32_t)t->type);
        out_u64(o, t->offset);
    }
    /* no tensors, no data section: nothing to align (llama.cpp's vocab-only
     * files end right after the metadata too) */
    if (w->n_t) out_pad(o, align);
}

static void write_body(const vx_gguf_writer *w, wr_out *o, uint64_t align) {
    write_header(w, o, align);
    for (size_t i = 0; i < w->n_t && !o->err; i++) {
        if (w->t[i].size) out_put(o, w->t[i].data, w->t[i].size);
        out_pad(o, align);
    }
    out_flush(o);
}

/* Creates a fresh temporary file next to path (same directory, so rename
 * stays within one file system). Mode 0666 lets the umask decide, as for
 * any newly created file. */
static int open_temp(const char *path, char **tmp_out, int *e) {
    static atomic_uint counter; /* makes names distinct; O_EXCL catches the rest */
    size_t n = strlen(path) + 64;
    char *tmp = malloc(n);
    if (!tmp) {
        *e = ENOMEM;
        return -1;
    }
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(tmp, n, "%s.tmp%ld.%u", path, (long)getpid(),
                 atomic_fetch_add(&counter, 1u));
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            *tmp_out = tmp;
            return fd;
        }
        if (errno != EEXIST) break;
    }
    *e = errno;
    free(tmp);
    return -1;
}

/* The file a write to path replaces (*out, malloc'd): path itself, or
 * where a symbolic link there points (the link stays and sees the new
 * file). Anything there that is not a regular file (a device, a fifo, a
 * directory) is refused: renaming over it would replace the node itself. */
static vx_status dest_path(const char *path, char **out, char *err, size_t err_size) {
    *out = NULL;
    if (!path || !*path) return vx_seterr(err, err_size, VX_EINVAL, "an output path is required");
    struct stat st;
    char *p = NULL;
    if (lstat(path, &st) != 0) {
        if (errno != ENOENT) return io_err(err, err_size, "cannot examine", path, errno);
        p = strdup(path); /* a new file */
    } else {
        if (S_ISLNK(st.st_mode)) {
            if (!(p = realpath(path, NULL)) && errno != ENOMEM)
                return io_err(err, err_size, "cannot follow the symbolic link", path, errno);
            if (p && stat(p, &st) != 0) {
                const int e = errno;
                free(p);
                return io_err(err, err_size, "cannot examine", path, e);
            }
        } else {
            p = strdup(path);
        }
        if (p && !S_ISREG(st.st_mode)) {
            free(p);
            return vx_seterr(err, err_size, VX_EIO, "%s is not a regular file: refusing to replace it", path);
        }
    }
    if (!p) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    *out = p;
    return VX_OK;
}

/* The temporary file a write to path starts with (*fd, name *tmp) and the
 * file it will replace (*dest): both malloc'd, or an error (nothing left). */
static vx_status open_dest(const char *path, char **dest, char **tmp, int *fd, char *err, size_t err_size) {
    vx_status st = dest_path(path, dest, err, err_size);
    if (st) return st;
    int e = 0;
    if ((*fd = open_temp(*dest, tmp, &e)) >= 0) return VX_OK;
    free(*dest);
    *dest = NULL;
    if (e == ENOMEM) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    return io_err(err, err_size, "cannot create a temporary file for", path, e);
}

vx_status vx_gguf_check_dest(const char *path, char *err, size_t err_size) {
    char *dest = NULL, *tmp = NULL;
    int fd;
    vx_status st = open_dest(path, &dest, &tmp, &fd, err, err_size);
    if (st) return st;
    close(fd);
    unlink(tmp);
    free(tmp);
    free(dest);
    return VX_OK;
}

vx_status vx_gguf_write_file(vx_gguf_writer *w, const char *path, char *err, size_t err_size) {
    if (!w || !path || !*path)
        return vx_seterr(err, err_size, VX_EINVAL, "writer and path are required");
    uint64_t align;
    vx_status st = writer_alignment(w, &align, err, err_size);
    if (st) return st;
    if ((st = assign_offsets(w, align, err, err_size))) return st;

    char *tmp = NULL, *dest = NULL;
    int fd;
    if ((st = open_dest(path, &dest, &tmp, &fd, err, err_size))) return st;
    wr_out *o = malloc(sizeof *o);
    if (!o) {
        close(fd);
        unlink(tmp);
        free(tmp);
        free(dest);
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    }
    o->fd = fd;
    o->err = 0;
    o->pos = 0;
    o->used = 0;
    o->mem = NULL;
    o->mem_len = o->mem_cap = 0;
    write_body(w, o, align);
    const char *what = "writing";
    int e = o->err;
    /* fsync before rename: delayed-allocation and network file systems
     * report ENOSPC/EIO only here, and the rename must not publish a file
     * whose data may be lost */
    if (!e && fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
        e = errno;
        what = "flushing";
    }
    if (close(fd) != 0 && !e && errno != EINTR) {
        e = errno;
        what = "closing";
    }
    free(o);
    if (!e && rename(tmp, dest) != 0) {
        e = errno;
        what = "renaming the temporary file to";
    }
    free(dest);
    if (e) {
        unlink(tmp);
        free(tmp);
        return io_err(err, err_size, what, path, e);
    }
    free(tmp);
    return VX_OK;
}

vx_status vx_gguf_writer_open_reader(vx_gguf_writer *w, void (*release)(void *), void *owner,
                                     vx_gguf **out, char *err, size_t err_size) {
    if (!w || !out) return vx_seterr(err, err_size, VX_EINVAL, "writer and out are required");
    *out = NULL;
    uint64_t align;
    vx_status st = writer_alignment(w, &align, err, err_size);
    if (st) return st;
    if ((st = assign_offsets(w, align, err, err_size))) return st;
    wr_out *o = calloc(1, sizeof *o);
    const void **data = malloc((w->n_t ? w->n_t : 1) * sizeof *data);
    if (!o || !data) {
        free(o);
        free(data);
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    }
    o->fd = -1;
    write_header(w, o, align);
    out_flush(o);
    for (size_t i = 0; i < w->n_t; i++) data[i] = w->t[i].data;
    if (o->err) {
        free(o->mem);
        free(o);
        free(data);
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    }
    st = vx_gguf_open_detached(o->mem, o->mem_len, data, (int64_t)w->n_t, release, owner, out, err, err_size);
    free(o);
    free(data);
    return st;
}
