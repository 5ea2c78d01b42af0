/*
 * fuzz_openai.c - libFuzzer target for the OpenAI request layer of `vx
 * serve` (src/server_openai.c). Every bad input must give a precise
 * OpenAI-style error (status, message, param) and never a crash, UB, leak
 * or hang; every accepted request must satisfy the documented invariants.
 *
 * Input: byte 0 picks the mode (low 2 bits) and its options (the others),
 * the rest is the payload.
 *   0  request bodies. Bits 2-3: vx_oai_parse_request as chat or
 *      completion, or POST /tokenize, /detokenize (vx_oai_tokenize_json,
 *      vx_oai_detokenize_json); bits 4-5: n_vocab 1, 7, 512 or the loaded
 *      vocabulary's size; bit 7: POST /v1/embeddings instead
 *      (vx_oai_parse_embeddings, vx_oai_embeddings_json; bit 2: as the
 *      legacy /embedding); bit 6: ollama's API instead (bits 2-3: /api/chat,
 *      /api/generate, /api/embed, /api/embeddings through vx_ollama_translate
 *      or vx_ollama_embed_body, then the OpenAI parser as the server does;
 *      replies, errors and embeddings in ollama's shapes must parse); bits
 *      6 and 7 both: llama-server's /completion (bit 2 clear) or /infill
 *      (set; the Qwen2 vocabulary's FIM tokens; bits 3-4 pick n_ctx, bit 5
 *      n_batch) through vx_lcpp_translate, then the OpenAI parser; its
 *      final and streaming replies (response_fields applied) must parse. An
 *      accepted request has its fields checked
 *      (sampling ranges, n, max_tokens, stop strings, logit_bias ids,
 *      prompt ids, messages_json shape), is handed to vx_sampler_init (which
 *      must accept it, as the engine will), rendered into a response and an
 *      SSE chunk (both must be valid JSON), then freed. A rejected one must
 *      carry status 400/413, a non-empty valid UTF-8 message and error JSON
 *      that parses, and leave the request zeroed.
 *   1  vx_oai_chat_prompt with a fixture template and vocabulary (bits 2-3:
 *      Qwen2.5 + qwen2, Llama 3.1 + llama-bpe, Mistral Nemo + llama-spm,
 *      Gemma 2 + llama-spm); bit 4: the payload is raw messages JSON,
 *      otherwise a chat request body that goes through vx_oai_parse_request
 *      first, as in the server (its tools rendered, a forced call's opening
 *      appended; bit 5: with server chat_template_kwargs). Ids must be in
 *      range; errors 400 with param "messages".
 *      An accepted request with tools (mode 0) must give every format a
 *      forced-call schema that compiles, and a response that parses.
 *   2  vx_text_filter. Byte 1: number of stop strings (% 5) and a chunking
 *      seed; the payload is split at NUL bytes into those stop strings, the
 *      rest is the stream. Fed whole, byte by byte and in random chunks, the
 *      output must be identical and free of any stop string; when the stop
 *      strings are valid UTF-8 (as the parser guarantees) it must also be
 *      valid UTF-8 and equal the reference: the sanitized stream cut before
 *      the stop string that ends first (the longest of those ending there).
 *   3  vx_utf8_sanitize must give valid UTF-8 (vx_utf8_valid), be the
 *      identity on valid input, and survive a response JSON round trip;
 *      the payload as a generated text through vx_tool_parse in every
 *      tool-call format, whole and streamed in three pieces (released
 *      plus held bytes are the text; the held part has the calls), and
 *      through the harmony parser (gpt-oss), whose stream in three pieces
 *      must give the whole reply's reasoning, content and calls.
 *
 * Environment: $VX_FIXTURES (default ../shared/fixtures, so run from the
 * repository root) for tokenizer/ggml-vocab-{qwen2,llama-bpe,llama-spm}.gguf
 * and four chat/templates/ files (those mode 1 names), loaded once at startup.
 *
 * Build (from the repository root):
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
 *       -std=c11 -D_GNU_SOURCE -Iinclude -Isrc tests/fuzz/fuzz_openai.c \
 *       src/server_openai.c src/server_text.c src/server_ollama.c src/server_llamacpp.c src/server_embed.c src/embed.c src/reasoning.c src/harmony.c src/tool_call.c src/json_check.c src/json_schema.c src/grammar*.c src/sampling.c \
 *       src/chat.c src/jinja*.c src/vocab.c \
 *       src/tok_*.c src/gguf.c src/name_index.c src/quant*.c src/common.c \
 *       -lcjson -lpcre2-8 -lm -o /tmp/fuzz_openai
 *
 * The system's libcjson is not instrumented, so ASan cannot see its reads.
 * To let it, build cJSON from source into the target instead: put cJSON.h
 * (the installed version, e.g. tag v1.7.15 of github.com/DaveGamble/cJSON)
 * in /tmp/cjson/inc/cjson/ and cJSON.c in /tmp/cjson/, then add
 * -I/tmp/cjson/inc before -Iinclude and replace -lcjson by /tmp/cjson/cJSON.c
 * (output /tmp/fuzz_openai_cj). That is how the over-read behind
 * CVE-2023-53154 showed up (see vx_oai_parse_json_object).
 *
 * Run (one job, bounded time; the machine is shared):
 *
 *   mkdir -p /tmp/corpus_openai /tmp/artifacts
 *   /tmp/fuzz_openai -dict=tests/fuzz/openai.dict -max_len=4096 -timeout=10 \
 *       -max_total_time=600 -artifact_prefix=/tmp/artifacts/ \
 *       /tmp/corpus_openai /tmp/seeds_openai
 *
 * Seeds: a mode byte followed by realistic bodies, e.g. "\x00" + a chat body
 * with messages, stop, logit_bias, stream_options; "\x04" + {"prompt":[1,2]}
 * with logprobs and echo; "\x08" + {"content":"hi","with_pieces":true};
 * "\x0c" + {"tokens":[1,2,3]}; "\x11" + a messages array with tool_calls;
 * "\x02\x02" + "STOP\0ab\0text with STOP"; "\x03" + mixed valid/invalid
 * UTF-8. tests/fuzz/openai.dict lists the JSON keys the parser knows.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "gguf.h"
#include "json_schema.h"
#include "server_embed.h"
#include "server_llamacpp.h"
#include "server_ollama.h"
#include "server_openai.h"
#include "../harmony_stream_check.h"
#include "../reasoning_stream_check.h"
#include "../tool_stream_check.h"
#include "vocab.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ------------------------------------------------------------- fixtures */

typedef struct pairing {
    const char *template_file, *vocab_file;
    vx_chat_template *t;
    vx_vocab *v;
} pairing;

static pairing g_pair[4] = {
    {"Qwen-Qwen2.5-7B-Instruct.jinja", "ggml-vocab-qwen2.gguf", NULL, NULL},
    {"meta-llama-Llama-3.1-8B-Instruct.jinja", "ggml-vocab-llama-bpe.gguf", NULL, NULL},
    {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "ggml-vocab-llama-spm.gguf", NULL, NULL},
    {"google-gemma-2-2b-it.jinja", "ggml-vocab-llama-spm.gguf", NULL, NULL},
};

static void die(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_openai: %s: %s\n", what, detail);
    abort(); /* test harness only */
}

static void check(int ok, const char *what) {
    if (!ok) die("check failed", what);
}

static const char *fixtures(void) {
    const char *fx = getenv("VX_FIXTURES");
    return fx && *fx ? fx : "../shared/fixtures";
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (!s || fread(s, 1, (size_t)n, f) != (size_t)n) die("cannot read", path);
    s[n] = 0;
    fclose(f);
    return s;
}

static vx_vocab *load_vocab(const char *file) {
    for (int i = 0; i < 4; i++)
        if (g_pair[i].v && !strcmp(g_pair[i].vocab_file, file)) return g_pair[i].v;
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/tokenizer/%s", fixtures(), file);
    vx_gguf *g = NULL;
    vx_vocab *v = NULL;
    if (vx_gguf_open(path, &g, err, sizeof err) != VX_OK || vx_vocab_load(g, &v, err, sizeof err) != VX_OK)
        die(path, err);
    vx_gguf_close(g);
    return v;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    for (int i = 0; i < 4; i++) {
        char path[1024], err[512];
        snprintf(path, sizeof path, "%s/chat/templates/%s", fixtures(), g_pair[i].template_file);
        char *src = read_file(path);
        if (vx_chat_template_parse(src, &g_pair[i].t, err, sizeof err) != VX_OK) die(path, err);
        free(src);
        g_pair[i].v = load_vocab(g_pair[i].vocab_file);
    }
    return 0;
}

/* -------------------------------------------------------------- helpers */

static bool is_json(const char *s) {
    if (!s) return false;
    cJSON *j = cJSON_Parse(s);
    cJSON_Delete(j);
    return j != NULL;
}

static bool str_ok(const char *s) { return s && vx_utf8_valid(s, strlen(s), NULL); }

/* A rejected request: a precise error and nothing left to free. */
static void check_error(const vx_oai_error *e) {
    check(e->status == 400 || e->status == 413, "error status is 400 or 413");
    check(e->message[0] != 0, "error has a message");
    check(str_ok(e->message), "error message is valid UTF-8");
    check(str_ok(e->param), "error param is valid UTF-8");
    check(e->type && !strcmp(e->type, "invalid_request_error"), "error type");
    char *j = vx_oai_error_json(e);
    check(is_json(j), "error JSON parses");
    free(j);
}

static bool float_in(float x, float lo, float hi) { return isfinite(x) && x >= lo && x <= hi; }

/* Renders a response and a chunk for the request and checks both parse. */
static void check_response(const vx_oai_request *r, const vx_vocab *v) {
    vx_oai_logprob lp[2];
    memset(lp, 0, sizeof lp);
    lp[0].token = r->n_prompt_ids ? r->prompt_ids[0] : 0;
    lp[0].logprob = -INFINITY;
    lp[0].n_top = r->top_logprobs < 2 ? r->top_logprobs : 2;
    lp[1].logprob = NAN;
    const char *text = r->prompt ? r->prompt : r->messages_json;
    vx_oai_meta m = {.kind = r->kind, .id = "chatcmpl-x", .created = 1, .model = r->model, .vocab = v};
    vx_oai_choice c = {.index = 0, .text = text, .text_len = text ? strlen(text) : 0, .finish_reason = "stop",
                       .lp = r->logprobs ? lp : NULL, .n_lp = 2};
    vx_oai_usage u = {1, 2, 0};
    char *j = vx_oai_response_json(&m, &c, 1, &u);
    check(is_json(j), "response JSON parses");
    free(j);
    vx_sbuf b = {0};
    vx_oai_chunk(&b, &m, &c, false, r->include_usage);
    check(b.p && b.len > 8 && !strncmp(b.p, "data: ", 6), "chunk framing");
    b.p[b.len - 2] = 0; /* the "\n\n" */
    check(is_json(b.p + 6), "chunk JSON parses");
    vx_sbuf_free(&b);
}

/* Tools: valid names; every format's forced call has a schema that
 * compiles (the engine compiles it again); the response with calls. */
static void check_tools(const vx_oai_request *r) {
    check(!r->tools_json || (r->kind == VX_OAI_CHAT && r->n_tools >= 1 && r->n_tools <= VX_OAI_MAX_TOOLS), "tools");
    check((r->tool_choice == VX_OAI_TOOLS_NAMED) == (r->tool_name != NULL), "tool_name iff named");
    if (!r->tools_json) return;
    for (vx_tool_format f = VX_TOOL_FMT_HERMES; f <= VX_TOOL_FMT_MISTRAL; f++) {
        char *prefix = NULL, *schema = NULL;
        check(vx_tool_force(f, r->tools_json, r->tool_name, r->parallel_tool_calls, &prefix, &schema) == VX_OK,
              "vx_tool_force accepts validated tools");
        vx_jschema *js = NULL;
        char msg[256];
        check(schema && vx_jschema_compile(schema, strlen(schema), &js, msg, sizeof msg) == VX_OK, "forced schema compiles");
        vx_jschema_free(js);
        free(prefix);
        free(schema);
    }
    /* harmony names the function in the call's header: one function only */
    char *prefix = NULL, *schema = NULL;
    const vx_status hs = vx_tool_force(VX_TOOL_FMT_HARMONY, r->tools_json, r->tool_name, r->parallel_tool_calls,
                                       &prefix, &schema);
    if (r->tool_name || r->n_tools == 1) {
        vx_jschema *js = NULL;
        char msg[256];
        check(hs == VX_OK && prefix && strstr(prefix, "to=functions.") && schema &&
                  vx_jschema_compile(schema, strlen(schema), &js, msg, sizeof msg) == VX_OK,
              "harmony: a forced call of one function");
        vx_jschema_free(js);
    } else {
        check(hs == VX_EUNSUPPORTED && !prefix && !schema, "harmony: any of several refused");
    }
    free(prefix);
    free(schema);
    vx_tool_call call = {.name = r->tool_names[0], .arguments = "{\"a\":1}", .id = "call_x"};
    vx_oai_meta m = {.kind = VX_OAI_CHAT, .id = "chatcmpl-x", .created = 1, .model = r->model, .vocab = g_pair[0].v};
    vx_oai_choice c = {.index = 0, .text = "", .finish_reason = "tool_calls", .calls = &call, .n_calls = 1};
    vx_oai_usage u = {1, 2, 0};
    char *j = vx_oai_response_json(&m, &c, 1, &u);
    check(is_json(j), "response with tool calls parses");
    free(j);
}

/* Tool-call parsing of a generated text, in every format: the text
 * streamed in three pieces comes out as the released bytes and then the
 * held ones, and the held part has the whole text's calls. */
static void check_tool_parse(const char *s, size_t n) {
    static char *const names[2] = {"get_weather", "f"};
    const size_t a = n ? (unsigned char)s[0] % (n + 1) : 0, b = a + (n > a ? (unsigned char)s[n - 1] % (n - a + 1) : 0);
    for (vx_tool_format f = VX_TOOL_FMT_HERMES; f <= VX_TOOL_FMT_MISTRAL; f++) {
        vx_tool_calls whole;
        check(vx_tool_parse(f, s, n, names, 2, 0, &whole) == VX_OK, "vx_tool_parse");
        for (int32_t i = 0; i < whole.n; i++) check(whole.v[i].name[0] && whole.v[i].id[0], "a call has a name and id");
        vx_tool_calls_free(&whole);
        const char *why = tool_stream_check(f, s, n, a, b, names, 2);
        check(!why[0], why);
    }
    /* harmony (gpt-oss): the parser's stream against the whole reply */
    vx_tool_calls whole;
    check(vx_tool_parse(VX_TOOL_FMT_HARMONY, s, n, names, 2, 0, &whole) == VX_OK, "vx_tool_parse harmony");
    for (int32_t i = 0; i < whole.n; i++) check(whole.v[i].name[0] && whole.v[i].id[0], "a harmony call has a name and id");
    vx_tool_calls_free(&whole);
    const size_t cuts[2] = {a, b};
    for (int k = 0; k < 4; k++) {
        const char *why = harmony_stream_check(s, n, k & 1, k >> 1, cuts, 2);
        check(!why[0], why);
    }
}

/* An accepted request: every field within its documented range. */
static void check_request(const vx_oai_request *r, vx_oai_kind kind, int32_t n_vocab, const vx_vocab *v) {
    check(r->kind == kind, "kind");
    check(!r->model || str_ok(r->model), "model is valid UTF-8");
    check(!r->suffix || (kind == VX_OAI_COMPLETION && r->suffix[0] && str_ok(r->suffix)), "suffix: a completion's, non-empty");
    if (r->suffix && v && (r->prompt || r->n_prompt_ids <= 0 || r->prompt_ids[0] < vx_vocab_n_tokens(v))) {
        vx_token *t = NULL, pre, suf, mid;
        int32_t n = 0;
        vx_oai_error fe;
        const bool fim = vx_vocab_fim(v, &pre, &suf, &mid);
        if (vx_oai_fim_prompt(v, r, &t, &n, &fe)) {
            check(fim && n >= 3 && t[n - 1] == mid, "FIM prompt ends with MID");
        } else {
            check(!fim ? fe.status == 400 && !strcmp(fe.param, "suffix") : fe.status == 500, "FIM refusal");
            check(!t, "refused FIM prompt holds nothing");
        }
        free(t);
    }
    if (kind == VX_OAI_CHAT) {
        check(r->messages_json && r->n_messages >= 1, "messages present");
        check(!r->prompt && !r->prompt_ids, "chat has no prompt");
        cJSON *m = cJSON_Parse(r->messages_json);
        check(cJSON_IsArray(m) && cJSON_GetArraySize(m) == r->n_messages, "messages_json is the array");
        const cJSON *msg;
        cJSON_ArrayForEach(msg, m) {
            check(cJSON_IsObject(msg), "message is an object");
            int n_role = 0, n_content = 0;
            const cJSON *f;
            cJSON_ArrayForEach(f, msg) {
                if (!strcmp(f->string, "role")) {
                    n_role++;
                    check(cJSON_IsString(f) && f->valuestring[0], "role is a non-empty string");
                }
                if (!strcmp(f->string, "content")) {
                    n_content++;
                    check(cJSON_IsString(f), "content is a string");
                }
            }
            check(n_role == 1 && n_content == 1, "one role and one content per message");
        }
        cJSON_Delete(m);
        check(r->max_tokens >= -1, "max_tokens");
        check(!r->echo, "chat has no echo");
    } else {
        check(!r->messages_json, "completion has no messages");
        check((r->prompt != NULL) != (r->prompt_ids != NULL), "exactly one prompt form");
        if (r->prompt) check(r->prompt_len == strlen(r->prompt) && str_ok(r->prompt), "prompt text");
        if (r->prompt_ids) {
            check(r->n_prompt_ids > 0, "prompt ids non-empty");
            for (int32_t i = 0; i < r->n_prompt_ids; i++)
                check(r->prompt_ids[i] >= 0 && r->prompt_ids[i] < n_vocab, "prompt id in range");
        }
        check(r->max_tokens >= 0, "max_tokens");
    }
    check(r->n >= 1 && r->n <= VX_OAI_MAX_N, "n");
    const vx_sampler_params *sp = &r->sampling;
    check(float_in(sp->temperature, 0, 2), "temperature");
    check(float_in(sp->top_p, 0, 1), "top_p");
    check(float_in(sp->min_p, 0, 1), "min_p");
    check(float_in(sp->presence_penalty, -2, 2), "presence_penalty");
    check(float_in(sp->frequency_penalty, -2, 2), "frequency_penalty");
    check(float_in(sp->repeat_penalty, 0, 10) && sp->repeat_penalty > 0, "repeat_penalty");
    check(sp->top_k >= -1, "top_k");
    check(sp->penalty_last_n >= -1, "penalty_last_n");
    check(sp->logit_bias == r->logit_bias && sp->n_logit_bias == r->n_logit_bias, "logit_bias linked");
    check(r->n_logit_bias >= 0 && r->n_logit_bias <= VX_OAI_MAX_BIAS, "logit_bias count");
    check(r->n_logit_bias == 0 || r->logit_bias != NULL, "logit_bias array");
    for (int32_t i = 0; i < r->n_logit_bias; i++) {
        const vx_logit_bias *b = &r->logit_bias[i];
        check(b->token >= 0 && b->token < n_vocab, "logit_bias id in range");
        check(float_in(b->bias, -100, 100) || b->bias == -INFINITY, "logit_bias value");
    }
    check(r->n_stop >= 0 && r->n_stop <= VX_OAI_MAX_STOP, "stop count");
    for (int32_t i = 0; i < r->n_stop; i++) {
        check(r->stop[i] != NULL, "stop string set");
        size_t n = strlen(r->stop[i]);
        check(n >= 1 && n <= VX_OAI_MAX_STOP_LEN && str_ok(r->stop[i]), "stop string length");
    }
    for (int32_t i = r->n_stop; i < VX_OAI_MAX_STOP; i++) check(r->stop[i] == NULL, "unused stop slots");
    check(r->top_logprobs >= 0 && r->top_logprobs <= VX_OAI_MAX_TOP, "top_logprobs");
    check(r->logprobs || r->top_logprobs == 0, "top_logprobs needs logprobs");
    check(!r->include_usage || r->stream, "include_usage needs stream");
    check_tools(r);

    /* the engine must accept what the parser accepted (the server caps the
     * penalty window at n_ctx the same way) */
    vx_sampler_params p = *sp;
    if (p.penalty_last_n > 4096) p.penalty_last_n = 4096;
    vx_sampler *s = NULL;
    check(vx_sampler_init(&p, n_vocab, &s) == VX_OK, "vx_sampler_init accepts the request");
    vx_sampler_free(s);
    check_response(r, v);
}

static bool zeroed(const vx_oai_request *r) {
    static const vx_oai_request zero;
    return memcmp(r, &zero, sizeof zero) == 0;
}

/* ----------------------------------------------------------------- modes */

static void check_ids(const vx_token *t, int32_t n, const vx_vocab *v);

/* server_embed.c's run needs an engine, which this target does not
 * build: its two calls resolve here and are never made */
vx_status vx_engine_submit(vx_engine *e, const vx_request_params *rp, uint64_t *id, char *err, size_t err_size) {
    (void)e, (void)rp, (void)id, (void)err, (void)err_size;
    die("vx_engine_submit", "not in this target");
    return VX_EINTERNAL;
}
void vx_engine_cancel(vx_engine *e, uint64_t id) { (void)e, (void)id; }

/* POST /v1/embeddings' parser (n_ctx 64, n_embd 32): accepted inputs are
 * non-empty, within the context and the vocabulary, and render to JSON
 * (floats or base64) with random vectors; rejected ones leave nothing. */
static void embed_request(const vx_vocab *v, const char *body, size_t len, bool legacy, int ollama) {
    vx_oai_embed_request q;
    vx_oai_error e;
    memset(&e, 0x5a, sizeof e);
    if (!vx_oai_parse_embeddings(body, len, v, 64, 32, legacy, &q, &e)) {
        check_error(&e);
        check(q.inputs == NULL && q.n_inputs == 0 && q.model == NULL, "rejected embeddings request holds nothing");
        return;
    }
    check(q.n_inputs >= 1 && q.n_inputs <= VX_OAI_MAX_INPUTS, "inputs counted");
    check(q.dimensions >= 0 && q.dimensions <= 32 && q.normalize >= -1, "dimensions, normalize");
    int64_t total = 0;
    for (int32_t i = 0; i < q.n_inputs; i++) {
        check(q.n_tokens[i] >= 1 && q.n_tokens[i] <= 64, "input within the context");
        check_ids(q.inputs[i], q.n_tokens[i], v);
        total += q.n_tokens[i];
    }
    check(total == q.n_tokens_total, "token total");
    float *vecs = malloc((size_t)q.n_inputs * 32 * sizeof *vecs);
    if (vecs) {
        for (size_t i = 0; i < (size_t)q.n_inputs * 32; i++) vecs[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
        q.ollama = ollama;
        char *j = vx_oai_embeddings_json(&q, q.model ? q.model : "m", vecs, 32);
        check(j && is_json(j), "embeddings JSON parses");
        free(j);
        free(vecs);
    }
    vx_oai_embed_request_free(&q);
}

/* ollama's API (kind: chat, generate, embed, embeddings): a translated
 * request goes through the OpenAI parser as in the server; what either
 * refuses carries an error that also renders as ollama's {"error"}; an
 * accepted one renders to ollama's reply objects. */
static void ollama_request(const vx_vocab *v, int kind, const char *body, size_t len) {
    vx_oai_error e;
    memset(&e, 0x5a, sizeof e);
    if (kind >= 2) {
        char *oai = NULL;
        bool empty;
        if (vx_ollama_embed_body(body, len, kind == 3, &oai, &empty, &e)) {
            if (!empty) embed_request(v, oai, strlen(oai), false, kind - 1);
        } else {
            check_error(&e);
            check(!oai, "rejected embed body holds nothing");
        }
        free(oai);
        return;
    }
    vx_ollama_request o;
    if (!vx_ollama_translate(kind ? VX_OLLAMA_GENERATE : VX_OLLAMA_CHAT, body, len, vx_vocab_n_tokens(v), &o, &e)) {
        check_error(&e);
        char *j = vx_ollama_error_json(&e);
        check(j && is_json(j), "ollama error JSON parses");
        free(j);
        check(!o.oai_body && !o.context && !o.model, "rejected ollama request holds nothing");
        return;
    }
    check(o.load_only || (o.oai_body && is_json(o.oai_body)), "translated body is JSON");
    check(o.max_tokens >= -1, "num_predict");
    check_ids(o.context, o.n_context, v);
    vx_oai_request r;
    memset(&r, 0x5a, sizeof r);
    if (!o.load_only && vx_oai_parse_request(o.oai_kind, o.oai_body, o.oai_len, vx_vocab_n_tokens(v), 0, &r, &e)) {
        check_request(&r, o.oai_kind, vx_vocab_n_tokens(v), v);
        vx_oai_logprob lp = {.token = 1, .logprob = -0.5f, .n_top = 1, .top_id = {2}, .top_logprob = {-1.0f}};
        const vx_tool_call call = {.name = r.model ? r.model : (char *)"f", .arguments = r.prompt ? r.prompt : (char *)"{}"};
        const vx_token ctx[2] = {1, 2};
        vx_ollama_reply rep = {.kind = o.kind, .model = r.model, .text = r.prompt, .text_len = r.prompt ? r.prompt_len : 0,
                               .thinking = r.model, .thinking_len = r.model ? strlen(r.model) : 0, .calls = &call,
                               .n_calls = 1, .lp = &lp, .n_lp = 1, .vocab = v, .done_reason = "stop",
                               .context = ctx, .n_context = 2};
        vx_sbuf b = {0};
        vx_ollama_reply_json(&b, &rep);
        check(!b.oom && b.len && b.p[b.len - 1] == '\n', "ollama reply ends its line");
        if (b.p) b.p[b.len - 1] = 0;
        check(b.p && is_json(b.p), "ollama reply parses");
        vx_sbuf_free(&b);
        vx_oai_request_free(&r);
    } else if (!o.load_only) {
        check_error(&e);
    }
    vx_ollama_request_free(&o);
}

/* llama-server's /completion (infill false) or /infill: the translation,
 * the OpenAI parser as in the server, the replies' JSON. */
static void lcpp_request(const vx_vocab *v, bool infill, int sizes, const char *body, size_t len) {
    static const int32_t ctx[4] = {8, 64, 512, 4096}, batch[2] = {16, 512};
    vx_oai_error e;
    memset(&e, 0x5a, sizeof e);
    vx_lcpp_request l;
    memset(&l, 0x5a, sizeof l);
    if (!vx_lcpp_translate(infill ? VX_LCPP_INFILL : VX_LCPP_COMPLETION, body, len, v, ctx[sizes & 3],
                           batch[(sizes >> 2) & 1], &l, &e)) {
        check_error(&e);
        check(!l.oai_body && l.n_fields == 0, "rejected llama-server request holds nothing");
        return;
    }
    check(l.oai_body && is_json(l.oai_body), "translated body is JSON");
    check(l.max_tokens >= -1 && l.n_probs >= 0 && l.n_probs <= VX_OAI_MAX_TOP && l.n_fields <= VX_LCPP_MAX_FIELDS,
          "n_predict, n_probs, response_fields");
    vx_oai_request r;
    memset(&r, 0x5a, sizeof r);
    if (vx_oai_parse_request(VX_OAI_COMPLETION, l.oai_body, l.oai_len, vx_vocab_n_tokens(v), 0, &r, &e)) {
        check_request(&r, VX_OAI_COMPLETION, vx_vocab_n_tokens(v), v);
        r.max_tokens = l.max_tokens;
        vx_oai_logprob lp = {.token = 1, .logprob = -0.5f, .n_top = 1, .top_id = {2}, .top_logprob = {-1.0f}};
        const vx_token toks[2] = {1, 2};
        vx_lcpp_reply rep = {.lreq = &l, .req = &r, .model = r.model, .text = r.prompt,
                             .text_len = r.prompt ? r.prompt_len : 0, .tokens = toks, .n_tokens = 2, .lp = &lp,
                             .n_lp = 1, .vocab = v, .stop_type = "word", .stopping_word = r.n_stop ? r.stop[0] : "",
                             .prompt = r.prompt, .prompt_len = r.prompt ? r.prompt_len : 0, .n_predicted = 2,
                             .n_evaluated = 3, .prompt_ms = 1, .predicted_ms = 2};
        for (int final = 0; final < 2; final++) {
            vx_sbuf b = {0};
            rep.final = final;
            vx_lcpp_reply_json(&b, &rep);
            check(!b.oom && b.p && is_json(b.p), "llama-server reply parses");
            vx_sbuf_free(&b);
        }
        vx_oai_request_free(&r);
    } else {
        check_error(&e);
    }
    vx_lcpp_request_free(&l);
}

static void mode_request(uint8_t opt, const char *body, size_t len) {
    const vx_vocab *v = g_pair[0].v;
    if ((opt & 48) == 48) {
        lcpp_request(v, opt & 1, (opt >> 1) & 7, body, len);
        return;
    }
    if (opt & 16) {
        ollama_request(v, opt & 3, body, len);
        return;
    }
    if (opt & 32) {
        embed_request(v, body, len, opt & 1, 0);
        return;
    }
    static const int32_t vocabs[3] = {1, 7, 512};
    int32_t n_vocab = ((opt >> 2) & 3) == 3 ? vx_vocab_n_tokens(v) : vocabs[(opt >> 2) & 3];
    vx_oai_error e;
    memset(&e, 0x5a, sizeof e); /* a missed field shows as garbage */
    int kind = opt & 3;
    if (kind < 2) {
        vx_oai_request r;
        memset(&r, 0x5a, sizeof r);
        if (vx_oai_parse_request((vx_oai_kind)kind, body, len, n_vocab, 0, &r, &e)) {
            check_request(&r, (vx_oai_kind)kind, n_vocab, v);
            vx_oai_request_free(&r);
            check(zeroed(&r), "freed request is zeroed");
        } else {
            check_error(&e);
            check(zeroed(&r), "rejected request holds nothing");
        }
        return;
    }
    char *j = kind == 2 ? vx_oai_tokenize_json(v, body, len, &e) : vx_oai_detokenize_json(v, body, len, &e);
    if (j) check(is_json(j), "(de)tokenize JSON parses");
    else check_error(&e);
    free(j);
}

static void check_ids(const vx_token *t, int32_t n, const vx_vocab *v) {
    for (int32_t i = 0; i < n; i++) check(t[i] >= 0 && t[i] < vx_vocab_n_tokens(v), "prompt token in range");
}

static void mode_chat(uint8_t opt, const char *payload, size_t len) {
    const pairing *pr = &g_pair[opt & 3];
    vx_oai_error e;
    memset(&e, 0x5a, sizeof e);
    vx_token *t = NULL;
    int32_t n = -1;
    if (opt & 4) {
        char *msgs = malloc(len + 1);
        if (!msgs) return;
        memcpy(msgs, payload, len);
        msgs[len] = 0;
        if (vx_oai_chat_prompt(pr->t, pr->v, msgs, &t, &n, &e)) check_ids(t, n, pr->v);
        else check(e.status == 400 && !strcmp(e.param, "messages") && str_ok(e.message), "chat prompt error");
        free(msgs);
        free(t);
        return;
    }
    vx_oai_request r;
    if (!vx_oai_parse_request(VX_OAI_CHAT, payload, len, vx_vocab_n_tokens(pr->v), 0, &r, &e)) {
        check_error(&e);
        return;
    }
    /* as the server: the rendering with tools and chat_template_kwargs,
     * then whether it leaves a thought open, then the tokens */
    char *text = NULL;
    size_t cont = 0;
    if (vx_oai_request_render(pr->t, pr->v, &r, (opt & 8) ? "{\"enable_thinking\":false}" : NULL, &text, &cont, &e)) {
        check(cont <= strlen(text), "the continued content lies in the text");
        (void)vx_reasoning_open_at_end(text, strlen(text));
        (void)vx_reasoning_prefill(text + cont, strlen(text) - cont);
        if (vx_oai_chat_tokenize(pr->v, text, r.tools_json ? "<tool_call>\n" : NULL, &t, &n, &e)) check_ids(t, n, pr->v);
        else check_error(&e);
    } else {
        check(e.status == 400 && !strcmp(e.param, "messages") && str_ok(e.message), "chat prompt error");
    }
    free(text);
    free(t);
    vx_oai_request_free(&r);
}

/* Feeds the stream in chunks (sizes from seed; 0 = whole, 1 = bytes). */
static void run_filter(char *const *stops, int32_t n_stop, const char *s, size_t n, uint32_t seed, int how,
                       vx_sbuf *out) {
    vx_text_filter f;
    vx_text_filter_init(&f, stops, n_stop);
    size_t pos = 0;
    bool stopped = false;
    while (pos < n && !stopped) {
        size_t k = n - pos;
        if (how == 1) k = 1;
        if (how == 2) {
            seed = seed * 1103515245u + 12345u;
            k = 1 + (seed >> 16) % 7;
            if (k > n - pos) k = n - pos;
        }
        stopped = vx_text_filter_feed(&f, s + pos, k, out);
        pos += k;
    }
    if (!stopped) vx_text_filter_finish(&f, out);
    else check(vx_text_filter_feed(&f, "x", 1, out), "stays stopped");
    vx_text_filter_free(&f);
}

static void mode_filter(const uint8_t *data, size_t size) {
    if (size < 2) return;
    int32_t want = data[1] % 5, n_stop = 0;
    uint32_t seed = data[1] / 5u;
    char *stops[VX_OAI_MAX_STOP];
    bool stops_valid = true;
    const char *p = (const char *)data + 2, *end = (const char *)data + size;
    while (n_stop < want) {
        const char *z = memchr(p, 0, (size_t)(end - p));
        if (!z) break;
        size_t sl = (size_t)(z - p);
        if (sl >= 1 && sl <= VX_OAI_MAX_STOP_LEN) {
            stops[n_stop] = strndup(p, sl);
            if (!vx_utf8_valid(p, sl, NULL)) stops_valid = false;
            n_stop++;
        } else {
            want--; /* the parser drops empty stop strings */
        }
        p = z + 1;
    }
    size_t n = (size_t)(end - p);

    vx_sbuf out[3] = {{0}, {0}, {0}};
    for (int how = 0; how < 3; how++) run_filter(stops, n_stop, p, n, seed, how, &out[how]);
    for (int how = 1; how < 3; how++)
        check(out[how].len == out[0].len && (!out[0].len || !memcmp(out[how].p, out[0].p, out[0].len)),
              "the same output for every chunking");
    for (int32_t i = 0; i < n_stop; i++)
        check(!out[0].len || !memmem(out[0].p, out[0].len, stops[i], strlen(stops[i])), "no stop string in output");

    if (stops_valid) {
        /* stop strings are valid UTF-8 (the parser's guarantee): an invalid
         * one could match inside a character and cut it */
        check(vx_utf8_valid(out[0].p, out[0].len, NULL), "output is valid UTF-8");
        /* reference: the stop string that ends first, the longest on a tie */
        vx_sbuf s = {0};
        vx_utf8_sanitize(&s, p, n);
        size_t best_end = SIZE_MAX, best_start = s.len;
        for (int32_t i = 0; i < n_stop; i++) {
            size_t sl = strlen(stops[i]);
            const char *h = s.len ? memmem(s.p, s.len, stops[i], sl) : NULL;
            if (!h) continue;
            size_t st = (size_t)(h - s.p);
            if (st + sl < best_end || (st + sl == best_end && st < best_start)) {
                best_end = st + sl;
                best_start = st;
            }
        }
        check(out[0].len == best_start && (!best_start || !memcmp(out[0].p, s.p, best_start)),
              "output matches the reference");
        vx_sbuf_free(&s);
    }
    for (int i = 0; i < 3; i++) vx_sbuf_free(&out[i]);
    for (int32_t i = 0; i < n_stop; i++) free(stops[i]);
}

/* The reasoning split of a generated text, both ways the prompt may end:
 * the parts lie inside the text, and the stream cut in three pieces gives
 * them exactly. */
static void check_reasoning(const char *s, size_t n) {
    const size_t cuts[2] = {n ? (unsigned char)s[0] % (n + 1) : 0, 0};
    const size_t b = cuts[0] + (n > cuts[0] ? (unsigned char)s[n - 1] % (n - cuts[0] + 1) : 0);
    const size_t both[2] = {cuts[0], b};
    for (int open = 0; open < 2; open++) {
        vx_reasoning_parts p;
        vx_reasoning_split(s, n, open, &p);
        check(p.r_off + p.r_len <= n && p.c_off + p.c_len == n && (p.thought || (p.c_off == 0 && !p.r_len)),
              "reasoning parts inside the text");
        const char *why = reasoning_stream_check(s, n, open, both, 2);
        check(!why[0], why);
    }
}

static void mode_utf8(const char *s, size_t n) {
    check_tool_parse(s, n);
    check_reasoning(s, n);
    vx_sbuf b = {0};
    vx_utf8_sanitize(&b, s, n);
    check(vx_utf8_valid(b.p, b.len, NULL), "sanitized text is valid UTF-8");
    if (vx_utf8_valid(s, n, NULL)) check(b.len == n && (!n || !memcmp(b.p, s, n)), "identity on valid UTF-8");
    else check(b.len > 0 && b.len <= 3 * n, "replacements");
    /* the response JSON carries the sanitized text exactly */
    vx_oai_meta m = {.kind = VX_OAI_COMPLETION, .id = "cmpl-x", .created = 1, .model = "m", .vocab = g_pair[0].v};
    vx_oai_choice c = {.index = 0, .text = s, .text_len = n, .finish_reason = "length"};
    vx_oai_usage u = {0, 0, 0};
    char *j = vx_oai_response_json(&m, &c, 1, &u);
    cJSON *root = cJSON_Parse(j);
    check(root != NULL, "response JSON parses");
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0);
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(ch, "text");
    check(cJSON_IsString(text), "text is a string");
    /* cJSON strings end at an escaped NUL: compare up to the first one */
    size_t cmp = b.len;
    const char *nul = b.len ? memchr(b.p, 0, b.len) : NULL;
    if (nul) cmp = (size_t)(nul - b.p);
    check(strlen(text->valuestring) == cmp && (!cmp || !memcmp(text->valuestring, b.p, cmp)), "text round trip");
    cJSON_Delete(root);
    free(j);
    vx_sbuf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > (1 << 16)) return 0;
    if (!g_pair[0].v) LLVMFuzzerInitialize(NULL, NULL);
    uint8_t mode = data[0] & 3, opt = data[0] >> 2;
    /* an exact-size copy, not NUL-terminated, so over-reads are caught */
    size_t n = size - 1;
    char *body = malloc(n ? n : 1);
    if (!body) return 0;
    memcpy(body, data + 1, n);
    switch (mode) {
    case 0: mode_request(opt, body, n); break;
    case 1: mode_chat(opt, body, n); break;
    case 2: mode_filter(data, size); break;
    default: mode_utf8(body, n); break;
    }
    free(body);
    return 0;
}
