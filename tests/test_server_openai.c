/*
 * test_server_openai.c - the OpenAI layer of `vx serve` without a network:
 * request parsing of every field (types, ranges, null, defaults), JSON and
 * UTF-8 errors with positions, the text filter (stop strings across chunk
 * boundaries, UTF-8 held until complete, checked against a one-shot
 * reference on random input), response/chunk/error JSON shapes, and the
 * tokenizer endpoints and chat prompt on the qwen2 fixture's vocabulary.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server_openai.h"
#include "testutil.h"

#define N_VOCAB 512

/* Parses body as kind; returns true on success. */
static bool parse(vx_oai_kind kind, const char *body, vx_oai_request *r, vx_oai_error *e) {
    memset(e, 0, sizeof *e);
    return vx_oai_parse_request(kind, body, strlen(body), N_VOCAB, 0, r, e);
}

/* Expects body to be rejected with 400 and the given param. */
static void expect_reject_at(int line, vx_oai_kind kind, const char *body, const char *param) {
    vx_oai_request r;
    vx_oai_error e;
    bool ok = parse(kind, body, &r, &e);
    vx_test_checks++;
    if (ok || e.status != 400 || (param && strcmp(e.param, param) != 0) || !e.message[0]) {
        vx_test_failures++;
        fprintf(stderr, "test_server_openai.c:%d: %s\n  expected 400 param '%s', got %s status %d param '%s': %s\n",
                line, body, param ? param : "(any)", ok ? "success" : "error", e.status, e.param, e.message);
    }
    if (ok) vx_oai_request_free(&r);
}
#define REJECT_CHAT(body, param) expect_reject_at(__LINE__, VX_OAI_CHAT, body, param)
#define REJECT_CMPL(body, param) expect_reject_at(__LINE__, VX_OAI_COMPLETION, body, param)

#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

static void test_utf8(void) {
    size_t bad = 99;
    CHECK(vx_utf8_valid("", 0, &bad));
    CHECK(vx_utf8_valid("abc \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", 15, &bad));
    CHECK(!vx_utf8_valid("ab\xC0\x80", 4, &bad) && bad == 2);          /* overlong */
    CHECK(!vx_utf8_valid("\xED\xA0\x80", 3, &bad) && bad == 0);        /* surrogate */
    CHECK(!vx_utf8_valid("x\xF4\x90\x80\x80", 5, &bad) && bad == 1);   /* > U+10FFFF */
    CHECK(!vx_utf8_valid("abc\xE2\x82", 5, &bad) && bad == 3);         /* truncated */
    CHECK(!vx_utf8_valid("\x80", 1, &bad) && bad == 0);                /* lone continuation */
    CHECK(!vx_utf8_valid("\xFF", 1, NULL));
    vx_sbuf b = {0};
    vx_utf8_sanitize(&b, "a\xE2\x82" "b\xFF" "c", 6);
    CHECKF(b.p && !strcmp(b.p, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c"), "sanitize: %s", b.p);
    vx_sbuf_free(&b);
    vx_utf8_sanitize(&b, "\xC3\xA9", 2);
    CHECK(b.p && !strcmp(b.p, "\xC3\xA9"));
    vx_sbuf_free(&b);
}

static void test_sbuf(void) {
    vx_sbuf b = {0};
    for (int i = 0; i < 1000; i++) vx_sbuf_addf(&b, "%d,", i);
    CHECK(b.len > 3000 && !b.oom && b.p[b.len] == 0);
    CHECK(!strncmp(b.p, "0,1,2,", 6));
    char big[600];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    size_t before = b.len;
    vx_sbuf_addf(&b, "%s", big); /* longer than the formatting fast path */
    CHECK(b.len == before + 599);
    char *p = vx_sbuf_take(&b);
    CHECK(p && b.p == NULL && b.len == 0);
    free(p);
    p = vx_sbuf_take(&b); /* empty buffer: an empty string, not NULL */
    CHECK(p && p[0] == 0);
    free(p);
}

static void test_errors(void) {
    vx_oai_error e;
    vx_oai_set_error(&e, 400, "temperature", "bad \"value\" %d", 3);
    char *j = vx_oai_error_json(&e);
    cJSON *root = j ? cJSON_Parse(j) : NULL;
    CHECKF(root != NULL, "error json: %s", j ? j : "(null)");
    cJSON *err = cJSON_GetObjectItemCaseSensitive(root, "error");
    CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(err, "message")) &&
          !strcmp(cJSON_GetObjectItemCaseSensitive(err, "message")->valuestring, "bad \"value\" 3"));
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(err, "type")->valuestring, "invalid_request_error"));
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(err, "param")->valuestring, "temperature"));
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(err, "code")));
    cJSON_Delete(root);
    free(j);
    vx_oai_set_error(&e, 500, NULL, "x");
    j = vx_oai_error_json(&e);
    CHECK(j && strstr(j, "\"type\":\"server_error\"") && strstr(j, "\"param\":null"));
    free(j);
    vx_oai_set_error(&e, 429, NULL, "x");
    CHECK(!strcmp(e.type, "rate_limit_error"));
    vx_sbuf b = {0};
    vx_oai_error_chunk(&b, &e);
    CHECK(b.p && !strncmp(b.p, "data: {\"error\":", 15) && b.len > 2 && !strcmp(b.p + b.len - 2, "\n\n"));
    vx_sbuf_free(&b);
}

static void test_json_errors(void) {
    vx_oai_request r;
    vx_oai_error e;
    CHECK(!parse(VX_OAI_CHAT, "{\"messages\": [1,\n  2,,]}", &r, &e));
    CHECKF(e.status == 400 && strstr(e.message, "line 2") && strstr(e.message, "column 5"), "%s", e.message);
    CHECK(!parse(VX_OAI_CHAT, "{\"a\":1} x", &r, &e));
    CHECKF(e.status == 400 && strstr(e.message, "byte 8"), "%s", e.message);
    CHECK(!parse(VX_OAI_CHAT, "{\"a\":", &r, &e));
    CHECKF(e.status == 400 && strstr(e.message, "byte 4"), "%s", e.message); /* cJSON points at the last byte */
    CHECK(!parse(VX_OAI_CHAT, "", &r, &e) && e.status == 400 && strstr(e.message, "empty"));
    CHECK(!parse(VX_OAI_CHAT, "[1]", &r, &e) && strstr(e.message, "object"));
    CHECK(!parse(VX_OAI_CHAT, "\"x\"", &r, &e) && strstr(e.message, "object"));
    CHECK(!parse(VX_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xC3\"}]}", &r, &e));
    CHECKF(strstr(e.message, "UTF-8") && strstr(e.message, "byte 39"), "%s", e.message);
    /* deep nesting: an error, not a stack overflow */
    size_t n = 200000;
    char *deep = malloc(2 * n + 16);
    if (deep) {
        strcpy(deep, "{\"x\":");
        memset(deep + 5, '[', n);
        memset(deep + 5 + n, ']', n);
        strcpy(deep + 5 + 2 * n, "}");
        CHECK(!parse(VX_OAI_CHAT, deep, &r, &e) && e.status == 400);
        CHECKF(strstr(e.message, "nested deeper than 1000 levels"), "%s", e.message);
        /* brackets inside strings do not count */
        memset(deep, 0, 2 * n + 16);
        strcpy(deep, "{\"x\":\"");
        memset(deep + 6, '[', 2000);
        strcpy(deep + 6 + 2000, "\",}");
        CHECK(!parse(VX_OAI_CHAT, deep, &r, &e) && e.status == 400);
        CHECKF(strstr(e.message, "syntax error"), "%s", e.message);
        free(deep);
    }
    /* a NUL inside the body is a JSON syntax error, not a truncation */
    const char nul_body[] = "{\"messages\":[]}\0{}";
    memset(&e, 0, sizeof e);
    CHECK(!vx_oai_parse_request(VX_OAI_CHAT, nul_body, sizeof nul_body - 1, N_VOCAB, 0, &r, &e) && e.status == 400);
    /* more messages than the context has tokens: refused before any copy;
     * as many: read */
    const char three[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"},"
                         "{\"role\":\"user\",\"content\":\"c\"}]}";
    memset(&e, 0, sizeof e);
    CHECK(!vx_oai_parse_request(VX_OAI_CHAT, three, sizeof three - 1, N_VOCAB, 2, &r, &e) && e.status == 400 &&
          e.code && !strcmp(e.code, "context_length_exceeded") && !strcmp(e.param, "messages") &&
          strstr(e.message, "you sent 3 messages"));
    CHECK(vx_oai_parse_request(VX_OAI_CHAT, three, sizeof three - 1, N_VOCAB, 3, &r, &e) && r.n_messages == 3);
    vx_oai_request_free(&r);
}

static void test_chat_fields(void) {
    vx_oai_request r;
    vx_oai_error e;
    /* defaults */
    CHECKF(parse(VX_OAI_CHAT, "{" MSG "}", &r, &e), "%s", e.message);
    vx_sampler_params d = vx_sampler_default_params();
    CHECK(r.kind == VX_OAI_CHAT && r.n == 1 && r.max_tokens == -1 && !r.stream && !r.logprobs && r.n_stop == 0);
    CHECK(r.model == NULL && r.sampling.temperature == d.temperature && r.sampling.seed == UINT64_MAX);
    CHECK(r.n_messages == 1 && r.messages_json && strstr(r.messages_json, "\"content\":\"hi\""));
    vx_oai_request_free(&r);

    /* every field */
    const char *all = "{\"model\":\"m1\"," MSG ",\"max_tokens\":7,\"temperature\":0.5,\"top_p\":0.9,"
                      "\"top_k\":12,\"min_p\":0.1,\"presence_penalty\":-1.5,\"frequency_penalty\":2,"
                      "\"repetition_penalty\":1.1,\"stop\":[\"a\",\"bc\",\"\"],\"seed\":42,\"n\":3,"
                      "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"logprobs\":true,"
                      "\"top_logprobs\":4,\"logit_bias\":{\"5\":10,\"7\":-100},\"user\":\"u\","
                      "\"ignore_eos\":true,\"unknown_field\":{\"x\":[1,2]},\"repeat_last_n\":32}";
    CHECKF(parse(VX_OAI_CHAT, all, &r, &e), "%s", e.message);
    CHECK(r.model && !strcmp(r.model, "m1"));
    CHECK(r.max_tokens == 7 && r.n == 3 && r.stream && r.include_usage && r.logprobs && r.top_logprobs == 4);
    CHECK(fabsf(r.sampling.temperature - 0.5f) < 1e-6f && fabsf(r.sampling.top_p - 0.9f) < 1e-6f);
    CHECK(r.sampling.top_k == 12 && fabsf(r.sampling.min_p - 0.1f) < 1e-6f);
    CHECK(r.sampling.presence_penalty == -1.5f && r.sampling.frequency_penalty == 2.0f);
    CHECK(fabsf(r.sampling.repeat_penalty - 1.1f) < 1e-6f && r.sampling.penalty_last_n == 32);
    CHECK(r.n_stop == 2 && !strcmp(r.stop[0], "a") && !strcmp(r.stop[1], "bc")); /* "" ignored */
    CHECK(r.sampling.seed == 42 && r.ignore_eos);
    CHECK(r.n_logit_bias == 2 && r.sampling.n_logit_bias == 2 && r.sampling.logit_bias == r.logit_bias);
    CHECK(r.logit_bias[0].token == 5 && r.logit_bias[0].bias == 10.0f);
    CHECK(r.logit_bias[1].token == 7 && isinf(r.logit_bias[1].bias) && r.logit_bias[1].bias < 0);
    vx_oai_request_free(&r);

    /* null means absent; max_completion_tokens wins; repeat_penalty alias; seed -1 random */
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"temperature\":null,\"stop\":null,\"max_tokens\":5,"
                "\"max_completion_tokens\":9,\"repeat_penalty\":1.3,\"seed\":-1,\"stream_options\":{\"include_usage\":true}}",
                &r, &e));
    CHECK(r.sampling.temperature == d.temperature && r.n_stop == 0 && r.max_tokens == 9);
    CHECK(fabsf(r.sampling.repeat_penalty - 1.3f) < 1e-6f && r.sampling.seed == UINT64_MAX);
    CHECK(!r.include_usage); /* only with stream */
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"stop\":\"END\",\"top_logprobs\":3,\"seed\":3.0,\"max_tokens\":0}", &r, &e));
    CHECK(r.n_stop == 1 && !strcmp(r.stop[0], "END") && r.top_logprobs == 0 && r.sampling.seed == 3);
    CHECK(r.max_tokens == 0);
    vx_oai_request_free(&r);

    /* content parts are joined; other fields of a message are kept */
    CHECK(parse(VX_OAI_CHAT, "{\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                "{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":null,\"name\":\"x\"}]}",
                &r, &e));
    cJSON *m = r.messages_json ? cJSON_Parse(r.messages_json) : NULL;
    CHECK(cJSON_GetArraySize(m) == 2 && r.n_messages == 2);
    cJSON *m0 = cJSON_GetArrayItem(m, 0), *m1 = cJSON_GetArrayItem(m, 1);
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(m0, "content")->valuestring, "a\nb"));
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(m1, "content")->valuestring, ""));
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(m1, "name")->valuestring, "x"));
    cJSON_Delete(m);
    vx_oai_request_free(&r);

    /* type errors and ranges */
    REJECT_CHAT("{}", "messages");
    REJECT_CHAT("{\"messages\":{}}", "messages");
    REJECT_CHAT("{\"messages\":[]}", "messages");
    REJECT_CHAT("{\"messages\":[1]}", "messages[0]");
    REJECT_CHAT("{\"messages\":[{\"content\":\"x\"}]}", "messages[0].role");
    REJECT_CHAT("{\"messages\":[{\"role\":5,\"content\":\"x\"}]}", "messages[0].role");
    REJECT_CHAT("{\"messages\":[{\"role\":\"\",\"content\":\"x\"}]}", "messages[0].role");
    REJECT_CHAT("{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages[0].content");
    REJECT_CHAT("{\"messages\":[{\"role\":\"user\",\"content\":[5]}]}", "messages[0].content[0]");
    REJECT_CHAT("{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"a\"}]}]}", "messages[0].content[0].type");
    REJECT_CHAT("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}", "messages[0].content[0].text");
    REJECT_CHAT("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", "messages[0].content[0].type");
    REJECT_CHAT("{\"model\":5," MSG "}", "model");
    REJECT_CHAT("{" MSG ",\"max_tokens\":\"5\"}", "max_tokens");
    REJECT_CHAT("{" MSG ",\"max_tokens\":-1}", "max_tokens");
    REJECT_CHAT("{" MSG ",\"max_tokens\":1.5}", "max_tokens");
    REJECT_CHAT("{" MSG ",\"max_tokens\":1e30}", "max_tokens");
    REJECT_CHAT("{" MSG ",\"max_tokens\":2147483648}", "max_tokens");
    REJECT_CHAT("{" MSG ",\"max_completion_tokens\":true}", "max_completion_tokens");
    REJECT_CHAT("{" MSG ",\"temperature\":\"hot\"}", "temperature");
    REJECT_CHAT("{" MSG ",\"temperature\":-0.1}", "temperature");
    REJECT_CHAT("{" MSG ",\"temperature\":2.5}", "temperature");
    REJECT_CHAT("{" MSG ",\"temperature\":1e400}", "temperature");
    REJECT_CHAT("{" MSG ",\"top_p\":1.5}", "top_p");
    REJECT_CHAT("{" MSG ",\"top_p\":[1]}", "top_p");
    REJECT_CHAT("{" MSG ",\"top_k\":-2}", "top_k");
    REJECT_CHAT("{" MSG ",\"top_k\":2.5}", "top_k");
    REJECT_CHAT("{" MSG ",\"min_p\":-1}", "min_p");
    REJECT_CHAT("{" MSG ",\"presence_penalty\":3}", "presence_penalty");
    REJECT_CHAT("{" MSG ",\"frequency_penalty\":-2.01}", "frequency_penalty");
    REJECT_CHAT("{" MSG ",\"repetition_penalty\":0}", "repetition_penalty");
    REJECT_CHAT("{" MSG ",\"repeat_penalty\":-1}", "repeat_penalty");
    REJECT_CHAT("{" MSG ",\"seed\":\"1\"}", "seed");
    REJECT_CHAT("{" MSG ",\"seed\":0.5}", "seed");
    REJECT_CHAT("{" MSG ",\"seed\":1e30}", "seed");
    REJECT_CHAT("{" MSG ",\"n\":0}", "n");
    REJECT_CHAT("{" MSG ",\"n\":9}", "n");
    REJECT_CHAT("{" MSG ",\"n\":1000000}", "n");
    REJECT_CHAT("{" MSG ",\"stream\":1}", "stream");
    REJECT_CHAT("{" MSG ",\"stream\":\"true\"}", "stream");
    REJECT_CHAT("{" MSG ",\"stream_options\":true}", "stream_options");
    REJECT_CHAT("{" MSG ",\"stream_options\":{\"include_usage\":1}}", "stream_options.include_usage");
    REJECT_CHAT("{" MSG ",\"stop\":5}", "stop");
    REJECT_CHAT("{" MSG ",\"stop\":[\"a\",5]}", "stop[1]");
    REJECT_CHAT("{" MSG ",\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\",\"12\","
                "\"13\",\"14\",\"15\",\"16\",\"17\"]}", "stop");
    REJECT_CHAT("{" MSG ",\"logprobs\":1}", "logprobs");
    REJECT_CHAT("{" MSG ",\"logprobs\":true,\"top_logprobs\":21}", "top_logprobs");
    REJECT_CHAT("{" MSG ",\"logprobs\":true,\"top_logprobs\":-1}", "top_logprobs");
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"response_format\":{\"type\":\"json_object\"}}", &r, &e) && r.json_object);
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"response_format\":{\"type\":\"text\"}}", &r, &e) && !r.json_object);
    vx_oai_request_free(&r);
    /* json_schema: the schema compiled at parse time; what the subset does not take is a 400 naming it */
    REJECT_CHAT("{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{}}}",
                "response_format.json_schema.schema");
    REJECT_CHAT("{" MSG ",\"response_format\":{\"type\":\"json_schema\"}}", "response_format.json_schema");
    REJECT_CHAT("{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"type\":"
                "\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"^x\"}}}}}}",
                "response_format.json_schema.schema");
    REJECT_CHAT("{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"type\":"
                "\"string\"}}}}", "response_format.json_schema.schema");
    REJECT_CHAT("{" MSG ",\"response_format\":{\"type\":\"yaml\"}}", "response_format");
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":"
                "\"p\",\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
                "\"integer\"}},\"required\":[\"a\"],\"additionalProperties\":false}}}}", &r, &e) &&
          r.json_schema && strstr(r.json_schema, "\"required\":[\"a\"]") && !r.json_object);
    vx_oai_request_free(&r);
    memset(&e, 0, sizeof e);
    CHECK(!vx_oai_parse_request(VX_OAI_CHAT, "{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
                                "{\"schema\":{\"type\":\"object\",\"properties\":{\"n\":{\"minimum\":1}}}}}}",
                                strlen("{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
                                       "{\"schema\":{\"type\":\"object\",\"properties\":{\"n\":{\"minimum\":1}}}}}}"),
                                N_VOCAB, 0, &r, &e) &&
          e.status == 400 && strstr(e.message, "'minimum'") && strstr(e.message, "/properties/n"));
    REJECT_CHAT("{" MSG ",\"response_format\":{}}", "response_format");
    /* grammar (llama-server's GBNF field): compiled at parse time, its error a 400 naming the line */
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"grammar\":\"root ::= [0-9]+\"}", &r, &e) && r.grammar &&
          !strcmp(r.grammar, "root ::= [0-9]+"));
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"grammar\":\"\"}", &r, &e) && !r.grammar); /* "": none (llama-server's default) */
    vx_oai_request_free(&r);
    REJECT_CHAT("{" MSG ",\"grammar\":5}", "grammar");
    REJECT_CHAT("{" MSG ",\"grammar\":\"root ::= x\"}", "grammar");
    REJECT_CHAT("{" MSG ",\"grammar\":\"root ::= [0-9]+\",\"response_format\":{\"type\":\"json_object\"}}", "grammar");
    memset(&e, 0, sizeof e);
    {
        static const char body[] = "{" MSG ",\"grammar\":\"root ::= \\\"a\\\"\\nb ::= [a-\"}";
        CHECK(!vx_oai_parse_request(VX_OAI_CHAT, body, strlen(body), N_VOCAB, 0, &r, &e) && e.status == 400 &&
              strstr(e.message, "line 2, column 7") && strstr(e.message, "closing ']'"));
    }
    REJECT_CHAT("{" MSG ",\"tools\":[{\"type\":\"function\"}]}", "tools[0].function");
    REJECT_CHAT("{" MSG ",\"tools\":{}}", "tools");
    REJECT_CHAT("{" MSG ",\"tools\":[{}],\"tool_choice\":\"auto\"}", "tools[0].type");
    REJECT_CHAT("{" MSG ",\"functions\":[{\"name\":\"f\"}]}", "functions");
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"response_format\":{\"type\":\"text\"},\"tools\":[]}", &r, &e));
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"tools\":[{}],\"tool_choice\":\"none\",\"response_format\":null}", &r, &e));
    vx_oai_request_free(&r);
    REJECT_CHAT("{" MSG ",\"logit_bias\":[1]}", "logit_bias");
    REJECT_CHAT("{" MSG ",\"logit_bias\":{\"x\":1}}", "logit_bias");
    REJECT_CHAT("{" MSG ",\"logit_bias\":{\"-1\":1}}", "logit_bias");
    REJECT_CHAT("{" MSG ",\"logit_bias\":{\"512\":1}}", "logit_bias");
    REJECT_CHAT("{" MSG ",\"logit_bias\":{\"1\":101}}", "logit_bias");
    REJECT_CHAT("{" MSG ",\"logit_bias\":{\"1\":\"a\"}}", "logit_bias");
    REJECT_CHAT("{" MSG ",\"logit_bias\":{\"99999999999\":1}}", "logit_bias");
    REJECT_CHAT("{" MSG ",\"ignore_eos\":\"yes\"}", "ignore_eos");
    /* a stop string over the length limit */
    char longstop[VX_OAI_MAX_STOP_LEN + 64];
    snprintf(longstop, sizeof longstop, "{" MSG ",\"stop\":\"%0*d\"}", VX_OAI_MAX_STOP_LEN + 1, 0);
    REJECT_CHAT(longstop, "stop");
    /* sixteen stop strings are fine */
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\","
                "\"12\",\"13\",\"14\",\"15\",\"16\"]}", &r, &e) && r.n_stop == 16);
    vx_oai_request_free(&r);
}

#define TOOL(name) "{\"type\":\"function\",\"function\":{\"name\":\"" name "\",\"parameters\":{\"type\":\"object\"}}}"

/* tools, tool_choice, parallel_tool_calls, and the tool calls of past
 * assistant messages as the template gets them */
static void test_tool_fields(void) {
    vx_oai_request r;
    vx_oai_error e;
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"tools\":[" TOOL("get_weather") "," TOOL("f-2") "]}", &r, &e));
    CHECK(r.n_tools == 2 && !strcmp(r.tool_names[0], "get_weather") && !strcmp(r.tool_names[1], "f-2") &&
          r.tool_choice == VX_OAI_TOOLS_AUTO && r.parallel_tool_calls && r.tools_json &&
          strstr(r.tools_json, "\"name\":\"f-2\""));
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"tools\":[" TOOL("a") "],\"tool_choice\":\"required\",\"parallel_tool_calls\":false}",
                &r, &e));
    CHECK(r.tool_choice == VX_OAI_TOOLS_REQUIRED && !r.parallel_tool_calls && !r.tool_name);
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"tools\":[" TOOL("a") "," TOOL("b") "],\"tool_choice\":{\"type\":\"function\","
                "\"function\":{\"name\":\"b\"}}}", &r, &e));
    CHECK(r.tool_choice == VX_OAI_TOOLS_NAMED && r.tool_name && !strcmp(r.tool_name, "b"));
    vx_oai_request_free(&r);
    /* the tools' text as the client wrote it (numbers as written), the
     * first "tools" of two; a NUL escape: printed again from the parse */
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"tools\" : [ {\"type\":\"function\",\"function\":{\"name\":\"a\",\"parameters\":"
                "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\",\"minimum\":1.0}}}}} ] ,\"tools\":[]}", &r, &e));
    CHECKF(r.tools_json && !strcmp(r.tools_json, "[ {\"type\":\"function\",\"function\":{\"name\":\"a\",\"parameters\":"
                                   "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\",\"minimum\":1.0}}}}} ]"),
           "%s", r.tools_json ? r.tools_json : "(null)");
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"description\":"
                "\"x\\u0000y\"}}]}", &r, &e));
    CHECKF(r.tools_json && strstr(r.tools_json, "\"description\":\"x\xEF\xBF\xBDy\""), "%s", r.tools_json ? r.tools_json : "(null)");
    vx_oai_request_free(&r);
    /* none, or no tools: a request without tools */
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"tools\":[" TOOL("a") "],\"tool_choice\":\"none\"}", &r, &e));
    CHECK(!r.tools_json && r.n_tools == 0);
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"tools\":null,\"tool_choice\":\"auto\"}", &r, &e) && !r.tools_json);
    vx_oai_request_free(&r);
    REJECT_CHAT("{" MSG ",\"tool_choice\":\"required\"}", "tool_choice");
    REJECT_CHAT("{" MSG ",\"tools\":[" TOOL("a") "],\"tool_choice\":\"always\"}", "tool_choice");
    REJECT_CHAT("{" MSG ",\"tools\":[" TOOL("a") "],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"b\"}}}",
                "tool_choice");
    REJECT_CHAT("{" MSG ",\"tools\":[" TOOL("a") "],\"tool_choice\":{\"type\":\"function\"}}", "tool_choice");
    REJECT_CHAT("{" MSG ",\"tools\":[" TOOL("a") "],\"tool_choice\":3}", "tool_choice");
    REJECT_CHAT("{" MSG ",\"tools\":[" TOOL("a") "," TOOL("a") "]}", "tools[1].function.name");
    REJECT_CHAT("{" MSG ",\"tools\":[" TOOL("a b") "]}", "tools[0].function.name");
    REJECT_CHAT("{" MSG ",\"tools\":[" TOOL("") "]}", "tools[0].function.name");
    REJECT_CHAT("{" MSG ",\"tools\":[" TOOL("x1234567890123456789012345678901234567890123456789012345678901234") "]}",
                "tools[0].function.name");
    REJECT_CHAT("{" MSG ",\"tools\":[{\"type\":\"code\",\"function\":{\"name\":\"a\"}}]}", "tools[0].type");
    REJECT_CHAT("{" MSG ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"parameters\":[]}}]}",
                "tools[0].function.parameters");
    REJECT_CHAT("{" MSG ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"description\":1}}]}",
                "tools[0].function.description");
    REJECT_CHAT("{" MSG ",\"tools\":[" TOOL("a") "],\"parallel_tool_calls\":1}", "parallel_tool_calls");
    REJECT_CHAT("{" MSG ",\"tools\":[" TOOL("a") "],\"tool_choice\":\"required\",\"response_format\":{\"type\":"
                "\"json_object\"}}", "tool_choice");
    {
        char body[16384];
        int o = snprintf(body, sizeof body, "{" MSG ",\"tools\":[");
        for (int i = 0; i < VX_OAI_MAX_TOOLS + 1; i++) o += snprintf(body + o, sizeof body - (size_t)o, "%s" TOOL("f%d"), i ? "," : "", i);
        snprintf(body + o, sizeof body - (size_t)o, "]}");
        REJECT_CHAT(body, "tools");
    }
    /* numbers keep their text; JSON that the strict reader refuses (a
     * trailing comma, trailing text) stays a string; a NUL escape goes
     * through the reader (U+FFFD) */
    CHECK(parse(VX_OAI_CHAT, "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"a\","
                "\"arguments\":\"{\\\"t\\\":1500.0,\\\"u\\\":1e-7}\"}},{\"function\":{\"name\":\"b\",\"arguments\":"
                "\"{\\\"x\\\":1,}\"}},{\"function\":{\"name\":\"c\",\"arguments\":\"{} x\"}},{\"function\":{\"name\":"
                "\"d\",\"arguments\":\"{\\\"s\\\":\\\"\\\\u0000\\\"}\"}}]}]}", &r, &e));
    CHECKF(r.messages_json && strstr(r.messages_json, "\"arguments\":{\"t\":1500.0,\"u\":1e-7}") &&
           strstr(r.messages_json, "\"arguments\":\"{\\\"x\\\":1,}\"") && strstr(r.messages_json, "\"arguments\":\"{} x\"") &&
           strstr(r.messages_json, "\"arguments\":{\"s\":\"\xEF\xBF\xBD\"}"),
           "%s", r.messages_json ? r.messages_json : "(null)");
    vx_oai_request_free(&r);
    /* a text completion cannot answer with calls */
    REJECT_CMPL("{\"prompt\":\"x\",\"tools\":[" TOOL("a") "]}", "tools");
    REJECT_CMPL("{\"prompt\":\"x\",\"functions\":5}", "functions");
    CHECK(parse(VX_OAI_COMPLETION, "{\"prompt\":\"x\",\"tools\":[" TOOL("a") "],\"tool_choice\":\"none\"}", &r, &e));
    vx_oai_request_free(&r);
    /* a past call's arguments string becomes the object it holds; other
     * strings and fields stay as they are */
    CHECK(parse(VX_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\","
                "\"content\":null,\"tool_calls\":[{\"id\":\"call1\",\"type\":\"function\",\"function\":{\"name\":\"a\","
                "\"arguments\":\"{\\\"x\\\": [1, \\\"y\\\"]}\"}},{\"id\":\"call2\",\"type\":\"function\",\"function\":"
                "{\"name\":\"b\",\"arguments\":\"not json\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"call1\","
                "\"content\":\"42\"}]}", &r, &e));
    CHECKF(r.messages_json && strstr(r.messages_json, "\"arguments\":{\"x\": [1, \"y\"]}") &&
           strstr(r.messages_json, "\"arguments\":\"not json\"") && strstr(r.messages_json, "\"tool_call_id\":\"call1\""),
           "%s", r.messages_json ? r.messages_json : "(null)");
    vx_oai_request_free(&r);
}

static void test_completion_fields(void) {
    vx_oai_request r;
    vx_oai_error e;
    CHECK(parse(VX_OAI_COMPLETION, "{\"prompt\":\"Once\"}", &r, &e));
    CHECK(r.prompt && !strcmp(r.prompt, "Once") && r.prompt_len == 4 && !r.prompt_ids && r.max_tokens == 16);
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_COMPLETION, "{\"prompt\":[1,5,7],\"logprobs\":3,\"echo\":true}", &r, &e));
    CHECK(!r.prompt && r.n_prompt_ids == 3 && r.prompt_ids[2] == 7 && r.logprobs && r.top_logprobs == 3 && r.echo);
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_COMPLETION, "{\"prompt\":[\"only\"],\"logprobs\":0}", &r, &e));
    CHECK(r.prompt && !strcmp(r.prompt, "only") && r.logprobs && r.top_logprobs == 0);
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_COMPLETION, "{\"prompt\":[[3,4]]}", &r, &e));
    CHECK(r.n_prompt_ids == 2 && r.prompt_ids[0] == 3);
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_COMPLETION, "{\"prompt\":\"\"}", &r, &e) && r.prompt && r.prompt_len == 0);
    vx_oai_request_free(&r);
    REJECT_CMPL("{}", "prompt");
    REJECT_CMPL("{\"prompt\":null}", "prompt");
    REJECT_CMPL("{\"prompt\":5}", "prompt");
    REJECT_CMPL("{\"prompt\":[]}", "prompt");
    REJECT_CMPL("{\"prompt\":[\"a\",\"b\"]}", "prompt");
    REJECT_CMPL("{\"prompt\":[1,\"b\"]}", "prompt");
    REJECT_CMPL("{\"prompt\":[1,512]}", "prompt[1]");
    REJECT_CMPL("{\"prompt\":[1,-1]}", "prompt[1]");
    REJECT_CMPL("{\"prompt\":[1,2.5]}", "prompt[1]");
    REJECT_CMPL("{\"prompt\":[[1,600]]}", "prompt[0][1]");
    REJECT_CMPL("{\"prompt\":[[]]}", "prompt[0]");
    REJECT_CMPL("{\"prompt\":[{}]}", "prompt[0]");
    REJECT_CMPL("{\"prompt\":\"a\",\"logprobs\":true}", "logprobs");
    REJECT_CMPL("{\"prompt\":\"a\",\"logprobs\":21}", "logprobs");
    REJECT_CMPL("{\"prompt\":\"a\",\"echo\":1}", "echo");
    REJECT_CMPL("{\"prompt\":\"a\",\"n\":9}", "n");
}

/* ------------------------------------------------------------ text filter */

/* Feeds text in pieces of the given sizes; returns the output (static). */
static const char *filter_run(const char *const *stops, int n_stop, const char *text, size_t len,
                              const size_t *cuts, int n_cuts, bool *stopped) {
    static vx_sbuf out;
    vx_sbuf_free(&out);
    vx_text_filter f;
    vx_text_filter_init(&f, (char *const *)stops, n_stop);
    size_t pos = 0;
    bool st = false;
    for (int i = 0; i <= n_cuts && !st; i++) {
        size_t end = i < n_cuts ? cuts[i] : len;
        if (end > len) end = len;
        if (end < pos) continue;
        st = vx_text_filter_feed(&f, text + pos, end - pos, &out);
        pos = end;
    }
    if (!st) vx_text_filter_finish(&f, &out);
    vx_text_filter_free(&f);
    if (stopped) *stopped = st;
    if (!out.p) vx_sbuf_add(&out, "", 0);
    return out.p ? out.p : "";
}

static void test_text_filter(void) {
    bool st;
    const char *s1[] = {"ll"};
    size_t c1[] = {2};
    CHECK(!strcmp(filter_run(s1, 1, "Hello", 5, c1, 1, &st), "He") && st);
    const char *s2[] = {"STOP"};
    size_t c2[] = {3, 6, 8};
    CHECK(!strcmp(filter_run(s2, 1, "abcSTxSTOPzz", 12, c2, 3, &st), "abcSTx") && st);
    CHECK(!strcmp(filter_run(s2, 1, "abcST", 5, c2, 1, &st), "abcST") && !st); /* released at the end */
    const char *s3[] = {"world", "lo w"};
    CHECK(!strcmp(filter_run(s3, 2, "hello world", 11, NULL, 0, &st), "hel") && st); /* earliest wins */
    const char *s4[] = {"aab"};
    size_t c4[] = {1, 2, 3};
    CHECK(!strcmp(filter_run(s4, 1, "aaab", 4, c4, 3, &st), "a") && st);
    CHECK(!strcmp(filter_run(s2, 1, "STOP", 4, NULL, 0, &st), "") && st);
    /* stream stops being read after the stop */
    vx_text_filter f;
    vx_sbuf out = {0};
    vx_text_filter_init(&f, (char *const *)s2, 1);
    CHECK(vx_text_filter_feed(&f, "xSTOPy", 6, &out));
    CHECK(vx_text_filter_feed(&f, "more", 4, &out));
    vx_text_filter_finish(&f, &out);
    CHECK(out.len == 1 && out.p[0] == 'x');
    vx_text_filter_free(&f);
    vx_sbuf_free(&out);

    /* UTF-8: nothing released until a character is complete */
    vx_text_filter_init(&f, NULL, 0);
    vx_text_filter_feed(&f, "a\xE2", 2, &out);
    CHECK(out.len == 1);
    vx_text_filter_feed(&f, "\x82", 1, &out);
    CHECK(out.len == 1);
    vx_text_filter_feed(&f, "\xAC" "b", 2, &out);
    CHECK(out.len == 5 && !memcmp(out.p, "a\xE2\x82\xAC" "b", 5));
    vx_text_filter_feed(&f, "\xF0\x9F", 2, &out);
    vx_text_filter_finish(&f, &out); /* cut short at the end: U+FFFD */
    CHECK(out.len == 8 && !memcmp(out.p + 5, "\xEF\xBF\xBD", 3));
    vx_text_filter_free(&f);
    vx_sbuf_free(&out);
    /* invalid bytes and interrupted sequences become U+FFFD */
    CHECK(!strcmp(filter_run(NULL, 0, "\xFF" "a\xC3" "b", 4, NULL, 0, &st), "\xEF\xBF\xBD" "a\xEF\xBF\xBD" "b"));
    /* a multi-byte stop string split across tokens inside characters */
    const char *s5[] = {"\xC3\xA9t\xC3\xA9"};
    size_t c5[] = {2, 3, 5, 6};
    CHECK(!strcmp(filter_run(s5, 1, "x\xC3\xA9t\xC3\xA9y", 8, c5, 4, &st), "x") && st);
    size_t c6[] = {1, 2};
    CHECK(!strcmp(filter_run(s5, 1, "\xC3\xA9t!", 4, c6, 2, &st), "\xC3\xA9t!") && !st);
}

/* Reference: sanitize all, cut before the stop string that ends first (the
 * longest of those that end at the same byte), as feeding byte by byte does. */
static void filter_reference(const char *const *stops, int n_stop, const char *text, size_t len, vx_sbuf *out) {
    vx_sbuf s = {0};
    vx_utf8_sanitize(&s, text, len);
    size_t cut = s.len, cut_end = SIZE_MAX;
    for (int i = 0; i < n_stop; i++) {
        size_t sl = strlen(stops[i]);
        const char *h = s.len ? memmem(s.p, s.len, stops[i], sl) : NULL;
        if (!h) continue;
        size_t at = (size_t)(h - s.p);
        if (at + sl < cut_end || (at + sl == cut_end && at < cut)) {
            cut = at;
            cut_end = at + sl;
        }
    }
    vx_sbuf_add(out, s.p ? s.p : "", cut);
    vx_sbuf_free(&s);
}

static void test_text_filter_random(void) {
    /* small alphabet with multi-byte and invalid bytes, so stops and
     * partial characters are frequent */
    static const char *alpha[] = {"a", "b", "ab", "\xC3\xA9", "\xE2\x82\xAC", "\xC3", "\xA9", "\x82", "\xFF", " "};
    /* " a" and "b" lie inside longer ones: the one that ends first wins */
    const char *stops_pool[] = {"ab a", "\xC3\xA9\x62" /* e-acute, b */, "bb", "\xE2\x82\xAC\xE2\x82\xAC", "a a a",
                                " a", "b"};
    uint64_t x = 12345;
    int mismatches = 0;
    for (int iter = 0; iter < 3000; iter++) {
        char text[256];
        size_t len = 0;
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int n_parts = 1 + (int)((x >> 33) % 30);
        for (int i = 0; i < n_parts; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            const char *p = alpha[(x >> 33) % (sizeof alpha / sizeof alpha[0])];
            memcpy(text + len, p, strlen(p));
            len += strlen(p);
        }
        const char *stops[3];
        int n_stop = (int)((x >> 20) % 4);
        for (int i = 0; i < n_stop; i++) stops[i] = stops_pool[(x >> (10 + 3 * i)) % 7];
        size_t cuts[16];
        int n_cuts = (int)((x >> 40) % 16);
        for (int i = 0; i < n_cuts; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            cuts[i] = len ? (size_t)((x >> 33) % (len + 1)) : 0;
        }
        /* cuts must be increasing */
        for (int i = 1; i < n_cuts; i++)
            if (cuts[i] < cuts[i - 1]) cuts[i] = cuts[i - 1];
        vx_sbuf want = {0};
        filter_reference(stops, n_stop, text, len, &want);
        const char *got = filter_run(stops, n_stop, text, len, cuts, n_cuts, NULL);
        const char *w = want.p ? want.p : "";
        if (strlen(got) != want.len || memcmp(got, w, want.len) != 0 || !vx_utf8_valid(got, strlen(got), NULL)) {
            if (mismatches++ < 3)
                fprintf(stderr, "filter mismatch (iter %d): got %zu bytes, want %zu\n", iter, strlen(got), want.len);
        }
        vx_sbuf_free(&want);
    }
    CHECKF(mismatches == 0, "%d random text-filter cases differ from the reference", mismatches);
}

/* Cases the libFuzzer target (tests/fuzz/fuzz_openai.c) found. */
static void test_fuzz_regressions(void) {
    vx_oai_request r;
    vx_oai_error e;
    bool st;
    /* stop strings inside longer ones: the one that ends first wins, however
     * the stream is cut ("abcd" fed whole used to give "" and byte by byte "ab") */
    const char *s1[] = {"abcd", "c"};
    size_t c1[] = {1, 2, 3};
    CHECK(!strcmp(filter_run(s1, 2, "xabcd", 5, NULL, 0, &st), "xab") && st);
    CHECK(!strcmp(filter_run(s1, 2, "xabcd", 5, c1, 3, &st), "xab") && st);
    const char *s2[] = {"c", "bc"}; /* both end at the same byte: the longer */
    CHECK(!strcmp(filter_run(s2, 2, "abcd", 4, NULL, 0, &st), "a") && st);
    const char *s3[] = {"", "zz"}; /* an empty stop string is ignored */
    CHECK(!strcmp(filter_run(s3, 2, "abzzc", 5, NULL, 0, &st), "ab") && st);
    CHECK(!strcmp(filter_run(s3, 1, "abc", 3, c1, 2, &st), "abc") && !st);

    /* a message's role and content given twice: the first counts, and the
     * template sees exactly that (its JSON reader keeps the last one) */
    CHECK(parse(VX_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"role\":5,"
                             "\"content\":[{\"type\":\"image_url\"}],\"name\":\"n\"}]}", &r, &e));
    cJSON *m = r.messages_json ? cJSON_Parse(r.messages_json) : NULL;
    cJSON *m0 = cJSON_GetArrayItem(m, 0);
    int n_role = 0, n_content = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, m0) {
        n_role += !strcmp(f->string, "role") && cJSON_IsString(f) && !strcmp(f->valuestring, "user");
        n_content += !strcmp(f->string, "content") && cJSON_IsString(f) && !strcmp(f->valuestring, "hi");
    }
    CHECKF(n_role == 1 && n_content == 1 && cJSON_GetArraySize(m0) == 3, "messages_json: %s", r.messages_json);
    cJSON_Delete(m);
    vx_oai_request_free(&r);
    REJECT_CHAT("{\"messages\":[{\"role\":null,\"role\":\"user\",\"content\":\"x\"}]}", "messages[0].role");

    /* what cJSON lets through: control bytes between tokens (it skips every
     * byte <= 0x20), numbers with a leading zero or a bare dot, and NUL in
     * strings ("n\u0000x" was read as the key "n", prompts were cut short:
     * a NUL in a key or a raw NUL byte is an error, \u0000 in a value U+FFFD) */
    static const struct {
        const char *body;
        size_t len;
        const char *what, *where;
    } bad[] = {
        {"{\"prompt\":\"a\",\x01\"n\":2}", 0, "control character", "byte 14"},
        {"{\"prompt\":\"a\",\"n\":1}\x00\x00\x00", 23, "control character", "byte 20"},
        {"{\"prompt\":\"a\",\"max_tokens\":\x00\x00\x02\x00 5}", 34, "control character", "byte 27"},
        {"{\"prompt\":\"a\",\"n\":01}", 0, "invalid number", "byte 18"},
        {"{\"prompt\":\"a\",\"n\":1.}", 0, "invalid number", "column 19"},
        {"{\"prompt\":\"a\",\"n\":-}", 0, "invalid number", "byte 18"},
        {"{\"prompt\":\"a\",\"n\":[1.5e]}", 0, "invalid number", "byte 19"},
        {"{\"prompt\":\"a\",\"n\\u0000x\":2}", 0, "NUL", "byte 16"},
        {"{\"prompt\":\"a\x00" "b\"}", 16, "NUL", "byte 12"},
        /* cJSON read a \u escape without four hex digits as a NUL */
        {"{\"prompt\":\"ab\\uZZZZc\"}", 0, "\\u escape", "byte 13"},
        {"{\"prompt\":\"ab\\u12\"}", 0, "\\u escape", "byte 13"},
        {"{\"prompt\":\"a\",\"n\\u1x\":2}", 0, "\\u escape", "byte 16"},
        {"{\"x\":01, \"prompt\":\"a\",,}", 0, "invalid number", "byte 5"}, /* the first error is reported */
        {"{\"prompt\":\"a\",,\"n\":01}", 0, "syntax error", "byte 15"}, /* cJSON's position */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t len = bad[i].len ? bad[i].len : strlen(bad[i].body);
        memset(&e, 0, sizeof e);
        bool ok = vx_oai_parse_request(VX_OAI_COMPLETION, bad[i].body, len, N_VOCAB, 0, &r, &e);
        CHECKF(!ok && e.status == 400 && !e.param[0] && strstr(e.message, "Invalid JSON") &&
                   strstr(e.message, bad[i].what) && strstr(e.message, bad[i].where),
               "case %zu: %s", i, ok ? "accepted" : e.message);
        if (ok) vx_oai_request_free(&r);
    }
    CHECK(parse(VX_OAI_COMPLETION, "{\"prompt\":\"a\\u0000b\\u0000\",\"n\":2}", &r, &e));
    CHECK(r.prompt && !strcmp(r.prompt, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD") && r.prompt_len == 8 && r.n == 2);
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\\u0000y\"}],\"stop\":\"\\u0000\"}", &r, &e));
    CHECK(r.messages_json && strstr(r.messages_json, "\"content\":\"x\xEF\xBF\xBDy\""));
    CHECK(r.n_stop == 1 && !strcmp(r.stop[0], "\xEF\xBF\xBD"));
    vx_oai_request_free(&r);
    /* a NUL after a syntax error: the syntax error is reported */
    REJECT_CMPL("{\"prompt\":\"a\\u0000\",,}", NULL);
    /* a body that ends after a comma in an object, in a buffer of exactly its
     * size (cJSON 1.7.15 read one byte past it; ASan builds with an
     * instrumented cJSON see it) */
    static const char comma[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"b\"},{\"role\":\"er\",";
    char *exact = malloc(sizeof comma - 1);
    if (exact) {
        memcpy(exact, comma, sizeof comma - 1);
        memset(&e, 0, sizeof e);
        CHECK(!vx_oai_parse_request(VX_OAI_CHAT, exact, sizeof comma - 1, N_VOCAB, 0, &r, &e) && e.status == 400 &&
              strstr(e.message, "Invalid JSON"));
        free(exact);
    }

    /* a quoted value cut short inside a character: the message stays UTF-8 */
    static const char *cut[] = {
        "{\"prompt\":\"a\",\"logit_bias\":{\"1\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9"
        "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\":1}}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"x\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC"
        "\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC"
        "\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC"
        "\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\"}]}]}",
    };
    for (int k = 0; k < 2; k++) {
        memset(&e, 0, sizeof e);
        CHECK(!vx_oai_parse_request((vx_oai_kind)(1 - k), cut[k], strlen(cut[k]), N_VOCAB, 0, &r, &e) && e.status == 400);
        CHECKF(e.message[0] && vx_utf8_valid(e.message, strlen(e.message), NULL), "not UTF-8: %s", e.message);
        CHECK(!strcmp(e.param, k ? "messages[0].content[0].type" : "logit_bias"));
    }
    vx_oai_set_error(&e, 400, NULL, "%s", "\xC3\xA9 and \xE2\x82 cut"); /* sanitized whatever the cause */
    CHECKF(!strcmp(e.message, "\xC3\xA9 and  cut"), "%s", e.message);

    /* still fine: raw control bytes inside strings, an escaped backslash
     * before u0000, exponents, -0, a byte order mark */
    CHECK(parse(VX_OAI_COMPLETION, "{\"prompt\":\"a\x01\x1f" "b\",\"n\":1E+0,\"temperature\":-0.0e-0}", &r, &e));
    CHECK(r.prompt && !strcmp(r.prompt, "a\x01\x1f" "b") && r.n == 1);
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_COMPLETION, "\xEF\xBB\xBF{\"prompt\":\"a\\\\u0000\",\"top_p\":0.5e0}", &r, &e));
    CHECK(r.prompt && !strcmp(r.prompt, "a\\u0000"));
    vx_oai_request_free(&r);
}

/* ---------------------------------------------------------------- responses */

static void test_responses(const vx_vocab *v) {
    vx_oai_meta m = {.kind = VX_OAI_CHAT, .id = "chatcmpl-x", .created = 1700000000, .model = "m", .vocab = v};
    vx_oai_logprob lp[2];
    memset(lp, 0, sizeof lp);
    lp[0].token = 300;
    lp[0].logprob = -0.5f;
    lp[0].n_top = 2;
    lp[0].top_id[0] = 300;
    lp[0].top_logprob[0] = -0.5f;
    lp[0].top_id[1] = 2; /* a control token, shown by name */
    lp[0].top_logprob[1] = -INFINITY;
    lp[1].token = 200; /* a byte token: not valid UTF-8 alone */
    lp[1].logprob = -1.0f;
    const char text[] = "a\"b\\c\n\x01\0z\xC3";
    vx_oai_choice c[2] = {
        {.index = 0, .text = text, .text_len = sizeof text - 1, .finish_reason = "stop", .lp = lp, .n_lp = 2},
        {.index = 1, .text = "", .text_len = 0, .finish_reason = "length"},
    };
    vx_oai_usage u = {.prompt_tokens = 10, .completion_tokens = 5, .cached_tokens = 3};
    char *j = vx_oai_response_json(&m, c, 2, &u);
    cJSON *root = j ? cJSON_Parse(j) : NULL;
    CHECKF(root != NULL, "chat response is not JSON: %s", j ? j : "(null)");
    CHECK(j && vx_utf8_valid(j, strlen(j), NULL));
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(root, "object")->valuestring, "chat.completion"));
    CHECK(cJSON_GetObjectItemCaseSensitive(root, "created")->valuedouble == 1700000000);
    cJSON *ch = cJSON_GetObjectItemCaseSensitive(root, "choices");
    CHECK(cJSON_GetArraySize(ch) == 2);
    cJSON *c0 = cJSON_GetArrayItem(ch, 0);
    cJSON *msg = cJSON_GetObjectItemCaseSensitive(c0, "message");
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(msg, "role")->valuestring, "assistant"));
    /* cJSON strings end at \u0000: check up to there */
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(msg, "content")->valuestring, "a\"b\\c\n\x01"));
    CHECK(j && strstr(j, "\\u0000z\xEF\xBF\xBD\""));
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(c0, "finish_reason")->valuestring, "stop"));
    cJSON *lps = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c0, "logprobs"), "content");
    CHECK(cJSON_GetArraySize(lps) == 2);
    cJSON *l0 = cJSON_GetArrayItem(lps, 0);
    CHECK(fabs(cJSON_GetObjectItemCaseSensitive(l0, "logprob")->valuedouble + 0.5) < 1e-6);
    cJSON *tops = cJSON_GetObjectItemCaseSensitive(l0, "top_logprobs");
    CHECK(cJSON_GetArraySize(tops) == 2);
    CHECK(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(tops, 1), "logprob")->valuedouble == -9999.0);
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(tops, 1), "token")->valuestring, "</s>"));
    cJSON *l1 = cJSON_GetArrayItem(lps, 1);
    cJSON *bytes = cJSON_GetObjectItemCaseSensitive(l1, "bytes");
    CHECK(cJSON_GetArraySize(bytes) == 1 && cJSON_GetArrayItem(bytes, 0)->valuedouble == 200 - 3);
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ch, 1), "logprobs")));
    cJSON *us = cJSON_GetObjectItemCaseSensitive(root, "usage");
    CHECK(cJSON_GetObjectItemCaseSensitive(us, "total_tokens")->valuedouble == 15);
    CHECK(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(us, "prompt_tokens_details"),
                                           "cached_tokens")->valuedouble == 3);
    cJSON_Delete(root);
    free(j);

    /* completions: legacy logprobs arrays */
    m.kind = VX_OAI_COMPLETION;
    m.id = "cmpl-x";
    c[0].text = "xy";
    c[0].text_len = 2;
    c[0].text_offset = 4;
    lp[0].n_top = 1;
    j = vx_oai_response_json(&m, c, 1, &u);
    root = j ? cJSON_Parse(j) : NULL;
    CHECKF(root != NULL, "completion response is not JSON: %s", j ? j : "(null)");
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(root, "object")->valuestring, "text_completion"));
    c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0);
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(c0, "text")->valuestring, "xy"));
    cJSON *lpo = cJSON_GetObjectItemCaseSensitive(c0, "logprobs");
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(lpo, "tokens")) == 2);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(lpo, "token_logprobs")) == 2);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(lpo, "top_logprobs")) == 2);
    cJSON *off = cJSON_GetObjectItemCaseSensitive(lpo, "text_offset");
    CHECK(cJSON_GetArrayItem(off, 0)->valuedouble == 4);
    char piece[64];
    int32_t pl = vx_token_to_piece(v, 300, piece, sizeof piece, false);
    CHECK(cJSON_GetArrayItem(off, 1)->valuedouble == 4 + pl);
    cJSON_Delete(root);
    free(j);
    /* an echoed prompt's first token: null logprob, null top_logprobs */
    const vx_oai_logprob lp0 = lp[0];
    lp[0].logprob = NAN;
    lp[0].n_top = -1;
    j = vx_oai_response_json(&m, c, 1, &u);
    root = j ? cJSON_Parse(j) : NULL;
    lpo = root ? cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0),
                                                  "logprobs")
               : NULL;
    CHECK(cJSON_IsNull(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(lpo, "token_logprobs"), 0)));
    CHECK(cJSON_IsNull(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(lpo, "top_logprobs"), 0)));
    CHECK(cJSON_IsObject(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(lpo, "top_logprobs"), 1)));
    lp[0] = lp0;
    cJSON_Delete(root);
    free(j);

    /* streaming chunks */
    vx_sbuf b = {0};
    m.kind = VX_OAI_CHAT;
    vx_oai_choice cc = {.index = 1};
    vx_oai_chunk(&b, &m, &cc, true, true);
    CHECK(b.p && !strncmp(b.p, "data: {", 7) && !strcmp(b.p + b.len - 2, "\n\n"));
    root = b.p ? cJSON_Parse(b.p + 6) : NULL;
    CHECK(root && !strcmp(cJSON_GetObjectItemCaseSensitive(root, "object")->valuestring, "chat.completion.chunk"));
    cJSON *delta = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0), "delta");
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(delta, "role")->valuestring, "assistant"));
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(root, "usage")));
    cJSON_Delete(root);
    b.len = 0;
    cc.text = "hi";
    cc.text_len = 2;
    vx_oai_chunk(&b, &m, &cc, false, false);
    CHECK(b.p && strstr(b.p, "\"delta\":{\"content\":\"hi\"}") && strstr(b.p, "\"finish_reason\":null") &&
          !strstr(b.p, "usage"));
    b.len = 0;
    cc.text_len = 0;
    cc.finish_reason = "length";
    vx_oai_chunk(&b, &m, &cc, false, false);
    CHECK(b.p && strstr(b.p, "\"delta\":{}") && strstr(b.p, "\"finish_reason\":\"length\""));
    b.len = 0;
    vx_oai_usage_chunk(&b, &m, &u);
    root = b.p ? cJSON_Parse(b.p + 6) : NULL;
    CHECK(root && cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "choices")) == 0 &&
          cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "usage"), "prompt_tokens")->valuedouble == 10);
    cJSON_Delete(root);
    b.len = 0;
    m.kind = VX_OAI_COMPLETION;
    cc.text = "t";
    cc.text_len = 1;
    cc.finish_reason = NULL;
    vx_oai_chunk(&b, &m, &cc, false, false);
    CHECK(b.p && strstr(b.p, "\"object\":\"text_completion\"") && strstr(b.p, "\"text\":\"t\""));
    vx_sbuf_free(&b);

    /* ids */
    char id1[64], id2[64];
    vx_oai_make_id(VX_OAI_CHAT, id1, sizeof id1);
    vx_oai_make_id(VX_OAI_COMPLETION, id2, sizeof id2);
    CHECK(!strncmp(id1, "chatcmpl-", 9) && strlen(id1) == 9 + 24 && !strncmp(id2, "cmpl-", 5));
    vx_oai_make_id(VX_OAI_COMPLETION, id1, sizeof id1);
    CHECK(strcmp(id1, id2) != 0);

    j = vx_oai_models_json("qwen \"2\"", 5, 2048, 512);
    root = j ? cJSON_Parse(j) : NULL;
    cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "data"), 0);
    CHECK(d0 && !strcmp(cJSON_GetObjectItemCaseSensitive(d0, "id")->valuestring, "qwen \"2\""));
    CHECK(d0 && !strcmp(cJSON_GetObjectItemCaseSensitive(d0, "object")->valuestring, "model"));
    cJSON_Delete(root);
    free(j);
}

/* A message with tool calls: content null when empty, OpenAI's shapes;
 * the streaming delta carries each call's index. */
/* The response of two chat choices, parsed (the caller deletes it), and
 * their messages. */
static cJSON *two_messages(const vx_oai_meta *m, const vx_oai_choice *c, cJSON **m0, cJSON **m1) {
    vx_oai_usage u = {0};
    char *j = vx_oai_response_json(m, c, 2, &u);
    cJSON *root = j ? cJSON_Parse(j) : NULL;
    CHECKF(root, "%s", j ? j : "(null)");
    free(j);
    cJSON *ch = cJSON_GetObjectItemCaseSensitive(root, "choices");
    *m0 = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ch, 0), "message");
    *m1 = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ch, 1), "message");
    return root;
}

static void test_tool_responses(const vx_vocab *v) {
    vx_oai_meta m = {.kind = VX_OAI_CHAT, .id = "chatcmpl-x", .created = 1700000000, .model = "m", .vocab = v};
    vx_tool_call calls[2] = {{.name = "get_weather", .arguments = "{\"location\":\"Z\u00fcrich\"}", .id = "call_1"},
                             {.name = "get_time", .arguments = "{}", .id = "call_2"}};
    vx_oai_choice c[2] = {
        {.index = 0, .text = "", .text_len = 0, .finish_reason = "tool_calls", .calls = calls, .n_calls = 2},
        {.index = 1, .text = "Let me see.", .text_len = 11, .finish_reason = "tool_calls", .calls = calls + 1, .n_calls = 1},
    };
    cJSON *m0, *m1, *root = two_messages(&m, c, &m0, &m1);
    cJSON *ch = cJSON_GetObjectItemCaseSensitive(root, "choices");
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(m0, "content")));
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(m1, "content")->valuestring, "Let me see."));
    cJSON *tc = cJSON_GetObjectItemCaseSensitive(m0, "tool_calls");
    CHECK(cJSON_GetArraySize(tc) == 2);
    cJSON *t0 = cJSON_GetArrayItem(tc, 0), *f0 = cJSON_GetObjectItemCaseSensitive(t0, "function");
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(t0, "id")->valuestring, "call_1") &&
          !strcmp(cJSON_GetObjectItemCaseSensitive(t0, "type")->valuestring, "function") &&
          !cJSON_GetObjectItemCaseSensitive(t0, "index"));
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(f0, "name")->valuestring, "get_weather") &&
          !strcmp(cJSON_GetObjectItemCaseSensitive(f0, "arguments")->valuestring, "{\"location\":\"Z\u00fcrich\"}"));
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ch, 0), "finish_reason")->valuestring, "tool_calls"));
    cJSON_Delete(root);
    vx_sbuf out = {0};
    vx_oai_tool_calls_chunk(&out, &m, 3, calls, 2, true);
    CHECK(out.p && !strncmp(out.p, "data: ", 6) && out.len > 8 && !strcmp(out.p + out.len - 2, "\n\n"));
    root = out.p ? cJSON_Parse(out.p + 6) : NULL;
    CHECKF(root, "%s", out.p ? out.p : "(null)");
    cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0);
    CHECK(cJSON_GetObjectItemCaseSensitive(c0, "index")->valuedouble == 3 &&
          cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(c0, "finish_reason")));
    tc = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c0, "delta"), "tool_calls");
    CHECK(cJSON_GetArraySize(tc) == 2 && cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(tc, 1), "index")->valuedouble == 1);
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(root, "usage")));
    cJSON_Delete(root);
    vx_sbuf_free(&out);
}

static void test_tokenize_endpoints(const vx_vocab *v) {
    vx_oai_error e;
    const char *body = "{\"content\":\"hello world\",\"add_special\":true}";
    char *j = vx_oai_tokenize_json(v, body, strlen(body), &e);
    cJSON *root = j ? cJSON_Parse(j) : NULL;
    cJSON *toks = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    CHECKF(cJSON_GetArraySize(toks) > 2, "%s", j ? j : e.message);
    CHECK(cJSON_GetArrayItem(toks, 0) && cJSON_GetArrayItem(toks, 0)->valuedouble == 1); /* BOS */
    /* detokenize what came back (without the BOS) */
    vx_sbuf d = {0};
    vx_sbuf_adds(&d, "{\"tokens\":[");
    for (int i = 1; i < cJSON_GetArraySize(toks); i++)
        vx_sbuf_addf(&d, "%s%d", i > 1 ? "," : "", (int)cJSON_GetArrayItem(toks, i)->valuedouble);
    vx_sbuf_adds(&d, "]}");
    char *dj = vx_oai_detokenize_json(v, d.p, d.len, &e);
    cJSON *dr = dj ? cJSON_Parse(dj) : NULL;
    cJSON *content = cJSON_GetObjectItemCaseSensitive(dr, "content");
    CHECKF(cJSON_IsString(content) && strstr(content->valuestring, "hello world"), "%s", dj ? dj : e.message);
    cJSON_Delete(dr);
    free(dj);
    vx_sbuf_free(&d);
    cJSON_Delete(root);
    free(j);

    body = "{\"content\":\"hi\",\"with_pieces\":true}";
    j = vx_oai_tokenize_json(v, body, strlen(body), &e);
    CHECKF(j && strstr(j, "\"piece\":"), "%s", j ? j : e.message);
    free(j);
    /* a lone byte token's piece is shown as its bytes */
    body = "{\"content\":\"\xC3\xA9\",\"with_pieces\":true}";
    j = vx_oai_tokenize_json(v, body, strlen(body), &e);
    {
        cJSON *r = j ? cJSON_Parse(j) : NULL;
        CHECK(r != NULL);
        cJSON_Delete(r);
    }
    free(j);

    const char *bad[] = {"{}", "{\"content\":5}", "{\"content\":\"x\",\"add_special\":\"y\"}", "nope"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = vx_oai_tokenize_json(v, bad[i], strlen(bad[i]), &e);
        CHECKF(!j && e.status == 400, "tokenize accepted %s", bad[i]);
        free(j);
    }
    const char *dbad[] = {"{}", "{\"tokens\":5}", "{\"tokens\":[1,512]}", "{\"tokens\":[-1]}", "{\"tokens\":[\"a\"]}"};
    for (size_t i = 0; i < sizeof dbad / sizeof dbad[0]; i++) {
        j = vx_oai_detokenize_json(v, dbad[i], strlen(dbad[i]), &e);
        CHECKF(!j && e.status == 400, "detokenize accepted %s", dbad[i]);
        free(j);
    }
    /* byte tokens that do not form a character still give valid JSON */
    body = "{\"tokens\":[200,201]}";
    j = vx_oai_detokenize_json(v, body, strlen(body), &e);
    {
        cJSON *r = j ? cJSON_Parse(j) : NULL;
        CHECK(r != NULL && vx_utf8_valid(j, strlen(j), NULL));
        cJSON_Delete(r);
    }
    free(j);
    body = "{\"tokens\":[]}";
    j = vx_oai_detokenize_json(v, body, strlen(body), &e);
    CHECK(j && !strcmp(j, "{\"content\":\"\"}"));
    free(j);
}

static void test_chat_prompt(const vx_vocab *v) {
    vx_chat_template *t = NULL;
    char err[256];
    CHECK(vx_chat_template_parse(vx_chat_template_builtin("chatml"), &t, err, sizeof err) == VX_OK);
    vx_token *toks = NULL;
    int32_t n = 0;
    vx_oai_error e;
    const char *msgs = "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"U\"}]";
    CHECKF(vx_oai_chat_prompt(t, v, msgs, &toks, &n, &e), "%s", e.message);
    CHECK(n > 10 && toks && toks[0] == 1);
    char text[512];
    int32_t tl = toks ? vx_detokenize(v, toks + 1, n - 1, text, sizeof text - 1, false, false) : -1;
    if (tl >= 0) text[tl] = 0;
    CHECKF(tl > 0 && strstr(text, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"),
           "rendered: %s", tl > 0 ? text : "(none)");
    free(toks);
    vx_chat_template_free(t);

    /* a template that refuses the messages: 400 with its message */
    t = NULL;
    CHECK(vx_chat_template_parse("{{ raise_exception('System role not supported') }}", &t, err, sizeof err) == VX_OK);
    CHECK(!vx_oai_chat_prompt(t, v, msgs, &toks, &n, &e) && e.status == 400 && strstr(e.message, "System role not supported"));
    vx_chat_template_free(t);

    /* the BOS text a template writes is dropped: the tokenizer adds BOS */
    t = NULL;
    CHECK(vx_chat_template_parse("{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}", &t, err, sizeof err) == VX_OK);
    CHECK(vx_oai_chat_prompt(t, v, msgs, &toks, &n, &e));
    CHECK(n >= 2 && toks[0] == 1 && toks[1] != 1);
    free(toks);
    vx_chat_template_free(t);

    /* tools reach the template as `tools`; a forced call's opening follows
     * the rendered text */
    t = NULL;
    CHECK(vx_chat_template_parse("{% for t in tools %}{{ t.function.name }};{% endfor %}{{ messages[1].content }}", &t,
                                 err, sizeof err) == VX_OK);
    CHECK(vx_oai_chat_prompt_ex(t, v, msgs, "[" TOOL("get_weather") "," TOOL("f") "]", "<x>", &toks, &n, &e));
    tl = toks ? vx_detokenize(v, toks + 1, n - 1, text, sizeof text - 1, false, false) : -1;
    if (tl >= 0) text[tl] = 0;
    CHECKF(tl > 0 && !strcmp(text, "get_weather;f;U<x>"), "rendered: %s", tl > 0 ? text : "(none)");
    free(toks);
    CHECK(!vx_oai_chat_prompt_ex(t, v, msgs, NULL, NULL, &toks, &n, &e) && e.status == 400); /* tools is None */
    vx_chat_template_free(t);
}

/* reasoning_format, chat_template_kwargs, and reasoning_content in
 * responses and chunks; the template variables reach the rendering. */
static void test_reasoning_fields(const vx_vocab *v) {
    vx_oai_request r;
    vx_oai_error e;
    CHECK(parse(VX_OAI_CHAT, "{" MSG "}", &r, &e) && r.reasoning == VX_OAI_REASONING_DEFAULT && !r.template_kwargs);
    vx_oai_request_free(&r);
    static const struct {
        const char *v;
        int want;
    } fmts[] = {{"none", VX_OAI_REASONING_NONE}, {"deepseek", VX_OAI_REASONING_SPLIT}, {"auto", VX_OAI_REASONING_DEFAULT}};
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        char body[160];
        snprintf(body, sizeof body, "{" MSG ",\"reasoning_format\":\"%s\"}", fmts[i].v);
        CHECK(parse(VX_OAI_CHAT, body, &r, &e) && r.reasoning == fmts[i].want);
        vx_oai_request_free(&r);
    }
    static const char *const refused[][2] = { /* body, param */
        {"{" MSG ",\"reasoning_format\":\"hidden\"}", "reasoning_format"},
        {"{" MSG ",\"reasoning_format\":1}", "reasoning_format"},
        {"{" MSG ",\"chat_template_kwargs\":[]}", "chat_template_kwargs"},
        {"{" MSG ",\"chat_template_kwargs\":\"x\"}", "chat_template_kwargs"},
        {"{" MSG ",\"chat_template_kwargs\":{\"messages\":[]}}", "chat_template_kwargs"},
        {"{" MSG ",\"chat_template_kwargs\":{\"a\":1,\"tools\":[]}}", "chat_template_kwargs"},
        {"{" MSG ",\"chat_template_kwargs\":{\"add_generation_prompt\":false}}", "chat_template_kwargs"},
        {"{" MSG ",\"chat_template_kwargs\":{\"x\":1,\"y\":2,\"x\":3}}", "chat_template_kwargs"},
        {"{" MSG ",\"chat_template_kwargs\":{\"m\\u0065ssages\":[]}}", "chat_template_kwargs"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        expect_reject_at(__LINE__, VX_OAI_CHAT, refused[i][0], refused[i][1]);
    /* a key spelled with escapes ahead of the plain one: the object that
     * was checked is the one passed on (the first, as cJSON reads it) */
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"chat_template_kwarg\\u0073\":{\"a\":1},\"chat_template_kwargs\":"
                "{\"messages\":[]}}", &r, &e));
    CHECKF(r.template_kwargs && !strcmp(r.template_kwargs, "{\"a\":1}"), "%s", r.template_kwargs ? r.template_kwargs : "");
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"tool\\u0073\":[" TOOL("a") "],\"tools\":[{\"function\":7}]}", &r, &e));
    CHECKF(r.tools_json && strstr(r.tools_json, "\"name\":\"a\"") && !strstr(r.tools_json, "7"), "%s",
           r.tools_json ? r.tools_json : "");
    vx_oai_request_free(&r);
    /* kept as written (1.0 stays), null is absent */
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"chat_template_kwargs\" : { \"enable_thinking\": false, \"x\": 1.0 }}", &r, &e));
    CHECKF(r.template_kwargs && !strcmp(r.template_kwargs, "{ \"enable_thinking\": false, \"x\": 1.0 }"), "%s",
           r.template_kwargs ? r.template_kwargs : "(null)");
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"chat_template_kwargs\":null,\"reasoning_format\":null}", &r, &e) &&
          !r.template_kwargs && r.reasoning == VX_OAI_REASONING_DEFAULT);
    vx_oai_request_free(&r);
    /* reasoning_effort: a template variable under chat_template_kwargs (whose own one comes last and wins) */
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"reasoning_effort\":\"low\"}", &r, &e));
    CHECKF(r.template_kwargs && !strcmp(r.template_kwargs, "{\"reasoning_effort\":\"low\"}"), "%s",
           r.template_kwargs ? r.template_kwargs : "(null)");
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"reasoning_effort\":\"high\",\"chat_template_kwargs\":{\"x\":1}}", &r, &e));
    CHECKF(r.template_kwargs && !strcmp(r.template_kwargs, "{\"reasoning_effort\":\"high\",\"x\":1}"), "%s",
           r.template_kwargs ? r.template_kwargs : "(null)");
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"reasoning_effort\":null}", &r, &e) && !r.template_kwargs);
    vx_oai_request_free(&r);
    expect_reject_at(__LINE__, VX_OAI_CHAT, "{" MSG ",\"reasoning_effort\":\"huge\"}", "reasoning_effort");
    expect_reject_at(__LINE__, VX_OAI_CHAT, "{" MSG ",\"reasoning_effort\":2}", "reasoning_effort");
    CHECK(vx_oai_check_kwargs("{\"enable_thinking\":true}", &e));
    CHECK(!vx_oai_check_kwargs("{\"bos_token\":\"x\"}", &e) && e.status == 400);
    CHECK(!vx_oai_check_kwargs("[1]", &e) && e.status == 400);
    CHECK(!vx_oai_check_kwargs("{\"a\":", &e) && e.status == 400);

    /* the variables reach the template, the request's over the server's
     * (merged: the server's members, then the request's), tools beside them */
    vx_chat_template *t = NULL;
    char err[256], *text = NULL;
    size_t cont = 0;
    CHECK(vx_chat_template_parse("{{ messages[0].content }}|{{ enable_thinking }}|{{ x }}|{{ tools | length if tools "
                                 "else 'none' }}", &t, err, sizeof err) == VX_OK);
    CHECK(parse(VX_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"U\"}],\"tools\":[" TOOL("a") "],"
                "\"chat_template_kwargs\":{ \"enable_thinking\":false }}", &r, &e));
    CHECK(vx_oai_request_render(t, v, &r, "{\"enable_thinking\":true,\"x\":7}", &text, &cont, &e));
    CHECKF(text && !strcmp(text, "U|False|7|1") && cont == strlen(text), "%s", text ? text : e.message);
    free(text);
    CHECK(vx_oai_request_render(t, v, &r, NULL, &text, &cont, &e));
    CHECKF(text && !strcmp(text, "U|False||1"), "%s", text ? text : e.message);
    free(text);
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"U\"}]}", &r, &e));
    CHECK(vx_oai_request_render(t, v, &r, "{\"enable_thinking\":true,\"x\":\"s\"}", &text, &cont, &e));
    CHECKF(text && !strcmp(text, "U|True|s|none"), "%s", text ? text : e.message);
    free(text);
    vx_oai_request_free(&r);
    const char *ab = "{" MSG ",\"chat_template_kwargs\":{\"enable_thinking\":0}}";
    char *aj = vx_oai_apply_template_json(t, v, "{\"x\":2}", 0, ab, strlen(ab), &e);
    CHECKF(aj && !strcmp(aj, "{\"prompt\":\"hi|0|2|none\"}"), "%s", aj ? aj : e.message);
    free(aj);
    aj = vx_oai_apply_template_json(t, v, NULL, 0, "{\"messages\":3}", 14, &e);
    CHECK(!aj && e.status == 400 && !strcmp(e.param, "messages"));
    /* more messages than the context holds: refused, as for a chat request */
    const char two[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"\"},{\"role\":\"user\",\"content\":\"\"}]}";
    aj = vx_oai_apply_template_json(t, v, NULL, 1, two, strlen(two), &e);
    CHECK(!aj && e.status == 400 && e.code && !strcmp(e.code, "context_length_exceeded"));
    vx_chat_template_free(t);

    /* a final assistant message: continued (prefill) unless the request
     * asks for a generation prompt; vLLM's continue_final_message */
#define PREFILL "\"messages\":[{\"role\":\"user\",\"content\":\"U\"},{\"role\":\"assistant\",\"content\":\"Sure, <b>\"}]"
    CHECK(parse(VX_OAI_CHAT, "{" PREFILL "}", &r, &e) && r.continue_final && !r.add_generation_prompt);
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{" PREFILL ",\"add_generation_prompt\":true}", &r, &e) && !r.continue_final &&
          r.add_generation_prompt);
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{" PREFILL ",\"add_generation_prompt\":false}", &r, &e) && !r.continue_final &&
          !r.add_generation_prompt);
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{" MSG ",\"continue_final_message\":true}", &r, &e) && r.continue_final &&
          !r.add_generation_prompt);
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{" MSG "}", &r, &e) && !r.continue_final && r.add_generation_prompt);
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"U\"},{\"role\":\"assistant\",\"content\":\"\"}]}",
                &r, &e) && !r.continue_final); /* nothing to continue */
    vx_oai_request_free(&r);
    CHECK(parse(VX_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"U\"},{\"role\":\"assistant\",\"content\":\"x\","
                "\"tool_calls\":[]}]}", &r, &e) && !r.continue_final);
    vx_oai_request_free(&r);
    REJECT_CHAT("{" PREFILL ",\"continue_final_message\":true,\"add_generation_prompt\":true}", "continue_final_message");
    REJECT_CHAT("{" PREFILL ",\"continue_final_message\":1}", "continue_final_message");
    REJECT_CHAT("{" PREFILL ",\"add_generation_prompt\":\"no\"}", "add_generation_prompt");
    t = NULL;
    CHECK(vx_chat_template_parse(vx_chat_template_builtin("chatml"), &t, err, sizeof err) == VX_OK);
    CHECK(parse(VX_OAI_CHAT, "{" PREFILL "}", &r, &e));
    CHECK(vx_oai_request_render(t, v, &r, NULL, &text, &cont, &e));
    CHECKF(text && !strcmp(text, "<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\nSure, <b>") &&
               !strcmp(text + cont, "Sure, <b>"), "%s", text ? text : e.message);
    free(text);
    vx_oai_request_free(&r);
    vx_chat_template_free(t);
    /* a template that does not write the content as sent cannot continue it */
    t = NULL;
    CHECK(vx_chat_template_parse("{% for m in messages %}{{ m.content | upper }}{% endfor %}", &t, err, sizeof err) == VX_OK);
    CHECK(parse(VX_OAI_CHAT, "{" PREFILL "}", &r, &e));
    CHECK(!vx_oai_request_render(t, v, &r, NULL, &text, &cont, &e) && !text && e.status == 400 &&
          !strcmp(e.param, "messages") && strstr(e.message, "continue"));
    vx_oai_request_free(&r);
    vx_chat_template_free(t);
#undef PREFILL

    /* responses: reasoning_content beside the content when there is any */
    vx_oai_meta m = {.kind = VX_OAI_CHAT, .id = "chatcmpl-x", .created = 1700000000, .model = "m", .vocab = v};
    vx_oai_choice c[2] = {
        {.index = 0, .text = "Hello", .text_len = 5, .reasoning = "I think \"so\"", .reasoning_len = 12,
         .finish_reason = "stop"},
        {.index = 1, .text = "", .text_len = 0, .reasoning = "", .reasoning_len = 0, .finish_reason = "length"},
    };
    cJSON *m0, *m1, *root = two_messages(&m, c, &m0, &m1);
    cJSON *rc = cJSON_GetObjectItemCaseSensitive(m0, "reasoning_content");
    CHECK(cJSON_IsString(rc) && !strcmp(rc->valuestring, "I think \"so\"") &&
          !strcmp(cJSON_GetObjectItemCaseSensitive(m0, "content")->valuestring, "Hello"));
    CHECK(!cJSON_GetObjectItemCaseSensitive(m1, "reasoning_content") &&
          cJSON_IsString(cJSON_GetObjectItemCaseSensitive(m1, "content")));
    cJSON_Delete(root);
    /* chunks: a reasoning delta, a reasoning + content delta, a content delta */
    static const struct {
        const char *r, *t;
    } deltas[] = {{"plan", ""}, {"end", "Hi"}, {"", "there"}};
    for (size_t i = 0; i < sizeof deltas / sizeof deltas[0]; i++) {
        vx_sbuf out = {0};
        vx_oai_choice oc = {.index = 0, .text = deltas[i].t, .text_len = strlen(deltas[i].t),
                            .reasoning = deltas[i].r, .reasoning_len = strlen(deltas[i].r)};
        vx_oai_chunk(&out, &m, &oc, false, false);
        root = out.p && out.len > 6 ? cJSON_Parse(out.p + 6) : NULL;
        CHECKF(root, "%s", out.p ? out.p : "(null)");
        cJSON *d = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0),
                                                    "delta");
        cJSON *dr = cJSON_GetObjectItemCaseSensitive(d, "reasoning_content"), *dc = cJSON_GetObjectItemCaseSensitive(d, "content");
        CHECKF(deltas[i].r[0] ? cJSON_IsString(dr) && !strcmp(dr->valuestring, deltas[i].r) : !dr, "%s", out.p);
        CHECKF(deltas[i].t[0] || !deltas[i].r[0] ? cJSON_IsString(dc) && !strcmp(dc->valuestring, deltas[i].t) : !dc,
               "%s", out.p);
        cJSON_Delete(root);
        vx_sbuf_free(&out);
    }
}

/* Random mutations of valid bodies: every parser must answer (success or
 * a 4xx with a message) and never crash; ASan/UBSan builds check memory. */
static void test_mutations(const vx_vocab *v) {
    static const char *seeds[] = {
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"}]}],"
        "\"max_tokens\":7,\"temperature\":0.5,\"stop\":[\"x\",\"yz\"],\"logit_bias\":{\"5\":1},\"n\":2,"
        "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"logprobs\":true,\"top_logprobs\":2}",
        "{\"prompt\":[1,2,3],\"max_tokens\":3,\"logprobs\":2,\"echo\":true,\"seed\":-1,\"top_k\":5}",
        "{\"prompt\":[\"\\u00e9t\\u00e9\"],\"stop\":\"\\n\",\"min_p\":0.1,\"repeat_penalty\":1.1}",
        "{\"content\":\"hello\",\"add_special\":true,\"with_pieces\":true}",
        "{\"tokens\":[1,2,300,200]}",
    };
    static const char junk[] = "{}[]\",:0123456789.eE+-tfnul \\\xC3\xA9\xFF\x00";
    uint64_t x = 99;
    int bad_status = 0;
    for (int iter = 0; iter < 20000; iter++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const char *seed = seeds[(x >> 33) % (sizeof seeds / sizeof seeds[0])];
        char buf[1024];
        size_t n = strlen(seed);
        memcpy(buf, seed, n);
        int edits = 1 + (int)((x >> 40) % 4);
        for (int k = 0; k < edits; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            size_t pos = n ? (size_t)((x >> 33) % n) : 0;
            char c = junk[(x >> 20) % (sizeof junk - 1)];
            switch ((x >> 10) % 4) {
            case 0: buf[pos] = c; break;                                   /* replace */
            case 1: n = pos; break;                                        /* truncate */
            case 2:                                                        /* insert */
                if (n + 1 < sizeof buf) {
                    memmove(buf + pos + 1, buf + pos, n - pos);
                    buf[pos] = c;
                    n++;
                }
                break;
            default:                                                       /* delete */
                if (n) {
                    memmove(buf + pos, buf + pos + 1, n - pos - 1);
                    n--;
                }
                break;
            }
        }
        vx_oai_error e;
        memset(&e, 0, sizeof e);
        vx_oai_request r;
        for (int kind = 0; kind < 2; kind++) {
            memset(&e, 0, sizeof e);
            if (vx_oai_parse_request((vx_oai_kind)kind, buf, n, N_VOCAB, 0, &r, &e)) vx_oai_request_free(&r);
            else if (e.status != 400 || !e.message[0]) bad_status++;
        }
        memset(&e, 0, sizeof e);
        char *j = vx_oai_tokenize_json(v, buf, n, &e);
        if (!j && (e.status < 400 || e.status >= 500)) bad_status++;
        free(j);
        memset(&e, 0, sizeof e);
        j = vx_oai_detokenize_json(v, buf, n, &e);
        if (!j && (e.status < 400 || e.status >= 500)) bad_status++;
        free(j);
    }
    CHECKF(bad_status == 0, "%d mutated bodies were not answered with a 4xx and a message", bad_status);
}

int main(void) {
    test_utf8();
    test_sbuf();
    test_errors();
    test_json_errors();
    test_chat_fields();
    test_completion_fields();
    test_tool_fields();
    test_text_filter();
    test_text_filter_random();
    test_fuzz_regressions();
    vx_model_params mp = vx_model_default_params();
    mp.vocab_only = true;
    vx_model *m = NULL;
    char err[VX_ERRMSG_MAX];
    vx_status st = vx_model_load(vx_test_fixture_path("models/qwen2/qwen2-Q8_0.gguf"), &mp, &m, err, sizeof err);
    CHECKF(st == VX_OK, "cannot load the fixture vocabulary: %s", err);
    if (m) {
        const vx_vocab *v = vx_model_get_vocab(m);
        CHECK(vx_vocab_n_tokens(v) == N_VOCAB);
        test_responses(v);
        test_tool_responses(v);
        test_tokenize_endpoints(v);
        test_chat_prompt(v);
        test_reasoning_fields(v);
        test_mutations(v);
        vx_model_free(m);
    }
    return vx_test_finish("test_server_openai");
}
