/*
 * harmony_stream_check.h - the streaming invariant of harmony.h, for
 * test_harmony and fuzz_openai: a reply fed to a vx_harmony_stream in
 * pieces (cut at the given offsets) releases, joined, the same reasoning
 * and content as the whole reply fed at once, with the same calls, and
 * holds nothing after the finish. Header-only: fuzz_openai is built by hand
 * without the test harness.
 */
#ifndef VX_HARMONY_STREAM_CHECK_H
#define VX_HARMONY_STREAM_CHECK_H

#include <string.h>

#include "harmony.h"

/* The reply text[0..len) fed in pieces cut at cuts[0..n_cuts) (ascending,
 * <= len), then finished, into s (initialized here; the caller frees it):
 * what was released, joined, into r and c. False: out of memory, or bytes
 * held after the finish. */
static inline bool harmony_run(const char *text, size_t len, bool split, int32_t max_calls, const size_t *cuts,
                               int n_cuts, vx_sbuf *r, vx_sbuf *c, vx_harmony_stream *s) {
    vx_harmony_stream_init(s, split, max_calls);
    size_t at = 0;
    for (int i = 0; i <= n_cuts + 1; i++) {
        bool ok;
        if (i <= n_cuts) {
            const size_t to = i < n_cuts ? cuts[i] : len;
            ok = vx_harmony_stream_feed(s, text + at, to - at);
            at = to;
        } else {
            ok = vx_harmony_stream_finish(s);
        }
        if (!ok) return false;
        vx_sbuf_add(r, s->reasoning.p, s->reasoning.len);
        vx_sbuf_add(c, s->content.p, s->content.len);
    }
    return s->held.len == 0 && !r->oom && !c->oom;
}

static inline bool harmony_same(const vx_sbuf *a, const vx_sbuf *b) {
    return a->len == b->len && (a->len == 0 || !memcmp(a->p, b->p, a->len));
}

/* Empty when the pieces give what the whole gives, else what differs (a
 * static string). */
static inline const char *harmony_stream_check(const char *text, size_t len, bool split, int32_t max_calls,
                                               const size_t *cuts, int n_cuts) {
    vx_sbuf r[2] = {{0}, {0}}, c[2] = {{0}, {0}};
    vx_harmony_stream s[2];
    const char *why = "";
    const bool ok0 = harmony_run(text, len, split, max_calls, NULL, 0, &r[0], &c[0], &s[0]);
    const bool ok1 = harmony_run(text, len, split, max_calls, cuts, n_cuts, &r[1], &c[1], &s[1]);
    if (!ok0 || !ok1) why = "out of memory or bytes held after the finish";
    else if (!harmony_same(&r[0], &r[1])) why = "the reasoning differs";
    else if (!harmony_same(&c[0], &c[1])) why = "the content differs";
    else if (s[0].calls.n != s[1].calls.n) why = "the number of calls differs";
    for (int32_t i = 0; !why[0] && i < s[0].calls.n; i++)
        if (strcmp(s[0].calls.v[i].name, s[1].calls.v[i].name) ||
            strcmp(s[0].calls.v[i].arguments, s[1].calls.v[i].arguments))
            why = "a call differs";
    for (int k = 0; k < 2; k++) {
        vx_harmony_stream_free(&s[k]);
        vx_sbuf_free(&r[k]);
        vx_sbuf_free(&c[k]);
    }
    return why;
}

#endif
