/*
 * reasoning.c - the split of a reply into reasoning and answer
 * (reasoning.h): once over a whole text, and as a stream.
 */
#include "reasoning.h"

#include <string.h>

#define OPEN_LEN (sizeof VX_THINK_OPEN - 1)
#define CLOSE_LEN (sizeof VX_THINK_CLOSE - 1)

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static const char *find(const char *s, size_t n, const char *m, size_t ml) {
    return n >= ml ? memmem(s, n, m, ml) : NULL;
}

bool vx_reasoning_detect(const char *src) {
    return src && strstr(src, VX_THINK_OPEN) && strstr(src, VX_THINK_CLOSE);
}

bool vx_reasoning_open_at_end(const char *prompt, size_t len) {
    size_t i = len;
    while (i > 0 && blank(prompt[i - 1])) i--;
    return i >= OPEN_LEN && !memcmp(prompt + i - OPEN_LEN, VX_THINK_OPEN, OPEN_LEN);
}

/* The last occurrence of m in s[0..n), or NULL. */
static const char *find_last(const char *s, size_t n, const char *m, size_t ml) {
    const char *last = NULL;
    for (const char *p = find(s, n, m, ml); p; p = find(p + 1, n - (size_t)(p + 1 - s), m, ml)) last = p;
    return last;
}

vx_prefill_thought vx_reasoning_prefill(const char *content, size_t len) {
    const char *o = find_last(content, len, VX_THINK_OPEN, OPEN_LEN);
    const char *c = find_last(content, len, VX_THINK_CLOSE, CLOSE_LEN);
    if (o && (!c || c < o)) return VX_PREFILL_OPEN;
    return c ? VX_PREFILL_CLOSED : VX_PREFILL_NONE;
}

void vx_reasoning_split(const char *text, size_t len, bool open, vx_reasoning_parts *out) {
    memset(out, 0, sizeof *out);
    size_t s = 0;
    if (!open) {
        while (s < len && blank(text[s])) s++;
        if (len - s < OPEN_LEN || memcmp(text + s, VX_THINK_OPEN, OPEN_LEN)) {
            out->c_len = len; /* no thought: the answer as it is */
            return;
        }
        s += OPEN_LEN;
    }
    out->thought = true;
    const char *e = find(text + s, len - s, VX_THINK_CLOSE, CLOSE_LEN);
    size_t re = e ? (size_t)(e - text) : len;
    while (s < re && blank(text[s])) s++;
    while (re > s && blank(text[re - 1])) re--;
    out->r_off = s;
    out->r_len = re - s;
    size_t c = e ? (size_t)(e - text) + CLOSE_LEN : len;
    while (c < len && blank(text[c])) c++;
    out->c_off = c;
    out->c_len = len - c;
}

enum { ST_START, ST_THINK, ST_AFTER, ST_ANSWER };

void vx_reasoning_stream_init(vx_reasoning_stream *s, bool open) {
    memset(s, 0, sizeof *s);
    s->state = open ? ST_THINK : ST_START;
}

void vx_reasoning_stream_free(vx_reasoning_stream *s) {
    vx_sbuf_free(&s->held);
    vx_sbuf_free(&s->reasoning);
    vx_sbuf_free(&s->answer);
}

/* Drops the first n held bytes. */
static void consume(vx_reasoning_stream *s, size_t n) {
    if (n == 0) return;
    memmove(s->held.p, s->held.p + n, s->held.len - n);
    s->held.len -= n;
    if (s->held.p) s->held.p[s->held.len] = 0;
}

/* Releases reasoning p[0..n), without the blanks that lead the whole
 * reasoning; with trim, without its trailing blanks too (the thought ends). */
static void release_reasoning(vx_reasoning_stream *s, const char *p, size_t n, bool trim) {
    if (!s->started)
        while (n > 0 && blank(*p)) p++, n--;
    if (trim)
        while (n > 0 && blank(p[n - 1])) n--;
    if (n == 0) return;
    vx_sbuf_add(&s->reasoning, p, n);
    s->started = true;
}

static void run(vx_reasoning_stream *s, bool final) {
    for (;;) {
        char *h = s->held.p;
        const size_t n = s->held.len;
        switch (s->state) {
        case ST_START: { /* blanks, then <think> or the answer */
            size_t i = 0;
            while (i < n && blank(h[i])) i++;
            const size_t m = VX_MIN(n - i, OPEN_LEN);
            if (n - i >= OPEN_LEN && !memcmp(h + i, VX_THINK_OPEN, OPEN_LEN)) {
                consume(s, i + OPEN_LEN);
                s->state = ST_THINK;
                continue;
            }
            if (!final && (m == 0 || !memcmp(h + i, VX_THINK_OPEN, m))) return; /* may still open one */
            s->state = ST_ANSWER; /* no thought: the answer as it is, blanks too */
            continue;
        }
        case ST_THINK: {
            const char *e = find(h, n, VX_THINK_CLOSE, CLOSE_LEN);
            if (e) {
                release_reasoning(s, h, (size_t)(e - h), true);
                consume(s, (size_t)(e - h) + CLOSE_LEN);
                s->state = ST_AFTER;
                continue;
            }
            if (final) {
                release_reasoning(s, h, n, true);
                s->held.len = 0;
                return;
            }
            /* hold a marker's start and the blanks before it */
            size_t end = n - vx_partial_tail(h, n, VX_THINK_CLOSE, CLOSE_LEN);
            while (end > 0 && blank(h[end - 1])) end--;
            release_reasoning(s, h, end, false);
            consume(s, end);
            return;
        }
        case ST_AFTER: { /* the answer's leading blanks */
            size_t i = 0;
            while (i < n && blank(h[i])) i++;
            consume(s, i);
            if (i == n) return;
            s->state = ST_ANSWER;
            continue;
        }
        default:
            if (n) vx_sbuf_add(&s->answer, h, n);
            s->held.len = 0;
            return;
        }
    }
}

static bool step(vx_reasoning_stream *s, const char *text, size_t n, bool final) {
    s->reasoning.len = s->answer.len = 0;
    if (n) vx_sbuf_add(&s->held, text, n);
    if (!s->held.oom) run(s, final);
    return !s->held.oom && !s->reasoning.oom && !s->answer.oom;
}

bool vx_reasoning_stream_feed(vx_reasoning_stream *s, const char *text, size_t n) {
    return step(s, text, n, false);
}

bool vx_reasoning_stream_finish(vx_reasoning_stream *s) { return step(s, NULL, 0, true); }
