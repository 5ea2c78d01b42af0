/*
 * common.h - internal helpers shared by every module: error reporting,
 * overflow-safe arithmetic, internal assertions, fp16/bf16 conversion,
 * random ids, a growable byte buffer.
 */
#ifndef VX_COMMON_H
#define VX_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "vortex.h"

#define VX_UNUSED(x) ((void)(x))
#define VX_MIN(a, b) ((a) < (b) ? (a) : (b))
#define VX_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Writes a formatted message into err[0..size) (if err != NULL) and returns code. */
vx_status vx_seterr(char *err, size_t size, vx_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Maps a whole regular file read-only (*base, *size; munmap to release).
 * VX_EIO for open/stat/mmap failures and non-regular files, VX_EFORMAT for
 * a file under min_size bytes ("too short for a <what> header"), each with
 * the path. */
vx_status vx_map_file(const char *path, uint64_t min_size, const char *what, const void **base, uint64_t *size,
                      char *err, size_t err_size);

/* Internal invariant: reports file:line on stderr and aborts. Never used on
 * anything that depends on user input (files, requests). */
void vx_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#define VX_ASSERT(x) ((x) ? (void)0 : vx_assert_fail(#x, __FILE__, __LINE__))

/* Overflow-checked size arithmetic: return false on overflow. */
static inline bool vx_mul_ovf(uint64_t a, uint64_t b, uint64_t *r) {
    return __builtin_mul_overflow(a, b, r);
}
static inline bool vx_add_ovf(uint64_t a, uint64_t b, uint64_t *r) {
    return __builtin_add_overflow(a, b, r);
}

/* Half-precision conversions (IEEE binary16 and bfloat16), exact for all inputs. */
float vx_fp16_to_fp32(uint16_t h);
uint16_t vx_fp32_to_fp16(float f); /* round to nearest even */
static inline float vx_bf16_to_fp32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
uint16_t vx_fp32_to_bf16(float f); /* round to nearest even, NaN kept quiet */

/* ---- byte buffer */
/* A growable byte buffer, always NUL-terminated once non-empty. Running out
 * of memory sets oom and makes further appends no-ops. */
typedef struct vx_sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} vx_sbuf;

bool vx_sbuf_add(vx_sbuf *b, const void *data, size_t n);
bool vx_sbuf_adds(vx_sbuf *b, const char *s);
bool vx_sbuf_addf(vx_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void vx_sbuf_free(vx_sbuf *b);
/* Hands the bytes over (malloc'd, NUL-terminated; NULL if memory ran out). */
char *vx_sbuf_take(vx_sbuf *b);

/* The longest k < ml with s[n-k..n) == m[0..k): the start of marker m
 * (ml bytes) at the end of s, held back by a stream until more text
 * decides (reasoning.c, tool_call.c, harmony.c). */
size_t vx_partial_tail(const char *s, size_t n, const char *m, size_t ml);

/* n random alphanumerics (getrandom; without it a clock-seeded LCG: ids
 * need to be unique-ish, not secret) and a NUL at buf[n]. */
void vx_random_alnum(char *buf, size_t n);

/* The value of hexadecimal digit c, or -1. */
static inline int vx_hex_digit(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Monotonic time in microseconds. */
int64_t vx_time_us(void);
int64_t vx_time_ns(void); /* monotonic clock */

#endif
