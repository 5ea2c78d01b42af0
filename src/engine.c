/*
 * engine.c - continuous batching (see engine.h).
 *
 * Every request keeps its whole token history (prompt + generated) and how
 * much of it is in the KV cache (n_past). A step feeds each running request
 * the tokens it still needs: decode requests one token, prefilling requests
 * a chunk, within the step's token budget (decode first, so streams keep
 * flowing while long prompts are chunked). Preemption simply drops a
 * request's cache (n_past = 0) and puts it back at the head of the queue;
 * recomputing from its history gives the same continuation.
 */
#include "engine.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "draft.h"
#include "embed.h"
#include "json_check.h"
#include "json_schema.h"
#include "grammar.h"
#include "kv_cache.h"

#define MAX_TOP 20

typedef struct req {
    uint64_t id;
    vx_token *tokens; /* [cap] prompt then generated */
    int32_t n_tokens, cap;
    int32_t n_prompt, n_gen, n_past;
    int32_t n_cached; /* prompt positions reused from the prefix cache */
    bool was_admitted;
    int64_t t_admitted; /* vx_time_ns of the first admission */
    int32_t max_tokens;
    bool logprobs;
    int32_t n_logprobs;
    bool prompt_lp;  /* report the prompt's logprobs (prompt_logprobs) ... */
    int32_t lp_next; /* ... from this prompt index on (the rest were sent) */
    bool ignore_eos;
    vx_jfilter jf;      /* json_object / json_schema (jf.jv set): it checks the generated text */
    vx_jschema *schema; /* json_schema's, compiled */
    vx_grammar *grammar; /* a GBNF request's, compiled ... */
    vx_gfilter *gf;      /* ... and its state: it checks the generated text */
    vx_sampler *smp;
    vx_token *draft;    /* [draft_max] this step's draft (speculative decoding) ... */
    int32_t n_draft;    /* ... of this many tokens, in the batch after its pending one */
    int32_t spec_cap;   /* its next draft's length at most: grows while drafts are taken whole */
    int32_t draft_max, draft_min; /* its limits (vx_request_params; draft_max 0: no drafts) */
    float draft_p_min;
    int32_t n_drafted, n_accepted; /* its drafted tokens verified, and taken */
    bool embed;         /* an embedding request (vx_request_params.embed) */
    vx_pooling pooling;
    float *embd;        /* its pooled vector [n_embd], summed / copied as the prompt runs */
    vx_event_fn cb;
    void *ud;
    atomic_bool cancel;
    int32_t slot;      /* sequence id while running, -1 while queued */
    uint64_t admitted; /* admission order, for choosing whom to preempt */
    struct req *next;  /* queue link */
} req;

struct vx_engine {
    const vx_model *model;
    const vx_vocab *vocab;
    vx_engine_params p;
    vx_context *ctx;
    int32_t n_vocab, n_embd;
    bool encoder; /* vx_model_is_encoder: embeddings only, each prompt whole in one batch */
    char *piece;        /* a token's text for its event (piece_size bytes) */
    vx_jvocab *jv;      /* the tokens' bytes, built for the first JSON-constrained request */
    vx_gvocab *gv;      /* the tokens' byte trie, built for the first GBNF request */
    vx_drafter *drafter; /* speculative decoding's drafts, NULL when off */
    vx_draft_job *jobs;  /* [n_parallel] */
    int32_t piece_size; /* the vocabulary's longest piece, + 1 */

    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    req *qhead, *qtail; /* waiting, FIFO */
    int32_t n_queued;
    req **running;      /* [n_parallel] by slot */
    int32_t n_running;
    uint64_t next_id, admissions;
    vx_engine_stats stats;

    /* step buffers [n_batch] */
    vx_token *b_tok;
    vx_pos *b_pos;
    vx_seq_id *b_seq;
    int8_t *b_logits;
    int8_t *b_embd;
    req **b_req; /* owner of each batch entry */
    req **done;  /* [n_parallel + queue_max] requests finishing this step */
    vx_finish *done_why;
};

vx_engine_params vx_engine_default_params(void) {
    vx_engine_params p;
    memset(&p, 0, sizeof p);
    p.n_ctx = 4096;
    p.n_parallel = 4;
    p.n_batch = 512;
    p.n_threads = 0;
    p.queue_max = 64;
    p.kv_type = VX_KV_F16;
    p.draft_max = 16;
    p.draft_p_min = 0.8f;
    return p;
}

static void req_free(req *r) {
    if (!r) return;
    vx_sampler_free(r->smp);
    vx_jschema_free(r->schema);
    vx_gfilter_free(r->gf);
    vx_grammar_free(r->grammar);
    free(r->embd);
    free(r->draft);
    free(r->tokens);
    free(r);
}

/* An event of r with no token yet and its counts. */
static vx_token_event base_event(const req *r) {
    vx_token_event ev;
    memset(&ev, 0, sizeof ev);
    ev.id = r->id;
    ev.token = -1;
    ev.logprob = NAN;
    ev.n_prompt = r->n_prompt;
    ev.n_cached = r->n_cached;
    ev.n_gen = r->n_gen;
    ev.n_drafted = r->n_drafted;
    ev.n_draft_accepted = r->n_accepted;
    ev.t_admitted_ns = r->t_admitted;
    return ev;
}

/* Sends r's final event without a token. Lock not held. */
static void send_end(req *r, vx_finish why, const char *error) {
    vx_token_event ev = base_event(r);
    ev.finish = why;
    ev.error = error;
    r->cb(&ev, r->ud);
}

/* Token t into ev: its text (with_text; the vocabulary's longest piece
 * fits e->piece) and, with lp, its logprob and r's top alternatives under
 * logits (the model's distribution, as OpenAI and vLLM report it) into
 * ids / lps. */
static void token_into(vx_engine *e, const req *r, vx_token t, bool with_text, bool lp, const float *logits,
                       vx_token_event *ev, vx_token *ids, float *lps) {
    const int32_t len = with_text ? vx_token_to_piece(e->vocab, t, e->piece, e->piece_size, false) : 0;
    ev->token = t;
    ev->text = e->piece;
    ev->text_len = len > 0 ? len : 0;
    if (lp) {
        ev->n_top = vx_logprobs(logits, e->n_vocab, t, &ev->logprob, r->n_logprobs, ids, lps);
        ev->top_ids = ids;
        ev->top_logprobs = lps;
    }
}

/* Sends the final event and frees the request. Called without the lock. */
static void finish(vx_engine *e, req *r, vx_finish why, const char *error) {
    send_end(r, why, error);
    pthread_mutex_lock(&e->mu);
    e->stats.requests_finished++;
    pthread_mutex_unlock(&e->mu);
    req_free(r);
}

/* Takes a running request out of its slot and frees its cache. Lock held. */
static void release_slot(vx_engine *e, req *r) {
    if (r->slot < 0) return;
    vx_kv_seq_rm(e->ctx, r->slot, 0, -1);
    if (e->drafter) vx_drafter_reset(e->drafter, r->slot);
    e->running[r->slot] = NULL;
    e->n_running--;
    r->slot = -1;
}

/* Preempts the most recently admitted running request: its cache is
 * dropped and it waits at the head of the queue. Lock held. */
static bool preempt_one(vx_engine *e, const req *keep) {
    req *victim = NULL;
    for (int32_t s = 0; s < e->p.n_parallel; s++) {
        req *r = e->running[s];
        if (r && r != keep && (!victim || r->admitted > victim->admitted)) victim = r;
    }
    if (!victim) return false;
    release_slot(e, victim);
    victim->n_past = 0;
    if (victim->embed) memset(victim->embd, 0, (size_t)e->n_embd * sizeof *victim->embd); /* a mean restarts */
    victim->next = e->qhead;
    e->qhead = victim;
    if (!e->qtail) e->qtail = victim;
    e->n_queued++;
    e->stats.preemptions++;
    return true;
}

/* Samples the next token of r from logits and reports it; returns the
 * finish reason (NONE to continue). Lock not held. */
static vx_finish emit(vx_engine *e, req *r, const float *logits) {
    vx_token t = vx_sampler_sample(r->smp, logits);
    if (r->gf && vx_gfilter_limited(r->gf)) {
        send_end(r, VX_FINISH_ERROR,
                 "the grammar is too ambiguous: its parses of the text grew past vx's bounds (4096 at once), so "
                 "some tokens it allows could not be tried; simplify it (nested repetitions such as (x*)* multiply "
                 "them)");
        return VX_FINISH_ERROR;
    }
    if (t < 0) {
        send_end(r, VX_FINISH_ERROR,
                 r->jf.jv ? "no token can continue the JSON object: the vocabulary has none that fits, or "
                           "logit_bias banned them all"
                 : r->gf ? "no token can continue the text in the grammar: the vocabulary has none that fits, or "
                           "logit_bias banned them all"
                         : "no token can be sampled: every logit is -inf or NaN (all banned by logit_bias, "
                           "or a corrupt model)");
        return VX_FINISH_ERROR;
    }
    vx_sampler_accept(r->smp, t);
    bool closed = false; /* a json_object request's object is complete */
    if (r->jf.jv) {
        const bool ok = vx_jfilter_feed(&r->jf, t); /* the filter allowed it */
        VX_ASSERT(ok);
        closed = vx_jcheck_done(&r->jf.jc);
    }
    if (r->gf) {
        if (!vx_gfilter_feed(r->gf, t)) { /* the mask allowed it: only memory can be short */
            send_end(r, VX_FINISH_ERROR, "out of memory while matching the grammar");
            return VX_FINISH_ERROR;
        }
        closed = vx_gfilter_done(r->gf);
    }
    r->tokens[r->n_tokens++] = t;
    r->n_gen++;
    vx_token_event ev = base_event(r);
    vx_token top_ids[MAX_TOP];
    float top_lp[MAX_TOP];
    const bool eog = !r->ignore_eos && vx_vocab_is_eog(e->vocab, t);
    token_into(e, r, t, !eog, r->logprobs, logits, &ev, top_ids, top_lp);
    if (eog || closed) ev.finish = VX_FINISH_STOP;
    else if ((r->max_tokens >= 0 && r->n_gen >= r->max_tokens) || r->n_tokens >= e->p.n_ctx)
        ev.finish = VX_FINISH_LENGTH;
    bool go_on = r->cb(&ev, r->ud);
    if (ev.finish != VX_FINISH_NONE) return ev.finish;
    return go_on ? VX_FINISH_NONE : VX_FINISH_CANCELED;
}

/* Sends embedding request r's vector (its prompt all evaluated) in its
 * final event. Lock not held. */
static vx_finish send_embd(vx_engine *e, req *r) {
    vx_pool_end(r->pooling, r->embd, e->n_embd, r->n_tokens);
    vx_token_event ev = base_event(r);
    ev.finish = VX_FINISH_STOP;
    ev.embd = r->embd;
    ev.n_embd = e->n_embd;
    r->cb(&ev, r->ud);
    return VX_FINISH_STOP;
}

/* Reports prompt token i's logprob under logits (those of position i - 1)
 * for a prompt_logprobs request; returns whether to go on. Lock not held. */
static bool emit_prompt(vx_engine *e, req *r, int32_t i, const float *logits) {
    vx_token_event ev = base_event(r);
    vx_token top_ids[MAX_TOP];
    float top_lp[MAX_TOP];
    ev.prompt = true;
    token_into(e, r, r->tokens[i], true, true, logits, &ev, top_ids, top_lp);
    r->lp_next = i + 1;
    return r->cb(&ev, r->ud);
}

/* Blocks holding positions [0, n). */
static int32_t blocks_for(int32_t n, int32_t bs) { return (n + bs - 1) / bs; }

/* Speculative decoding: a draft for each decoding request, as long as
 * its cap, the context, max_tokens, the step's token budget (half of it
 * stays for prompts waiting to be evaluated) and the KV blocks allow: only
 * blocks no request needs for its pending tokens, and no cached prefix
 * evicted. Engine thread only (running[] changes nowhere else). */
static void propose_drafts(vx_engine *e) {
    int32_t blk_total, blk_used, blk_cached, bs, n_dec = 0, nj = 0;
    int64_t prefill = 0; /* prompt tokens waiting in the running requests */
    vx_kv_usage(e->ctx, &blk_total, &blk_used, &blk_cached, &bs);
    /* free blocks beyond every request's pending tokens and one spare each */
    int64_t spare = blk_total - blk_used - blk_cached;
    for (int32_t s = 0; s < e->p.n_parallel; s++) {
        req *r = e->running[s];
        if (!r) continue;
        r->n_draft = 0;
        spare -= blocks_for(r->n_tokens, bs) - blocks_for(r->n_past, bs) + 1;
        if (r->n_tokens - r->n_past == 1) n_dec++;
        else prefill += r->n_tokens - r->n_past;
    }
    if (n_dec == 0) return;
    /* the batch's room for drafts, shared */
    const int32_t room = e->p.n_batch - n_dec - (int32_t)VX_MIN(prefill, e->p.n_batch / 2);
    const int32_t per_req = room > 0 ? room / n_dec : 0;
    for (int32_t s = 0; s < e->p.n_parallel; s++) {
        req *r = e->running[s];
        if (!r || r->embed || r->draft_max == 0 || r->n_tokens - r->n_past != 1 || atomic_load(&r->cancel)) continue;
        int32_t k = VX_MIN(VX_MIN(r->spec_cap, per_req), e->p.n_ctx - r->n_tokens - 1);
        if (r->max_tokens >= 0) k = VX_MIN(k, r->max_tokens - r->n_gen - 1);
        /* blocks the draft's positions [n_tokens, n_tokens + k) would add */
        while (k > 0 && blocks_for(r->n_tokens + k, bs) - blocks_for(r->n_tokens, bs) > spare) k--;
        if (k < VX_MAX(1, r->draft_min)) continue;
        spare -= blocks_for(r->n_tokens + k, bs) - blocks_for(r->n_tokens, bs);
        e->jobs[nj++] = (vx_draft_job){s, r->tokens, r->n_tokens, k, r->draft_p_min, r->draft, 0};
    }
    vx_drafter_propose(e->drafter, e->jobs, nj);
    for (int32_t j = 0; j < nj; j++) {
        req *r = e->running[e->jobs[j].seq];
        r->n_draft = e->jobs[j].n_out >= VX_MAX(1, r->draft_min) ? e->jobs[j].n_out : 0;
    }
}

/* Takes the target's draws for request r from batch entries i (its
 * pending token) to i + k (its draft's tokens): each draw is kept, and the
 * next entry's logits are read while the draw equals the draft token that
 * went into that entry. The cache (and the drafter's) is then cut to the
 * tokens kept. Returns the finish reason; *accepted: the draft tokens
 * taken. Lock not held. */
static vx_finish verify(vx_engine *e, req *r, int32_t i, int32_t k, int32_t *accepted) {
    vx_finish why = VX_FINISH_NONE;
    int32_t j = 0;
    for (;; j++) {
        r->n_past++;
        if (atomic_load(&r->cancel)) why = VX_FINISH_CANCELED;
        else why = emit(e, r, vx_get_logits_ith(e->ctx, i + j));
        if (why != VX_FINISH_NONE || j == k || r->tokens[r->n_tokens - 1] != r->draft[j]) break;
    }
    *accepted = j;
    r->n_drafted += k;
    r->n_accepted += j;
    if (why == VX_FINISH_NONE) {
        vx_kv_seq_rm(e->ctx, r->slot, r->n_past, -1);
        vx_drafter_keep(e->drafter, r->slot, r->n_past);
        r->spec_cap = j == k ? VX_MIN(r->draft_max, VX_MAX(r->spec_cap, 2 * k)) : VX_MAX(j + 1, r->draft_min);
    }
    return why;
}

/* Takes finished request r out of its slot and onto the step's done
 * list (freed, and told if canceled, at the step's end). Lock not held. */
static void retire(vx_engine *e, req *r, vx_finish why, int *n_done) {
    pthread_mutex_lock(&e->mu);
    release_slot(e, r);
    pthread_mutex_unlock(&e->mu);
    e->done[*n_done] = r;
    e->done_why[(*n_done)++] = why;
}

/* One step: admit, build a batch, run it, sample. Returns false when idle. */
static bool step(vx_engine *e) {
    req **done = e->done;
    vx_finish *done_why = e->done_why;
    int n_done = 0;

    pthread_mutex_lock(&e->mu);
    /* cancellations of waiting requests */
    for (req **pp = &e->qhead, *prev = NULL; *pp;) {
        req *r = *pp;
        if (atomic_load(&r->cancel)) {
            *pp = r->next;
            if (e->qtail == r) e->qtail = prev;
            e->n_queued--;
            done[n_done] = r;
            done_why[n_done++] = VX_FINISH_CANCELED;
        } else {
            prev = r;
            pp = &r->next;
        }
    }
    /* cancellations of running requests */
    for (int32_t s = 0; s < e->p.n_parallel; s++) {
        req *r = e->running[s];
        if (r && atomic_load(&r->cancel)) {
            release_slot(e, r);
            done[n_done] = r;
            done_why[n_done++] = VX_FINISH_CANCELED;
        }
    }
    /* admission, FIFO, while the pool has blocks for the head's tokens (a
     * preempted request waits here until others free their blocks) */
    int32_t blk_total, blk_used, bs;
    vx_kv_usage(e->ctx, &blk_total, &blk_used, NULL, &bs);
    int32_t blk_free = blk_total - blk_used;
    for (int32_t s = 0; s < e->p.n_parallel && e->qhead; s++) {
        if (e->running[s]) continue;
        req *r = e->qhead;
        const int32_t need = (r->n_tokens + !r->embed + bs - 1) / bs; /* and the next token's */
        if (need > blk_total) {
            /* can never fit: fail it instead of blocking the queue */
            e->qhead = r->next;
            if (!e->qhead) e->qtail = NULL;
            e->n_queued--;
            done[n_done] = r;
            done_why[n_done++] = VX_FINISH_ERROR;
            s--;
            continue;
        }
        /* keep one spare block per running sequence for this step's growth,
         * or the newcomer would be preempted straight away, again and again */
        if (need + e->n_running > blk_free) break;
        blk_free -= need;
        e->qhead = r->next;
        if (!e->qhead) e->qtail = NULL;
        e->n_queued--;
        r->next = NULL;
        r->slot = s;
        r->admitted = ++e->admissions;
        /* reuse cached blocks of the longest matching prefix; keep the last
         * token to evaluate, its logits start the generation */
        r->n_past = (r->prompt_lp && r->lp_next < r->n_prompt) || (r->embed && r->pooling != VX_POOLING_LAST) ||
                            e->encoder
                        ? 0 /* the prompt's logits or embeddings are wanted: compute it all */
                        : vx_kv_seq_reuse_prefix(e->ctx, s, r->tokens, r->n_tokens - 1);
        if (!r->was_admitted) {
            r->t_admitted = vx_time_ns();
            r->n_cached = VX_MIN(r->n_past, r->n_prompt);
            e->stats.tokens_prompt_cached += (uint64_t)r->n_cached;
            r->was_admitted = true;
        }
        e->running[s] = r;
        e->n_running++;
    }
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; i < n_done; i++)
        finish(e, done[i], done_why[i],
               done_why[i] == VX_FINISH_ERROR ? "the KV cache is too small for this request" : NULL);
    n_done = 0;

    const int64_t t_draft = vx_time_us();
    if (e->drafter) propose_drafts(e);
    /* build the batch: decode tokens first (each with its draft), then
     * prefill chunks */
    pthread_mutex_lock(&e->mu);
    int32_t n = 0, budget = e->p.n_batch;
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t s = 0; s < e->p.n_parallel && budget > 0; s++) {
            req *r = e->running[s];
            if (!r) continue;
            const int32_t pending = r->n_tokens - r->n_past;
            const bool decoding = pending == 1;
            if ((pass == 0) != decoding || pending <= 0) continue;
            if (e->encoder && pending > budget) continue; /* whole, in a later step */
            const int32_t take = VX_MIN(pending, budget);
            for (int32_t j = 0; j < take; j++) {
                e->b_tok[n] = r->tokens[r->n_past + j];
                e->b_pos[n] = r->n_past + j;
                e->b_seq[n] = s;
                const int32_t p = r->n_past + j;
                e->b_logits[n] = !r->embed && (p == r->n_tokens - 1 ||
                                               (r->prompt_lp && p + 1 >= r->lp_next && p + 1 < r->n_prompt));
                e->b_embd[n] = r->embed && vx_pool_wants(r->pooling, p, r->n_tokens);
                e->b_req[n] = r;
                n++;
            }
            budget -= take;
            for (int32_t j = 0; pass == 0 && j < r->n_draft; j++, n++) {
                e->b_tok[n] = r->draft[j];
                e->b_pos[n] = r->n_past + 1 + j;
                e->b_seq[n] = s;
                e->b_logits[n] = 1;
                e->b_embd[n] = 0;
                e->b_req[n] = r;
            }
            if (pass == 0) budget -= r->n_draft;
        }
    }
    pthread_mutex_unlock(&e->mu);
    if (n == 0) return e->n_running > 0 || e->n_queued > 0 ? true : false;

    vx_batch b = {n, e->b_tok, e->b_pos, e->b_seq, e->b_logits, e->b_embd};
    vx_status st = vx_decode(e->ctx, &b);
    const double dt = (double)(vx_time_us() - t_draft) * 1e-6; /* the drafts' forward passes too */
    if (st == VX_EFULL) {
        /* out of blocks: preempt the newest request and try again next step */
        pthread_mutex_lock(&e->mu);
        bool ok = preempt_one(e, NULL);
        req *only = NULL;
        if (!ok) {
            for (int32_t s = 0; s < e->p.n_parallel; s++)
                if (e->running[s]) only = e->running[s];
            if (only) release_slot(e, only);
        }
        pthread_mutex_unlock(&e->mu);
        if (only) finish(e, only, VX_FINISH_ERROR, "the KV cache is too small for this request");
        return true;
    }
    if (st != VX_OK) {
        /* unexpected: fail every request of the batch */
        char msg[VX_ERRMSG_MAX];
        snprintf(msg, sizeof msg, "forward pass failed: %s", vx_context_errmsg(e->ctx));
        pthread_mutex_lock(&e->mu);
        for (int32_t i = 0; i < n; i++) {
            req *r = e->b_req[i];
            if (r->slot >= 0) {
                release_slot(e, r);
                done[n_done] = r;
                done_why[n_done++] = VX_FINISH_ERROR;
            }
        }
        pthread_mutex_unlock(&e->mu);
        for (int i = 0; i < n_done; i++) finish(e, done[i], done_why[i], msg);
        return true;
    }

    /* advance and sample */
    int32_t n_prompt_tok = 0, n_gen_tok = 0, n_drafted = 0, n_accepted = 0;
    for (int32_t i = 0; i < n; i++) {
        req *r = e->b_req[i];
        if (r->n_draft > 0) { /* a decoding request and its draft: entries i .. i + k */
            const int32_t k = r->n_draft, gen0 = r->n_gen;
            int32_t a;
            r->n_draft = 0;
            if (r->n_past < r->n_prompt) n_prompt_tok++; /* its pending token is the prompt's last */
            const vx_finish why = verify(e, r, i, k, &a);
            i += k;
            n_drafted += k;
            n_accepted += a;
            n_gen_tok += r->n_gen - gen0;
            if (why != VX_FINISH_NONE) retire(e, r, why, &n_done);
            continue;
        }
        r->n_past++;
        if (r->n_past <= r->n_prompt) n_prompt_tok++;
        /* (a request of several entries may have finished at an earlier one) */
        if (r->slot < 0) continue;
        const int32_t gen0 = r->n_gen, p = e->b_pos[i];
        vx_finish why;
        if (r->embed) {
            if (e->b_embd[i]) vx_pool_add(r->pooling, r->embd, vx_get_embeddings_ith(e->ctx, i), e->n_embd);
            if (r->n_past < r->n_tokens) continue;
            why = atomic_load(&r->cancel) ? VX_FINISH_CANCELED : send_embd(e, r);
        } else if (!e->b_logits[i]) continue;
        else if (atomic_load(&r->cancel)) why = VX_FINISH_CANCELED;
        else if (p + 1 < r->n_tokens) /* a prompt position's, for prompt_logprobs */
            why = emit_prompt(e, r, p + 1, vx_get_logits_ith(e->ctx, i)) ? VX_FINISH_NONE : VX_FINISH_CANCELED;
        else if (r->max_tokens == 0) /* the prompt's logprobs were all it asked */
            send_end(r, why = VX_FINISH_LENGTH, NULL);
        else
            why = emit(e, r, vx_get_logits_ith(e->ctx, i));
        n_gen_tok += r->n_gen - gen0;
        if (why != VX_FINISH_NONE) retire(e, r, why, &n_done); /* STOP/LENGTH/ERROR were reported (emit, send_end) */
    }
    pthread_mutex_lock(&e->mu);
    e->stats.steps++;
    e->stats.busy_seconds += dt;
    e->stats.tokens_prompt += (uint64_t)n_prompt_tok;
    e->stats.tokens_generated += (uint64_t)n_gen_tok;
    e->stats.draft_tokens += (uint64_t)n_drafted;
    e->stats.draft_accepted += (uint64_t)n_accepted;
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; i < n_done; i++) {
        req *r = done[i];
        if (done_why[i] == VX_FINISH_CANCELED) {
            finish(e, r, VX_FINISH_CANCELED, NULL);
        } else {
            pthread_mutex_lock(&e->mu);
            e->stats.requests_finished++;
            pthread_mutex_unlock(&e->mu);
            req_free(r);
        }
    }
    return true;
}

static void *engine_main(void *arg) {
    vx_engine *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (!e->stop && e->n_queued == 0 && e->n_running == 0) pthread_cond_wait(&e->cv, &e->mu);
        const bool stop = e->stop;
        pthread_mutex_unlock(&e->mu);
        if (stop) break;
        step(e);
    }
    return NULL;
}

vx_status vx_engine_init(const vx_model *model, const vx_engine_params *params, vx_engine **out,
                         char *err, size_t err_size) {
    vx_engine_params defp = vx_engine_default_params();
    if (!params) params = &defp;
    *out = NULL;
    if (params->n_parallel <= 0 || params->n_parallel > 256 || params->n_ctx <= 0 ||
        params->n_batch <= 0 || params->queue_max < 0 || params->kv_size < 0)
        return vx_seterr(err, err_size, VX_EINVAL, "engine parameters out of range");
    vx_engine *e = calloc(1, sizeof *e);
    if (!e) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    e->model = model;
    e->vocab = vx_model_get_vocab(model);
    e->p = *params;
    if (e->p.n_ctx > vx_model_n_ctx_train(model)) e->p.n_ctx = vx_model_n_ctx_train(model);
    if (e->p.kv_size > 0 && e->p.kv_size < e->p.n_ctx) {
        const int32_t kv = e->p.kv_size, ctx = e->p.n_ctx;
        free(e);
        return vx_seterr(err, err_size, VX_EINVAL,
                         "the KV cache (%d positions) is smaller than the context (%d): a request that uses "
                         "the whole context could never finish; give a KV size of at least the context",
                         kv, ctx);
    }
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    vx_context_params cp = vx_context_default_params();
    cp.n_ctx = (uint32_t)e->p.n_ctx;
    /* by default the pool holds every slot's full context in whole blocks,
     * so preemption is a fallback; a smaller kv_size shares blocks on demand */
    const uint32_t slot_kv = (uint32_t)vx_kv_whole_blocks(e->p.n_ctx);
    cp.kv_size = e->p.kv_size > 0 ? (uint32_t)e->p.kv_size : slot_kv * (uint32_t)e->p.n_parallel;
    cp.n_batch = (uint32_t)e->p.n_batch;
    cp.n_seq_max = (uint32_t)e->p.n_parallel;
    cp.n_threads = e->p.n_threads;
    cp.kv_type = e->p.kv_type;
    cp.batch_invariant = e->p.batch_invariant;
    vx_status st = vx_context_init(model, &cp, &e->ctx, err, err_size);
    if (st) {
        vx_engine_free(e);
        return st;
    }
    e->n_vocab = vx_context_n_vocab(e->ctx);
    e->n_embd = vx_model_n_embd(model);
    e->encoder = vx_model_is_encoder(model);
    e->piece_size = vx_vocab_max_piece(e->vocab) + 1;
    e->piece = malloc((size_t)e->piece_size);
    const size_t nb = (size_t)e->p.n_batch;
    e->running = calloc((size_t)e->p.n_parallel, sizeof *e->running);
    e->b_tok = malloc(nb * sizeof *e->b_tok);
    e->b_pos = malloc(nb * sizeof *e->b_pos);
    e->b_seq = malloc(nb * sizeof *e->b_seq);
    e->b_logits = malloc(nb);
    e->b_embd = malloc(nb);
    e->b_req = malloc(nb * sizeof *e->b_req);
    const size_t nd = 2 * (size_t)e->p.n_parallel + (size_t)e->p.queue_max + 1;
    e->done = malloc(nd * sizeof *e->done);
    e->done_why = malloc(nd * sizeof *e->done_why);
    if (!e->running || !e->b_tok || !e->b_pos || !e->b_seq || !e->b_logits || !e->b_embd || !e->b_req ||
        !e->done || !e->done_why || !e->piece) {
        vx_engine_free(e);
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    }
    if ((e->p.spec_ngram > 0 || e->p.draft_model) && !e->encoder) {
        if (e->p.draft_max < 1 || e->p.draft_max > 256 || e->p.draft_min < 0 || e->p.draft_min > e->p.draft_max) {
            vx_engine_free(e);
            return vx_seterr(err, err_size, VX_EINVAL, "draft_max must be in [1, 256] and draft_min in [0, draft_max]");
        }
        vx_draft_params dp = vx_draft_default_params();
        dp.ngram_n = e->p.spec_ngram;
        dp.model = e->p.draft_model;
        dp.n_seq = e->p.n_parallel;
        dp.n_ctx = e->p.n_ctx;
        dp.n_batch = e->p.n_batch;
        dp.n_max = e->p.draft_max;
        dp.n_threads = e->p.n_threads;
        dp.kv_type = e->p.kv_type;
        dp.kv_size = e->p.kv_size;
        if ((st = vx_drafter_init(&dp, e->vocab, &e->drafter, err, err_size)) != VX_OK) {
            vx_engine_free(e);
            return st;
        }
        if (!(e->jobs = malloc((size_t)e->p.n_parallel * sizeof *e->jobs))) {
            vx_engine_free(e);
            return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
        }
    }
    if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
        vx_engine_free(e);
        return vx_seterr(err, err_size, VX_ENOMEM, "cannot start the engine thread");
    }
    e->thread_started = true;
    *out = e;
    return VX_OK;
}

void vx_engine_free(vx_engine *e) {
    if (!e) return;
    if (e->thread_started) {
        pthread_mutex_lock(&e->mu);
        e->stop = true;
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
    }
    /* everyone still here gets a final event */
    while (e->qhead) {
        req *r = e->qhead;
        e->qhead = r->next;
        finish(e, r, VX_FINISH_CANCELED, NULL);
    }
    if (e->running)
        for (int32_t s = 0; s < e->p.n_parallel; s++)
            if (e->running[s]) finish(e, e->running[s], VX_FINISH_CANCELED, NULL);
    vx_context_free(e->ctx);
    vx_drafter_free(e->drafter);
    free(e->jobs);
    free(e->running);
    free(e->piece);
    vx_jvocab_free(e->jv);
    vx_gvocab_free(e->gv);
    free(e->b_tok);
    free(e->b_pos);
    free(e->b_seq);
    free(e->b_logits);
    free(e->b_embd);
    free(e->b_req);
    free(e->done);
    free(e->done_why);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}

/* A table built from the vocabulary once, by the first request that
 * needs it (*slot: the engine's; build / destroy: its constructor and
 * destructor). NULL when out of memory. */
static const void *shared_table(vx_engine *e, void **slot, void *(*build)(const vx_vocab *),
                                void (*destroy)(void *)) {
    pthread_mutex_lock(&e->mu);
    const void *t = *slot;
    pthread_mutex_unlock(&e->mu);
    if (t) return t;
    void *mine = build(e->vocab);
    if (!mine) return NULL;
    pthread_mutex_lock(&e->mu);
    if (!*slot) *slot = mine, mine = NULL;
    t = *slot;
    pthread_mutex_unlock(&e->mu);
    if (mine) destroy(mine); /* another request built it first */
    return t;
}

static void *jvocab_build(const vx_vocab *v) { return vx_jvocab_new(v); }
static void jvocab_destroy(void *t) { vx_jvocab_free(t); }
static void *gvocab_build(const vx_vocab *v) { return vx_gvocab_new(v); }
static void gvocab_destroy(void *t) { vx_gvocab_free(t); }

/* Constrains r's tokens to a JSON object, or to schema (owned by r from
 * here) when not NULL. False when out of memory. */
static bool json_setup(vx_engine *e, req *r, vx_jschema *schema) {
    r->schema = schema;
    const vx_jvocab *jv = shared_table(e, (void **)&e->jv, jvocab_build, jvocab_destroy);
    if (!jv) return false;
    vx_jfilter_init(&r->jf, jv, schema);
    vx_sampler_set_filter(r->smp, vx_jfilter_allows, &r->jf);
    return true;
}

/* Constrains r's tokens to grammar (owned by r from here). False when out
 * of memory. */
static bool grammar_setup(vx_engine *e, req *r, vx_grammar *grammar) {
    r->grammar = grammar;
    const vx_gvocab *gv = shared_table(e, (void **)&e->gv, gvocab_build, gvocab_destroy);
    if (!gv || !(r->gf = vx_gfilter_new(grammar, gv))) return false;
    vx_sampler_set_filter(r->smp, vx_gfilter_allows, r->gf);
    return true;
}

vx_status vx_engine_submit(vx_engine *e, const vx_request_params *rp, uint64_t *id, char *err,
                           size_t err_size) {
    if (!rp || !rp->on_event || !rp->prompt || rp->n_prompt <= 0)
        return vx_seterr(err, err_size, VX_EINVAL, "a request needs a non-empty prompt and a callback");
    if (rp->embed && rp->n_prompt > e->p.n_ctx)
        return vx_seterr(err, err_size, VX_ERANGE, "the input has %d tokens; the context holds %d", rp->n_prompt,
                         e->p.n_ctx);
    if (!rp->embed && rp->n_prompt >= e->p.n_ctx)
        return vx_seterr(err, err_size, VX_ERANGE,
                         "the prompt has %d tokens; the context holds %d (prompt and at least one "
                         "generated token)",
                         rp->n_prompt, e->p.n_ctx);
    if (e->encoder && !rp->embed)
        return vx_seterr(err, err_size, VX_EUNSUPPORTED,
                         "this model is an embedding model (an encoder without an output head): it computes "
                         "embeddings, not text");
    if (e->encoder && rp->n_prompt > e->p.n_batch)
        return vx_seterr(err, err_size, VX_ERANGE,
                         "the input has %d tokens; this embedding model takes at most %d (the batch size: its "
                         "attention sees the whole input at once)",
                         rp->n_prompt, e->p.n_batch);
    if (rp->embed && !vx_pool_valid(rp->pooling))
        return vx_seterr(err, err_size, VX_EINVAL, "an embedding request pools by mean, cls or last");
    if (rp->n_logprobs < 0 || rp->n_logprobs > MAX_TOP)
        return vx_seterr(err, err_size, VX_EINVAL, "logprobs must be in [0, %d]", MAX_TOP);
    for (int32_t i = 0; i < rp->n_prompt; i++)
        if (rp->prompt[i] < 0 || rp->prompt[i] >= e->n_vocab)
            return vx_seterr(err, err_size, VX_EINVAL, "token %d at prompt index %d is outside the "
                             "vocabulary (%d)", rp->prompt[i], i, e->n_vocab);
    req *r = calloc(1, sizeof *r);
    if (!r) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    r->cap = e->p.n_ctx;
    r->tokens = malloc((size_t)r->cap * sizeof *r->tokens);
    if (!r->tokens) {
        req_free(r);
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    }
    if (rp->embed) {
        r->embed = true;
        r->pooling = rp->pooling;
        r->embd = calloc((size_t)e->n_embd, sizeof *r->embd);
        if (!r->embd) {
            req_free(r);
            return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
        }
    } else if (vx_sampler_init(&rp->sampling, e->n_vocab, &r->smp) != VX_OK) {
        req_free(r);
        return vx_seterr(err, err_size, VX_EINVAL, "invalid sampling parameters");
    } else if (e->drafter && rp->draft_max >= 0) {
        r->draft_max = rp->draft_max > 0 ? VX_MIN(rp->draft_max, e->p.draft_max) : e->p.draft_max;
        r->draft_min = rp->draft_min > 0 ? rp->draft_min : e->p.draft_min;
        r->draft_p_min = rp->draft_p_min > 0 ? rp->draft_p_min : e->p.draft_p_min;
        r->spec_cap = r->draft_max;
        if (!(r->draft = malloc((size_t)e->p.draft_max * sizeof *r->draft))) {
            req_free(r);
            return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
        }
    }
    vx_jschema *schema = NULL;
    if (rp->json_schema && !rp->embed) {
        const vx_status st = vx_jschema_compile(rp->json_schema, rp->json_schema_len, &schema, err, err_size);
        if (st != VX_OK) {
            req_free(r);
            return st;
        }
    }
    if (!rp->embed && (rp->json_object || schema) && !json_setup(e, r, schema)) {
        req_free(r); /* the schema with it */
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    }
    if (rp->grammar && !rp->embed) {
        vx_grammar *g = NULL;
        const vx_status st = r->jf.jv ? vx_seterr(err, err_size, VX_EINVAL, "a grammar and a JSON format cannot "
                                                                            "be asked for together")
                                      : vx_grammar_parse(rp->grammar, rp->grammar_len, &g, err, err_size);
        if (st != VX_OK) {
            req_free(r);
            return st;
        }
        if (!grammar_setup(e, r, g)) {
            req_free(r); /* the grammar with it */
            return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
        }
    }
    memcpy(r->tokens, rp->prompt, (size_t)rp->n_prompt * sizeof *r->tokens);
    r->n_tokens = r->n_prompt = rp->n_prompt;
    for (int32_t i = 0; i < rp->n_prompt && r->smp; i++) vx_sampler_accept(r->smp, rp->prompt[i]);
    r->max_tokens = rp->max_tokens;
    r->logprobs = rp->logprobs || rp->n_logprobs > 0;
    r->n_logprobs = rp->n_logprobs;
    r->prompt_lp = rp->prompt_logprobs;
    r->lp_next = 1;
    r->ignore_eos = rp->ignore_eos;
    r->cb = rp->on_event;
    r->ud = rp->user_data;
    r->slot = -1;
    pthread_mutex_lock(&e->mu);
    if (e->stop) {
        pthread_mutex_unlock(&e->mu);
        req_free(r);
        return vx_seterr(err, err_size, VX_ECANCELED, "the engine is shutting down");
    }
    /* queue_max requests may wait beyond those the free slots will take
     * at the next step: an idle engine takes n_parallel + queue_max */
    int32_t free_slots = e->p.n_parallel;
    for (int32_t i = 0; i < e->p.n_parallel; i++) free_slots -= e->running[i] != NULL;
    if (e->n_queued >= e->p.queue_max + free_slots) {
        pthread_mutex_unlock(&e->mu);
        req_free(r);
        return vx_seterr(err, err_size, VX_EFULL, "the request queue is full (%d waiting)",
                         e->p.queue_max);
    }
    r->id = ++e->next_id;
    if (e->qtail) e->qtail->next = r;
    else e->qhead = r;
    e->qtail = r;
    e->n_queued++;
    e->stats.requests_total++;
    if (id) *id = r->id;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return VX_OK;
}

void vx_engine_cancel(vx_engine *e, uint64_t id) {
    pthread_mutex_lock(&e->mu);
    for (req *r = e->qhead; r; r = r->next)
        if (r->id == id) atomic_store(&r->cancel, true);
    for (int32_t s = 0; s < e->p.n_parallel; s++)
        if (e->running[s] && e->running[s]->id == id) atomic_store(&e->running[s]->cancel, true);
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

void vx_engine_get_stats(vx_engine *e, vx_engine_stats *out) {
    pthread_mutex_lock(&e->mu);
    *out = e->stats;
    out->queued = e->n_queued;
    out->running = e->n_running;
    vx_kv_usage(e->ctx, &out->kv_blocks_total, &out->kv_blocks_used, &out->kv_blocks_cached, NULL);
    vx_kv_prefix_counts(e->ctx, &out->prefix_lookups, &out->prefix_hits);
    pthread_mutex_unlock(&e->mu);
}

int32_t vx_engine_n_ctx(const vx_engine *e) { return e->p.n_ctx; }

int32_t vx_engine_capacity(const vx_engine *e) { return e->p.n_parallel + e->p.queue_max; }
