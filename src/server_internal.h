/*
 * server_internal.h - the data of `vx serve` (server.c): a generation
 * request's job and its choices, the engine events queued for them, the
 * connection state, and the server itself. Only server.c includes it; the
 * types sit apart from the code so that server.c holds the behaviour.
 * Threads, lifetimes and the lock order: server.c's header comment.
 */
#ifndef VX_SERVER_INTERNAL_H
#define VX_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "harmony.h"
#include "reasoning.h"
#include "server.h"
#include "server_llamacpp.h"
#include "server_ollama.h"
#include "server_openai.h"
#include "tool_call.h"

#define MAX_STATUS 600
#define PUMP_WAIT_MS 100 /* how often a waiting connection checks its client */

/* One engine event, copied off the engine thread. */
typedef struct ev_item {
    struct ev_item *next;
    int32_t choice;
    vx_token token;
    bool prompt; /* a prompt token's logprob (echo with logprobs) */
    vx_finish finish;
    float logprob;
    int32_t n_prompt, n_cached;
    int32_t n_drafted, n_draft_accepted; /* speculative decoding, so far */
    int64_t t_ns; /* when the engine reported it */
    int64_t t_admitted_ns; /* when its request left the queue (0: not yet) */
    int32_t n_top;
    vx_token top_id[VX_OAI_MAX_TOP];
    float top_lp[VX_OAI_MAX_TOP];
    char *error;
    int32_t text_len;
    char text[]; /* text_len bytes, then the error message if any */
} ev_item;

struct job;

typedef struct choice {
    struct job *job;
    int32_t index;
    /* shared with the engine thread (job->mu) */
    uint64_t engine_id;
    bool submitted, engine_done, cancel_requested;
    bool shutdown_sent; /* vx_server_cancel_all canceled it */
    /* connection thread only */
    bool done;
    const char *finish_reason;
    vx_text_filter filter;
    vx_sbuf text;          /* non-streaming: the whole text (the answer, once split) */
    vx_sbuf reasoning;     /* non-streaming: the reasoning split off at the end */
    vx_reasoning_stream rstream; /* streaming: the split as the text comes */
    vx_tool_stream tstream; /* tools, streaming: holds back what may be a call */
    vx_harmony_stream hstream; /* gpt-oss (job->harmony): the reply's messages, streaming */
    vx_tool_calls calls;   /* tools: the calls found at the end */
    vx_oai_logprob *lp;    /* logprobs not yet sent (streaming) or all (not) */
    int32_t n_lp, cap_lp;
    size_t lp_offset;      /* completion text_offset of lp[0] */
    int32_t n_gen;
    int32_t n_drafted, n_draft_accepted; /* speculative decoding: llama-server's timings */
} choice;

typedef struct job {
    struct vx_server *srv;
    struct job *prev, *next; /* srv->jobs */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    /* engine -> connection hand-off (mu) */
    ev_item *qhead, *qtail;
    size_t q_bytes;
    bool abandoned; /* the HTTP side is gone: drop events, cancel */
    bool overflow;  /* the client did not keep up */
    /* set up before the first submit, then read-only */
    vx_oai_request req;
    char id[64];
    vx_oai_meta meta;
    struct MHD_Connection *conn;
    int fd;
    int32_t n_prompt;
    int32_t n_choices;
    choice choices[VX_OAI_MAX_N];
    char *echo;
    size_t echo_len;
    bool tools;         /* the reply may hold tool calls (req.tools_json) */
    char *tool_prefix;  /* a forced call's opening (harmony: or the final channel's
                           header of a reply held to JSON), already in the prompt */
    char *tool_schema;  /* and the JSON Schema the rest of its reply keeps to */
    bool think;         /* the reply's thoughts go to reasoning_content (reasoning.h) */
    bool think_open;    /* and the prompt left one open */
    bool harmony;       /* the reply is in OpenAI's harmony format (harmony.h): that parser
                           splits reasoning, content and calls, think says whether analysis is
                           reasoning */
    bool prompt_lp; /* echo with logprobs: the prompt's tokens lead the logprobs */
    vx_ollama_request oll; /* ollama's /api/chat or /api/generate: its translation (owned,
                              freed with the job); oll.kind 0: OpenAI's API */
    int64_t t_start, t_first; /* ns: the request's start, its first generated token's event */
    int64_t t_admitted; /* ns: when the engine took it from its queue (0: not known) */
    vx_lcpp_request lcpp; /* llama-server's /completion or /infill: its translation (owned); lcpp.kind 0: none */
    bool lcpp_nl;         /* and a streamed piece had a newline (the final object's has_new_line) */
    vx_token *ctx;      /* ollama /api/generate: the prompt's tokens and the generated ones;
                           llama-server's return_tokens: the generated ones */
    int32_t n_ctx, cap_ctx; /* (its final "context") */
    /* connection thread only */
    int32_t n_cached;
    int32_t n_done;
    bool failed;
    vx_oai_error error;
    vx_sbuf out; /* SSE bytes not yet handed to MHD */
    size_t out_off;
    bool out_finished;
    vx_sbuf scratch;
} job;

/* Per connection (MHD's socket context), on the server's watch list: a
 * request's headers must arrive within header_timeout_s of the
 * connection's start or of its previous request's end, and its body at
 * BODY_MIN_RATE at least from then on. MHD's own timeout
 * counts idle time only, so a client sending a byte a second (slowloris)
 * held its connection for ever, and enough of them locked every other
 * client out before a 503 could be sent (that needs complete headers). */
typedef struct conn_watch {
    struct conn_watch *prev, *next;
    MHD_socket fd;
    int64_t t_wait;  /* waiting for a request's headers since (us) */
    bool in_request; /* from the request's headers to its end */
    bool receiving;  /* its body still arriving: since t_req, body_bytes so far */
    int64_t t_req;
    uint64_t body_bytes;
    bool cut;        /* shut down by the watchdog */
} conn_watch;

/* A body that has arrived at less than this many bytes a second on average
 * header_timeout_s after its headers is cut too (as Apache's
 * mod_reqtimeout MinRate): dripping the body held a slot as long. */
#define BODY_MIN_RATE 1000

/* Per HTTP request (MHD's con_cls). */
typedef struct conn_req {
    char method[16];
    char path[160];
    vx_sbuf body;
    bool too_large;
    int64_t t_start;
    int status;
    int32_t n_prompt; /* an embeddings request's input tokens (a job counts its own) */
    bool embed;       /* an embeddings request: in s->n_embed until it completes */
    bool ollama;      /* an ollama route: errors as {"error": "..."} */
    job *job;
} conn_req;

struct vx_server {
    vx_server_params p;
    char *host, *api_key, *model_name, *template_kwargs, *template_src;
    bool harmony; /* the template writes harmony messages (gpt-oss): replies are parsed so */
    vx_ollama_model om; /* the model as ollama's /api/tags, /api/ps, /api/show describe it */
    char om_arch[64], om_quant[32];
    const vx_model *model;
    const vx_vocab *vocab;
    int32_t n_vocab;
    vx_engine *engine;
    const vx_chat_template *tmpl;
    struct MHD_Daemon *daemon;
    int port;
    int64_t created;

    pthread_mutex_t mu;
    job *jobs;      /* in flight */
    int n_jobs;
    int n_embed;    /* embeddings requests in flight (they have no job) */
    bool canceling; /* vx_server_cancel_all: embeddings runs stop too */
    int refs;       /* 1 (the owner) + one per job */
    bool stopping;
    int n_conns;    /* open connections (beyond max_connections: 503) */
    conn_watch *watches; /* open connections, for the watchdog */
    pthread_t watchdog;
    bool watchdog_on, watchdog_stop;
    pthread_cond_t watchdog_cv;
    uint64_t status_count[MAX_STATUS];
    uint64_t aborted, tokens_prompt, tokens_generated, header_timeouts, body_timeouts;
};

#endif
