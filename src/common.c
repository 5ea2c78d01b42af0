/* common.c - error messages, assertions, half-precision conversion, time, random ids, the byte buffer. */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

vx_status vx_seterr(char *err, size_t size, vx_status code, const char *fmt, ...) {
    if (err && size > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, size, fmt, ap);
        va_end(ap);
    }
    return code;
}

void vx_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "vortex: internal error: %s:%d: assertion '%s' failed\n", file, line, expr);
    fflush(stderr);
    abort(); /* an internal invariant, never user input */
}

const char *vx_status_str(vx_status s) {
    switch (s) {
    case VX_OK: return "ok";
    case VX_EINVAL: return "invalid argument";
    case VX_ENOMEM: return "out of memory";
    case VX_EIO: return "I/O error";
    case VX_EFORMAT: return "malformed input";
    case VX_EUNSUPPORTED: return "unsupported";
    case VX_ERANGE: return "out of range";
    case VX_EFULL: return "no room left";
    case VX_ECANCELED: return "canceled";
    case VX_EINTERNAL: return "internal error";
    }
    return "unknown status";
}

float vx_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t u;
    if (exp == 0) {
        if (mant == 0) {
            u = sign;
        } else { /* subnormal: normalize */
            int e = -1;
            do {
                e++;
                mant <<= 1;
            } while (!(mant & 0x400));
            mant &= 0x3ff;
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | (mant << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (mant << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t vx_fp32_to_fp16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000;
    uint32_t absu = u & 0x7fffffff;
    if (absu > 0x7f800000u) return (uint16_t)(sign | 0x7e00); /* NaN */
    if (absu >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* overflow -> inf */
    if (absu < 0x38800000u) {                                  /* subnormal or zero in fp16 */
        if (absu < 0x33000000u) return (uint16_t)sign;        /* rounds to zero */
        uint32_t e = absu >> 23;
        uint32_t m = (absu & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t e = (absu >> 23) - 127 + 15;
    uint32_t m = absu & 0x7fffff;
    uint32_t r = (e << 10) | (m >> 13);
    uint32_t rem = m & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++; /* may carry into exponent: correct */
    return (uint16_t)(sign | r);
}

uint16_t vx_fp32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffff) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

int64_t vx_time_us(void) { return vx_time_ns() / 1000; }

int64_t vx_time_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

vx_status vx_map_file(const char *path, uint64_t min_size, const char *what, const void **base, uint64_t *size,
                      char *err, size_t err_size) {
    *base = NULL;
    *size = 0;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer (refused below) */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return vx_seterr(err, err_size, VX_EIO, "%s: %s", path, strerror(errno));
    struct stat sb;
    vx_status st = VX_OK;
    if (fstat(fd, &sb) != 0)
        st = vx_seterr(err, err_size, VX_EIO, "%s: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = vx_seterr(err, err_size, VX_EIO, "%s: not a regular file", path);
    else if ((uint64_t)sb.st_size < min_size || sb.st_size == 0) /* mmap refuses 0 bytes */
        st = vx_seterr(err, err_size, VX_EFORMAT, "%s: file is %lld bytes, too short for a %s header (%llu bytes)",
                       path, (long long)sb.st_size, what, (unsigned long long)min_size);
    else if ((uint64_t)sb.st_size > SIZE_MAX)
        st = vx_seterr(err, err_size, VX_EIO, "%s: %lld bytes do not fit in the address space", path,
                       (long long)sb.st_size);
    if (st) {
        close(fd);
        return st;
    }
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int e = errno;
    close(fd);
    if (p == MAP_FAILED) return vx_seterr(err, err_size, VX_EIO, "%s: mmap: %s", path, strerror(e));
    *base = p;
    *size = (uint64_t)sb.st_size;
    return VX_OK;
}

void vx_random_alnum(char *buf, size_t n) {
    static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    for (size_t o = 0; o < n;) {
        unsigned char rnd[32];
        const size_t k = n - o < sizeof rnd ? n - o : sizeof rnd;
        if (getrandom(rnd, k, 0) != (ssize_t)k) {
            uint64_t x = (uint64_t)(uintptr_t)buf ^ (uint64_t)vx_time_ns() * 0x9E3779B97F4A7C15ull ^ o;
            for (size_t i = 0; i < k; i++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                rnd[i] = (unsigned char)(x >> 56);
            }
        }
        for (size_t i = 0; i < k; i++) buf[o++] = alnum[rnd[i] % (sizeof alnum - 1)];
    }
    buf[n] = 0;
}

/* ---- byte buffer (common.h) */

static bool sbuf_reserve(vx_sbuf *b, size_t extra) {
    if (b->oom) return false;
    if (b->len + extra + 1 <= b->cap) return true;
    if (extra > SIZE_MAX / 2 - b->len) {
        b->oom = true;
        return false;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

size_t vx_partial_tail(const char *s, size_t n, const char *m, size_t ml) {
    for (size_t k = ml - 1 < n ? ml - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, m, k)) return k;
    return 0;
}

bool vx_sbuf_add(vx_sbuf *b, const void *data, size_t n) {
    if (!sbuf_reserve(b, n)) return false;
    if (n) memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = 0;
    return true;
}

bool vx_sbuf_adds(vx_sbuf *b, const char *s) { return vx_sbuf_add(b, s, strlen(s)); }

bool vx_sbuf_addf(vx_sbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return false;
    if ((size_t)n < sizeof tmp) return vx_sbuf_add(b, tmp, (size_t)n);
    if (!sbuf_reserve(b, (size_t)n)) return false;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return true;
}

void vx_sbuf_free(vx_sbuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

char *vx_sbuf_take(vx_sbuf *b) {
    char *p = b->oom ? NULL : b->p;
    if (p == NULL && !b->oom) p = calloc(1, 1);
    if (b->oom) free(b->p);
    memset(b, 0, sizeof *b);
    return p;
}
