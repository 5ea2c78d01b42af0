/*
 * reasoning_stream_check.h - the streaming invariant of reasoning.h, for
 * test_reasoning and fuzz_openai: a reply fed to a vx_reasoning_stream in
 * pieces (cut at the given offsets) comes out as exactly the one-shot
 * split's reasoning and answer, no reasoning after any answer, and nothing
 * held after the finish. Header-only: fuzz_openai is built by hand without
 * the test harness.
 */
#ifndef VX_REASONING_STREAM_CHECK_H
#define VX_REASONING_STREAM_CHECK_H

#include <string.h>

#include "reasoning.h"

/* cuts: n_cuts ascending offsets <= len. Empty when the invariant holds,
 * else what broke (a static string). */
static inline const char *reasoning_stream_check(const char *text, size_t len, bool open, const size_t *cuts,
                                                 int n_cuts) {
    vx_reasoning_parts p;
    vx_reasoning_split(text, len, open, &p);
    vx_reasoning_stream s;
    vx_reasoning_stream_init(&s, open);
    vx_sbuf r = {0}, a = {0};
    const char *why = "";
    size_t at = 0;
    for (int k = 0; k <= n_cuts + 1 && !why[0]; k++) {
        bool ok;
        if (k <= n_cuts) {
            const size_t to = k < n_cuts ? cuts[k] : len;
            ok = vx_reasoning_stream_feed(&s, text + at, to - at);
            at = to;
        } else {
            ok = vx_reasoning_stream_finish(&s);
        }
        if (!ok) why = "out of memory";
        else if (s.reasoning.len && a.len) why = "reasoning released after the answer";
        else if (k == n_cuts + 1 && s.held.len) why = "bytes held after the finish";
        vx_sbuf_add(&r, s.reasoning.p, s.reasoning.len);
        vx_sbuf_add(&a, s.answer.p, s.answer.len);
    }
    if (!why[0] && (r.len != p.r_len || (r.len && memcmp(r.p, text + p.r_off, r.len))))
        why = "streamed reasoning differs from the split";
    if (!why[0] && (a.len != p.c_len || (a.len && memcmp(a.p, text + p.c_off, a.len))))
        why = "streamed answer differs from the split";
    vx_sbuf_free(&r);
    vx_sbuf_free(&a);
    vx_reasoning_stream_free(&s);
    return why;
}

#endif
