/*
 * draft.h - where the serving engine's speculative decoding gets its
 * drafts: tokens guessed cheaply for each sequence, which the target model
 * then verifies in one batch (engine.c keeps exactly the ones its own
 * sampler would have drawn, so drafts change speed, never output).
 *
 * Two sources, as llama-server has them, tried in this order:
 *   n-gram lookup ("prompt lookup", llama-server's --spec-type ngram-simple):
 *       the sequence's last ngram_n tokens are looked up in its earlier
 *       tokens (prompt and generated); the tokens that followed their most
 *       recent earlier occurrence are the draft. No model, no memory.
 *   a draft model (llama-server's -md): a smaller model with the same
 *       vocabulary, holding a KV cache per sequence, proposes its greedy
 *       continuation while its top token's probability stays >= p_min.
 *
 * One drafter serves every sequence id [0, n_seq); calls come from one
 * thread (the engine's).
 */
#ifndef VX_DRAFT_H
#define VX_DRAFT_H

#include <stdbool.h>
#include <stdint.h>

#include "vortex.h"

typedef struct vx_drafter vx_drafter;

typedef struct vx_draft_params {
    int32_t ngram_n;         /* n-gram lookup on sequences of this many tokens; 0 = off */
    const vx_model *model;   /* the draft model, NULL = none (each job gives its p_min) */
    int32_t n_seq;           /* sequence ids [0, n_seq) */
    int32_t n_ctx;           /* positions of one sequence */
    int32_t n_batch;         /* tokens per draft-model forward pass (its catch-up chunks) */
    int32_t n_max;           /* most tokens one proposal drafts */
    int32_t n_threads;
    vx_kv_type kv_type;
    int32_t kv_size;         /* the target's KV positions over all sequences (0: n_seq x n_ctx) */
} vx_draft_params;

vx_draft_params vx_draft_default_params(void);

/* VX_EINVAL (err says why) when neither source is given, or the draft
 * model's vocabulary is not the target's (vocab: the target's; the same
 * size and the same text for every token). */
vx_status vx_drafter_init(const vx_draft_params *p, const vx_vocab *vocab, vx_drafter **out, char *err,
                          size_t err_size);
void vx_drafter_free(vx_drafter *d);

/* One sequence's request for a draft: its tokens so far (the last one not
 * yet evaluated by the target) and at most n_max tokens to guess; the
 * drafter writes n_out (0..n_max) tokens to out. */
typedef struct vx_draft_job {
    int32_t seq;
    const vx_token *tokens;
    int32_t n_tokens;
    int32_t n_max;
    float p_min;    /* the draft model's threshold for this job */
    vx_token *out;
    int32_t n_out;
} vx_draft_job;

/* Drafts for n jobs of distinct sequences. The draft model evaluates what
 * it has not seen of each sequence first, at most n_batch tokens per pass
 * over all of them: a sequence still catching up gets no draft this time.
 * Never fails: a draft model that cannot run yields empty drafts (and
 * forgets the sequence). */
void vx_drafter_propose(vx_drafter *d, vx_draft_job *jobs, int32_t n);
/* The sequence's tokens [0, n_keep) stand; what the drafter holds beyond
 * may differ and is dropped. */
void vx_drafter_keep(vx_drafter *d, int32_t seq, int32_t n_keep);
/* The sequence ended (or was preempted): forget it. */
void vx_drafter_reset(vx_drafter *d, int32_t seq);
/* Blocks of the draft model's KV cache (0 without a draft model). */
int32_t vx_drafter_kv_blocks(const vx_drafter *d);

/* The n-gram source alone: the tokens after the most recent earlier
 * occurrence of tokens' last key_n ones (overlapping allowed), at most
 * n_max of them, into out; returns how many (0: no earlier occurrence). */
int32_t vx_ngram_lookup(const vx_token *tokens, int32_t n, int32_t key_n, int32_t n_max, vx_token *out);

#endif
