/*
 * speculative.c - speculative decoding on two contexts (vortex.h,
 * vx_spec_step, vx_spec_step_sample): a draft model proposes tokens
 * (greedily), the target verifies them
 * in one batch through the same batch-first forward every other caller
 * uses, and both caches are cut back to what was kept.
 *
 * A step, both caches holding [0, p) and cur the token at p:
 *   draft:  d0 = argmax D(cur @ p), d1 = argmax D(d0 @ p + 1), ...,
 *           d[k-1]; the draft cache then holds [0, p + k)
 *   verify: the target on [cur, d0, .., d[k-1]] at p .. p + k, logits of
 *           each: y0 .. yk
 *   keep:   the longest prefix d0 .. d[a-1] with d[i] = y[i], then y[a]
 *           (the target's own choice where they differ, or its next token
 *           after all k): a + 1 tokens, the target's greedy output; with
 *           a sampler, y[i] is the target's draw at i (taken into the
 *           sampler's history before the draw at i + 1), so the tokens are
 *           the draws the target alone would make, one per token emitted,
 *           in the same order
 *   cut:    the target cache to [0, p + a + 1); the draft cache too, or,
 *           when all k were kept, its missing d[k-1] decoded into it
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "vortex.h"

enum { MAX_DRAFT = 64 };

vx_token vx_argmax(const float *logits, int32_t n) {
    vx_token best = 0;
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

/* One token at pos on sequence 0, its logits wanted or not. */
static vx_status decode_one(vx_context *c, vx_token t, vx_pos pos, bool logits) {
    const vx_seq_id seq = 0;
    const int8_t want = logits ? 1 : 0;
    const vx_batch b = {1, &t, &pos, &seq, &want, NULL};
    return vx_decode(c, &b);
}

/* The target's token at verified position logits (smp: a draw, taken
 * into smp's history; NULL: argmax). */
static vx_token pick(vx_sampler *smp, const float *logits, int32_t nv) {
    if (!smp) return vx_argmax(logits, nv);
    const vx_token y = vx_sampler_sample(smp, logits);
    if (y >= 0) vx_sampler_accept(smp, y);
    return y;
}

vx_status vx_spec_step_sample(vx_context *tgt, vx_context *dft, vx_sampler *smp, vx_token cur, vx_pos n_past,
                              int32_t n_draft, vx_token *out, int32_t *n_out, vx_spec_stats *stats) {
    *n_out = 0;
    const int32_t nv = vx_context_n_vocab(tgt);
    /* the draft cache takes cur and the drafts but the last, and after a
     * step that keeps every draft the last one too: n_draft + 1 positions */
    if (n_draft < 1 || n_draft > MAX_DRAFT || nv != vx_context_n_vocab(dft) || n_past < 0 ||
        vx_sampler_has_filter(smp) || (int64_t)n_past + n_draft + 1 > (int64_t)vx_context_n_ctx(tgt) ||
        (int64_t)n_past + n_draft + 1 > (int64_t)vx_context_n_ctx(dft))
        return VX_EINVAL;
    vx_status st;
    /* draft */
    vx_token tok[MAX_DRAFT + 1];
    tok[0] = cur;
    for (int32_t i = 0; i < n_draft; i++) {
        if ((st = decode_one(dft, tok[i], n_past + i, true))) return st;
        tok[i + 1] = vx_argmax(vx_get_logits_ith(dft, 0), nv);
    }
    /* verify: cur and the drafts, every position's logits */
    vx_pos pos[MAX_DRAFT + 1];
    vx_seq_id seq[MAX_DRAFT + 1];
    int8_t want[MAX_DRAFT + 1];
    for (int32_t i = 0; i <= n_draft; i++) pos[i] = n_past + i, seq[i] = 0, want[i] = 1;
    const vx_batch b = {n_draft + 1, tok, pos, seq, want, NULL};
    if ((st = vx_decode(tgt, &b))) return st;
    int32_t a = 0;
    for (;;) {
        const vx_token y = pick(smp, vx_get_logits_ith(tgt, a), nv);
        out[a] = y;
        if (a == n_draft || y != tok[a + 1]) break; /* y < 0 (no token to draw) too */
        a++;
    }
    *n_out = a + 1;
    if (stats) {
        stats->n_steps++;
        stats->n_drafted += n_draft;
        stats->n_accepted += a;
    }
    /* cut both caches back to [0, n_past + a + 1) */
    const vx_pos keep = n_past + a + 1;
    if (keep < n_past + n_draft + 1 && (st = vx_kv_seq_rm(tgt, 0, keep, -1))) return st;
    if (a < n_draft) return keep < n_past + n_draft ? vx_kv_seq_rm(dft, 0, keep, -1) : VX_OK;
    return decode_one(dft, tok[n_draft], n_past + n_draft, false);
}

vx_status vx_spec_step(vx_context *tgt, vx_context *dft, vx_token cur, vx_pos n_past, int32_t n_draft, vx_token *out,
                       int32_t *n_out, vx_spec_stats *stats) {
    return vx_spec_step_sample(tgt, dft, NULL, cur, n_past, n_draft, out, n_out, stats);
}
