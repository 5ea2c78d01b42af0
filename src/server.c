/*
 * server.c - the HTTP side of `vx serve` (see server.h).
 *
 * Threads: libmicrohttpd runs one thread per connection; the engine runs
 * its own thread and reports tokens through on_event(). A generation
 * request is a `job` shared by the two: on_event() only copies the event
 * into the job's queue under the job's mutex and signals its condition
 * variable, so a slow or dead client can never stall the engine. The
 * connection thread drains the queue and does everything else (UTF-8
 * reassembly, stop strings, JSON, SSE). A queue that grows beyond
 * max_buffered bytes (the client stopped reading) cancels the request.
 *
 * Lifetime: a job is reference-counted: one reference per engine request
 * until its final event, one for the HTTP request, one for a streaming
 * response. The server itself is counted by its jobs so that a final event
 * arriving after vx_server_free() (the engine is freed later) is safe.
 *
 * Lock order: srv->mu before job->mu; engine calls (submit, cancel) are
 * never made with either held.
 */
#include "server.h"

#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "model_quantize.h"
#include "harmony.h"
#include "reasoning.h"
#include "server_embed.h"
#include "server_llamacpp.h"
#include "server_metrics.h"
#include "server_route.h"
#include "server_ollama.h"
#include "server_openai.h"

#include "server_internal.h"

vx_server_params vx_server_default_params(void) {
    vx_server_params p;
    memset(&p, 0, sizeof p);
    p.host = "127.0.0.1";
    p.port = 8080;
    p.model_name = "model";
    p.n_ctx = 4096;
    p.max_body = 8u << 20;
    p.max_buffered = 8u << 20;
    p.timeout_s = 600;
    p.header_timeout_s = 30;
    p.max_connections = 256;
    p.log_requests = true;
    p.pooling = VX_POOLING_LAST;
    p.n_parallel = 4;
    return p;
}

static bool server_stopping(vx_server *s) {
    pthread_mutex_lock(&s->mu);
    bool stopping = s->stopping;
    pthread_mutex_unlock(&s->mu);
    return stopping;
}

static void server_unref(vx_server *s) {
    pthread_mutex_lock(&s->mu);
    bool last = --s->refs == 0;
    pthread_mutex_unlock(&s->mu);
    if (!last) return;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->watchdog_cv);
    free(s->host);
    free(s->api_key);
    free(s->model_name);
    free(s->template_kwargs);
    free(s->template_src);
    free(s);
}

/* ------------------------------------------------------------------ jobs */

static void job_free(job *j) {
    vx_server *s = j->srv;
    pthread_mutex_lock(&s->mu);
    if (j->prev) j->prev->next = j->next;
    else s->jobs = j->next;
    if (j->next) j->next->prev = j->prev;
    s->n_jobs--;
    pthread_mutex_unlock(&s->mu);
    while (j->qhead) {
        ev_item *it = j->qhead;
        j->qhead = it->next;
        free(it);
    }
    for (int32_t i = 0; i < j->n_choices; i++) {
        vx_text_filter_free(&j->choices[i].filter);
        vx_sbuf_free(&j->choices[i].text);
        vx_sbuf_free(&j->choices[i].reasoning);
        vx_reasoning_stream_free(&j->choices[i].rstream);
        vx_tool_stream_free(&j->choices[i].tstream);
        vx_harmony_stream_free(&j->choices[i].hstream);
        vx_tool_calls_free(&j->choices[i].calls);
        free(j->choices[i].lp);
    }
    vx_oai_request_free(&j->req);
    free(j->echo);
    free(j->ctx);
    vx_ollama_request_free(&j->oll);
    vx_lcpp_request_free(&j->lcpp);
    free(j->tool_prefix);
    free(j->tool_schema);
    vx_sbuf_free(&j->out);
    vx_sbuf_free(&j->scratch);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
    server_unref(s);
}

static void job_unref(job *j) {
    pthread_mutex_lock(&j->mu);
    bool last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (last) job_free(j);
}

static job *job_new(vx_server *s) {
    job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->srv = s;
    j->fd = -1;
    pthread_mutex_lock(&s->mu);
    s->refs++;
    s->n_jobs++;
    j->next = s->jobs;
    if (s->jobs) s->jobs->prev = j;
    s->jobs = j;
    pthread_mutex_unlock(&s->mu);
    return j;
}

/* Cancels the engine requests of a job that have not finished. */
static void job_cancel(job *j, bool abandon) {
    uint64_t ids[VX_OAI_MAX_N];
    int n = 0;
    pthread_mutex_lock(&j->mu);
    if (abandon) j->abandoned = true;
    for (int32_t i = 0; i < j->n_choices; i++) {
        choice *c = &j->choices[i];
        if (c->submitted && !c->engine_done) {
            c->cancel_requested = true;
            ids[n++] = c->engine_id;
        }
    }
    pthread_mutex_unlock(&j->mu);
    for (int i = 0; i < n; i++) vx_engine_cancel(j->srv->engine, ids[i]);
}

/* Engine thread: copy the event and go. Returning false cancels. */
static bool on_event(const vx_token_event *ev, void *user_data) {
    choice *c = user_data;
    job *j = c->job;
    const bool final = ev->finish != VX_FINISH_NONE;
    const int32_t tl = ev->text_len > 0 && ev->text ? ev->text_len : 0;
    const size_t el = ev->error ? strlen(ev->error) + 1 : 0;
    const size_t size = sizeof(ev_item) + (size_t)tl + el;
    bool keep = true, last = false;

    pthread_mutex_lock(&j->mu);
    if (final) c->engine_done = true;
    if (j->abandoned || c->cancel_requested) {
        keep = false;
    } else if (!final && j->req.stream && j->q_bytes + size > j->srv->p.max_buffered) {
        /* the client is not reading: cancel rather than buffer without bound
         * (a non-streaming request reads nothing from its client until the
         * end: its queue is drained by its own thread and bounded by
         * max_tokens, so the limit does not apply to it) */
        j->overflow = true;
        keep = false;
    } else {
        ev_item *it = malloc(size);
        if (!it) {
            j->overflow = true;
            keep = false;
        } else {
            it->next = NULL;
            it->choice = c->index;
            it->token = ev->token;
            it->prompt = ev->prompt;
            it->finish = ev->finish;
            it->logprob = ev->logprob;
            it->n_prompt = ev->n_prompt;
            it->n_cached = ev->n_cached;
            it->n_drafted = ev->n_drafted, it->n_draft_accepted = ev->n_draft_accepted;
            it->t_ns = vx_time_ns();
            it->t_admitted_ns = ev->t_admitted_ns;
            it->n_top = ev->n_top > 0 && ev->top_ids && ev->top_logprobs ? VX_MIN(ev->n_top, VX_OAI_MAX_TOP) : 0;
            for (int32_t k = 0; k < it->n_top; k++) {
                it->top_id[k] = ev->top_ids[k];
                it->top_lp[k] = ev->top_logprobs[k];
            }
            it->text_len = tl;
            if (tl) memcpy(it->text, ev->text, (size_t)tl);
            it->error = NULL;
            if (el) {
                it->error = it->text + tl;
                memcpy(it->error, ev->error, el);
            }
            if (j->qtail) j->qtail->next = it;
            else j->qhead = it;
            j->qtail = it;
            j->q_bytes += size;
        }
    }
    if (final || j->overflow) pthread_cond_signal(&j->cv);
    else if (j->qhead == j->qtail) pthread_cond_signal(&j->cv); /* the queue was empty */
    if (final) last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (last) job_free(j);
    return keep;
}

/* ------------------------------------------------------ job: consumer side */

static bool fd_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    /* POLLIN alone is a pipelined request, not a hang-up */
    return (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) != 0;
}

static bool client_gone(const job *j) { return fd_gone(j->fd); }

static void lp_push(choice *c, const ev_item *it) {
    if (c->n_lp == c->cap_lp) {
        int32_t cap = c->cap_lp ? c->cap_lp * 2 : 16;
        vx_oai_logprob *p = realloc(c->lp, (size_t)cap * sizeof *p);
        if (!p) return; /* logprobs are best effort under memory pressure */
        c->lp = p;
        c->cap_lp = cap;
    }
    vx_oai_logprob *l = &c->lp[c->n_lp++];
    l->token = it->token;
    l->logprob = it->logprob;
    l->n_top = VX_MIN(it->n_top, c->job->req.top_logprobs);
    for (int32_t k = 0; k < l->n_top; k++) {
        l->top_id[k] = it->top_id[k];
        l->top_logprob[k] = it->top_lp[k];
    }
}

/* When the prompt's evaluation started, for a first token at first: the
 * engine's admission (the wait in its queue is not prompt time), else the
 * request's start. */
static int64_t prompt_start(const job *j, int64_t first) {
    return j->t_admitted && j->t_admitted <= first ? j->t_admitted : j->t_start;
}

/* An ollama reply object into out: a streaming chunk (done NULL) or the
 * final object with the request's counts and durations (prompt: from the
 * engine's admission to the first generated token; eval: from it on). */
static void ollama_reply(job *j, vx_sbuf *out, const choice *c, const char *reasoning, size_t rlen, const char *text,
                         size_t len, const vx_tool_call *calls, int32_t n_calls, const char *done) {
    vx_ollama_reply r = {.kind = j->oll.kind, .model = j->meta.model, .text = text, .text_len = len,
                         .thinking = reasoning, .thinking_len = rlen, .calls = calls, .n_calls = n_calls,
                         .vocab = j->srv->vocab, .done_reason = done};
    if (j->req.logprobs && c->n_lp > 0) {
        r.lp = c->lp;
        r.n_lp = c->n_lp;
    }
    if (done) {
        const int64_t now = vx_time_ns(), first = j->t_first ? j->t_first : now;
        const int64_t admitted = prompt_start(j, first); /* as in ollama */
        r.total_ns = now - j->t_start;
        r.prompt_ns = first - admitted;
        r.eval_ns = now - first;
        r.prompt_count = j->n_prompt;
        r.eval_count = c->n_gen;
        /* a tool call is a stop of its own kind in OpenAI's API only */
        if (!strcmp(done, "tool_calls")) r.done_reason = "stop";
        if (j->oll.kind == VX_OLLAMA_GENERATE) {
            r.context = j->ctx;
            r.n_context = j->n_ctx;
        }
    }
    vx_ollama_reply_json(out, &r);
}

/* A llama-server reply object: a streaming piece (final false) or the
 * final object (the choice done: its stop type, counts and timings). */
static void lcpp_reply(job *j, vx_sbuf *out, const choice *c, const char *text, size_t len, bool final) {
    const vx_oai_request *q = &j->req;
    vx_lcpp_reply r = {.lreq = &j->lcpp, .req = q, .model = j->meta.model, .text = text, .text_len = len,
                       .tokens = j->ctx, .n_tokens = j->n_ctx, .lp = c->lp, .n_lp = c->n_lp, .vocab = j->srv->vocab,
                       .final = final, .n_predicted = c->n_gen, .n_evaluated = j->n_prompt, .n_reused = j->n_cached,
                       /* the sequence in the cache: the prompt and all generated tokens but the last */
                       .n_cached = VX_MAX(0, j->n_prompt + c->n_gen - 1), .new_line = j->lcpp_nl,
                       .draft_n = c->n_drafted, .draft_n_accepted = c->n_draft_accepted,
                       .prompt = q->prompt, .prompt_len = q->prompt ? q->prompt_len : 0};
    if (final) {
        const bool word = c->filter.stopped && c->filter.stop_index >= 0 && c->filter.stop_index < q->n_stop;
        const char *fr = c->finish_reason ? c->finish_reason : "stop";
        r.stop_type = !strcmp(fr, "length") ? "limit" : word ? "word" : "eos";
        r.stopping_word = word ? q->stop[c->filter.stop_index] : "";
        const int64_t now = vx_time_ns(), first = j->t_first ? j->t_first : now;
        r.prompt_ms = (double)(first - prompt_start(j, first)) / 1e6;
        r.predicted_ms = (double)(now - first) / 1e6;
    }
    vx_lcpp_reply_json(out, &r);
}

/* A llama-server server-sent event into the job's output. */
static void lcpp_event(job *j, const choice *c, const char *text, size_t len, bool final) {
    vx_sbuf_adds(&j->out, "data: ");
    lcpp_reply(j, &j->out, c, text, len, final);
    vx_sbuf_adds(&j->out, "\n\n");
}

/* Streaming: one chunk with new reasoning (rlen bytes; 0: none) and text,
 * and the logprobs gathered so far. */
static void emit_chunk_r(job *j, choice *c, const char *reasoning, size_t rlen, const char *text, size_t len,
                         const char *finish) {
    if (j->oll.kind) {
        if (!finish) ollama_reply(j, &j->out, c, reasoning, rlen, text, len, NULL, 0, NULL);
        c->n_lp = 0;
        return;
    }
    if (j->lcpp.kind) { /* server-sent events, the last one (choice_done) with stop true */
        if (!finish) {
            j->lcpp_nl |= len && memchr(text, '\n', len);
            lcpp_event(j, c, text, len, false);
        }
        c->n_lp = 0;
        if (j->ctx) j->n_ctx = 0; /* each piece its own tokens */
        return;
    }
    vx_oai_choice oc = {.index = c->index, .text = text, .text_len = len, .reasoning = reasoning,
                        .reasoning_len = rlen, .finish_reason = finish};
    if (j->req.logprobs) {
        oc.lp = c->lp;
        oc.n_lp = c->n_lp;
        oc.text_offset = c->lp_offset;
    }
    vx_oai_chunk(&j->out, &j->meta, &oc, false, j->req.include_usage);
    /* the offsets of later tokens continue after the ones just sent */
    char piece[512];
    for (int32_t i = 0; i < oc.n_lp; i++) {
        int32_t pl = vx_token_to_piece(j->srv->vocab, c->lp[i].token, piece, sizeof piece, false);
        if (pl > 0) c->lp_offset += (size_t)pl;
    }
    c->n_lp = 0;
}

static void emit_chunk(job *j, choice *c, const char *text, size_t len, const char *finish) {
    emit_chunk_r(j, c, NULL, 0, text, len, finish);
}

/* Streaming: what the reasoning stream released by its last call goes
 * out, its answer through the tool stream. */
static void emit_released(job *j, choice *c, const char *reasoning, size_t rlen, const char *text, size_t n) {
    const char *p = text;
    if (j->tools && n && !vx_tool_stream_feed(&c->tstream, text, n, &p, &n)) {
        j->out.oom = true;
        return;
    }
    if (rlen || n) emit_chunk_r(j, c, reasoning, rlen, p, n, NULL);
}

/* Streaming, harmony: what the parser released by its last call goes out. */
static void emit_harmony(job *j, choice *c) {
    const vx_harmony_stream *h = &c->hstream;
    if (h->reasoning.len || h->content.len)
        emit_chunk_r(j, c, h->reasoning.p, h->reasoning.len, h->content.p, h->content.len, NULL);
}

static void emit_text(job *j, choice *c, const vx_sbuf *t) {
    if (t->len == 0) return;
    if (!j->req.stream) {
        vx_sbuf_add(&c->text, t->p, t->len);
        return;
    }
    if (j->harmony) {
        if (!vx_harmony_stream_feed(&c->hstream, t->p, t->len)) j->out.oom = true;
        else emit_harmony(j, c);
        return;
    }
    if (!j->think) {
        emit_released(j, c, NULL, 0, t->p, t->len);
        return;
    }
    vx_reasoning_stream *rs = &c->rstream;
    if (!vx_reasoning_stream_feed(rs, t->p, t->len)) j->out.oom = true;
    else emit_released(j, c, rs->reasoning.p, rs->reasoning.len, rs->answer.p, rs->answer.len);
}

/* The end of a harmony reply: what the stream still held sent, or the
 * whole text parsed into answer (text), reasoning and calls (hstream). */
static void harmony_finish(job *j, choice *c) {
    vx_harmony_stream *h = &c->hstream;
    if (j->req.stream) {
        if (!vx_harmony_stream_finish(h)) j->out.oom = true;
        else emit_harmony(j, c);
        return;
    }
    vx_sbuf answer = {0};
    if (!vx_harmony_stream_all(h, c->text.p, c->text.len, &c->reasoning, &answer)) {
        vx_sbuf_free(&answer);
        j->out.oom = true;
        return;
    }
    vx_sbuf_free(&c->text);
    c->text = answer;
}

/* Reasoning at the end of a reply: the whole text split (non-streaming),
 * or what the stream still held sent. */
static void think_finish(job *j, choice *c) {
    if (!j->think) return;
    if (j->req.stream) {
        vx_reasoning_stream *rs = &c->rstream;
        if (!vx_reasoning_stream_finish(rs)) j->out.oom = true;
        else emit_released(j, c, rs->reasoning.p, rs->reasoning.len, rs->answer.p, rs->answer.len);
        return;
    }
    vx_reasoning_parts p;
    if (!c->text.p) return; /* nothing generated */
    vx_reasoning_split(c->text.p, c->text.len, j->think_open, &p);
    if (!p.thought) return;
    if (!vx_sbuf_add(&c->reasoning, c->text.p + p.r_off, p.r_len)) j->out.oom = true;
    memmove(c->text.p, c->text.p + p.c_off, p.c_len);
    c->text.len = p.c_len;
    c->text.p[p.c_len] = 0;
}

/* The end of a reply: its reasoning split off (think_finish), then the
 * tool calls in the answer (streaming: in the text held back), sent or
 * kept for the response; the finish reason becomes "tool_calls" when
 * there are any. A reply without calls stays the text it was. */
static const char *reply_finish(job *j, choice *c, const char *reason) {
    const vx_oai_request *q = &j->req;
    if (j->harmony) { /* calls of functions the request did not offer are dropped */
        harmony_finish(j, c);
        vx_tool_calls *hc = &c->hstream.calls;
        if (!j->tools || hc->n == 0 || j->out.oom) return reason;
        c->calls = *hc;
        memset(hc, 0, sizeof *hc);
        if (!q->stream) return "tool_calls";
        if (j->oll.kind) {
            ollama_reply(j, &j->out, c, NULL, 0, "", 0, c->calls.v, c->calls.n, NULL);
            c->n_lp = 0; /* sent with the calls */
        } else
            vx_oai_tool_calls_chunk(&j->out, &j->meta, c->index, c->calls.v, c->calls.n, q->include_usage);
        return "tool_calls";
    }
    think_finish(j, c);
    if (!j->tools) return reason;
    size_t len;
    const char *text = q->stream ? vx_tool_stream_held(&c->tstream, &len) : c->text.p ? c->text.p : "";
    if (!q->stream) len = c->text.len;
    if (vx_tool_parse(j->srv->p.tool_format, text, len, q->tool_names, q->n_tools, q->parallel_tool_calls ? 0 : 1,
                      &c->calls) != VX_OK) {
        j->out.oom = true;
        return reason;
    }
    /* a forced call cut short (max_tokens, a stop string): the opening
     * the server wrote into the prompt is not the model's text */
    const size_t pl = j->tool_prefix && c->calls.n == 0 ? strlen(j->tool_prefix) : 0;
    if (!q->stream) {
        if (c->calls.n > 0) {
            c->text.len = 0;
            vx_sbuf_add(&c->text, c->calls.content, c->calls.content_len);
        } else if (pl && c->text.len >= pl) {
            memmove(c->text.p, c->text.p + pl, c->text.len - pl + 1);
            c->text.len -= pl;
        }
    } else if (c->calls.n == 0) {
        if (len > pl) emit_chunk(j, c, text + pl, len - pl, NULL);
    } else {
        if (c->calls.content_len) emit_chunk(j, c, c->calls.content, c->calls.content_len, NULL);
        if (j->oll.kind) {
            ollama_reply(j, &j->out, c, NULL, 0, "", 0, c->calls.v, c->calls.n, NULL);
            c->n_lp = 0; /* sent with the calls */
        } else
            vx_oai_tool_calls_chunk(&j->out, &j->meta, c->index, c->calls.v, c->calls.n, q->include_usage);
    }
    return c->calls.n > 0 ? "tool_calls" : reason;
}

static void usage_of(const job *j, vx_oai_usage *u) {
    u->prompt_tokens = j->n_prompt;
    u->cached_tokens = j->n_cached;
    u->completion_tokens = 0;
    for (int32_t i = 0; i < j->n_choices; i++) u->completion_tokens += j->choices[i].n_gen;
}

static void finish_stream(job *j) {
    if (j->lcpp.kind) { /* llama-server: no [DONE]; an error as its own event */
        if (j->failed) {
            char *e = vx_oai_error_json(&j->error);
            if (!e || !vx_sbuf_adds(&j->out, "error: ") || !vx_sbuf_adds(&j->out, e) || !vx_sbuf_adds(&j->out, "\n\n"))
                j->out.oom = true;
            free(e);
        }
        j->out_finished = true;
        return;
    }
    if (j->oll.kind) { /* no end marker: the last object says done (or error) */
        if (j->failed) {
            char *e = vx_ollama_error_json(&j->error);
            if (!e || !vx_sbuf_adds(&j->out, e) || !vx_sbuf_adds(&j->out, "\n")) j->out.oom = true;
            free(e);
        }
        j->out_finished = true;
        return;
    }
    if (j->failed) {
        vx_oai_error_chunk(&j->out, &j->error);
    } else {
        if (j->req.include_usage) {
            vx_oai_usage u;
            usage_of(j, &u);
            vx_oai_usage_chunk(&j->out, &j->meta, &u);
        }
        vx_sbuf_adds(&j->out, "data: [DONE]\n\n");
    }
    j->out_finished = true;
}

static void choice_done(job *j, choice *c, const char *reason) {
    if (c->done) return;
    c->done = true;
    c->finish_reason = reason;
    j->n_done++;
    if (j->req.stream && !j->failed && j->oll.kind) ollama_reply(j, &j->out, c, NULL, 0, "", 0, NULL, 0, reason);
    else if (j->req.stream && !j->failed && j->lcpp.kind) lcpp_event(j, c, "", 0, true);
    else if (j->req.stream && !j->failed) emit_chunk(j, c, "", 0, reason);
    if (j->n_done == j->n_choices && j->req.stream) finish_stream(j);
}

/* A failure ends the whole request (all choices). */
static void job_fail(job *j, int status, const char *msg) {
    if (!j->failed) {
        j->failed = true;
        vx_oai_set_error(&j->error, status, NULL, "%s", msg);
    }
    for (int32_t i = 0; i < j->n_choices; i++) choice_done(j, &j->choices[i], NULL);
}

static void handle_event(job *j, const ev_item *it) {
    choice *c = &j->choices[it->choice];
    if (c->done) return; /* after a stop string: the engine is being canceled */
    vx_sbuf *t = &j->scratch;
    t->len = 0;
    if (it->n_cached > j->n_cached) j->n_cached = it->n_cached;
    c->n_drafted = it->n_drafted, c->n_draft_accepted = it->n_draft_accepted;
    if (it->prompt) { /* text already echoed */
        lp_push(c, it);
        return;
    }
    if (it->token >= 0) {
        c->n_gen++;
        if (!j->t_first) j->t_first = it->t_ns;
        if (!j->t_admitted) j->t_admitted = it->t_admitted_ns;
        if (j->ctx) { /* ollama's context, llama-server's return_tokens */
            if (j->n_ctx == j->cap_ctx) {
                vx_token *p = realloc(j->ctx, (size_t)(j->cap_ctx * 2) * sizeof *p);
                if (p) {
                    j->ctx = p;
                    j->cap_ctx *= 2;
                }
            }
            if (j->n_ctx < j->cap_ctx) j->ctx[j->n_ctx++] = it->token;
        }
        if (j->req.logprobs) lp_push(c, it);
        const char *text = it->text;
        size_t len = (size_t)it->text_len;
        if ((j->tools || j->think) && len == 0) {
            /* the call marker of the llama3 and mistral formats is a
             * control token, which has no text: it must reach the parser;
             * so must thought markers that a vocabulary made control tokens */
            const char *mk = j->tools ? vx_tool_format_marker(j->srv->p.tool_format) : NULL;
            char piece[64];
            const int32_t pl = vx_token_to_piece(j->srv->vocab, it->token, piece, sizeof piece - 1, true);
            if (pl > 0) {
                piece[pl] = 0;
                if (mk && !strcmp(piece, mk)) text = mk;
                else if (j->think && !strcmp(piece, VX_THINK_OPEN)) text = VX_THINK_OPEN;
                else if (j->think && !strcmp(piece, VX_THINK_CLOSE)) text = VX_THINK_CLOSE;
                if (text != it->text) len = (size_t)pl;
            }
        }
        bool stop = vx_text_filter_feed(&c->filter, text, len, t);
        emit_text(j, c, t);
        if (stop) {
            uint64_t id;
            pthread_mutex_lock(&j->mu);
            bool cancel = !c->engine_done;
            c->cancel_requested = true;
            id = c->engine_id;
            pthread_mutex_unlock(&j->mu);
            if (cancel) vx_engine_cancel(j->srv->engine, id);
            choice_done(j, c, reply_finish(j, c, "stop"));
            return;
        }
    }
    switch (it->finish) {
    case VX_FINISH_NONE:
        return;
    case VX_FINISH_STOP:
    case VX_FINISH_LENGTH:
        t->len = 0;
        vx_text_filter_finish(&c->filter, t);
        emit_text(j, c, t);
        choice_done(j, c, reply_finish(j, c, it->finish == VX_FINISH_STOP ? "stop" : "length"));
        return;
    case VX_FINISH_CANCELED:
        if (server_stopping(j->srv)) job_fail(j, 503, "The server is shutting down.");
        else job_fail(j, 500, "The request was canceled.");
        return;
    case VX_FINISH_ERROR: {
        char msg[VX_ERRMSG_MAX + 32];
        snprintf(msg, sizeof msg, "Generation failed: %s", it->error ? it->error : "unknown error");
        job_fail(j, 500, msg);
        return;
    }
    }
}

/* Waits up to wait_ms for events and processes all that are queued. */
static void job_pump(job *j, int wait_ms) {
    pthread_mutex_lock(&j->mu);
    if (!j->qhead && !j->overflow && wait_ms > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)wait_ms * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
    }
    ev_item *list = j->qhead;
    j->qhead = j->qtail = NULL;
    j->q_bytes = 0;
    bool overflow = j->overflow;
    pthread_mutex_unlock(&j->mu);
    /* first, so that the client hears why its request was canceled */
    if (overflow && j->n_done < j->n_choices)
        job_fail(j, 500, "The client did not read the response fast enough; the request was canceled.");
    while (list) {
        ev_item *it = list;
        list = it->next;
        handle_event(j, it);
        free(it);
    }
    if ((j->out.oom || j->scratch.oom) && j->n_done < j->n_choices)
        job_fail(j, 500, "Out of memory.");
}

/* Microseconds a streaming response may go without bytes before it sends
 * an SSE comment: half the idle timeout (at most 15 s), so that waiting in
 * the queue or a long prefill never looks idle. */
static int64_t keepalive_us(const vx_server *s) {
    int64_t us = (int64_t)s->p.timeout_s * 500000;
    return VX_MAX(VX_MIN(us, 15 * 1000000LL), 200 * 1000LL);
}

/* MHD content reader of a streaming response (connection thread; may block).
 * The idle timeout stays on while streaming: a client that stops reading
 * blocks MHD's writes and is disconnected after it, and the request is
 * canceled (on_completed). This reader never blocks longer than
 * keepalive_us, so a request that is merely slow is not timed out. */
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    job *j = cls;
    const int64_t t0 = vx_time_us();
    for (;;) {
        if (j->out_off < j->out.len) {
            size_t n = VX_MIN(max, j->out.len - j->out_off);
            memcpy(buf, j->out.p + j->out_off, n);
            j->out_off += n;
            if (j->out_off == j->out.len) j->out.len = j->out_off = 0;
            return (ssize_t)n;
        }
        if (j->out_finished) return MHD_CONTENT_READER_END_OF_STREAM;
        if (j->out.oom) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (client_gone(j)) {
            job_cancel(j, true);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        job_pump(j, PUMP_WAIT_MS);
        /* NDJSON has no comments: a space, which the next object's line
         * starts with (JSON allows it; a blank line would break clients
         * that parse every line) */
        if (j->out.len == 0 && !j->out_finished && vx_time_us() - t0 >= keepalive_us(j->srv))
            vx_sbuf_adds(&j->out, j->oll.kind ? " " : ": keep-alive\n\n");
    }
}

static void sse_free(void *cls) { job_unref(cls); }

/* --------------------------------------------------------------- responses */

static void add_common_headers(struct MHD_Response *r, const char *ctype) {
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
}

/* Queues body (malloc'd, taken) with a status. */
static enum MHD_Result respond(struct MHD_Connection *conn, conn_req *r, int status, char *body,
                               const char *ctype, const char *allow) {
    if (!body) {
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        body = strdup("{\"error\":{\"message\":\"Out of memory.\",\"type\":\"server_error\",\"param\":null,\"code\":null}}");
        ctype = "application/json";
        if (!body) return MHD_NO;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    add_common_headers(resp, ctype);
    if (allow) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
    if (status == MHD_HTTP_UNAUTHORIZED) MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (status == MHD_HTTP_TOO_MANY_REQUESTS) MHD_add_response_header(resp, "Retry-After", "1");
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    r->status = status;
    return ret;
}

/* 503 for a connection beyond max_connections; the connection is closed
 * after the answer so that the slot frees up. */
static enum MHD_Result respond_overloaded(vx_server *s, struct MHD_Connection *conn, conn_req *r, int n_conns) {
    vx_oai_error e;
    vx_oai_set_error(&e, 503, NULL,
                     "The server is overloaded: %d connections are open, the limit is %u. Retry later.", n_conns,
                     s->p.max_connections);
    char *body = vx_oai_error_json(&e);
    if (!body) return MHD_NO;
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    add_common_headers(resp, "application/json");
    MHD_add_response_header(resp, "Retry-After", "1");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_SERVICE_UNAVAILABLE, resp);
    MHD_destroy_response(resp);
    r->status = 503;
    return ret;
}

static enum MHD_Result respond_json(struct MHD_Connection *conn, conn_req *r, int status, char *body) {
    return respond(conn, r, status, body, "application/json", NULL);
}

static enum MHD_Result respond_error(struct MHD_Connection *conn, conn_req *r, const vx_oai_error *e) {
    /* ollama says 503 when its queue is full */
    if (r->ollama) return respond_json(conn, r, e->status == 429 ? 503 : e->status, vx_ollama_error_json(e));
    return respond_json(conn, r, e->status, vx_oai_error_json(e));
}

static enum MHD_Result respond_errorf(struct MHD_Connection *conn, conn_req *r, int status, const char *code,
                                      const char *msg) {
    vx_oai_error e;
    vx_oai_set_error(&e, status, NULL, "%s", msg);
    e.code = code;
    return respond_error(conn, r, &e);
}

/* ----------------------------------------------------------- generation */

static const char *engine_error_code(vx_status st, int *status) {
    switch (st) {
    case VX_EFULL: *status = 429; return "rate_limit_exceeded";
    case VX_ERANGE: *status = 400; return "context_length_exceeded";
    case VX_EINVAL: *status = 400; return NULL;
    case VX_ECANCELED: *status = 503; return NULL;
    default: *status = 500; return NULL;
    }
}

/* An ollama reply line as a response body: the object without its
 * newline (NULL when memory ran out). */
static char *one_object(vx_sbuf *b) {
    if (b->oom) {
        vx_sbuf_free(b);
        return NULL;
    }
    if (b->len && b->p[b->len - 1] == '\n') b->p[--b->len] = 0;
    return vx_sbuf_take(b);
}

/* Builds the non-streaming response of a finished job. */
static char *job_response(job *j) {
    if (j->lcpp.kind) {
        const choice *c = &j->choices[0];
        vx_sbuf b = {0};
        lcpp_reply(j, &b, c, c->text.p ? c->text.p : "", c->text.len, true);
        return one_object(&b);
    }
    if (j->oll.kind) {
        const choice *c = &j->choices[0];
        vx_sbuf b = {0};
        ollama_reply(j, &b, c, c->reasoning.p, c->reasoning.len, c->text.p ? c->text.p : "", c->text.len, c->calls.v,
                     c->calls.n, c->finish_reason ? c->finish_reason : "stop");
        return one_object(&b);
    }
    vx_oai_choice oc[VX_OAI_MAX_N];
    vx_sbuf texts[VX_OAI_MAX_N];
    memset(texts, 0, sizeof texts);
    for (int32_t i = 0; i < j->n_choices; i++) {
        choice *c = &j->choices[i];
        const char *text = c->text.p ? c->text.p : "";
        size_t len = c->text.len;
        if (j->echo) {
            vx_sbuf_add(&texts[i], j->echo, j->echo_len);
            vx_sbuf_add(&texts[i], text, len);
            text = texts[i].p ? texts[i].p : "";
            len = texts[i].len;
        }
        oc[i] = (vx_oai_choice){.index = c->index, .text = text, .text_len = len, .reasoning = c->reasoning.p,
                                .reasoning_len = c->reasoning.len, .finish_reason = c->finish_reason,
                                .calls = c->calls.v, .n_calls = c->calls.n};
        if (j->req.logprobs) {
            static const vx_oai_logprob none; /* logprobs asked, no token generated */
            oc[i].lp = c->lp ? c->lp : &none;
            oc[i].n_lp = c->n_lp;
            oc[i].text_offset = j->prompt_lp ? 0 : j->echo_len;
        }
    }
    vx_oai_usage u;
    usage_of(j, &u);
    char *res = vx_oai_response_json(&j->meta, oc, j->n_choices, &u);
    for (int32_t i = 0; i < j->n_choices; i++) vx_sbuf_free(&texts[i]);
    return res;
}

/* Tools: the template renders them and the reply is parsed for calls,
 * which needs a template whose call format is known; tool_choice
 * "required" or a function forces a call (tool_call.h): its opening and
 * schema. False with err filled. */
static bool tools_begin(vx_server *s, job *j, vx_oai_error *err) {
    const vx_oai_request *q = &j->req;
    j->tools = q->tools_json != NULL;
    if (!j->tools) return true;
    if (s->p.tool_format == VX_TOOL_FMT_NONE) {
        vx_oai_set_error(err, 400, "tools",
                         "This model's chat template has no tool-call format this server knows (hermes "
                         "<tool_call>, Llama 3.x JSON, Mistral [TOOL_CALLS], harmony), so 'tools' cannot be used with it: start "
                         "vx serve with --chat-template FILE naming a template that has one, or send tool_choice "
                         "'none'.");
        return false;
    }
    if (q->tool_choice == VX_OAI_TOOLS_AUTO) return true;
    const vx_status st = vx_tool_force(s->p.tool_format, q->tools_json, q->tool_name, q->parallel_tool_calls,
                                       &j->tool_prefix, &j->tool_schema);
    if (st == VX_ENOMEM) vx_oai_set_error(err, 500, NULL, "Out of memory.");
    else if (st == VX_EUNSUPPORTED) /* harmony: a forced call names its function in the header */
        vx_oai_set_error(err, 400, "tool_choice",
                         "This model (harmony format) names the function in the call's header, so tool_choice "
                         "'required' can force a call only when there is one tool: name the function instead "
                         "({\"type\": \"function\", \"function\": {\"name\": ...}}).");
    else if (st != VX_OK) /* validated tools always give one: not expected */
        vx_oai_set_error(err, 400, "tool_choice", "A call of these tools cannot be forced.");
    return st == VX_OK;
}

/* A chat request's prompt: the template's rendering with the request's
 * tools and chat_template_kwargs (over the server's) and a generation
 * prompt, or its final message continued; then a forced call's opening.
 * Whether the reply's thoughts are split off: the server's default or the
 * request's reasoning_format, never for a reply held to a JSON shape
 * (response_format, a forced call), which the model writes from its first
 * token. The reply starts in a thought when the generation prompt opened
 * one or the continued message left one open; after one that ended in
 * the continued message, it is all answer. */
static bool chat_prompt(vx_server *s, job *j, vx_token **prompt, int32_t *n_prompt, vx_oai_error *err) {
    const vx_oai_request *q = &j->req;
    char *text = NULL;
    size_t cont;
    if (!vx_oai_request_render(s->tmpl, s->vocab, q, s->p.template_kwargs, &text, &cont, err)) return false;
    j->think = q->reasoning == VX_OAI_REASONING_DEFAULT ? s->p.reasoning : q->reasoning == VX_OAI_REASONING_SPLIT;
    j->harmony = s->harmony;
    const size_t len = strlen(text);
    if (j->harmony) {
        /* think stays for a reply held to a JSON shape: it has no header
         * and is content, whole (harmony.h); the parser finds the messages
         * itself. Such a reply goes in the final channel, opened in the
         * prompt (as llama.cpp forces it): the model writes the JSON where
         * it would write its answer, not in place of a message header */
        j->think_open = false;
        if ((q->json_object || q->json_schema) && !j->tool_prefix && !q->continue_final && q->add_generation_prompt &&
            !(j->tool_prefix = strdup(VX_HARMONY_FINAL))) {
            free(text);
            vx_oai_set_error(err, 500, NULL, "Out of memory.");
            return false;
        }
    } else {
        if (q->json_object || q->json_schema || q->grammar || j->tool_prefix) j->think = false;
        if (j->think && q->continue_final) {
            const vx_prefill_thought pt = vx_reasoning_prefill(text + cont, len - cont);
            j->think_open = pt == VX_PREFILL_OPEN;
            if (pt == VX_PREFILL_CLOSED) j->think = false;
        } else {
            j->think_open = j->think && vx_reasoning_open_at_end(text, len);
        }
    }
    const bool ok = vx_oai_chat_tokenize(s->vocab, text, j->tool_prefix, prompt, n_prompt, err);
    free(text);
    return ok;
}

/* An ollama request with nothing to generate: the model is loaded (it
 * always is), as ollama answers it. */
static enum MHD_Result respond_loaded(vx_server *s, struct MHD_Connection *conn, conn_req *r,
                                      const vx_ollama_request *o) {
    const vx_ollama_reply lr = {.kind = o->kind, .model = o->model ? o->model : s->model_name, .text = "",
                                .done_reason = o->unload ? "unload" : "load"};
    vx_sbuf b = {0};
    vx_ollama_reply_json(&b, &lr);
    return respond_json(conn, r, 200, one_object(&b));
}

/* The prompt after ollama's context: the context's tokens, then the new
 * text's without the BOS the tokenizer put first (the context has it). */
static bool prepend_context(const vx_vocab *v, const vx_ollama_request *o, vx_token **prompt, int32_t *n,
                            vx_oai_error *err) {
    if (o->n_context == 0) return true;
    const bool bos = *n > 0 && (*prompt)[0] == vx_vocab_bos(v) && vx_vocab_add_bos(v);
    const int32_t keep = *n - (bos ? 1 : 0);
    vx_token *t = malloc(((size_t)o->n_context + (size_t)keep + 1) * sizeof *t);
    if (!t) {
        vx_oai_set_error(err, 500, NULL, "Out of memory.");
        return false;
    }
    memcpy(t, o->context, (size_t)o->n_context * sizeof *t);
    if (keep > 0) memcpy(t + o->n_context, *prompt + (bos ? 1 : 0), (size_t)keep * sizeof *t);
    free(*prompt);
    *prompt = t;
    *n = o->n_context + keep;
    return true;
}

/* POST /v1/chat/completions and /v1/completions (okind 0), or ollama's
 * /api/chat and /api/generate (okind), translated into the OpenAI request
 * that means the same. */
static enum MHD_Result handle_generate(vx_server *s, struct MHD_Connection *conn, conn_req *r, vx_oai_kind kind,
                                       vx_ollama_kind okind, vx_lcpp_kind lkind) {
    vx_oai_error err;
    const int64_t t_start = vx_time_ns();
    job *j = job_new(s);
    if (!j) return respond_errorf(conn, r, 500, NULL, "Out of memory.");
    r->job = j; /* the request's reference, released when the request completes */
    const char *body = r->body.p ? r->body.p : "";
    size_t blen = r->body.len;
    vx_ollama_request *oll = &j->oll; /* freed with the job, whatever happens from here */
    if (okind) {
        if (!vx_ollama_translate(okind, body, blen, s->n_vocab, oll, &err)) return respond_error(conn, r, &err);
        if (oll->load_only) return respond_loaded(s, conn, r, oll);
        kind = oll->oai_kind;
        body = oll->oai_body;
        blen = oll->oai_len;
    }
    if (lkind) { /* llama-server's /completion and /infill: an OpenAI completion */
        if (!vx_lcpp_translate(lkind, body, blen, s->vocab, s->p.n_ctx, s->p.n_batch > 0 ? s->p.n_batch : 512,
                               &j->lcpp, &err))
            return respond_error(conn, r, &err);
        kind = VX_OAI_COMPLETION;
        body = j->lcpp.oai_body;
        blen = j->lcpp.oai_len;
    }
    const bool parsed = vx_oai_parse_request(kind, body, blen, s->n_vocab, s->p.n_ctx, &j->req, &err);
    vx_oai_request *q = &j->req;
    if (parsed && okind) q->max_tokens = oll->max_tokens;
    if (parsed && lkind) q->max_tokens = j->lcpp.max_tokens;
    j->t_start = t_start;
    if (!parsed) return respond_error(conn, r, &err);
    if (vx_model_is_encoder(s->model)) { /* as OpenAI's answer to a chat request for an embedding model */
        char msg[256];
        snprintf(msg, sizeof msg, "model '%s' is an embedding model (%s, an encoder): it does not support %s; use %s",
                 s->model_name, vx_model_arch(s->model), okind ? "generate or chat" : "completions",
                 okind ? "/api/embed" : "/v1/embeddings");
        return respond_errorf(conn, r, 400, "model_not_supported", msg);
    }
    /* a sequence never holds more than n_ctx tokens: a larger penalty window
     * means the same, and would only make the sampler allocate its size */
    if (q->sampling.penalty_last_n > s->p.n_ctx) q->sampling.penalty_last_n = s->p.n_ctx;

    /* n choices are n engine requests: more than an idle engine takes would
     * get a 429 on every retry */
    const int32_t cap = vx_engine_capacity(s->engine);
    if (q->n > cap) {
        vx_oai_set_error(&err, 400, "n",
                         "Invalid value for 'n': this server takes at most %d requests at once (--parallel plus --queue), "
                         "and each of the %d choices is one.",
                         (int)cap, (int)q->n);
        return respond_error(conn, r, &err);
    }

    if (!tools_begin(s, j, &err)) return respond_error(conn, r, &err);

    vx_token *prompt = NULL;
    int32_t n_prompt = 0;
    bool ok;
    if (kind == VX_OAI_CHAT) {
        ok = chat_prompt(s, j, &prompt, &n_prompt, &err);
    } else if (q->suffix) {
        ok = vx_oai_fim_prompt(s->vocab, q, &prompt, &n_prompt, &err);
    } else if (q->prompt) {
        ok = vx_oai_tokenize_text(s->vocab, q->prompt, q->prompt_len, true, true, &prompt, &n_prompt, &err);
    } else {
        prompt = q->prompt_ids;
        n_prompt = q->n_prompt_ids;
        q->prompt_ids = NULL;
        ok = true;
    }
    ok = ok && prepend_context(s->vocab, oll, &prompt, &n_prompt, &err);
    if (!ok) return respond_error(conn, r, &err);
    if (n_prompt == 0) {
        free(prompt);
        vx_oai_set_error(&err, 400, kind == VX_OAI_CHAT ? "messages" : "prompt", "The prompt is empty.");
        return respond_error(conn, r, &err);
    }
    if (n_prompt >= s->p.n_ctx) {
        free(prompt);
        vx_oai_set_error(&err, 400, kind == VX_OAI_CHAT ? "messages" : "prompt",
                         "This model's maximum context length is %d tokens. However, your %s resulted in %d "
                         "tokens. Please reduce the length of the %s.",
                         (int)s->p.n_ctx, kind == VX_OAI_CHAT ? "messages" : "prompt", (int)n_prompt,
                         kind == VX_OAI_CHAT ? "messages" : "prompt");
        err.code = "context_length_exceeded";
        return respond_error(conn, r, &err);
    }
    if (server_stopping(s)) {
        free(prompt);
        return respond_errorf(conn, r, 503, NULL, "The server is shutting down.");
    }

    /* the job's fixed part */
    j->n_prompt = n_prompt;
    if (okind == VX_OLLAMA_GENERATE && (j->ctx = malloc(((size_t)n_prompt + 64) * sizeof *j->ctx))) {
        memcpy(j->ctx, prompt, (size_t)n_prompt * sizeof *j->ctx);
        j->n_ctx = n_prompt;
        j->cap_ctx = n_prompt + 64;
    }
    /* llama-server's tokens: every streamed piece's, or with return_tokens all */
    if (j->lcpp.kind && (j->lcpp.return_tokens || q->stream) && (j->ctx = malloc(64 * sizeof *j->ctx))) j->cap_ctx = 64;
    j->n_choices = q->n;
    j->conn = conn;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    j->fd = ci ? ci->connect_fd : -1;
    vx_oai_make_id(kind, j->id, sizeof j->id);
    j->meta = (vx_oai_meta){.kind = kind, .id = j->id, .created = (int64_t)time(NULL),
                            .model = q->model ? q->model : s->model_name, .vocab = s->vocab};
    if (q->echo) {
        if (q->prompt) {
            j->echo = strdup(q->prompt);
            j->echo_len = q->prompt_len;
        } else {
            vx_sbuf e = {0};
            char piece[512];
            for (int32_t i = 0; i < n_prompt; i++) {
                int32_t pl = vx_token_to_piece(s->vocab, prompt[i], piece, sizeof piece, false);
                if (pl > 0) vx_sbuf_add(&e, piece, (size_t)pl);
            }
            j->echo_len = e.len;
            j->echo = vx_sbuf_take(&e);
        }
        if (!j->echo) j->echo_len = 0;
    }
    for (int32_t i = 0; i < j->n_choices; i++) {
        choice *c = &j->choices[i];
        c->job = j;
        c->index = i;
        vx_text_filter_init(&c->filter, q->stop, q->n_stop);
        c->lp_offset = j->echo_len;
        vx_tool_stream_init(&c->tstream, j->tools ? s->p.tool_format : VX_TOOL_FMT_NONE);
        vx_reasoning_stream_init(&c->rstream, j->think_open);
        vx_harmony_stream_init(&c->hstream, j->think, q->parallel_tool_calls ? 0 : 1);
        if (j->tool_prefix) { /* a forced call's opening is part of the reply to parse */
            const size_t pl = strlen(j->tool_prefix);
            const char *p;
            size_t n;
            if (!q->stream) vx_sbuf_add(&c->text, j->tool_prefix, pl);
            else if (j->harmony) {
                if (!vx_harmony_stream_feed(&c->hstream, j->tool_prefix, pl)) j->out.oom = true;
            }
            else if (!vx_tool_stream_feed(&c->tstream, j->tool_prefix, pl, &p, &n)) j->out.oom = true;
        }
    }
    /* echo with logprobs (lm-evaluation-harness's loglikelihood requests,
     * usually max_tokens 0): the prompt's tokens lead the logprobs, as in
     * OpenAI's legacy API and vLLM, the first with null (nothing precedes
     * it), the others as the engine reports them */
    j->prompt_lp = kind == VX_OAI_COMPLETION && q->echo && q->logprobs;
    for (int32_t i = 0; j->prompt_lp && i < j->n_choices; i++) {
        choice *c = &j->choices[i];
        const ev_item first = {.token = prompt[0], .prompt = true, .logprob = NAN, .n_top = -1};
        c->lp_offset = 0;
        lp_push(c, &first);
    }
    if (q->stream && !okind) {
        for (int32_t i = 0; i < j->n_choices; i++) {
            if (kind == VX_OAI_CHAT) {
                vx_oai_choice oc = {.index = i};
                vx_oai_chunk(&j->out, &j->meta, &oc, true, q->include_usage);
            } else if (j->echo_len) {
                vx_oai_choice oc = {.index = i, .text = j->echo, .text_len = j->echo_len};
                vx_oai_chunk(&j->out, &j->meta, &oc, false, q->include_usage);
            }
        }
    }

    /* submit n engine requests: same prompt, seeds seed+i */
    for (int32_t i = 0; i < j->n_choices && (q->max_tokens != 0 || j->prompt_lp); i++) {
        choice *c = &j->choices[i];
        vx_request_params rp;
        memset(&rp, 0, sizeof rp);
        rp.prompt = prompt;
        rp.n_prompt = n_prompt;
        rp.max_tokens = q->max_tokens;
        rp.sampling = q->sampling;
        /* seed + n stands in for the one of them that would be the
         * "random" value UINT64_MAX, so every choice stays reproducible
         * (seed -2, n 3: choice 1 was random) */
        if (q->sampling.seed != UINT64_MAX) {
            rp.sampling.seed = q->sampling.seed + (uint64_t)i;
            if (rp.sampling.seed == UINT64_MAX) rp.sampling.seed = q->sampling.seed + (uint64_t)j->n_choices;
        }
        rp.logprobs = q->logprobs;
        rp.n_logprobs = q->logprobs ? q->top_logprobs : 0;
        rp.prompt_logprobs = j->prompt_lp;
        rp.ignore_eos = q->ignore_eos;
        rp.json_object = q->json_object;
        rp.json_schema = j->tool_schema ? j->tool_schema : q->json_schema;
        rp.json_schema_len = rp.json_schema ? strlen(rp.json_schema) : 0;
        rp.grammar = q->grammar, rp.grammar_len = q->grammar ? strlen(q->grammar) : 0;
        rp.draft_max = j->lcpp.draft_max, rp.draft_min = j->lcpp.draft_min, rp.draft_p_min = j->lcpp.draft_p_min;
        rp.on_event = on_event;
        rp.user_data = c;
        pthread_mutex_lock(&j->mu);
        j->refs++; /* the engine's, until the final event */
        pthread_mutex_unlock(&j->mu);
        uint64_t id = 0;
        char msg[VX_ERRMSG_MAX] = "";
        vx_status st = vx_engine_submit(s->engine, &rp, &id, msg, sizeof msg);
        if (st != VX_OK) {
            pthread_mutex_lock(&j->mu);
            j->refs--; /* no event will come: the request never entered the engine */
            pthread_mutex_unlock(&j->mu);
            job_cancel(j, true);
            free(prompt);
            int status;
            const char *code = engine_error_code(st, &status);
            return respond_errorf(conn, r, status, code, msg[0] ? msg : vx_status_str(st));
        }
        pthread_mutex_lock(&j->mu);
        c->engine_id = id;
        c->submitted = true;
        pthread_mutex_unlock(&j->mu);
    }
    free(prompt);
    if (q->max_tokens == 0 && !j->prompt_lp)
        for (int32_t i = 0; i < j->n_choices; i++) choice_done(j, &j->choices[i], reply_finish(j, &j->choices[i], "length"));

    if (q->stream) {
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, sse_read, j, sse_free);
        if (!resp) {
            job_cancel(j, true);
            return MHD_NO;
        }
        pthread_mutex_lock(&j->mu);
        j->refs++; /* the response's, released by sse_free */
        pthread_mutex_unlock(&j->mu);
        add_common_headers(resp, okind ? "application/x-ndjson" : "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        r->status = 200;
        return ret;
    }
    /* this thread waits for the whole generation, which may take longer
     * than the idle timeout: suspend it meanwhile */
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    while (j->n_done < j->n_choices) {
        if (client_gone(j)) {
            job_cancel(j, true);
            return MHD_NO; /* nobody to answer: close the connection */
        }
        job_pump(j, PUMP_WAIT_MS);
    }
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, s->p.timeout_s);
    if (j->failed) return respond_error(conn, r, &j->error);
    return respond_json(conn, r, 200, job_response(j));
}

/* ---------------------------------------------------------- embeddings */

typedef struct embed_watch {
    vx_server *s;
    int fd;
} embed_watch;

/* The run of an embeddings request stops when its client left or the
 * server cancels everything (vx_server_cancel_all, after the grace
 * period of a shutdown). */
static bool embed_stop(void *ud) {
    const embed_watch *w = ud;
    pthread_mutex_lock(&w->s->mu);
    const bool canceling = w->s->canceling;
    pthread_mutex_unlock(&w->s->mu);
    return canceling || fd_gone(w->fd);
}

/* POST /v1/embeddings: every input an engine embedding request (a window
 * of --parallel at a time), the vectors pooled as the server's pooling
 * says; this thread waits for them all, as for a non-streaming request. */
static enum MHD_Result handle_embeddings(vx_server *s, struct MHD_Connection *conn, conn_req *r, const char *body,
                                         size_t blen, bool legacy, int ollama) {
    vx_oai_error err;
    const int64_t t_start = vx_time_ns();
    vx_oai_embed_request q;
    const int32_t n_embd = vx_model_n_embd(s->model);
    /* in flight from here (tokenizing 2048 inputs takes a while) until its
     * response is sent (on_completed): a shutdown waits for it */
    pthread_mutex_lock(&s->mu);
    s->n_embed++;
    pthread_mutex_unlock(&s->mu);
    r->embed = true;
    /* legacy: llama-server's format; ollama: its shapes (vx_oai_embed_request.ollama) */
    if (!vx_oai_parse_embeddings(body, blen, s->vocab, s->p.n_ctx, n_embd, legacy, &q, &err))
        return respond_error(conn, r, &err);
    q.ollama = ollama;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    embed_watch w = {s, ci ? ci->connect_fd : -1};
    const int fd = w.fd;
    float *vecs = NULL;
    char msg[VX_ERRMSG_MAX] = "";
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    const vx_status st = vx_embed_run(s->engine, &q, s->p.pooling, s->p.n_parallel, n_embd, embed_stop, &w, &vecs, msg,
                                      sizeof msg);
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, s->p.timeout_s);
    enum MHD_Result ret;
    if (st == VX_OK) {
        r->n_prompt = (int32_t)VX_MIN(q.n_tokens_total, (int64_t)INT32_MAX); /* logged, counted */
        q.elapsed_ns = vx_time_ns() - t_start;
        char *json = vx_oai_embeddings_json(&q, q.model ? q.model : s->model_name, vecs, n_embd);
        ret = json ? respond_json(conn, r, 200, json) : respond_errorf(conn, r, 500, NULL, "Out of memory.");
    } else if (st == VX_ECANCELED && fd_gone(fd)) {
        ret = MHD_NO; /* nobody to answer: close the connection */
    } else if (st == VX_ECANCELED) {
        ret = respond_errorf(conn, r, server_stopping(s) ? 503 : 500, NULL,
                             server_stopping(s) ? "The server is shutting down." : "The request was canceled.");
    } else {
        int status;
        const char *code = engine_error_code(st, &status);
        char full[VX_ERRMSG_MAX + 32];
        snprintf(full, sizeof full, "%s%s", st == VX_EINTERNAL ? "Embedding failed: " : "", msg[0] ? msg : vx_status_str(st));
        ret = respond_errorf(conn, r, status, code, full);
    }
    free(vecs);
    vx_oai_embed_request_free(&q);
    return ret;
}

/* ---------------------------------------------------------------- ollama */

/* GET /props (llama-server's): the context, slots, file, chat template
 * and the vocabulary's BOS / EOS text. */
static char *props_json(const vx_server *s) {
    char bos[128] = "", eos[128] = "";
    const vx_token ids[2] = {vx_vocab_bos(s->vocab), vx_vocab_eos(s->vocab)};
    char *txt[2] = {bos, eos};
    for (int i = 0; i < 2; i++) {
        const int32_t n = ids[i] >= 0 ? vx_token_to_piece(s->vocab, ids[i], txt[i], 127, true) : 0;
        txt[i][n > 0 ? n : 0] = 0;
    }
    const vx_lcpp_props p = {.model_path = s->p.model_path, .chat_template = s->p.template_src, .bos_token = bos,
                             .eos_token = eos, .n_ctx = s->p.n_ctx, .total_slots = VX_MAX(1, s->p.n_parallel)};
    return vx_lcpp_props_json(&p);
}

/* The served model as ollama describes one (server start). */
static void ollama_model_init(vx_server *s) {
    vx_ollama_model *m = &s->om;
    struct stat st;
    const bool have = s->p.model_path && stat(s->p.model_path, &st) == 0;
    snprintf(s->om_arch, sizeof s->om_arch, "%s", vx_model_arch(s->model));
    snprintf(s->om_quant, sizeof s->om_quant, "unknown");
    char ft[32];
    if (vx_model_meta_str(s->model, "general.file_type", ft, sizeof ft) > 0) {
        const vx_quant_mix *mix;
        for (int i = 0; (mix = vx_quant_mix_at(i)); i++)
            if (mix->ftype == atoi(ft)) snprintf(s->om_quant, sizeof s->om_quant, "%s", mix->name);
    }
    *m = (vx_ollama_model){.name = s->model_name, .arch = s->om_arch, .n_params = vx_model_n_params(s->model),
                           .quant = s->om_quant, .size = have ? (uint64_t)st.st_size : vx_model_size(s->model),
                           .mtime = have ? (int64_t)st.st_mtime : s->created,
                           .n_ctx_train = vx_model_n_ctx_train(s->model), .n_ctx = s->p.n_ctx,
                           .n_embd = vx_model_n_embd(s->model), .n_layer = vx_model_n_layer(s->model),
                           .template_src = s->template_src, .tools = s->p.tool_format != VX_TOOL_FMT_NONE,
                           .thinking = vx_reasoning_detect(s->template_src) || s->harmony,
                           .embedding = vx_model_pooling(s->model) != VX_POOLING_UNSPECIFIED};
}

/* POST /api/embed and /api/embeddings: the body as an OpenAI one, run as
 * /v1/embeddings runs it, answered in ollama's shape. */
static enum MHD_Result handle_ollama_embed(vx_server *s, struct MHD_Connection *conn, conn_req *r, bool legacy) {
    vx_oai_error err;
    char *oai = NULL;
    bool empty;
    if (!vx_ollama_embed_body(r->body.p ? r->body.p : "", r->body.len, legacy, &oai, &empty, &err))
        return respond_error(conn, r, &err);
    if (empty) { /* nothing to embed: ollama's empty answer */
        free(oai);
        if (legacy) return respond_json(conn, r, 200, strdup("{\"embedding\":[]}"));
        vx_sbuf b = {0};
        vx_sbuf_adds(&b, "{\"model\":");
        vx_oai_json_cstr(&b, s->model_name);
        vx_sbuf_adds(&b, ",\"embeddings\":[],\"total_duration\":0,\"load_duration\":0,\"prompt_eval_count\":0}");
        return respond_json(conn, r, 200, one_object(&b));
    }
    const enum MHD_Result ret = handle_embeddings(s, conn, r, oai, strlen(oai), false, legacy ? 2 : 1);
    free(oai);
    return ret;
}

/* ------------------------------------------------------------------ metrics */

static char *metrics_text(vx_server *s) {
    vx_engine_stats st;
    vx_engine_get_stats(s->engine, &st);
    pthread_mutex_lock(&s->mu);
    uint64_t status[MAX_STATUS];
    memcpy(status, s->status_count, sizeof status);
    const vx_http_counters h = {status, MAX_STATUS, s->aborted, s->tokens_prompt, s->tokens_generated,
                                s->header_timeouts, s->body_timeouts, s->n_jobs + s->n_embed};
    pthread_mutex_unlock(&s->mu);
    return vx_server_metrics_text(&h, &st);
}

/* ------------------------------------------------------------------ routing */

/* The key as "Authorization: Bearer KEY", or as "X-Api-Key: KEY" (which
 * llama-server and several clients use too). */
static bool authorized(vx_server *s, struct MHD_Connection *conn) {
    if (!s->api_key) return true;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (h && strncasecmp(h, "Bearer ", 7) == 0) h += 7;
    else if (!(h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Api-Key"))) return false;
    while (*h == ' ') h++;
    /* compare in time independent of where the strings differ */
    size_t hl = strlen(h), kl = strlen(s->api_key);
    unsigned diff = hl != kl;
    for (size_t i = 0; i < kl; i++) diff |= (unsigned)(unsigned char)s->api_key[i] ^ (unsigned)(unsigned char)(i < hl ? h[i] : 0);
    return diff == 0;
}

static enum MHD_Result route(vx_server *s, struct MHD_Connection *conn, conn_req *r) {
    const char *m = r->method;
    if (!strcmp(m, "OPTIONS")) {
        /* CORS preflight, so browser front-ends can call the API */
        struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (!resp) return MHD_NO;
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Authorization, X-Api-Key, Content-Type");
        MHD_add_response_header(resp, "Access-Control-Max-Age", "86400");
        enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_NO_CONTENT, resp);
        MHD_destroy_response(resp);
        r->status = 204;
        return ret;
    }
    bool post = false;
    vx_route rt = vx_server_find_route(r->path, &post);
    r->ollama = rt >= R_ROOT || !strncmp(r->path, "/api/", 5);
    if (!strncmp(r->path, "/api/blobs/", 11)) rt = R_OLL_MANAGE; /* /api/blobs/sha256:... */
    if (rt == R_NONE) {
        char msg[256];
        snprintf(msg, sizeof msg, "Invalid URL (%s %.160s).", m, r->path);
        return respond_errorf(conn, r, 404, "unknown_url", msg);
    }
    if (rt == R_OLL_MANAGE) { /* any method: ollama's delete is a DELETE */
        char msg[400];
        snprintf(msg, sizeof msg,
                 "%.40s is not supported: vx serve runs the one model it was started with (%.200s); models are GGUF "
                 "files given with -m.",
                 r->path, s->model_name);
        return respond_errorf(conn, r, 501, NULL, msg);
    }
    const bool is_get = !strcmp(m, "GET") || !strcmp(m, "HEAD");
    if (post ? strcmp(m, "POST") != 0 : !is_get) {
        char msg[256];
        snprintf(msg, sizeof msg, "Method %s is not allowed on %.160s.", m, r->path);
        vx_oai_error e;
        vx_oai_set_error(&e, 405, NULL, "%s", msg);
        return respond(conn, r, 405, r->ollama ? vx_ollama_error_json(&e) : vx_oai_error_json(&e), "application/json",
                       post ? "POST, OPTIONS" : "GET, HEAD, OPTIONS");
    }
    if (r->too_large) {
        char msg[160];
        snprintf(msg, sizeof msg, "The request body is larger than the limit of %zu bytes.", s->p.max_body);
        return respond_errorf(conn, r, 413, NULL, msg);
    }
    const bool stopping = server_stopping(s);
    if (rt == R_ROOT) /* ollama's clients look for this */
        return respond(conn, r, stopping ? 503 : 200, strdup(stopping ? "Shutting down" : "Ollama is running"),
                       "text/plain; charset=utf-8", NULL);
    if (rt == R_OLL_VERSION)
        return respond_json(conn, r, 200, strdup("{\"version\":\"" VX_OLLAMA_API_VERSION "\"}"));
    if (rt == R_HEALTH)
        return respond_json(conn, r, stopping ? 503 : 200,
                            strdup(stopping ? "{\"status\":\"shutting down\"}" : "{\"status\":\"ok\"}"));
    if (!authorized(s, conn))
        return respond_errorf(conn, r, 401, "invalid_api_key", "Invalid or missing API key (use Authorization: Bearer KEY).");
    if (rt == R_METRICS) return respond(conn, r, 200, metrics_text(s), "text/plain; version=0.0.4", NULL);
    if (stopping) return respond_errorf(conn, r, 503, NULL, "The server is shutting down.");
    const char *body = r->body.p ? r->body.p : "";
    vx_oai_error err;
    char *out;
    switch (rt) {
    case R_MODELS:
        return respond_json(conn, r, 200, vx_oai_models_json(s->model_name, s->created, s->p.n_ctx, s->n_vocab));
    case R_CHAT: return handle_generate(s, conn, r, VX_OAI_CHAT, 0, 0);
    case R_COMPLETIONS: return handle_generate(s, conn, r, VX_OAI_COMPLETION, 0, 0);
    case R_LCPP_COMPLETION: return handle_generate(s, conn, r, VX_OAI_COMPLETION, 0, VX_LCPP_COMPLETION);
    case R_LCPP_INFILL: return handle_generate(s, conn, r, VX_OAI_COMPLETION, 0, VX_LCPP_INFILL);
    case R_PROPS: return respond_json(conn, r, 200, props_json(s));
    case R_EMBED: return handle_embeddings(s, conn, r, body, r->body.len, false, 0);
    case R_EMBED_LEGACY: return handle_embeddings(s, conn, r, body, r->body.len, true, 0);
    case R_OLL_CHAT: return handle_generate(s, conn, r, VX_OAI_CHAT, VX_OLLAMA_CHAT, 0);
    case R_OLL_GENERATE: return handle_generate(s, conn, r, VX_OAI_CHAT, VX_OLLAMA_GENERATE, 0);
    case R_OLL_EMBED: return handle_ollama_embed(s, conn, r, false);
    case R_OLL_EMBEDDINGS: return handle_ollama_embed(s, conn, r, true);
    case R_OLL_TAGS: return respond_json(conn, r, 200, vx_ollama_tags_json(&s->om, false));
    case R_OLL_PS: return respond_json(conn, r, 200, vx_ollama_tags_json(&s->om, true));
    case R_OLL_SHOW: /* one model: any name shows it, but the body must be a JSON object */
        if (!vx_ollama_show_body(body, r->body.len, &err)) return respond_error(conn, r, &err);
        return respond_json(conn, r, 200, vx_ollama_show_json(&s->om));
    case R_TOKENIZE:
        out = vx_oai_tokenize_json(s->vocab, body, r->body.len, &err);
        return out ? respond_json(conn, r, 200, out) : respond_error(conn, r, &err);
    case R_DETOKENIZE:
        out = vx_oai_detokenize_json(s->vocab, body, r->body.len, &err);
        return out ? respond_json(conn, r, 200, out) : respond_error(conn, r, &err);
    case R_APPLY:
        out = vx_oai_apply_template_json(s->tmpl, s->vocab, s->p.template_kwargs, s->p.n_ctx, body, r->body.len, &err);
        return out ? respond_json(conn, r, 200, out) : respond_error(conn, r, &err);
    default: break;
    }
    return respond_errorf(conn, r, 500, NULL, "Unrouted request.");
}

/* The connection's watch (on_connection), or NULL. */
static conn_watch *connection_watch(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* "chunked", any case, spaces around: the one transfer coding MHD decodes */
static bool is_chunked(const char *te) {
    while (*te == ' ' || *te == '\t') te++;
    if (strncasecmp(te, "chunked", 7)) return false;
    for (te += 7; *te == ' ' || *te == '\t'; te++) {}
    return *te == 0;
}

/* The request's Content-Length headers: how many, the first, and whether
 * any differs from it. */
typedef struct cl_scan {
    const char *first;
    int n;
    bool differ;
} cl_scan;

static enum MHD_Result scan_content_length(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    cl_scan *c = cls;
    if (key && !strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        if (c->n++ == 0) c->first = value;
        else if (!value || !c->first || strcmp(value, c->first)) c->differ = true;
    }
    return MHD_YES;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                 const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    (void)version;
    vx_server *s = cls;
    conn_req *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        snprintf(r->method, sizeof r->method, "%s", method ? method : "?");
        snprintf(r->path, sizeof r->path, "%s", url ? url : "/");
        /* the path goes to the log: no control characters from clients */
        for (char *c = r->path; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
        for (char *c = r->method; *c; c++)
            if ((unsigned char)*c <= 0x20 || *c == 0x7f) *c = '?';
        r->t_start = vx_time_us();
        *con_cls = r;
        conn_watch *w = connection_watch(conn);
        pthread_mutex_lock(&s->mu);
        const int n_conns = s->n_conns;
        if (w) {
            w->in_request = w->receiving = true;
            w->t_req = r->t_start;
            w->body_bytes = 0;
        }
        pthread_mutex_unlock(&s->mu);
        if (n_conns > (int)s->p.max_connections) return respond_overloaded(s, conn, r, n_conns);
        /* MHD decodes chunked bodies only; with any other coding it waited
         * for a body end it cannot find (the connection hung until the idle
         * timeout): 501, as RFC 9112 6.1 asks, before reading a byte */
        const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
        if (te && !is_chunked(te)) {
            char msg[200];
            snprintf(msg, sizeof msg, "Transfer-Encoding '%.80s' is not supported: send the body as is or chunked.", te);
            return respond_errorf(conn, r, 501, NULL, msg);
        }
        /* MHD reads the first of several Content-Length headers; differing
         * ones are how requests get smuggled past proxies (RFC 9112 6.3: an
         * error) */
        cl_scan scan = {NULL, 0, false};
        MHD_get_connection_values(conn, MHD_HEADER_KIND, scan_content_length, &scan);
        if (scan.differ) return respond_errorf(conn, r, 400, NULL, "The request has conflicting Content-Length headers.");
        /* compressed bodies would be parsed as JSON bytes: 415 (RFC 9110 15.5.16) */
        const char *ce = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_ENCODING);
        if (ce && strcasecmp(ce, "identity")) {
            char msg[200];
            snprintf(msg, sizeof msg, "Content-Encoding '%.80s' is not supported: send the body uncompressed.", ce);
            return respond_errorf(conn, r, 415, NULL, msg);
        }
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(cl, &end, 10);
            if (errno || end == cl || n > s->p.max_body) r->too_large = true;
            /* answer now when the client waits for a 100 Continue before it
             * sends the body (RFC 9110 10.1.1: a final status instead), or
             * the body is so large that reading it to the end is not worth
             * it (the client may see the connection reset) */
            const char *ex = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
            if (r->too_large && ((ex && !strcasecmp(ex, "100-continue")) || errno ||
                                 n > (unsigned long long)s->p.max_body * 4 + (64u << 20)))
                return route(s, conn, r);
        }
        return MHD_YES;
    }
    conn_watch *w = connection_watch(conn);
    if (w) {
        pthread_mutex_lock(&s->mu);
        w->body_bytes += *upload_size;
        w->receiving = *upload_size != 0; /* the last call has none */
        pthread_mutex_unlock(&s->mu);
    }
    if (*upload_size) {
        /* over the limit: keep reading (and dropping) so the 413 reaches
         * the client instead of a reset connection */
        if (!r->too_large && !r->status) {
            if (r->body.len + *upload_size > s->p.max_body) {
                r->too_large = true;
                vx_sbuf_free(&r->body);
            } else if (!vx_sbuf_add(&r->body, upload_data, *upload_size)) {
                *upload_size = 0;
                return respond_errorf(conn, r, 500, NULL, "Out of memory.");
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->status) return MHD_YES; /* answered already (early 413) */
    return route(s, conn, r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    vx_server *s = cls;
    conn_req *r = *con_cls;
    if (!r) return;
    *con_cls = NULL;
    int32_t n_prompt = r->n_prompt, n_gen = 0;
    const bool ok = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK;
    if (r->job) {
        job *j = r->job;
        n_prompt = j->n_prompt;
        for (int32_t i = 0; i < j->n_choices; i++) n_gen += j->choices[i].n_gen;
        if (!ok || j->n_done < j->n_choices) job_cancel(j, true);
        job_unref(j);
    }
    const double dur = (double)(vx_time_us() - r->t_start) * 1e-6;
    conn_watch *w = connection_watch(conn);
    pthread_mutex_lock(&s->mu);
    if (w) {
        w->in_request = false;
        w->t_wait = vx_time_us();
    }
    if (!ok || !r->status) s->aborted++;
    else if (r->status > 0 && r->status < MAX_STATUS) s->status_count[r->status]++;
    s->tokens_prompt += (uint64_t)n_prompt;
    s->tokens_generated += (uint64_t)n_gen;
    s->n_embed -= r->embed;
    pthread_mutex_unlock(&s->mu);
    if (s->p.log_requests) {
        char st[16];
        if (ok && r->status) snprintf(st, sizeof st, "%d", r->status);
        else snprintf(st, sizeof st, "%d-aborted", r->status);
        fprintf(stderr, "%s %s %s %d %d %.1f t/s %.3fs\n", r->method, r->path, st, (int)n_prompt, (int)n_gen,
                dur > 0 ? n_gen / dur : 0.0, dur);
    }
    vx_sbuf_free(&r->body);
    free(r);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    vx_server *s = cls;
    conn_watch *w = NULL;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        w = ci ? calloc(1, sizeof *w) : NULL; /* no watch (out of memory): only the idle timeout applies */
        if (w) {
            w->fd = ci->connect_fd;
            w->t_wait = vx_time_us();
        }
        *socket_context = w;
    }
    pthread_mutex_lock(&s->mu);
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        s->n_conns++;
        if (w) {
            w->next = s->watches;
            if (s->watches) s->watches->prev = w;
            s->watches = w;
        }
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        s->n_conns--;
        /* unlinked before MHD closes the socket: the watchdog never shuts
         * down a descriptor number that a new connection may reuse */
        w = *socket_context;
        if (w) {
            if (w->prev) w->prev->next = w->next;
            else s->watches = w->next;
            if (w->next) w->next->prev = w->prev;
        }
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) free(w);
}

/* Once a second: connections that have waited longer than
 * header_timeout_s for a request's headers, or whose body is arriving
 * under BODY_MIN_RATE after that long, are shut down (MHD then closes
 * them as a client that went away). */
static void *watchdog_main(void *arg) {
    vx_server *s = arg;
    const int64_t limit = (int64_t)s->p.header_timeout_s * 1000000;
    pthread_mutex_lock(&s->mu);
    while (!s->watchdog_stop) {
        const int64_t now = vx_time_us();
        for (conn_watch *w = s->watches; w; w = w->next) {
            if (w->cut) continue;
            const int64_t since = now - w->t_req;
            if (!w->in_request && now - w->t_wait > limit) {
                s->header_timeouts++;
            } else if (w->in_request && w->receiving && since > limit &&
                       w->body_bytes < (uint64_t)((double)BODY_MIN_RATE * (double)since * 1e-6)) {
                s->body_timeouts++;
            } else {
                continue;
            }
            shutdown(w->fd, SHUT_RDWR);
            w->cut = true;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&s->watchdog_cv, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n') msg[--n] = 0;
    /* a client that goes away is logged with its request ("-aborted") */
    if (strstr(msg, "Application reported internal error") || strstr(msg, "application error generating response") ||
        strstr(msg, "closed by remote side"))
        return;
    fprintf(stderr, "vx serve: http: %s\n", msg);
}

/* -------------------------------------------------------------- lifecycle */

vx_status vx_server_start(const vx_server_params *params, const vx_model *model, vx_engine *engine,
                          const vx_chat_template *tmpl, vx_server **out, char *err, size_t err_size) {
    *out = NULL;
    vx_server_params p = params ? *params : vx_server_default_params();
    if (!model || !engine || !tmpl) return vx_seterr(err, err_size, VX_EINVAL, "server: missing model, engine or template");
    if (p.port < 0 || p.port > 65535) return vx_seterr(err, err_size, VX_EINVAL, "port %d is out of range", p.port);
    if (p.n_ctx <= 0 || p.max_body == 0 || p.max_buffered == 0)
        return vx_seterr(err, err_size, VX_EINVAL, "server: parameters out of range");
    vx_oai_error kerr;
    if (p.template_kwargs && !vx_oai_check_kwargs(p.template_kwargs, &kerr))
        return vx_seterr(err, err_size, VX_EINVAL, "chat template kwargs: %s", kerr.message);
    const char *host = p.host && p.host[0] ? p.host : "127.0.0.1";
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", p.port);
    int gai = getaddrinfo(host, port_s, &hints, &ai);
    if (gai != 0 || !ai) return vx_seterr(err, err_size, VX_EINVAL, "cannot resolve host '%s': %s", host, gai_strerror(gai));
    struct sockaddr_storage addr;
    memset(&addr, 0, sizeof addr);
    memcpy(&addr, ai->ai_addr, VX_MIN((size_t)ai->ai_addrlen, sizeof addr));
    const bool v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);

    vx_server *s = calloc(1, sizeof *s);
    if (!s) return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->watchdog_cv, NULL);
    s->refs = 1;
    s->p = p;
    s->host = strdup(host);
    s->api_key = p.api_key && p.api_key[0] ? strdup(p.api_key) : NULL;
    s->model_name = strdup(p.model_name ? p.model_name : "model");
    s->template_kwargs = p.template_kwargs ? strdup(p.template_kwargs) : NULL;
    s->p.template_kwargs = s->template_kwargs;
    s->template_src = strdup(p.template_src ? p.template_src : "");
    s->p.template_src = s->template_src;
    s->harmony = vx_harmony_detect(s->template_src);
    s->p.host = s->host;
    s->p.api_key = s->api_key;
    s->p.model_name = s->model_name;
    s->model = model;
    s->vocab = vx_model_get_vocab(model);
    s->n_vocab = vx_vocab_n_tokens(s->vocab);
    s->engine = engine;
    s->tmpl = tmpl;
    s->created = (int64_t)time(NULL);
    ollama_model_init(s);
    if (!s->host || !s->model_name || !s->template_src || (p.api_key && p.api_key[0] && !s->api_key) ||
        (p.template_kwargs && !s->template_kwargs)) {
        server_unref(s);
        return vx_seterr(err, err_size, VX_ENOMEM, "out of memory");
    }
    if (s->p.max_connections == 0) s->p.max_connections = 256;
    if (s->p.pooling != VX_POOLING_MEAN && s->p.pooling != VX_POOLING_CLS) s->p.pooling = VX_POOLING_LAST;
    const unsigned conn_limit = s->p.max_connections + s->p.max_connections / 4 + 4;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    if (v6) flags |= MHD_USE_IPv6;
    s->daemon = MHD_start_daemon(flags, (uint16_t)p.port, NULL, NULL, on_access, s,
                                 MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s, /* first, or MHD complains */
                                 MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                 MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                                 MHD_OPTION_CONNECTION_TIMEOUT, p.timeout_s,
                                 /* headroom: up to a quarter more connections are
                                  * accepted to be told 503 instead of being dropped */
                                 MHD_OPTION_CONNECTION_LIMIT, conn_limit,
                                 MHD_OPTION_END);
    if (!s->daemon) {
        int e = errno;
        server_unref(s);
        return vx_seterr(err, err_size, VX_EIO, "cannot listen on %s:%d%s%s", host, p.port, e ? ": " : "",
                         e ? strerror(e) : "");
    }
    if (s->p.header_timeout_s) {
        if (pthread_create(&s->watchdog, NULL, watchdog_main, s) != 0) {
            MHD_stop_daemon(s->daemon);
            s->daemon = NULL;
            server_unref(s);
            return vx_seterr(err, err_size, VX_ENOMEM, "server: cannot start the connection watchdog thread");
        }
        s->watchdog_on = true;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di && di->port ? di->port : p.port;
    *out = s;
    return VX_OK;
}

int vx_server_port(const vx_server *s) { return s ? s->port : 0; }

void vx_server_shutdown(vx_server *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    bool was = s->stopping;
    s->stopping = true;
    pthread_mutex_unlock(&s->mu);
    if (was || !s->daemon) return;
    MHD_socket fd = MHD_quiesce_daemon(s->daemon);
    if (fd != MHD_INVALID_SOCKET) close(fd);
}

int vx_server_active(vx_server *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->n_jobs + s->n_embed;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void vx_server_cancel_all(vx_server *s) {
    /* in batches: engine calls are made without our locks held */
    uint64_t ids[64];
    for (;;) {
        int n = 0;
        pthread_mutex_lock(&s->mu);
        s->stopping = s->canceling = true;
        for (job *j = s->jobs; j && n < (int)(sizeof ids / sizeof ids[0]); j = j->next) {
            pthread_mutex_lock(&j->mu);
            for (int32_t i = 0; i < j->n_choices && n < (int)(sizeof ids / sizeof ids[0]); i++) {
                choice *c = &j->choices[i];
                if (!c->submitted || c->engine_done || c->cancel_requested || c->shutdown_sent) continue;
                /* not cancel_requested: the final event must reach the
                 * client, which should hear why its request ended */
                c->shutdown_sent = true;
                ids[n++] = c->engine_id;
            }
            pthread_mutex_unlock(&j->mu);
        }
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < n; i++) vx_engine_cancel(s->engine, ids[i]);
        if (n < (int)(sizeof ids / sizeof ids[0])) break;
    }
}

void vx_server_free(vx_server *s) {
    if (!s) return;
    vx_server_shutdown(s);
    vx_server_cancel_all(s);
    /* joins every connection thread; their requests finish with the cancel */
    if (s->daemon) MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
    if (s->watchdog_on) {
        pthread_mutex_lock(&s->mu);
        s->watchdog_stop = true;
        pthread_cond_signal(&s->watchdog_cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->watchdog, NULL);
        s->watchdog_on = false;
    }
    server_unref(s); /* jobs still waiting for a final event keep it alive */
}
