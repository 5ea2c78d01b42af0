/*
 * draft.c - drafts for the engine's speculative decoding (see draft.h).
 *
 * The draft model keeps, per sequence, how many of the sequence's tokens
 * its cache holds (len). A proposal first evaluates the tokens it has not
 * seen (the prompt, the tokens the target took since), chunked over all
 * jobs within n_batch, then drafts one token per pass for every job still
 * drafting, all jobs in one batch. Its cache then runs ahead of the
 * sequence by the drafts fed to it; vx_drafter_keep cuts it back to what
 * the target kept. Drafts it made that no keep confirmed (a dropped or
 * failed step) are cut before the next proposal: known counts the cached
 * tokens that are the sequence's own.
 */
#include "draft.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kv_cache.h"

struct vx_drafter {
    vx_draft_params p;
    vx_context *ctx;  /* the draft model's, NULL without one */
    int32_t n_vocab;
    int32_t *len;     /* [n_seq] positions the draft cache holds ... */
    int32_t *known;   /* [n_seq] ... of which these are the sequence's tokens */
    /* batch buffers [n_batch] */
    vx_token *b_tok;
    vx_pos *b_pos;
    vx_seq_id *b_seq;
    int8_t *b_logits;
    int32_t *b_job;   /* the job of each entry whose logits are read */
    bool *active;     /* [n_seq] per job index: still drafting */
};

int32_t vx_drafter_kv_blocks(const vx_drafter *d) {
    int32_t total = 0;
    if (d && d->ctx) vx_kv_usage(d->ctx, &total, NULL, NULL, NULL);
    return total;
}

vx_draft_params vx_draft_default_params(void) {
    vx_draft_params p;
    memset(&p, 0, sizeof p);
    p.n_seq = 1;
    p.n_ctx = 4096;
    p.n_batch = 512;
    p.n_max = 16;
    p.kv_type = VX_KV_F16;
    return p;
}

int32_t vx_ngram_lookup(const vx_token *t, int32_t n, int32_t key_n, int32_t n_max, vx_token *out) {
    if (key_n < 1 || n_max < 1 || n <= key_n) return 0;
    const vx_token *key = t + n - key_n;
    for (int32_t s = n - key_n - 1; s >= 0; s--) {
        if (t[s] != key[0] || memcmp(t + s, key, (size_t)key_n * sizeof *t) != 0) continue;
        /* the tokens after the occurrence; past the end of t the copy goes
         * on through the draft itself (a repeating stretch repeats on) */
        const int32_t from = s + key_n, period = n - from;
        for (int32_t i = 0; i < n_max; i++) out[i] = from + i < n ? t[from + i] : out[i - period];
        return n_max;
    }
    return 0;
}

/* Whether the draft model's vocabulary is the target's; else err says
 * where they differ. */
static bool same_vocab(const vx_vocab *a, const vx_vocab *b, char *err, size_t err_size) {
    const int32_t na = vx_vocab_n_tokens(a), nb = vx_vocab_n_tokens(b);
    if (na != nb) {
        snprintf(err, err_size, "the draft model's vocabulary has %d tokens, the model's %d: they must be the same",
                 nb, na);
        return false;
    }
    for (vx_token t = 0; t < na; t++) {
        const char *x = vx_vocab_text(a, t), *y = vx_vocab_text(b, t);
        if (x && y && strcmp(x, y) == 0) continue;
        snprintf(err, err_size, "the draft model's vocabulary is not the model's: token %d is '%.40s' in the model, "
                 "'%.40s' in the draft model", t, x ? x : "", y ? y : "");
        return false;
    }
    return true;
}

vx_status vx_drafter_init(const vx_draft_params *p, const vx_vocab *vocab, vx_drafter **out, char *err,
                          size_t err_size) {
    *out = NULL;
    if ((p->ngram_n < 1 && !p->model) || p->n_seq < 1 || p->n_ctx < 1 || p->n_batch < 1 || p->n_max < 1) {
        snprintf(err, err_size, "speculative decoding needs an n-gram size or a draft model, and positive sizes");
        return VX_EINVAL;
    }
    vx_drafter *d = calloc(1, sizeof *d);
    if (!d) return VX_ENOMEM;
    d->p = *p;
    vx_status st = VX_ENOMEM;
    if (p->model) {
        vx_context_params cp = vx_context_default_params();
        cp.n_ctx = (uint32_t)p->n_ctx;
        /* every sequence's whole context, in whole blocks; with a target
         * whose cache holds fewer positions (vx serve --kv-size), as many
         * plus each sequence's drafts, in whole blocks: the draft cache
         * mirrors the target's sequences and runs ahead by a draft. When
         * it still fills up, the sequences of the failed pass are forgotten
         * and draft again from a later catch-up (run) */
        int64_t kv = vx_kv_whole_blocks(p->n_ctx) * p->n_seq;
        if (p->kv_size > 0)
            kv = VX_MIN(kv, vx_kv_whole_blocks(p->kv_size) + p->n_seq * vx_kv_whole_blocks(p->n_max + VX_KV_BLOCK));
        cp.kv_size = (uint32_t)kv;
        cp.n_batch = (uint32_t)p->n_batch;
        cp.n_seq_max = (uint32_t)p->n_seq;
        cp.n_threads = p->n_threads;
        cp.kv_type = p->kv_type;
        char cerr[VX_ERRMSG_MAX];
        if ((st = vx_context_init(p->model, &cp, &d->ctx, cerr, sizeof cerr)) != VX_OK) {
            snprintf(err, err_size, "the draft model: %s", cerr);
            vx_drafter_free(d);
            return st;
        }
        d->n_vocab = vx_context_n_vocab(d->ctx);
        if (!same_vocab(vocab, vx_model_get_vocab(p->model), err, err_size)) {
            vx_drafter_free(d);
            return VX_EINVAL;
        }
        d->len = calloc((size_t)p->n_seq, sizeof *d->len);
        d->known = calloc((size_t)p->n_seq, sizeof *d->known);
        d->b_tok = malloc((size_t)p->n_batch * sizeof *d->b_tok);
        d->b_pos = malloc((size_t)p->n_batch * sizeof *d->b_pos);
        d->b_seq = malloc((size_t)p->n_batch * sizeof *d->b_seq);
        d->b_logits = malloc((size_t)p->n_batch);
        d->b_job = malloc((size_t)p->n_batch * sizeof *d->b_job);
        d->active = calloc((size_t)p->n_seq, sizeof *d->active);
        if (!d->len || !d->known || !d->b_tok || !d->b_pos || !d->b_seq || !d->b_logits || !d->b_job || !d->active) {
            snprintf(err, err_size, "out of memory");
            vx_drafter_free(d);
            return VX_ENOMEM;
        }
    }
    *out = d;
    return VX_OK;
}

void vx_drafter_free(vx_drafter *d) {
    if (!d) return;
    vx_context_free(d->ctx);
    free(d->len);
    free(d->known);
    free(d->b_tok);
    free(d->b_pos);
    free(d->b_seq);
    free(d->b_logits);
    free(d->b_job);
    free(d->active);
    free(d);
}

/* Cuts the draft cache of seq to its first n positions (if it holds more). */
static void cut(vx_drafter *d, int32_t seq, int32_t n) {
    if (n < 0) n = 0;
    if (d->known[seq] > n) d->known[seq] = n;
    if (d->len[seq] <= n) return;
    d->len[seq] = n;
    vx_kv_seq_rm(d->ctx, seq, n, -1);
}

void vx_drafter_keep(vx_drafter *d, int32_t seq, int32_t n_keep) {
    if (!d->ctx || seq < 0 || seq >= d->p.n_seq) return;
    cut(d, seq, n_keep);
    d->known[seq] = d->len[seq]; /* what it drafted up to n_keep was taken */
}

void vx_drafter_reset(vx_drafter *d, int32_t seq) { vx_drafter_keep(d, seq, 0); }

/* The draft model's greedy token of logits, if its probability is at
 * least p_min; else -1. */
static vx_token confident(const vx_drafter *d, const float *logits, float p_min) {
    const vx_token best = vx_argmax(logits, d->n_vocab);
    if (p_min <= 0) return best;
    const float m = logits[best];
    double sum = 0;
    for (int32_t i = 0; i < d->n_vocab; i++) sum += expf(logits[i] - m);
    return 1.0 / sum >= p_min ? best : -1;
}

/* Runs the batch of n entries; on failure the draft model forgets every
 * sequence of it (their drafts stay empty). */
static bool run(vx_drafter *d, int32_t n, const vx_draft_job *jobs, int32_t n_jobs) {
    const vx_batch b = {n, d->b_tok, d->b_pos, d->b_seq, d->b_logits, NULL};
    if (vx_decode(d->ctx, &b) == VX_OK) return true;
    for (int32_t j = 0; j < n_jobs; j++) vx_drafter_reset(d, jobs[j].seq);
    return false;
}

static void propose_model(vx_drafter *d, vx_draft_job *jobs, int32_t n_jobs) {
    /* catch up: the tokens each sequence has that the cache has not, the
     * last one's logits giving the first draft */
    int32_t n = 0;
    for (int32_t j = 0; j < n_jobs; j++) {
        vx_draft_job *jb = &jobs[j];
        d->active[j] = false;
        if (jb->n_out > 0 || jb->n_max < 1) continue; /* drafted by n-gram lookup, or no room */
        int32_t *len = &d->len[jb->seq];
        /* drafts nobody confirmed go; the last token is fed again for its logits */
        cut(d, jb->seq, VX_MIN(d->known[jb->seq], jb->n_tokens - 1));
        if (*len == 0) *len = vx_kv_seq_reuse_prefix(d->ctx, jb->seq, jb->tokens, jb->n_tokens - 1);
        const int32_t take = VX_MIN(jb->n_tokens - *len, d->p.n_batch - n);
        for (int32_t i = 0; i < take; i++, n++) {
            d->b_tok[n] = jb->tokens[*len + i];
            d->b_pos[n] = *len + i;
            d->b_seq[n] = jb->seq;
            d->b_logits[n] = *len + i == jb->n_tokens - 1;
            d->b_job[n] = j;
        }
        *len += take;
        d->known[jb->seq] = *len;
        d->active[j] = *len == jb->n_tokens;
    }
    if (n == 0 || !run(d, n, jobs, n_jobs)) return;
    for (;;) {
        /* the newest logits of each active job give its next draft */
        for (int32_t i = 0; i < n; i++) {
            if (!d->b_logits[i]) continue;
            vx_draft_job *jb = &jobs[d->b_job[i]];
            const vx_token t = confident(d, vx_get_logits_ith(d->ctx, i), jb->p_min);
            if (t < 0) d->active[d->b_job[i]] = false;
            else jb->out[jb->n_out++] = t;
        }
        n = 0;
        for (int32_t j = 0; j < n_jobs; j++) {
            vx_draft_job *jb = &jobs[j];
            if (!d->active[j] || jb->n_out >= jb->n_max || jb->n_tokens + jb->n_out > d->p.n_ctx - 1) continue;
            d->b_tok[n] = jb->out[jb->n_out - 1];
            d->b_pos[n] = d->len[jb->seq];
            d->b_seq[n] = jb->seq;
            d->b_logits[n] = 1;
            d->b_job[n] = j;
            d->len[jb->seq]++;
            n++;
        }
        if (n == 0 || !run(d, n, jobs, n_jobs)) return;
    }
}

void vx_drafter_propose(vx_drafter *d, vx_draft_job *jobs, int32_t n) {
    for (int32_t j = 0; j < n; j++) {
        vx_draft_job *jb = &jobs[j];
        jb->n_max = VX_MIN(jb->n_max, d->p.n_max);
        jb->n_out = d->p.ngram_n > 0 ? vx_ngram_lookup(jb->tokens, jb->n_tokens, d->p.ngram_n, jb->n_max, jb->out) : 0;
    }
    if (d->ctx) propose_model(d, jobs, VX_MIN(n, d->p.n_seq));
}
