/*
 * harmony.c - the harmony reply parser (harmony.h): one state machine
 * over the reply's bytes, fed in pieces, so that a whole reply and a
 * stream of it come out the same.
 */
#include "harmony.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define MSG "<|message|>"
#define MSG_LEN (sizeof MSG - 1)
/* A header longer than this is not one: the rest of the reply is content. */
#define HEADER_MAX 512

enum { ST_HEAD, ST_BODY, ST_PLAIN };
enum { K_REASON, K_CONTENT, K_CALL, K_DROP };

/* What may open a reply's first header. */
static const char *const openers[] = {"<|channel|>", "<|start|>", "<|constrain|>", " to=", MSG};
/* What ends a message's body ("<|start|>" is the next one's header). */
static const char *const ends[] = {"<|end|>", "<|return|>", "<|call|>", "<|start|>"};
#define N_OPENERS (sizeof openers / sizeof *openers)
#define N_ENDS (sizeof ends / sizeof *ends)

bool vx_harmony_detect(const char *src) {
    return src && strstr(src, "<|channel|>") && strstr(src, MSG) && strstr(src, "<|start|>");
}

void vx_harmony_stream_init(vx_harmony_stream *s, bool split, int32_t max_calls) {
    memset(s, 0, sizeof *s);
    s->split = split;
    s->max_calls = max_calls;
}

void vx_harmony_stream_free(vx_harmony_stream *s) {
    vx_sbuf_free(&s->held);
    vx_sbuf_free(&s->args);
    vx_sbuf_free(&s->reasoning);
    vx_sbuf_free(&s->content);
    free(s->name);
    vx_tool_calls_free(&s->calls);
    memset(s, 0, sizeof *s);
}

char *vx_harmony_call_prefix(const char *name) {
    vx_sbuf b = {0};
    vx_sbuf_adds(&b, "<|channel|>commentary to=functions.");
    vx_sbuf_adds(&b, name);
    vx_sbuf_adds(&b, " <|constrain|>json" MSG);
    return b.oom ? (vx_sbuf_free(&b), NULL) : vx_sbuf_take(&b);
}

/* ------------------------------------------------------------- headers */

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* The value after the last occurrence of key in h[0..n): up to a blank or
 * control byte, a '<' or the end. NULL when key does not occur. */
static const char *value_after(const char *h, size_t n, const char *key, size_t *len) {
    const size_t kl = strlen(key);
    const char *last = NULL;
    for (size_t i = 0; i + kl <= n; i++)
        if (!memcmp(h + i, key, kl)) last = h + i + kl;
    if (!last) return NULL;
    const char *e = last;
    while (e < h + n && (unsigned char)*e > ' ' && *e != '<') e++;
    *len = (size_t)(e - last);
    return last;
}

/* The kind of the message whose header is h[0..n); a call's function
 * name into s->name. False when memory ran out. */
static bool read_header(vx_harmony_stream *s, const char *h, size_t n) {
    size_t cl = 0, rl = 0;
    const char *ch = value_after(h, n, "<|channel|>", &cl);
    const char *to = value_after(h, n, "to=", &rl);
    if (to && rl == 9 && !memcmp(to, "assistant", 9)) to = NULL;
    bool name_ok = to && rl > 10 && !memcmp(to, "functions.", 10);
    for (size_t i = 10; name_ok && i < rl; i++) /* OpenAI's names: a-zA-Z0-9_- (and '.', ':' of namespaces) */
        name_ok = (to[i] >= 'a' && to[i] <= 'z') || (to[i] >= 'A' && to[i] <= 'Z') || (to[i] >= '0' && to[i] <= '9') ||
                  to[i] == '_' || to[i] == '-' || to[i] == '.' || to[i] == ':';
    if (name_ok) {
        s->kind = K_CALL;
        free(s->name);
        if (!(s->name = malloc(rl - 10 + 1))) return false;
        memcpy(s->name, to + 10, rl - 10);
        s->name[rl - 10] = 0;
        s->args.len = 0;
        return true;
    }
    if (to && rl > 0) s->kind = K_DROP;
    else if (ch && cl == 8 && !memcmp(ch, "analysis", 8)) s->kind = K_REASON;
    else s->kind = K_CONTENT;
    if (s->kind == K_REASON && !s->split) vx_sbuf_adds(&s->content, "<|channel|>analysis" MSG);
    return true;
}

/* ------------------------------------------------------------- bodies */

static void out(vx_harmony_stream *s, const char *p, size_t n) {
    if (n == 0) return;
    switch (s->kind) {
    case K_REASON: vx_sbuf_add(s->split ? &s->reasoning : &s->content, p, n); break;
    case K_CONTENT: vx_sbuf_add(&s->content, p, n); break;
    case K_CALL: vx_sbuf_add(&s->args, p, n); break;
    default: break;
    }
}

/* The current call's message is complete (or cut short): a call when its
 * body is JSON, else the body is content. */
static bool end_call(vx_harmony_stream *s) {
    const char *a = s->args.p ? s->args.p : "";
    size_t n = s->args.len;
    while (n > 0 && blank(*a)) a++, n--;
    while (n > 0 && blank(a[n - 1])) n--;
    cJSON *j = n ? cJSON_ParseWithLength(a, n) : NULL;
    const bool is_json = j != NULL;
    cJSON_Delete(j);
    if (!is_json) return vx_sbuf_add(&s->content, s->args.p ? s->args.p : "", s->args.len);
    vx_tool_calls *c = &s->calls;
    if (s->max_calls > 0 && c->n >= s->max_calls) return true;
    vx_tool_call *v = realloc(c->v, (size_t)(c->n + 1) * sizeof *v);
    if (!v) return false;
    c->v = v;
    vx_tool_call *t = &v[c->n];
    memset(t, 0, sizeof *t);
    if (!(t->arguments = malloc(n + 1))) return false;
    memcpy(t->arguments, a, n);
    t->arguments[n] = 0;
    t->name = s->name;
    s->name = NULL;
    vx_tool_call_id(VX_TOOL_FMT_HARMONY, t->id, sizeof t->id);
    c->n++;
    return true;
}

/* The message ends: by marker m (NULL: the reply ended). */
static bool end_message(vx_harmony_stream *s, const char *m) {
    if (s->kind == K_REASON && !s->split && m && !strcmp(m, "<|end|>")) vx_sbuf_adds(&s->content, m);
    if (s->kind == K_CALL && !end_call(s)) return false;
    s->kind = K_CONTENT;
    return true;
}

/* The first of the markers ms in h[0..n): its offset (n: none) and index. */
static size_t first_of(const char *h, size_t n, const char *const *ms, size_t n_ms, size_t *which) {
    size_t best = n;
    for (size_t k = 0; k < n_ms; k++) {
        const size_t ml = strlen(ms[k]);
        const char *p = n >= ml ? memmem(h, n, ms[k], ml) : NULL;
        if (p && (size_t)(p - h) < best) best = (size_t)(p - h), *which = k;
    }
    return best;
}

/* How many bytes at the end of h[0..n) may begin one of the markers ms
 * (a proper prefix of one): to hold until the next piece decides. */
static size_t tail_prefix(const char *h, size_t n, const char *const *ms, size_t n_ms) {
    size_t keep = 0;
    for (size_t k = 0; k < n_ms; k++) {
        const size_t t = vx_partial_tail(h, n, ms[k], strlen(ms[k]));
        if (t > keep) keep = t;
    }
    return keep;
}

static void drop(vx_harmony_stream *s, size_t n) {
    memmove(s->held.p, s->held.p + n, s->held.len - n);
    s->held.len -= n;
    s->held.p[s->held.len] = 0;
}

/* Whether h[0..n) may still open a header (a prefix of an opener) or does. */
static bool may_open(const char *h, size_t n) {
    for (size_t k = 0; k < N_OPENERS; k++) {
        const size_t ol = strlen(openers[k]);
        if (!memcmp(h, openers[k], n < ol ? n : ol)) return true;
    }
    return false;
}

static bool run(vx_harmony_stream *s, bool final) {
    for (;;) {
        const char *h = s->held.p;
        const size_t n = s->held.len;
        if (n == 0) return !final || s->state != ST_BODY || end_message(s, NULL);
        switch (s->state) {
        case ST_HEAD: {
            const char *m = memmem(h, n, MSG, MSG_LEN);
            const size_t i = m ? (size_t)(m - h) : n;
            const bool too_long = m ? i > HEADER_MAX : n >= HEADER_MAX + MSG_LEN;
            if (!s->started && !may_open(h, n)) {
                s->state = ST_PLAIN;
                continue;
            }
            if (too_long) { /* not a header: the rest is content */
                s->state = ST_PLAIN;
                continue;
            }
            if (m) {
                if (!read_header(s, h, i)) return false;
                s->started = true;
                drop(s, i + MSG_LEN);
                s->state = ST_BODY;
                continue;
            }
            if (!final) return true;
            if (!s->started) { /* the reply was a header's start only */
                s->state = ST_PLAIN;
                continue;
            }
            s->held.len = 0; /* a header cut short: nothing to show */
            return true;
        }
        case ST_BODY: {
            size_t which = 0;
            const size_t e = first_of(h, n, ends, N_ENDS, &which);
            if (e < n) {
                out(s, h, e);
                const bool start = !strcmp(ends[which], "<|start|>");
                if (!end_message(s, ends[which])) return false;
                drop(s, e + (start ? 0 : strlen(ends[which])));
                s->state = ST_HEAD;
                continue;
            }
            const size_t keep = final ? 0 : tail_prefix(h, n, ends, N_ENDS);
            out(s, h, n - keep);
            drop(s, n - keep);
            if (final) return end_message(s, NULL);
            return true;
        }
        default:
            vx_sbuf_add(&s->content, h, n);
            s->held.len = 0;
            return true;
        }
    }
}

static bool step(vx_harmony_stream *s, const char *text, size_t n, bool final) {
    s->reasoning.len = s->content.len = 0;
    if (n && !vx_sbuf_add(&s->held, text, n)) return false;
    if (!run(s, final)) return false;
    return !s->reasoning.oom && !s->content.oom && !s->args.oom;
}

bool vx_harmony_stream_feed(vx_harmony_stream *s, const char *text, size_t n) { return step(s, text, n, false); }

bool vx_harmony_stream_finish(vx_harmony_stream *s) { return step(s, NULL, 0, true); }

/* What the last step released, appended. */
static bool collect(const vx_harmony_stream *s, vx_sbuf *reasoning, vx_sbuf *content) {
    return (!reasoning || vx_sbuf_add(reasoning, s->reasoning.p, s->reasoning.len)) &&
           vx_sbuf_add(content, s->content.p, s->content.len);
}

bool vx_harmony_stream_all(vx_harmony_stream *s, const char *text, size_t n, vx_sbuf *reasoning, vx_sbuf *content) {
    return vx_harmony_stream_feed(s, text ? text : "", n) && collect(s, reasoning, content) &&
           vx_harmony_stream_finish(s) && collect(s, reasoning, content);
}
