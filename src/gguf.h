/*
 * gguf.h - GGUF file reader and writer.
 *
 * File format (v2 and v3, little-endian):
 *   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x { string key | u32 value_type | value }
 *   n_tensors x { string name | u32 n_dims | n_dims x u64 ne | u32 ggml_type | u64 offset }
 *   padding to `general.alignment` (default 32) | tensor data (offsets relative to here)
 *   string = u64 length + bytes (no NUL); array = u32 elem_type + u64 count + elements
 * (v1 used u32 counts and lengths; it is rejected as unsupported.)
 *
 * The reader maps the file read-only and validates every count, size and
 * offset against the file size with overflow checks: a truncated or corrupt
 * file yields VX_EFORMAT with a precise message, never a crash.
 */
#ifndef VX_GGUF_H
#define VX_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vortex.h"

typedef enum vx_gguf_type {
    VX_GGUF_UINT8 = 0,
    VX_GGUF_INT8 = 1,
    VX_GGUF_UINT16 = 2,
    VX_GGUF_INT16 = 3,
    VX_GGUF_UINT32 = 4,
    VX_GGUF_INT32 = 5,
    VX_GGUF_FLOAT32 = 6,
    VX_GGUF_BOOL = 7,
    VX_GGUF_STRING = 8,
    VX_GGUF_ARRAY = 9,
    VX_GGUF_UINT64 = 10,
    VX_GGUF_INT64 = 11,
    VX_GGUF_FLOAT64 = 12,
    VX_GGUF_TYPE_COUNT
} vx_gguf_type;

#define VX_GGUF_MAX_DIMS 4
#define VX_GGUF_DEFAULT_ALIGNMENT 32

typedef struct vx_gguf_str {
    const char *s; /* NUL-terminated copy (the string may also contain NULs: use len) */
    uint64_t len;
} vx_gguf_str;

typedef struct vx_gguf_kv {
    const char *key;
    vx_gguf_type type;
    union {
        uint64_t u64; /* all unsigned integer types */
        int64_t i64;  /* all signed integer types */
        double f64;   /* FLOAT32 and FLOAT64 */
        bool b;
        vx_gguf_str str;
        struct {
            vx_gguf_type type; /* element type (never ARRAY: nested arrays are rejected) */
            uint64_t n;
            const void *data;       /* numeric/bool elements, packed little-endian, maybe unaligned */
            const vx_gguf_str *strs; /* STRING elements */
        } arr;
    } v;
} vx_gguf_kv;

typedef struct vx_gguf_tensor {
    const char *name;
    int type; /* ggml type id (see quant.h) */
    uint32_t n_dims;
    int64_t ne[VX_GGUF_MAX_DIMS]; /* ne[0] = elements per row; unused dims are 1 */
    uint64_t offset;              /* relative to the data section */
    uint64_t size;                /* bytes */
    const void *data;             /* inside the mapping */
} vx_gguf_tensor;

typedef struct vx_gguf vx_gguf;

/* Opens and validates a file (mapped read-only). */
vx_status vx_gguf_open(const char *path, vx_gguf **out, char *err, size_t err_size);
/* Parses a GGUF image in memory (not copied: must outlive the handle). */
vx_status vx_gguf_open_mem(const void *data, size_t size, vx_gguf **out, char *err, size_t err_size);
/* A reader whose tensor bytes live outside the image: image (malloc'd; the
 * reader frees it, also on failure) holds a GGUF file's header up to its
 * data section, data[i] tensor i's bytes (table order; n_data pointers,
 * each aligned for its type). The tensor offsets are not checked against
 * the image. On success, closing the reader calls release(owner), which
 * must keep the data valid until then. Built by vx_gguf_writer_open_reader
 * (a model imported from another format). */
vx_status vx_gguf_open_detached(void *image, size_t size, const void *const *data, int64_t n_data,
                                void (*release)(void *), void *owner, vx_gguf **out, char *err,
                                size_t err_size);
void vx_gguf_close(vx_gguf *g);

uint32_t vx_gguf_version(const vx_gguf *g);
size_t vx_gguf_alignment(const vx_gguf *g);
uint64_t vx_gguf_file_size(const vx_gguf *g); /* detached: the header image plus the tensors' bytes */
uint64_t vx_gguf_data_offset(const vx_gguf *g);

int64_t vx_gguf_n_kv(const vx_gguf *g);
const vx_gguf_kv *vx_gguf_kv_at(const vx_gguf *g, int64_t i);
const vx_gguf_kv *vx_gguf_find(const vx_gguf *g, const char *key); /* NULL if absent */

/* Typed getters: return 1 when found and convertible, 0 when absent,
 * -1 when present with an incompatible type (ints convert to ints when in
 * range, ints and floats to double, bool only from BOOL). */
int vx_gguf_get_i64(const vx_gguf *g, const char *key, int64_t *out);
int vx_gguf_get_f64(const vx_gguf *g, const char *key, double *out);
int vx_gguf_get_bool(const vx_gguf *g, const char *key, bool *out);
int vx_gguf_get_str(const vx_gguf *g, const char *key, const char **out);
/* Array getter: element type, count, and kv (for data/strs). */
int vx_gguf_get_arr(const vx_gguf *g, const char *key, vx_gguf_type *type, uint64_t *n,
                    const vx_gguf_kv **kv);
/* Element i of a numeric array as double / int64 (no bounds check beyond n). */
double vx_gguf_arr_f64(const vx_gguf_kv *kv, uint64_t i);
int64_t vx_gguf_arr_i64(const vx_gguf_kv *kv, uint64_t i);

int64_t vx_gguf_n_tensors(const vx_gguf *g);
const vx_gguf_tensor *vx_gguf_tensor_at(const vx_gguf *g, int64_t i);
const vx_gguf_tensor *vx_gguf_find_tensor(const vx_gguf *g, const char *name);

const char *vx_gguf_type_name(vx_gguf_type t);
/* Size in bytes of a scalar GGUF value type (0 for STRING/ARRAY). */
size_t vx_gguf_type_size(vx_gguf_type t);

/* ---------------------------------------------------------------- writer */

typedef struct vx_gguf_writer vx_gguf_writer;

vx_gguf_writer *vx_gguf_writer_init(void); /* NULL on OOM */
void vx_gguf_writer_free(vx_gguf_writer *w);
/* Setting a key twice replaces the earlier value. Data is copied. */
vx_status vx_gguf_set_u32(vx_gguf_writer *w, const char *key, uint32_t v);
vx_status vx_gguf_set_i32(vx_gguf_writer *w, const char *key, int32_t v);
vx_status vx_gguf_set_u64(vx_gguf_writer *w, const char *key, uint64_t v);
vx_status vx_gguf_set_f32(vx_gguf_writer *w, const char *key, float v);
vx_status vx_gguf_set_bool(vx_gguf_writer *w, const char *key, bool v);
vx_status vx_gguf_set_str(vx_gguf_writer *w, const char *key, const char *v);
/* Generic scalar or array of scalars (elements packed little-endian). */
vx_status vx_gguf_set_val(vx_gguf_writer *w, const char *key, vx_gguf_type type, const void *v);
vx_status vx_gguf_set_arr(vx_gguf_writer *w, const char *key, vx_gguf_type elem_type,
                          const void *data, uint64_t n);
vx_status vx_gguf_set_arr_str(vx_gguf_writer *w, const char *key, const char *const *strs,
                              uint64_t n);
/* Copies every key/value of a reader (e.g. to re-quantize a model). */
vx_status vx_gguf_copy_kv(vx_gguf_writer *w, const vx_gguf *src);
/* Adds a tensor; data (size bytes, must equal the row size x rows) is copied
 * unless borrow is true, in which case it must stay valid until write. */
vx_status vx_gguf_add_tensor(vx_gguf_writer *w, const char *name, int type, uint32_t n_dims,
                             const int64_t *ne, const void *data, uint64_t size, bool borrow);
/* Writes a v3 file. */
vx_status vx_gguf_write_file(vx_gguf_writer *w, const char *path, char *err, size_t err_size);
/* The writer's keys and tensors as a reader (vx_gguf_open_detached), without
 * copying tensor data: the writer and any borrowed data must outlive the
 * reader, e.g. through release(owner), which closing the reader calls (not
 * called when this fails). */
vx_status vx_gguf_writer_open_reader(vx_gguf_writer *w, void (*release)(void *), void *owner,
                                     vx_gguf **out, char *err, size_t err_size);
/* Whether vx_gguf_write_file could create its file at path (the temporary
 * it writes first, in path's directory): a check before long work. */
vx_status vx_gguf_check_dest(const char *path, char *err, size_t err_size);

#endif
