/*
 * tool_stream_check.h - the streaming invariant of tool_call.h, for
 * test_tools and fuzz_openai: text fed to a vx_tool_stream in three pieces
 * (cut at a and b) comes out as the released bytes, then the held ones;
 * the held part has the calls of the whole text; and when there are calls
 * none of their markup was released. Header-only: fuzz_openai is built by
 * hand without the test harness.
 */
#ifndef VX_TOOL_STREAM_CHECK_H
#define VX_TOOL_STREAM_CHECK_H

#include <stdlib.h>
#include <string.h>

#include "tool_call.h"

/* Empty when the invariant holds, else what broke (a static string). */
static inline const char *tool_stream_check(vx_tool_format f, const char *text, size_t n, size_t a, size_t b,
                                            char *const *names, int32_t n_names) {
    vx_tool_calls whole, part;
    if (vx_tool_parse(f, text, n, names, n_names, 0, &whole) != VX_OK) return "vx_tool_parse failed";
    vx_tool_stream s;
    vx_tool_stream_init(&s, f);
    char *rel = malloc(n + 1);
    size_t rl = 0;
    const char *why = rel ? "" : "out of memory";
    const size_t cuts[4] = {0, a, b, n};
    for (int k = 0; k < 3 && !why[0]; k++) {
        const char *o;
        size_t ol;
        if (!vx_tool_stream_feed(&s, text + cuts[k], cuts[k + 1] - cuts[k], &o, &ol)) why = "stream feed failed";
        else if (ol) memcpy(rel + rl, o, ol), rl += ol;
    }
    size_t hl;
    const char *held = vx_tool_stream_held(&s, &hl);
    const char *mk = vx_tool_format_marker(f);
    if (why[0]) {
    } else if (rl + hl != n || (rl && memcmp(rel, text, rl)) || (hl && memcmp(held, text + rl, hl))) {
        why = "released + held is not the text";
    } else if (vx_tool_parse(f, held, hl, names, n_names, 0, &part) != VX_OK) {
        why = "vx_tool_parse failed";
    } else {
        if (part.n != whole.n) why = "the held part lacks calls";
        else if (whole.n > 0 && (f == VX_TOOL_FMT_LLAMA3 ? rl != 0 : memmem(rel, rl, mk, strlen(mk)) != NULL))
            why = "a call's markup was released";
        vx_tool_calls_free(&part);
    }
    vx_tool_calls_free(&whole);
    vx_tool_stream_free(&s);
    free(rel);
    return why;
}

#endif
