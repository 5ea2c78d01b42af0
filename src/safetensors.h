/*
 * safetensors.h - Hugging Face safetensors file reader.
 *
 * File format (all little-endian):
 *   u64 N | N bytes of UTF-8 JSON (an object, maybe padded with spaces) | byte buffer
 *   JSON: { "__metadata__": { "key": "value", ... },          (optional; strings only)
 *           "<tensor name>": { "dtype": "F16", "shape": [2, 3],
 *                              "data_offsets": [begin, end] }, ... }
 *   begin/end are relative to the byte buffer (file byte 8 + N); the
 *   tensors' [begin, end) ranges must tile the buffer exactly: no gaps, no
 *   overlap, nothing after the last. Elements are row-major, shape
 *   outermost first (PyTorch order), each dtype packed little-endian.
 *
 * The reader maps the file read-only (or takes an image in memory) and
 * checks everything the reference library (huggingface/safetensors) checks,
 * with the same limits, plus strict JSON: a corrupt or hostile file yields
 * VX_EFORMAT (VX_EUNSUPPORTED for an unknown dtype or more than
 * VX_ST_MAX_DIMS dimensions) with a message naming the tensor, the field
 * and the numbers involved; never a crash or an out-of-bounds read.
 *
 * Limits of this reader (files the reference reads but this one refuses):
 * a "\u0000" escape anywhere in the header (names and values are C strings);
 * number literals longer than 63 characters (cJSON); nesting deeper than
 * 1000 (cJSON). Leniency: integral numbers written as floats (2.0, 2e0) are
 * taken as integers in shapes and offsets (cJSON keeps only the double).
 *
 * Tensor data is not necessarily aligned to its element size (the format
 * does not require it, although writers pad N to a multiple of 8 and order
 * tensors by falling dtype size, so it normally is): check before reading
 * values in place, or memcpy them.
 */
#ifndef VX_SAFETENSORS_H
#define VX_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "vortex.h"

typedef enum vx_st_dtype {
    VX_ST_BOOL, VX_ST_U8, VX_ST_I8, VX_ST_F8_E5M2, VX_ST_F8_E4M3, VX_ST_I16, VX_ST_U16, VX_ST_F16,
    VX_ST_BF16, VX_ST_I32, VX_ST_U32, VX_ST_F32, VX_ST_F64, VX_ST_I64, VX_ST_U64, VX_ST_DTYPE_COUNT
} vx_st_dtype;

#define VX_ST_MAX_DIMS 8
/* Largest header N accepted: the reference library's cap (100,000,000 bytes). */
#define VX_ST_MAX_HEADER 100000000u

typedef struct vx_st_tensor {
    const char *name;
    vx_st_dtype dtype;
    int n_dims;                       /* 0 = scalar */
    int64_t shape[VX_ST_MAX_DIMS];    /* as in the file: outermost first (PyTorch order);
                                         entries from n_dims on are 1 */
    uint64_t n_elem;                  /* product of shape (1 for a scalar) */
    uint64_t size;                    /* bytes = n_elem * dtype size */
    uint64_t offset;                  /* byte offset of the data in the file (8 + header size + begin) */
    const void *data;                 /* inside the mapping */
} vx_st_tensor;

typedef struct vx_safetensors vx_safetensors;

/* Maps a file read-only and validates it. VX_EIO for open/stat/mmap failures
 * and non-regular files; every message starts with the path. On failure
 * *out is NULL. */
vx_status vx_st_open(const char *path, vx_safetensors **out, char *err, size_t err_size);
/* Parses an image in memory (not copied: must outlive the handle). */
vx_status vx_st_open_mem(const void *data, size_t size, vx_safetensors **out, char *err,
                         size_t err_size);
void vx_st_close(vx_safetensors *st); /* NULL ok */

int64_t vx_st_n_tensors(const vx_safetensors *st);
/* Tensor i in order of offset (zero-size tensors sharing an offset: by name);
 * NULL outside [0, n). */
const vx_st_tensor *vx_st_tensor_at(const vx_safetensors *st, int64_t i);
const vx_st_tensor *vx_st_find(const vx_safetensors *st, const char *name); /* NULL if absent */

/* "__metadata__": string keys to string values. */
int64_t vx_st_n_metadata(const vx_safetensors *st);
const char *vx_st_metadata(const vx_safetensors *st, const char *key); /* NULL if absent */
/* Key i in file order (NULL outside [0, n)): to list the metadata. */
const char *vx_st_metadata_key(const vx_safetensors *st, int64_t i);

const char *vx_st_dtype_name(vx_st_dtype t); /* "F16", ... as in the file; "?" outside the enum */
size_t vx_st_dtype_size(vx_st_dtype t);      /* bytes per element; 0 outside the enum */

#endif
