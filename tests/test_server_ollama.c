/*
 * test_server_ollama.c - ollama's API layer without a network: the
 * translation of /api/chat, /api/generate and /api/embed bodies into the
 * OpenAI requests that mean the same (checked through
 * vx_oai_parse_request's result: sampling, limits, formats, think, tools),
 * what is refused and why, and the reply, error and model JSON shapes
 * (parsed back with cJSON).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server_embed.h"
#include "server_ollama.h"
#include "testutil.h"

#define N_VOCAB 512

/* Translates body and parses the result as vx serve does; false (e set)
 * when either refuses it. */
static bool translate(vx_ollama_kind kind, const char *body, vx_ollama_request *o, vx_oai_request *q,
                      vx_oai_error *e) {
    memset(e, 0, sizeof *e);
    memset(q, 0, sizeof *q);
    if (!vx_ollama_translate(kind, body, strlen(body), N_VOCAB, o, e)) return false;
    if (o->load_only) return true;
    if (!vx_oai_parse_request(o->oai_kind, o->oai_body, o->oai_len, N_VOCAB, 0, q, e)) {
        vx_ollama_request_free(o);
        return false;
    }
    q->max_tokens = o->max_tokens;
    return true;
}

static void done(vx_ollama_request *o, vx_oai_request *q) {
    vx_ollama_request_free(o);
    vx_oai_request_free(q);
}

/* body is refused with status, the message naming what. */
static void expect_refused(int line, vx_ollama_kind kind, const char *body, int status, const char *what) {
    vx_ollama_request o;
    vx_oai_request q;
    vx_oai_error e;
    const bool ok = translate(kind, body, &o, &q, &e);
    vx_test_checks++;
    if (ok || e.status != status || !strstr(e.message, what)) {
        vx_test_failures++;
        fprintf(stderr, "test_server_ollama.c:%d: %s\n  expected %d naming '%s', got %s %d: %s\n", line, body, status,
                what, ok ? "success" : "error", e.status, e.message);
    }
    if (ok) done(&o, &q);
}
#define REFUSED(kind, body, status, what) expect_refused(__LINE__, kind, body, status, what)

static void test_chat(void) {
    vx_ollama_request o;
    vx_oai_request q;
    vx_oai_error e;
    /* ollama's defaults: streaming, temperature 0.8, top_k 40, top_p 0.9,
     * min_p 0, repeat_penalty 1.1 over 64 tokens, no token limit */
    CHECK(translate(VX_OLLAMA_CHAT, "{\"model\":\"llama3.2\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &o,
                    &q, &e));
    CHECK(q.stream && q.max_tokens == -1 && q.n == 1);
    CHECK(fabsf(q.sampling.temperature - 0.8f) < 1e-6f && q.sampling.top_k == 40);
    CHECK(fabsf(q.sampling.top_p - 0.9f) < 1e-6f && q.sampling.min_p == 0.0f);
    CHECK(fabsf(q.sampling.repeat_penalty - 1.1f) < 1e-6f && q.sampling.penalty_last_n == 64);
    CHECK(q.model && !strcmp(q.model, "llama3.2") && o.model && !strcmp(o.model, "llama3.2"));
    CHECK(q.n_messages == 1 && strstr(q.messages_json, "\"hi\""));
    CHECK(o.oai_kind == VX_OAI_CHAT && !q.json_object && !q.json_schema && q.reasoning == VX_OAI_REASONING_DEFAULT);
    done(&o, &q);
    /* options win over the defaults; the ones vx has no use for are ignored */
    CHECK(translate(VX_OLLAMA_CHAT,
                    "{\"stream\":false,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"options\":{"
                    "\"temperature\":0,\"top_k\":5,\"top_p\":0.5,\"min_p\":0.1,\"repeat_penalty\":1.0,"
                    "\"repeat_last_n\":8,\"presence_penalty\":0.5,\"frequency_penalty\":0.25,\"seed\":42,"
                    "\"num_predict\":17,\"stop\":[\"a\",\"bc\"],\"num_ctx\":8192,\"num_thread\":4,\"mirostat\":2}}",
                    &o, &q, &e));
    CHECK(!q.stream && q.max_tokens == 17 && q.sampling.temperature == 0.0f && q.sampling.top_k == 5);
    CHECK(q.sampling.top_p == 0.5f && fabsf(q.sampling.min_p - 0.1f) < 1e-6f && q.sampling.repeat_penalty == 1.0f);
    CHECK(q.sampling.penalty_last_n == 8 && q.sampling.presence_penalty == 0.5f);
    CHECK(q.sampling.frequency_penalty == 0.25f && q.sampling.seed == 42);
    CHECK(q.n_stop == 2 && !strcmp(q.stop[0], "a") && !strcmp(q.stop[1], "bc"));
    done(&o, &q);
    /* num_predict -1, -2 and 0: no limit (ollama's runner limits from 1 on) */
    for (int i = 0; i <= 2; i++) {
        char body[160];
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"options\":{\"num_predict\":-%d}}",
                 i);
        CHECK(translate(VX_OLLAMA_CHAT, body, &o, &q, &e) && q.max_tokens == -1);
        done(&o, &q);
    }
    /* format: JSON mode, a schema */
    CHECK(translate(VX_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"format\":\"json\"}", &o, &q,
                    &e));
    CHECK(q.json_object && !q.json_schema);
    done(&o, &q);
    CHECK(translate(VX_OLLAMA_CHAT,
                    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"format\":{\"type\":\"object\","
                    "\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}}",
                    &o, &q, &e));
    CHECK(!q.json_object && q.json_schema && strstr(q.json_schema, "\"integer\""));
    done(&o, &q);
    CHECK(translate(VX_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"format\":\"\"}", &o, &q, &e));
    CHECK(!q.json_object && !q.json_schema);
    done(&o, &q);
    /* think: split or not, and the templates' enable_thinking */
    CHECK(translate(VX_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"think\":true}", &o, &q, &e));
    CHECK(q.reasoning == VX_OAI_REASONING_SPLIT && q.template_kwargs && strstr(q.template_kwargs, "true"));
    done(&o, &q);
    CHECK(translate(VX_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"think\":\"low\"}", &o, &q,
                    &e));
    CHECK(q.reasoning == VX_OAI_REASONING_SPLIT && q.template_kwargs &&
          strstr(q.template_kwargs, "\"reasoning_effort\":\"low\"")); /* gpt-oss's levels */
    done(&o, &q);
    CHECK(translate(VX_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"think\":false}", &o, &q, &e));
    CHECK(q.reasoning == VX_OAI_REASONING_NONE && q.template_kwargs && strstr(q.template_kwargs, "false"));
    done(&o, &q);
    /* tools, tool calls with object arguments, thinking in the history */
    CHECK(translate(VX_OLLAMA_CHAT,
                    "{\"messages\":[{\"role\":\"user\",\"content\":\"w?\"},{\"role\":\"assistant\",\"content\":\"\","
                    "\"thinking\":\"hmm\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{\"c\":1}}}]},"
                    "{\"role\":\"tool\",\"content\":\"ok\",\"tool_name\":\"f\"}],\"tools\":[{\"type\":\"function\","
                    "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}]}",
                    &o, &q, &e));
    CHECK(q.n_tools == 1 && !strcmp(q.tool_names[0], "f") && q.n_messages == 3);
    /* as reasoning_content (Qwen3's templates read it), and, for gpt-oss's, as thinking again */
    CHECK(strstr(q.messages_json, "\"reasoning_content\":\"hmm\"") && strstr(q.messages_json, "\"thinking\":\"hmm\""));
    CHECK(strstr(q.messages_json, "\"tool_name\":\"f\""));
    done(&o, &q);
    /* logprobs */
    CHECK(translate(VX_OLLAMA_CHAT,
                    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,\"top_logprobs\":3}", &o,
                    &q, &e));
    CHECK(q.logprobs && q.top_logprobs == 3);
    done(&o, &q);
    /* nothing to generate: load */
    const char *loads[] = {"{\"model\":\"m\"}", "{\"messages\":[]}", "{\"messages\":null}"};
    for (size_t i = 0; i < sizeof loads / sizeof loads[0]; i++) {
        CHECKF(translate(VX_OLLAMA_CHAT, loads[i], &o, &q, &e) && o.load_only, "%s", loads[i]);
        done(&o, &q);
    }
    REFUSED(VX_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"images\":[\"aGk=\"]}]}", 400,
            "messages[0].images");
    REFUSED(VX_OLLAMA_CHAT, "{\"messages\":\"hi\"}", 400, "'messages'");
    REFUSED(VX_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":\"yes\"}", 400, "stream");
    REFUSED(VX_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"model\":3}", 400, "model");
    REFUSED(VX_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"options\":[]}", 400, "options");
    REFUSED(VX_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"options\":{\"num_predict\":1.5}}",
            400, "num_predict");
    REFUSED(VX_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"options\":{\"temperature\":\"hot\"}}",
            400, "temperature");
    REFUSED(VX_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"options\":{\"top_k\":1.5}}", 400,
            "top_k");
    REFUSED(VX_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"format\":\"yaml\"}", 400, "format");
    REFUSED(VX_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"format\":{\"type\":\"object\","
                            "\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"x\"}}}}", 400, "pattern");
    REFUSED(VX_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"think\":\"max\"}", 400, "think");
    REFUSED(VX_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":1}", 400, "logprobs");
    REFUSED(VX_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"options\":{\"temperature\":1e309}}",
            400, "'temperature'"); /* not dropped as the null cJSON would print */
    REFUSED(VX_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"format\":{\"maxItems\":-1e999}}",
            400, "'maxItems'");
    REFUSED(VX_OLLAMA_CHAT, "{\"messages\": [", 400, "JSON");
    REFUSED(VX_OLLAMA_CHAT, "[1]", 400, "object");
}

static void test_generate(void) {
    vx_ollama_request o;
    vx_oai_request q;
    vx_oai_error e;
    /* the prompt as a user message after the system text, through the template */
    CHECK(translate(VX_OLLAMA_GENERATE, "{\"prompt\":\"Why?\",\"system\":\"Be short.\",\"stream\":false}", &o, &q, &e));
    CHECK(o.oai_kind == VX_OAI_CHAT && q.kind == VX_OAI_CHAT && q.n_messages == 2 && !q.stream);
    CHECK(strstr(q.messages_json, "\"system\"") && strstr(q.messages_json, "\"Why?\"") && q.max_tokens == -1);
    done(&o, &q);
    /* raw: a completion of the prompt as it is, with no limit (OpenAI's default would be 16) */
    CHECK(translate(VX_OLLAMA_GENERATE, "{\"prompt\":\"<s>[INST] x [/INST]\",\"raw\":true,\"system\":\"ignored\"}", &o,
                    &q, &e));
    CHECK(o.oai_kind == VX_OAI_COMPLETION && q.kind == VX_OAI_COMPLETION && q.prompt &&
          !strcmp(q.prompt, "<s>[INST] x [/INST]") && q.max_tokens == -1);
    done(&o, &q);
    CHECK(translate(VX_OLLAMA_GENERATE, "{\"prompt\":\"x\",\"raw\":true,\"logprobs\":true,\"top_logprobs\":2}", &o, &q,
                    &e));
    CHECK(q.logprobs && q.top_logprobs == 2);
    done(&o, &q);
    /* context: the ids, checked against the vocabulary */
    CHECK(translate(VX_OLLAMA_GENERATE, "{\"prompt\":\"x\",\"context\":[1,2,511]}", &o, &q, &e));
    CHECK(o.n_context == 3 && o.context[0] == 1 && o.context[2] == 511);
    done(&o, &q);
    /* no prompt and no system text is a load, with a context too (ollama
     * looks at the texts); a system text alone is a turn */
    CHECK(translate(VX_OLLAMA_GENERATE, "{\"prompt\":\"\",\"raw\":true,\"context\":[5]}", &o, &q, &e) && o.load_only);
    done(&o, &q);
    CHECK(translate(VX_OLLAMA_GENERATE, "{\"system\":\"s\"}", &o, &q, &e) && !o.load_only && q.n_messages == 2);
    done(&o, &q);
    REFUSED(VX_OLLAMA_GENERATE, "{\"prompt\":\"x\",\"raw\":true,\"think\":\"garbage\"}", 400, "think");
    CHECK(translate(VX_OLLAMA_GENERATE, "{\"model\":\"m\",\"keep_alive\":\"5m\"}", &o, &q, &e) && o.load_only);
    CHECK(!o.unload);
    done(&o, &q);
    const char *unloads[] = {"{\"keep_alive\":0}", "{\"keep_alive\":\"0\"}", "{\"keep_alive\":\"0s\"}",
                             "{\"keep_alive\":\"0m\"}", "{\"keep_alive\":\"0.0h\"}", "{\"keep_alive\":\"0ms\"}"};
    for (size_t i = 0; i < 6; i++) {
        CHECKF(translate(VX_OLLAMA_GENERATE, unloads[i], &o, &q, &e) && o.load_only && o.unload, "%s", unloads[i]);
        done(&o, &q);
    }
    CHECK(translate(VX_OLLAMA_GENERATE, "{\"prompt\":\"x\",\"keep_alive\":0}", &o, &q, &e) && !o.unload);
    done(&o, &q);
    REFUSED(VX_OLLAMA_GENERATE, "{\"prompt\":\"x\",\"context\":[1,512]}", 400, "context");
    REFUSED(VX_OLLAMA_GENERATE, "{\"prompt\":\"x\",\"context\":\"1,2\"}", 400, "context");
    /* suffix: fill in the middle, as an OpenAI completion with a suffix */
    CHECK(translate(VX_OLLAMA_GENERATE, "{\"prompt\":\"def f(\",\"suffix\":\"    return 1\",\"system\":\"s\"}", &o, &q,
                    &e));
    CHECK(o.oai_kind == VX_OAI_COMPLETION && q.prompt && !strcmp(q.prompt, "def f(") && q.suffix &&
          !strcmp(q.suffix, "    return 1") && q.max_tokens == -1);
    done(&o, &q);
    REFUSED(VX_OLLAMA_GENERATE, "{\"prompt\":\"x\",\"suffix\":7}", 400, "suffix");
    /* raw: the prompt as it is, the suffix unused (as ollama) */
    CHECK(translate(VX_OLLAMA_GENERATE, "{\"prompt\":\"x\",\"suffix\":\"y\",\"raw\":true}", &o, &q, &e));
    CHECK(o.oai_kind == VX_OAI_COMPLETION && !q.suffix && !strcmp(q.prompt, "x"));
    done(&o, &q);
    const char *loads2[] = {"{\"keep_alive\":\"5m\"}", "{\"keep_alive\":\"0x\"}", "{\"keep_alive\":-1}",
                            "{\"keep_alive\":\"\"}"};
    for (size_t i = 0; i < 4; i++) {
        CHECKF(translate(VX_OLLAMA_GENERATE, loads2[i], &o, &q, &e) && o.load_only && !o.unload, "%s", loads2[i]);
        done(&o, &q);
    }
    REFUSED(VX_OLLAMA_GENERATE, "{\"prompt\":\"x\",\"template\":\"{{ .Prompt }}\"}", 400, "template");
    REFUSED(VX_OLLAMA_GENERATE, "{\"prompt\":\"x\",\"images\":[\"aGk=\"]}", 400, "images");
    REFUSED(VX_OLLAMA_GENERATE, "{\"prompt\":7}", 400, "prompt");
    REFUSED(VX_OLLAMA_GENERATE, "{\"prompt\":\"x\",\"raw\":1}", 400, "raw");
    REFUSED(VX_OLLAMA_GENERATE, "{\"prompt\":\"x\",\"raw\":true,\"logprobs\":true,\"top_logprobs\":\"2\"}", 400,
            "top_logprobs");
    /* empty strings for suffix/template/images are what clients send for "none" */
    CHECK(translate(VX_OLLAMA_GENERATE, "{\"prompt\":\"x\",\"suffix\":\"\",\"template\":\"\",\"images\":[]}", &o, &q, &e));
    done(&o, &q);
}

static void test_embed_bodies(void) {
    vx_oai_error e;
    char *b = NULL;
    bool empty = true;
    const char *body = "{\"model\":\"m\",\"input\":[\"a\",\"b\"],\"dimensions\":8}";
    CHECK(vx_ollama_embed_body(body, strlen(body), false, &b, &empty, &e));
    cJSON *j = b ? cJSON_Parse(b) : NULL;
    CHECK(j && cJSON_GetArraySize(cJSON_GetObjectItem(j, "input")) == 2);
    CHECK(j && cJSON_GetObjectItem(j, "dimensions")->valueint == 8);
    CHECK(j && cJSON_IsTrue(cJSON_GetObjectItem(j, "truncate"))); /* ollama's default */
    cJSON_Delete(j);
    free(b);
    CHECK(vx_ollama_embed_body("{\"input\":\"a\",\"truncate\":false}", 30, false, &b, &empty, &e) && !empty);
    j = b ? cJSON_Parse(b) : NULL;
    CHECK(j && cJSON_IsFalse(cJSON_GetObjectItem(j, "truncate")));
    cJSON_Delete(j);
    free(b);
    /* the older /api/embeddings: one prompt, not normalized */
    CHECK(vx_ollama_embed_body("{\"prompt\":\"hello\"}", 18, true, &b, &empty, &e));
    j = b ? cJSON_Parse(b) : NULL;
    CHECK(j && !strcmp(cJSON_GetObjectItem(j, "input")->valuestring, "hello"));
    CHECK(j && cJSON_GetObjectItem(j, "embd_normalize")->valueint == -1);
    cJSON_Delete(j);
    free(b);
    const char *bad[] = {"{\"input\":\"a\",\"dimensions\":1e400}", "{\"input\":[\"a\",[1,2]]}", "{\"input\":5}", "{\"input\":\"a\",\"truncate\":1}",
                         "{\"input\":\"a\",\"model\":[]}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        b = NULL;
        CHECKF(!vx_ollama_embed_body(bad[i], strlen(bad[i]), false, &b, &empty, &e) && e.status == 400 && !b, "%s", bad[i]);
    }
    /* nothing to embed: no input, [], an empty prompt */
    const char *none[] = {"{}", "{\"input\":[]}", "{\"input\":null}"};
    for (size_t i = 0; i < 3; i++) {
        empty = false;
        CHECKF(vx_ollama_embed_body(none[i], strlen(none[i]), false, &b, &empty, &e) && empty, "%s", none[i]);
        free(b);
    }
    empty = false;
    CHECK(vx_ollama_embed_body("{\"prompt\":\"\"}", 13, true, &b, &empty, &e) && empty);
    free(b);
    b = NULL;
    CHECK(!vx_ollama_embed_body("{\"prompt\":[\"a\"]}", 16, true, &b, &empty, &e) && e.status == 400 && !b);
}

/* The reply object of r, parsed (its one line). */
static cJSON *reply(const vx_ollama_reply *r) {
    vx_sbuf b = {0};
    vx_ollama_reply_json(&b, r);
    CHECK(b.len > 0 && b.p[b.len - 1] == '\n' && !memchr(b.p, '\n', b.len - 1));
    cJSON *j = b.p ? cJSON_Parse(b.p) : NULL;
    CHECKF(j != NULL, "not JSON: %s", b.p);
    vx_sbuf_free(&b);
    return j;
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}

static void test_replies(void) {
    /* a streaming chat chunk: content so far, not done */
    vx_ollama_reply r = {.kind = VX_OLLAMA_CHAT, .model = "m", .text = "he\"llo", .text_len = 4};
    cJSON *j = reply(&r);
    const cJSON *msg = cJSON_GetObjectItem(j, "message");
    CHECK(!strcmp(str(j, "model"), "m") && cJSON_IsFalse(cJSON_GetObjectItem(j, "done")));
    CHECK(!strcmp(str(msg, "role"), "assistant") && !strcmp(str(msg, "content"), "he\"l"));
    CHECK(!cJSON_GetObjectItem(msg, "thinking") && !cJSON_GetObjectItem(j, "done_reason"));
    const char *ts = str(j, "created_at");
    CHECK(ts && strlen(ts) == 30 && ts[4] == '-' && ts[10] == 'T' && ts[19] == '.' && ts[29] == 'Z');
    cJSON_Delete(j);
    /* the final chat object: thinking, tool calls with object arguments, statistics */
    const vx_tool_call calls[2] = {{.name = "get_weather", .arguments = "{\"city\":\"Paris\",\"n\":[1,2]}"},
                                   {.name = "odd", .arguments = "not json"}};
    r = (vx_ollama_reply){.kind = VX_OLLAMA_CHAT, .model = "m", .text = "", .thinking = "why", .thinking_len = 3,
                          .calls = calls, .n_calls = 2, .done_reason = "stop", .total_ns = 3000, .prompt_ns = 1000,
                          .eval_ns = 2000, .prompt_count = 12, .eval_count = 5};
    j = reply(&r);
    msg = cJSON_GetObjectItem(j, "message");
    CHECK(!strcmp(str(msg, "thinking"), "why") && !strcmp(str(msg, "content"), ""));
    const cJSON *tc = cJSON_GetObjectItem(msg, "tool_calls");
    CHECK(cJSON_GetArraySize(tc) == 2);
    const cJSON *f0 = cJSON_GetObjectItem(cJSON_GetArrayItem(tc, 0), "function");
    const cJSON *args = cJSON_GetObjectItem(f0, "arguments");
    CHECK(!strcmp(str(f0, "name"), "get_weather") && cJSON_IsObject(args) && !strcmp(str(args, "city"), "Paris"));
    const cJSON *f1 = cJSON_GetObjectItem(cJSON_GetArrayItem(tc, 1), "function");
    CHECK(!strcmp(str(f1, "arguments"), "not json"));
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(j, "done")) && !strcmp(str(j, "done_reason"), "stop"));
    CHECK(cJSON_GetObjectItem(j, "total_duration")->valuedouble == 3000);
    CHECK(cJSON_GetObjectItem(j, "prompt_eval_count")->valueint == 12 && cJSON_GetObjectItem(j, "eval_count")->valueint == 5);
    CHECK(cJSON_GetObjectItem(j, "prompt_eval_duration")->valuedouble == 1000);
    CHECK(cJSON_GetObjectItem(j, "eval_duration")->valuedouble == 2000 && !cJSON_GetObjectItem(j, "context"));
    cJSON_Delete(j);
    /* generate: response, thinking at the top, context */
    const vx_token ctx[3] = {1, 7, 9};
    r = (vx_ollama_reply){.kind = VX_OLLAMA_GENERATE, .model = "m", .text = "ok", .text_len = 2, .thinking = "t",
                          .thinking_len = 1, .done_reason = "length", .context = ctx, .n_context = 3};
    j = reply(&r);
    CHECK(!strcmp(str(j, "response"), "ok") && !strcmp(str(j, "thinking"), "t") && !cJSON_GetObjectItem(j, "message"));
    const cJSON *c = cJSON_GetObjectItem(j, "context");
    CHECK(cJSON_GetArraySize(c) == 3 && cJSON_GetArrayItem(c, 1)->valueint == 7);
    CHECK(!strcmp(str(j, "done_reason"), "length"));
    cJSON_Delete(j);
    /* a NUL byte in the text is text (\u0000), not its end */
    r = (vx_ollama_reply){.kind = VX_OLLAMA_GENERATE, .model = "m", .text = "a\0b", .text_len = 3, .thinking = "\0",
                          .thinking_len = 1};
    vx_sbuf raw = {0};
    vx_ollama_reply_json(&raw, &r);
    CHECKF(raw.p && strstr(raw.p, "\"response\":\"a\\u0000b\"") && strstr(raw.p, "\"thinking\":\"\\u0000\""), "%s",
           raw.p);
    vx_sbuf_free(&raw);
    /* errors */
    vx_oai_error e;
    vx_oai_set_error(&e, 400, "x", "Bad \"thing\".");
    char *ej = vx_ollama_error_json(&e);
    j = ej ? cJSON_Parse(ej) : NULL;
    CHECK(j && !strcmp(str(j, "error"), "Bad \"thing\".") && cJSON_GetArraySize(j) == 1);
    cJSON_Delete(j);
    free(ej);
}

static void test_models(void) {
    vx_ollama_model m = {.name = "llama-3.2-1b", .arch = "llama", .n_params = 1235814400, .quant = "Q4_K_M",
                         .size = 807694464, .mtime = 1764522000, .n_ctx_train = 131072, .n_ctx = 4096,
                         .n_embd = 2048, .n_layer = 16, .template_src = "{{ x }}", .tools = true};
    char *t = vx_ollama_tags_json(&m, false);
    cJSON *j = t ? cJSON_Parse(t) : NULL;
    const cJSON *e0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "models"), 0);
    const cJSON *d = cJSON_GetObjectItem(e0, "details");
    CHECK(j && !strcmp(str(e0, "name"), "llama-3.2-1b") && !strcmp(str(e0, "model"), "llama-3.2-1b"));
    CHECK(!strcmp(str(e0, "modified_at"), "2025-11-30T17:00:00Z"));
    CHECK(cJSON_GetObjectItem(e0, "size")->valuedouble == 807694464.0 && strlen(str(e0, "digest")) == 64);
    CHECK(!strcmp(str(d, "family"), "llama") && !strcmp(str(d, "parameter_size"), "1.2B"));
    CHECK(!strcmp(str(d, "quantization_level"), "Q4_K_M") && !strcmp(str(d, "format"), "gguf"));
    CHECK(!cJSON_GetObjectItem(e0, "expires_at"));
    char *again = vx_ollama_tags_json(&m, false);
    CHECK(again && t && !strcmp(again, t)); /* the digest is stable */
    free(again);
    m.size++;
    again = vx_ollama_tags_json(&m, false);
    cJSON *k = again ? cJSON_Parse(again) : NULL;
    CHECK(k && strcmp(str(cJSON_GetArrayItem(cJSON_GetObjectItem(k, "models"), 0), "digest"), str(e0, "digest")));
    cJSON_Delete(k);
    free(again);
    cJSON_Delete(j);
    free(t);
    t = vx_ollama_tags_json(&m, true);
    j = t ? cJSON_Parse(t) : NULL;
    e0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "models"), 0);
    CHECK(j && cJSON_GetObjectItem(e0, "context_length")->valueint == 4096 && str(e0, "expires_at"));
    cJSON_Delete(j);
    free(t);
    t = vx_ollama_show_json(&m);
    j = t ? cJSON_Parse(t) : NULL;
    const cJSON *info = cJSON_GetObjectItem(j, "model_info"), *caps = cJSON_GetObjectItem(j, "capabilities");
    CHECK(j && !strcmp(str(j, "template"), "{{ x }}") && strstr(str(j, "modelfile"), "FROM llama-3.2-1b"));
    CHECK(cJSON_GetObjectItem(info, "llama.context_length")->valueint == 131072);
    CHECK(cJSON_GetObjectItem(info, "llama.block_count")->valueint == 16);
    CHECK(cJSON_GetObjectItem(info, "general.parameter_count")->valuedouble == 1235814400.0);
    CHECK(cJSON_GetArraySize(caps) == 2 && !strcmp(cJSON_GetArrayItem(caps, 1)->valuestring, "tools"));
    cJSON_Delete(j);
    free(t);
    vx_oai_error e;
    CHECK(vx_ollama_show_body("{\"model\":\"x\"}", 13, &e) && vx_ollama_show_body("{}", 2, &e));
    CHECK(!vx_ollama_show_body("{\"model\":", 9, &e) && e.status == 400);
    CHECK(!vx_ollama_show_body("{\"name\":1}", 10, &e) && e.status == 400 && strstr(e.message, "name"));
}

/* A vocabulary that adds BOS (DeepSeek-Coder's): BOS before PRE, once,
 * also when a prompt of ids starts with it. */
static void test_fim_bos(void) {
    vx_model_params mp = vx_model_default_params();
    mp.vocab_only = true;
    vx_model *m = NULL;
    char err[VX_ERRMSG_MAX];
    CHECKF(vx_model_load(vx_test_fixture_path("tokenizer/ggml-vocab-deepseek-coder.gguf"), &mp, &m, err, sizeof err) ==
               VX_OK,
           "%s", err);
    if (!m) return;
    const vx_vocab *v = vx_model_get_vocab(m);
    vx_token pre, suf, mid, *t = NULL;
    int32_t n = 0;
    vx_oai_request q;
    vx_oai_error e;
    CHECK(vx_vocab_fim(v, &pre, &suf, &mid) && vx_vocab_add_bos(v));
    const char *bodies[] = {"{\"prompt\":[32013,5,6],\"suffix\":\"x\"}", "{\"prompt\":[5,6],\"suffix\":\"x\"}"};
    for (int i = 0; i < 2; i++) {
        CHECK(vx_oai_parse_request(VX_OAI_COMPLETION, bodies[i], strlen(bodies[i]), vx_vocab_n_tokens(v), 0, &q, &e));
        CHECKF(vx_oai_fim_prompt(v, &q, &t, &n, &e) && n >= 6 && t[0] == vx_vocab_bos(v) && t[1] == pre && t[2] == 5 &&
                   t[3] == 6 && t[4] == suf && t[n - 1] == mid,
               "%s", bodies[i]);
        free(t);
        t = NULL;
        vx_oai_request_free(&q);
    }
    vx_model_free(m);
}

/* vx_oai_fim_prompt on a real vocabulary with FIM tokens (Qwen2's) and on
 * one without (Llama 2's SentencePiece). */
static void test_fim(void) {
    vx_model_params mp = vx_model_default_params();
    mp.vocab_only = true;
    vx_model *m = NULL;
    char err[VX_ERRMSG_MAX];
    CHECKF(vx_model_load(vx_test_fixture_path("tokenizer/ggml-vocab-qwen2.gguf"), &mp, &m, err, sizeof err) == VX_OK,
           "%s", err);
    if (!m) return;
    const vx_vocab *v = vx_model_get_vocab(m);
    vx_token pre, suf, mid;
    CHECK(vx_vocab_fim(v, &pre, &suf, &mid) && pre == 151659 && suf == 151661 && mid == 151660);
    vx_oai_request q;
    vx_oai_error e;
    memset(&e, 0, sizeof e);
    const char *body = "{\"prompt\":\"def f(<|im_start|>\",\"suffix\":\"  return 1\",\"max_tokens\":4}";
    CHECK(vx_oai_parse_request(VX_OAI_COMPLETION, body, strlen(body), vx_vocab_n_tokens(v), 0, &q, &e));
    vx_token *t = NULL, want[64];
    int32_t n = 0;
    CHECK(vx_oai_fim_prompt(v, &q, &t, &n, &e));
    /* PRE, the prefix's tokens (the control token's text as plain text), SUF, the suffix's, MID */
    int32_t w = 0;
    want[w++] = pre;
    w += vx_tokenize(v, "def f(<|im_start|>", -1, want + w, 60 - w, false, false);
    want[w++] = suf;
    w += vx_tokenize(v, "  return 1", -1, want + w, 60 - w, false, false);
    want[w++] = mid;
    CHECK(t && n == w && !memcmp(t, want, (size_t)w * sizeof *t));
    for (int32_t i = 1; t && i < n - 1; i++) CHECK(t[i] == suf || !vx_vocab_is_control(v, t[i]));
    free(t);
    vx_oai_request_free(&q);
    /* token ids as the prefix go in as they are */
    body = "{\"prompt\":[1,2,3],\"suffix\":\"x\"}";
    CHECK(vx_oai_parse_request(VX_OAI_COMPLETION, body, strlen(body), vx_vocab_n_tokens(v), 0, &q, &e));
    CHECK(vx_oai_fim_prompt(v, &q, &t, &n, &e) && n == 7 && t[0] == pre && t[1] == 1 && t[3] == 3 && t[4] == suf && t[6] == mid);
    free(t);
    vx_oai_request_free(&q);
    /* echo with a suffix: refused (the prompt is not the text before the reply) */
    body = "{\"prompt\":\"x\",\"suffix\":\"y\",\"echo\":true}";
    CHECK(!vx_oai_parse_request(VX_OAI_COMPLETION, body, strlen(body), vx_vocab_n_tokens(v), 0, &q, &e) && e.status == 400 &&
          !strcmp(e.param, "echo"));
    /* "" is no suffix; the chat API has none */
    body = "{\"prompt\":\"x\",\"suffix\":\"\"}";
    CHECK(vx_oai_parse_request(VX_OAI_COMPLETION, body, strlen(body), vx_vocab_n_tokens(v), 0, &q, &e) && !q.suffix);
    vx_oai_request_free(&q);
    vx_model_free(m);
    m = NULL;
    CHECKF(vx_model_load(vx_test_fixture_path("tokenizer/ggml-vocab-llama-spm.gguf"), &mp, &m, err, sizeof err) == VX_OK,
           "%s", err);
    if (!m) return;
    v = vx_model_get_vocab(m);
    CHECK(!vx_vocab_fim(v, &pre, &suf, &mid));
    test_fim_bos();
    body = "{\"prompt\":\"x\",\"suffix\":\"y\"}";
    CHECK(vx_oai_parse_request(VX_OAI_COMPLETION, body, strlen(body), vx_vocab_n_tokens(v), 0, &q, &e));
    CHECK(!vx_oai_fim_prompt(v, &q, &t, &n, &e) && e.status == 400 && !strcmp(e.param, "suffix") && !t);
    vx_oai_request_free(&q);
    vx_model_free(m);
}

int main(void) {
    test_chat();
    test_generate();
    test_embed_bodies();
    test_replies();
    test_models();
    test_fim();
    return vx_test_finish("test_server_ollama");
}
