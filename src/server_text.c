/*
 * server_text.c - the generated text on its way to a client (server_openai.h):
 * UTF-8 checked and repaired (a token may end inside a character; a bad
 * byte becomes U+FFFD), and the streaming filter that reassembles
 * characters across tokens and stops at the request's stop strings.
 * Moved out of server_openai.c, which keeps the request and response
 * shapes.
 */
#include "server_openai.h"

#include <stdlib.h>
#include <string.h>

#include "common.h"

/* ------------------------------------------------------------------ UTF-8 */

/* What a lead byte starts: the total length (0: not a lead byte) and the
 * allowed range of the second byte (excludes overlongs and surrogates). */
static int utf8_lead(unsigned c, unsigned *lo, unsigned *hi) {
    *lo = 0x80;
    *hi = 0xBF;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) {
        if (c == 0xE0) *lo = 0xA0;
        if (c == 0xED) *hi = 0x9F;
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (c == 0xF0) *lo = 0x90;
        if (c == 0xF4) *hi = 0x8F;
        return 4;
    }
    return 0;
}

int vx_utf8_char(const unsigned char *s, size_t n, size_t *bad) {
    unsigned lo, hi;
    int need = utf8_lead(s[0], &lo, &hi);
    *bad = 1;
    if (need == 0) return 0;
    for (int i = 1; i < need; i++) {
        if ((size_t)i >= n) {
            *bad = (size_t)i;
            return 0;
        }
        unsigned b = s[i];
        if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) {
            *bad = (size_t)i;
            return 0;
        }
    }
    return need;
}

bool vx_utf8_valid(const char *s, size_t n, size_t *bad_at) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, bad;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        int k = vx_utf8_char(u + i, n - i, &bad);
        if (k == 0) {
            if (bad_at) *bad_at = i;
            return false;
        }
        i += (size_t)k;
    }
    return true;
}

static const char REPLACEMENT[] = "\xEF\xBF\xBD";

void vx_utf8_sanitize(vx_sbuf *out, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, start = 0, bad;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        int k = vx_utf8_char(u + i, n - i, &bad);
        if (k > 0) {
            i += (size_t)k;
            continue;
        }
        vx_sbuf_add(out, s + start, i - start);
        vx_sbuf_add(out, REPLACEMENT, 3);
        i += bad;
        start = i;
    }
    vx_sbuf_add(out, s + start, n - start);
}

/* ------------------------------------------------------------- text filter */

void vx_text_filter_init(vx_text_filter *f, char *const *stop, int32_t n_stop) {
    memset(f, 0, sizeof *f);
    f->stop = stop;
    f->n_stop = n_stop;
}

void vx_text_filter_free(vx_text_filter *f) { vx_sbuf_free(&f->held); }

/* Reassembles UTF-8 byte by byte into held. */
static void filter_bytes(vx_text_filter *f, const unsigned char *u, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned c = u[i], lo, hi;
        if (f->n_part > 0) {
            utf8_lead(f->part[0], &lo, &hi);
            bool ok = f->n_part == 1 ? c >= lo && c <= hi : c >= 0x80 && c <= 0xBF;
            if (ok) {
                f->part[f->n_part++] = (unsigned char)c;
                if (f->n_part == f->need) {
                    vx_sbuf_add(&f->held, f->part, (size_t)f->n_part);
                    f->n_part = 0;
                }
                continue;
            }
            /* the character was cut short: replace it, then read c afresh */
            vx_sbuf_add(&f->held, REPLACEMENT, 3);
            f->n_part = 0;
        }
        int need = utf8_lead(c, &lo, &hi);
        if (need == 1) {
            unsigned char b = (unsigned char)c;
            vx_sbuf_add(&f->held, &b, 1);
        } else if (need == 0) {
            vx_sbuf_add(&f->held, REPLACEMENT, 3);
        } else {
            f->part[0] = (unsigned char)c;
            f->n_part = 1;
            f->need = need;
        }
    }
}

/* Looks for a stop string in held; releases what cannot start one. The
 * stop string that ends first wins (the longest of those ending at the same
 * byte): that is where generation stops when text arrives piece by piece,
 * so the result does not depend on how the stream is cut into tokens. A
 * stop string that starts earlier but ends later ("abcd" against "c" in
 * "abcd") is never completed. */
static bool filter_release(vx_text_filter *f, vx_sbuf *out, bool final) {
    const char *h = f->held.p;
    size_t n = f->held.len, first = SIZE_MAX, first_end = SIZE_MAX;
    int32_t which = -1;
    if (n == 0) return false;
    for (int32_t i = 0; i < f->n_stop; i++) {
        size_t sl = strlen(f->stop[i]);
        const char *hit = sl ? memmem(h, n, f->stop[i], sl) : NULL; /* "" is ignored */
        if (!hit) continue;
        size_t at = (size_t)(hit - h);
        if (at + sl < first_end || (at + sl == first_end && at < first)) {
            first = at;
            first_end = at + sl;
            which = i;
        }
    }
    if (first != SIZE_MAX) {
        vx_sbuf_add(out, h, first);
        f->held.len = 0;
        f->stopped = true;
        f->stop_index = which;
        return true;
    }
    size_t keep = 0;
    if (!final) {
        /* the longest suffix of held that is a proper prefix of a stop string */
        for (int32_t i = 0; i < f->n_stop; i++) {
            size_t sl = strlen(f->stop[i]);
            for (size_t k = (sl && sl - 1 < n ? sl - 1 : sl ? n : 0); k > keep; k--) {
                if (memcmp(h + n - k, f->stop[i], k) == 0) {
                    keep = k;
                    break;
                }
            }
        }
    }
    vx_sbuf_add(out, h, n - keep);
    memmove(f->held.p, h + n - keep, keep);
    f->held.len = keep;
    if (f->held.p) f->held.p[keep] = 0;
    return false;
}

bool vx_text_filter_feed(vx_text_filter *f, const char *bytes, size_t n, vx_sbuf *out) {
    if (f->stopped) return true;
    filter_bytes(f, (const unsigned char *)bytes, n);
    if (f->held.oom) out->oom = true;
    return filter_release(f, out, false);
}

void vx_text_filter_finish(vx_text_filter *f, vx_sbuf *out) {
    if (f->stopped) return;
    if (f->n_part > 0) {
        vx_sbuf_add(&f->held, REPLACEMENT, 3);
        f->n_part = 0;
    }
    filter_release(f, out, true);
}
