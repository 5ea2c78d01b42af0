/*
 * engine.h - the serving engine: one thread that owns a vx_context and
 * runs continuous batching over many requests. Requests join and leave the
 * running set every step; each step is one vx_decode() mixing the decode
 * tokens of running sequences with chunks of new prompts under a token
 * budget. When the KV cache runs out, the most recently admitted sequence
 * is preempted (its cache freed, its tokens recomputed later), so a request
 * that fits the context never fails for lack of blocks.
 *
 * Callers (the HTTP server) never run model code: they submit requests and
 * receive token events through a callback that runs on the engine thread.
 */
#ifndef VX_ENGINE_H
#define VX_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "vortex.h"

typedef struct vx_engine vx_engine;

typedef struct vx_engine_params {
    int32_t n_ctx;      /* max positions of one sequence (prompt + generated) */
    int32_t kv_size;    /* KV positions over all sequences (0 = n_ctx x n_parallel) */
    int32_t n_parallel; /* max sequences running at once */
    int32_t n_batch;    /* token budget of one step (decode tokens + prefill chunks) */
    int32_t n_threads;  /* 0 = all cores */
    int32_t queue_max;  /* requests that may wait beyond those the free slots
                           take; past that submit returns VX_EFULL */
    vx_kv_type kv_type;
    bool batch_invariant; /* vx_context_params.batch_invariant: outputs never depend on
                             what else runs, at the cost of the AMX prefill */
    /* Speculative decoding (llama-server's): each decoding sequence gets a
     * draft (draft.h) that the model verifies in the same batch; a token is
     * kept while the request's own sampler draws exactly the drafted one, so
     * outputs (and the random draws under a seed) are what they would be
     * without it. Off unless spec_ngram or draft_model is set. */
    int32_t spec_ngram;          /* n-gram lookup on this many tokens (--spec-type ngram-simple) */
    const vx_model *draft_model; /* a draft model of the same vocabulary (-md) */
    int32_t draft_max;           /* most tokens drafted per sequence and step (16) */
    int32_t draft_min;           /* shorter drafts are not verified (0) */
    float draft_p_min;           /* the draft model drafts while its top token's probability
                                    is at least this (0.8) */
} vx_engine_params;

vx_engine_params vx_engine_default_params(void);

typedef enum vx_finish {
    VX_FINISH_NONE = 0, /* more events follow */
    VX_FINISH_STOP,     /* end-of-generation token (or a json_object request's object closed) */
    VX_FINISH_LENGTH,   /* max_tokens or the context reached */
    VX_FINISH_CANCELED, /* the callback returned false or vx_engine_cancel() */
    VX_FINISH_ERROR     /* see error */
} vx_finish;

/* One event per generated token, then a final one (finish != NONE, token
 * -1 unless the last token came with it). Pointers are valid only during
 * the callback. */
typedef struct vx_token_event {
    uint64_t id;            /* request id */
    vx_token token;         /* -1: no token in this event */
    const char *text;       /* the token's bytes (may split a UTF-8 character) */
    int32_t text_len;
    float logprob;          /* of token under the model's distribution (the
                               log-softmax of the raw logits: vx_logprobs);
                               NaN unless the request asked for logprobs */
    int32_t n_top;          /* top alternatives (n_logprobs asked), same distribution */
    const vx_token *top_ids;
    const float *top_logprobs;
    vx_finish finish;
    int32_t n_prompt;       /* prompt tokens */
    int32_t n_cached;       /* prompt tokens whose KV came from the prefix cache */
    int32_t n_gen;          /* generated so far, this token included */
    int32_t n_drafted;      /* speculative decoding so far: drafted tokens verified ... */
    int32_t n_draft_accepted; /* ... and those the sampler drew */
    int64_t t_admitted_ns;  /* when the request first entered the running batch
                               (vx_time_ns; 0 while it waits): queue time ends there */
    bool prompt;            /* a prompt token's logprob (prompt_logprobs): token
                               is prompt[i] (i >= 1), logprob and top its
                               distribution given prompt[0..i); no text is
                               generated. These come first, in order */
    const char *error;      /* message when finish == VX_FINISH_ERROR */
    const float *embd;      /* an embedding request's vector (pooled, not
                               normalized), in its final event (STOP) */
    int32_t n_embd;
} vx_token_event;

/* Runs on the engine thread: must return quickly (queue the data, do not
 * block on a slow client). Return false to cancel the request; the final
 * event (VX_FINISH_CANCELED) still follows. */
typedef bool (*vx_event_fn)(const vx_token_event *ev, void *user_data);

typedef struct vx_request_params {
    const vx_token *prompt; /* copied at submit */
    int32_t n_prompt;
    int32_t max_tokens;     /* < 0: until the context is full */
    vx_sampler_params sampling; /* copied (logit_bias too) */
    bool logprobs;          /* report each token's logprob ... */
    int32_t n_logprobs;     /* ... and this many top alternatives, 0..20 */
    bool prompt_logprobs;   /* the same for the prompt's tokens after the first
                               (events with .prompt; the whole prompt is
                               computed, never taken from the prefix cache);
                               with max_tokens 0 nothing is generated */
    bool ignore_eos;
    bool json_object;       /* constrained decoding (json_check.h): the generated
                               text is one JSON object, and the request stops
                               (VX_FINISH_STOP) when it closes */
    const char *json_schema; /* the same, conforming to this JSON Schema
                               (json_schema.h; json_schema_len bytes, compiled
                               at submit: VX_EINVAL says what it cannot take) */
    size_t json_schema_len;
    const char *grammar;    /* the same, to this GBNF grammar (grammar.h;
                               grammar_len bytes, compiled at submit: VX_EINVAL
                               says where it is wrong); the request stops when
                               the text can only end (or at an end-of-generation
                               token the grammar lets through where it may end).
                               Not with json_object / json_schema */
    size_t grammar_len;
    bool embed;             /* an embedding request: the prompt is evaluated
                               (all of it, up to n_ctx tokens), nothing is
                               generated, and the final event carries the
                               prompt's embeddings pooled as this says (mean,
                               cls or last; the other fields are ignored) */
    vx_pooling pooling;
    int32_t draft_max;      /* speculative decoding (llama-server's speculative.n_max):
                               drafted tokens per step at most (0: the engine's
                               draft_max, which also caps it; < 0: no drafts) */
    int32_t draft_min;      /* shorter drafts are not verified (0: the engine's) */
    float draft_p_min;      /* the draft model's threshold (0: the engine's) */
    vx_event_fn on_event;
    void *user_data;
} vx_request_params;

vx_status vx_engine_init(const vx_model *model, const vx_engine_params *params,
                         vx_engine **out, char *err, size_t err_size);
/* Cancels every request (each gets its final event) and stops the thread. */
void vx_engine_free(vx_engine *engine);

/* Queues a request. VX_EFULL: the queue is full (HTTP 429). VX_ERANGE: the
 * prompt does not fit the context (err says the numbers). VX_EINVAL: bad
 * parameters. On success *id identifies it and events will follow. */
vx_status vx_engine_submit(vx_engine *engine, const vx_request_params *req, uint64_t *id,
                           char *err, size_t err_size);
/* Asks a request to stop; its final event says VX_FINISH_CANCELED. Unknown
 * or finished ids are ignored. Safe from any thread. */
void vx_engine_cancel(vx_engine *engine, uint64_t id);

typedef struct vx_engine_stats {
    int32_t queued, running;
    int32_t kv_blocks_total, kv_blocks_used, kv_blocks_cached;
    uint64_t requests_total, requests_finished;
    uint64_t tokens_prompt, tokens_generated, tokens_prompt_cached;
    uint64_t prefix_lookups, prefix_hits; /* KV blocks looked up / reused */
    uint64_t preemptions, steps;
    uint64_t draft_tokens, draft_accepted; /* speculative decoding: drafted tokens verified,
                                              and those the sampler drew */
    double busy_seconds; /* time spent in forward passes */
} vx_engine_stats;

void vx_engine_get_stats(vx_engine *engine, vx_engine_stats *out);
/* The context one sequence gets (n_ctx capped at the model's training context). */
int32_t vx_engine_n_ctx(const vx_engine *engine);
/* Requests an idle engine takes at once: n_parallel + queue_max (more are
 * refused with VX_EFULL however long the caller waits). */
int32_t vx_engine_capacity(const vx_engine *engine);

#endif
