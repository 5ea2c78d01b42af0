/*
 * server_openai.h - the OpenAI-compatible request/response layer of
 * `vx serve`, as pure functions that need no network and no engine:
 * request JSON parsing and validation (with OpenAI-style error objects),
 * prompt rendering and tokenization, the streaming text filter (UTF-8
 * reassembly and stop strings), and response / SSE chunk JSON building.
 */
#ifndef VX_SERVER_OPENAI_H
#define VX_SERVER_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat.h"
#include "common.h" /* vx_sbuf */
#include "tool_call.h"
#include "vortex.h"

#define VX_OAI_MAX_N 8          /* choices per request */
#define VX_OAI_MAX_STOP 16      /* stop strings per request */
#define VX_OAI_MAX_STOP_LEN 512 /* bytes of one stop string */
#define VX_OAI_MAX_TOP 20       /* top_logprobs */
#define VX_OAI_MAX_BIAS 4096    /* logit_bias entries */

/* ------------------------------------------------------------------ UTF-8 */

/* True if s[0..n) is valid UTF-8 (no overlongs, surrogates, > U+10FFFF);
 * otherwise *bad_at (may be NULL) is the offset of the first bad byte. */
bool vx_utf8_valid(const char *s, size_t n, size_t *bad_at);
/* Appends s[0..n) with every invalid sequence replaced by U+FFFD. */
void vx_utf8_sanitize(vx_sbuf *out, const char *s, size_t n);
/* The character at s[0..n) (n >= 1): its length, or 0 with *bad the
 * length of the maximal invalid subpart (>= 1) to replace or drop. */
int vx_utf8_char(const unsigned char *s, size_t n, size_t *bad);

/* ------------------------------------------------------------------ errors */

typedef struct vx_oai_error {
    int status;        /* HTTP status: 400, 404, 413, 429, 500, 503, ... */
    const char *type;  /* "invalid_request_error", "server_error", ... */
    const char *code;  /* NULL = JSON null */
    char param[128];   /* offending field ("" = null), e.g. "messages[1].content" */
    char message[1024];
} vx_oai_error;

void vx_oai_set_error(vx_oai_error *e, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* {"error":{"message":...,"type":...,"param":...,"code":...}} (malloc'd). */
char *vx_oai_error_json(const vx_oai_error *e);

/* ---------------------------------------------------------------- requests */

typedef enum vx_oai_kind { VX_OAI_CHAT = 0, VX_OAI_COMPLETION = 1 } vx_oai_kind;

typedef struct vx_oai_request {
    vx_oai_kind kind;
    char *model;          /* as sent (NULL: not given) */
    /* chat: the messages as a JSON array of objects whose content is a
     * plain string (text parts joined), for the chat template */
    char *messages_json;
    int32_t n_messages;
    /* completion: a text prompt, or token ids (exactly one is set) */
    char *prompt;
    size_t prompt_len;
    vx_token *prompt_ids;
    int32_t n_prompt_ids;
    int32_t max_tokens;   /* -1: until end of generation or the context is full */
    vx_sampler_params sampling; /* logit_bias points into this struct's array */
    vx_logit_bias *logit_bias;
    int32_t n_logit_bias;
    char *stop[VX_OAI_MAX_STOP];
    int32_t n_stop;
    int32_t n;            /* choices, 1..VX_OAI_MAX_N */
    bool stream;
    bool include_usage;   /* stream_options.include_usage */
    bool logprobs;        /* per-token logprobs wanted */
    int32_t top_logprobs; /* alternatives per token, 0..VX_OAI_MAX_TOP */
    bool echo;            /* completion: prepend the prompt to the text */
    char *suffix;         /* completion: the text after the insertion (fill in the middle,
                             vx_oai_fim_prompt); NULL or "": none */
    bool ignore_eos;      /* llama.cpp extension: generate past end-of-generation */
    bool json_object;     /* response_format {"type": "json_object"}: constrained to one JSON object */
    char *json_schema;    /* response_format json_schema's schema (JSON text), compiled and checked */
    char *grammar;        /* llama-server's "grammar": GBNF text (grammar.h), compiled and checked */
    /* tools (tool_call.h), validated: the array for the chat template
     * (NULL: none, or tool_choice "none"), the functions' names, and
     * tool_choice: VX_OAI_TOOLS_AUTO, _REQUIRED, or _NAMED (tool_name) */
    char *tools_json;
    char **tool_names;
    int32_t n_tools;
    int tool_choice;
    char *tool_name;
    bool parallel_tool_calls; /* default true */
    /* reasoning (reasoning.h): reasoning_format "none" keeps thoughts in
     * the content, "deepseek" splits them off into reasoning_content;
     * "auto" or not given: the server's default */
    int reasoning;
    /* chat_template_kwargs: extra template variables (a JSON object's
     * text as the client wrote it, e.g. {"enable_thinking": false}) */
    char *template_kwargs;
    /* add_generation_prompt (default true) and continue_final_message:
     * the reply continues the final message (vLLM's fields; a final
     * assistant message with text, add_generation_prompt not given, is
     * continued too: assistant prefill, as llama-server and ollama) */
    bool add_generation_prompt, continue_final;
} vx_oai_request;

enum { VX_OAI_REASONING_DEFAULT = 0, VX_OAI_REASONING_NONE, VX_OAI_REASONING_SPLIT };

enum { VX_OAI_TOOLS_AUTO = 0, VX_OAI_TOOLS_REQUIRED, VX_OAI_TOOLS_NAMED };
#define VX_OAI_MAX_TOOLS 128 /* functions per request, as OpenAI */

/* Parses and validates a request body. n_vocab bounds token ids (prompt,
 * logit_bias). n_ctx > 0: chat messages beyond n_ctx are refused
 * (context_length_exceeded: each renders to a token at least) before
 * anything is copied. On failure returns false with err filled (status
 * 400) and out holds nothing to free. Unknown fields are ignored. */
bool vx_oai_parse_request(vx_oai_kind kind, const char *body, size_t len, int32_t n_vocab, int32_t n_ctx,
                          vx_oai_request *out, vx_oai_error *err);
void vx_oai_request_free(vx_oai_request *r);

/* Parses a body as a JSON object, with the UTF-8 check and an error that
 * says where parsing stopped. Stricter than cJSON alone: control bytes
 * between tokens, numbers such as 01 or 1., raw NUL bytes and NUL
 * characters in keys are errors; a \u0000 in a string value becomes U+FFFD
 * (C strings end at NUL). Of duplicate keys the first is read. Returns
 * a cJSON object (caller deletes) as void * to keep cJSON out of this
 * header, or NULL with err filled. */
void *vx_oai_parse_json_object(const char *body, size_t len, vx_oai_error *err);

/* Helpers of the request parsers, for server_embed.c: an array of token
 * ids in [0, n_vocab) (a cJSON array) into a malloc'd array; a 400 for
 * member param of the wrong JSON type (a cJSON value; returns false); s as
 * a JSON string (NULL: null). */
bool vx_oai_parse_ids(const void *arr, const char *param, int32_t n_vocab, vx_token **out, int32_t *n_out,
                      vx_oai_error *err);
bool vx_oai_type_error(vx_oai_error *err, const char *param, const char *want, const void *got);
/* An optional integer member key of a cJSON object in [lo, hi] into *out
 * (left as it is when absent or null; present says which), else a 400. */
bool vx_oai_opt_int(const void *obj, const char *key, double lo, double hi, int64_t *out, bool *present,
                    vx_oai_error *err);
void vx_oai_json_cstr(vx_sbuf *b, const char *s);
/* s[0..n) as a JSON string (NUL bytes as \u0000, invalid UTF-8 replaced). */
void vx_oai_json_str(vx_sbuf *b, const char *s, size_t n);
/* JSON helpers of the API translations (cJSON objects): a member, JSON
 * null as absent; dst[key] = a copy of src's value (when present; false
 * when memory runs out); err set to the 500 of a failed allocation
 * (returns false). */
struct cJSON;
const struct cJSON *vx_oai_member(const struct cJSON *o, const char *key);
bool vx_oai_copy_member(struct cJSON *dst, const char *key, const struct cJSON *src);
bool vx_oai_oom(vx_oai_error *err);

/* A completion with a suffix as the model's fill-in-the-middle prompt:
 * [BOS] PRE prompt SUF suffix MID (the prefix-suffix-middle order of
 * Qwen2.5-Coder, CodeLlama, StarCoder, DeepSeek-Coder; texts tokenized
 * without special tokens: code may hold their spellings); a prompt of ids
 * goes in as they are. A 400 on "suffix" when the vocabulary has no FIM
 * tokens. */
bool vx_oai_fim_prompt(const vx_vocab *v, const vx_oai_request *r, vx_token **out, int32_t *n_out, vx_oai_error *err);

/* Tokenizes text (len bytes) into a malloc'd array. */
bool vx_oai_tokenize_text(const vx_vocab *v, const char *text, size_t len, bool add_special,
                          bool parse_special, vx_token **out, int32_t *n_out, vx_oai_error *err);
/* Renders a chat request's messages with the template (generation prompt
 * added), drops a leading BOS text that the tokenizer adds again, and
 * tokenizes with special tokens parsed. Template errors give a 400. */
bool vx_oai_chat_prompt(const vx_chat_template *t, const vx_vocab *v, const char *messages_json,
                        vx_token **out, int32_t *n_out, vx_oai_error *err);
/* The same with the request's tools as the template's `tools` (NULL:
 * None) and suffix (NULL: none) appended to the rendered text, as a
 * forced tool call's opening (tool_call.h). */
bool vx_oai_chat_prompt_ex(const vx_chat_template *t, const vx_vocab *v, const char *messages_json,
                           const char *tools_json, const char *suffix, vx_token **out, int32_t *n_out,
                           vx_oai_error *err);

/* A chat request's prompt text (*text malloc'd): its messages rendered
 * with its tools and chat_template_kwargs (over server_kwargs, the
 * server's, NULL: none) as template variables, and the generation prompt;
 * or, continuing the final message (r->continue_final), ending with that
 * message's content as sent, where the template writes it (a template
 * that drops thoughts from assistant messages keeps them there), *cont_off
 * being where that content starts (else strlen(*text)). Template errors
 * give a 400. */
bool vx_oai_request_render(const vx_chat_template *t, const vx_vocab *v, const vx_oai_request *r,
                           const char *server_kwargs, char **text, size_t *cont_off, vx_oai_error *err);
/* A rendered text followed by suffix (NULL: none) into tokens, a leading
 * BOS text dropped (the tokenizer adds BOS). */
bool vx_oai_chat_tokenize(const vx_vocab *v, const char *text, const char *suffix, vx_token **out, int32_t *n_out,
                          vx_oai_error *err);
/* POST /apply-template (llama-server's): a chat request's rendered prompt,
 * {"prompt": "..."}, with the server's chat_template_kwargs (NULL: none)
 * under the request's; n_ctx bounds the messages as for a chat request.
 * NULL with err filled. */
char *vx_oai_apply_template_json(const vx_chat_template *t, const vx_vocab *v, const char *server_kwargs,
                                 int32_t n_ctx, const char *body, size_t len, vx_oai_error *err);
/* Template variables for every request (vx serve --chat-template-kwargs):
 * the rules of a request's chat_template_kwargs. */
bool vx_oai_check_kwargs(const char *json, vx_oai_error *err);


/* ------------------------------------------------------------- text filter */

/* Turns a generated byte stream into text that is safe to send: UTF-8
 * characters split across tokens are held until complete (invalid bytes
 * become U+FFFD), and text that could be the start of a stop string is
 * held until it is known not to be one. A stop string ends the stream:
 * the text before it is released, the stop string and the rest dropped. */
typedef struct vx_text_filter {
    char *const *stop;
    int32_t n_stop;
    unsigned char part[4]; /* an incomplete UTF-8 character */
    int32_t n_part, need;
    vx_sbuf held;          /* complete text not yet released */
    bool stopped;
    int32_t stop_index; /* once stopped: the stop string that matched */
} vx_text_filter;

/* stop (n_stop strings) must outlive the filter. They should be valid UTF-8
 * (vx_oai_parse_request's are): an invalid one can match inside a character
 * and cut it. Empty strings are ignored. When stop strings overlap, the one
 * that ends first wins, so the output does not depend on how the stream is
 * split into pieces. */
void vx_text_filter_init(vx_text_filter *f, char *const *stop, int32_t n_stop);
void vx_text_filter_free(vx_text_filter *f);
/* Feeds bytes; appends what can be released to out. Returns true once a
 * stop string has been seen (further input is ignored). */
bool vx_text_filter_feed(vx_text_filter *f, const char *bytes, size_t n, vx_sbuf *out);
/* End of generation: releases everything still held. */
void vx_text_filter_finish(vx_text_filter *f, vx_sbuf *out);

/* --------------------------------------------------------------- responses */

/* One generated token for logprobs: its probability and the alternatives. */
typedef struct vx_oai_logprob {
    vx_token token;
    float logprob;  /* NaN: null */
    int32_t n_top;  /* < 0: top_logprobs null (an echoed prompt's first token) */
    vx_token top_id[VX_OAI_MAX_TOP];
    float top_logprob[VX_OAI_MAX_TOP];
} vx_oai_logprob;

typedef struct vx_oai_choice {
    int32_t index;
    const char *text;          /* chat: message content; completion: text */
    size_t text_len;
    const char *reasoning;     /* chat: reasoning_content (reasoning_len > 0) */
    size_t reasoning_len;
    const char *finish_reason; /* "stop", "length", or NULL (a streaming chunk) */
    const vx_oai_logprob *lp;  /* NULL: "logprobs": null */
    int32_t n_lp;
    size_t text_offset;        /* completion logprobs: offset of the first token */
    const vx_tool_call *calls; /* chat: the message's tool_calls (n_calls) */
    int32_t n_calls;
} vx_oai_choice;

typedef struct vx_oai_usage {
    int32_t prompt_tokens, completion_tokens, cached_tokens;
} vx_oai_usage;

typedef struct vx_oai_meta {
    vx_oai_kind kind;
    const char *id;    /* "chatcmpl-..." / "cmpl-..." */
    int64_t created;   /* unix time */
    const char *model;
    const vx_vocab *vocab; /* token texts for logprobs */
} vx_oai_meta;

/* Writes a random id such as "chatcmpl-<24 alphanumerics>" into buf. */
void vx_oai_make_id(vx_oai_kind kind, char *buf, size_t size);
/* A complete (non-streaming) response. NULL when memory runs out. */
char *vx_oai_response_json(const vx_oai_meta *m, const vx_oai_choice *choices, int32_t n,
                           const vx_oai_usage *u);
/* One SSE event "data: {chunk}\n\n" appended to out. Chat: role_only sends
 * the first delta {"role":"assistant","content":""}; a finish_reason sends
 * the empty final delta; reasoning makes a reasoning_content delta (with
 * content only when there is text too). usage_null adds "usage":null
 * (include_usage). */
void vx_oai_chunk(vx_sbuf *out, const vx_oai_meta *m, const vx_oai_choice *c, bool role_only,
                  bool usage_null);
/* A chat chunk whose delta is the tool calls of choice index (each with
 * its index, id, type and whole arguments). */
void vx_oai_tool_calls_chunk(vx_sbuf *out, const vx_oai_meta *m, int32_t index, const vx_tool_call *calls,
                             int32_t n, bool usage_null);
/* The include_usage chunk: empty choices and the usage. */
void vx_oai_usage_chunk(vx_sbuf *out, const vx_oai_meta *m, const vx_oai_usage *u);
/* An SSE error event "data: {"error":...}\n\n". */
void vx_oai_error_chunk(vx_sbuf *out, const vx_oai_error *e);

/* GET /v1/models */
char *vx_oai_models_json(const char *name, int64_t created, int32_t n_ctx, int32_t n_vocab);
/* POST /tokenize {"content", "add_special", "with_pieces"} -> {"tokens": [...]} */
char *vx_oai_tokenize_json(const vx_vocab *v, const char *body, size_t len, vx_oai_error *err);
/* POST /detokenize {"tokens": [...]} -> {"content": "..."} */
char *vx_oai_detokenize_json(const vx_vocab *v, const char *body, size_t len, vx_oai_error *err);

#endif
