/*
 * server_llamacpp.h - llama-server's own (non-OpenAI) endpoints on `vx
 * serve`: POST /completion (/completions stays OpenAI's), POST /infill and GET /props,
 * as pure functions beside server_openai.h and server_ollama.h, so that
 * the scripts and tools written for llama-server (llama.vim and
 * llama.vscode's fill in the middle, front-ends that speak /completion)
 * work against vx unchanged.
 *
 * As with ollama's API, a request is translated into the OpenAI completion
 * request that means the same, which vx_oai_parse_request validates, and
 * the reply is written in llama-server's shape: one object with content,
 * stop, stop_type ("eos", "word", "limit"), stopping_word, the token
 * counts and timings (ms), or, streaming, server-sent events ("data:
 * {...}"), one per piece of text and a last one with stop true and the
 * statistics, without OpenAI's [DONE].
 *
 * Sampling defaults are llama-server's (its CLI's): temperature 0.8, top_k
 * 40, top_p 0.95, min_p 0.05, repeat_penalty 1 over the last 64 tokens,
 * n_predict -1 (until the end of generation or of the context). Samplers
 * vx does not have (mirostat, typical_p, XTC, DRY, dynamic temperature,
 * GBNF grammars) are refused with a 400 naming the field when a request
 * turns them on, never ignored; their neutral values pass.
 */
#ifndef VX_SERVER_LLAMACPP_H
#define VX_SERVER_LLAMACPP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "server_openai.h"
#include "vortex.h"

typedef enum vx_lcpp_kind { VX_LCPP_COMPLETION = 1, VX_LCPP_INFILL = 2 } vx_lcpp_kind;

/* At most this many response_fields */
#define VX_LCPP_MAX_FIELDS 32

typedef struct vx_lcpp_request {
    vx_lcpp_kind kind;
    char *oai_body; /* the same request as an OpenAI completion (for vx_oai_parse_request) */
    size_t oai_len;
    int32_t max_tokens;       /* n_predict (-1: until the end) */
    int32_t n_probs;          /* completion_probabilities' alternatives (0: none) */
    bool post_sampling_probs; /* refused when true (the sampler's candidates are not kept) */
    bool return_tokens;       /* "tokens": the generated ids */
    /* speculative.n_max / n_min / p_min as vx_request_params takes them
     * (0: the server's; draft_max -1: no drafts) */
    int32_t draft_max, draft_min;
    float draft_p_min;
    char *fields[VX_LCPP_MAX_FIELDS]; /* response_fields ("timings/prompt_n": nested) */
    int32_t n_fields;
} vx_lcpp_request;

/* Translates a /completion or /infill body. Infill builds the prompt's
 * tokens as llama-server does ([FIM_REP] project, [FIM_SEP] file and
 * text of each input_extra chunk, [BOS], [FIM_PRE] input_prefix prompt,
 * [FIM_SUF] input_suffix, [FIM_MID]; prefix and suffix cut to 3/4 and
 * 1/4 of n_batch, the extra chunks to what the context leaves), so it
 * needs the vocabulary's FIM tokens (a 400 without them). False with err
 * filled. */
bool vx_lcpp_translate(vx_lcpp_kind kind, const char *body, size_t len, const vx_vocab *v, int32_t n_ctx,
                       int32_t n_batch, vx_lcpp_request *out, vx_oai_error *err);
void vx_lcpp_request_free(vx_lcpp_request *r);

/* One reply object (no framing): a streaming piece (final false: content,
 * stop false, counts), or the final object (the whole text when not
 * streaming, "" when streaming, where the pieces carried it). */
typedef struct vx_lcpp_reply {
    const vx_lcpp_request *lreq;
    const vx_oai_request *req; /* its generation_settings */
    const char *model;
    const char *text;
    size_t text_len;
    const vx_token *tokens; /* the generated ids (return_tokens) */
    int32_t n_tokens;
    const vx_oai_logprob *lp; /* completion_probabilities (n_lp entries) */
    int32_t n_lp;
    const vx_vocab *vocab;
    bool final;
    const char *stop_type;     /* "eos", "word", "limit", "none" */
    const char *stopping_word; /* the stop string that ended it, or "" */
    bool new_line;             /* the text (streamed: all its pieces) has a newline */
    const char *prompt;        /* the prompt's text */
    size_t prompt_len;
    int32_t n_predicted, n_evaluated;
    int32_t n_reused; /* prompt tokens taken from the prefix cache (not evaluated) */
    int32_t n_cached; /* the sequence's tokens in the cache at the end (llama-server's n_past) */
    double prompt_ms, predicted_ms;
    int32_t draft_n, draft_n_accepted; /* speculative decoding: drafted tokens verified, taken */
} vx_lcpp_reply;

void vx_lcpp_reply_json(vx_sbuf *out, const vx_lcpp_reply *r);

/* GET /props */
typedef struct vx_lcpp_props {
    const char *model_path, *chat_template, *bos_token, *eos_token;
    int32_t n_ctx, total_slots;
} vx_lcpp_props;

char *vx_lcpp_props_json(const vx_lcpp_props *p);

#endif
