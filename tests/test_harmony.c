/*
 * test_harmony.c - harmony.h, the gpt-oss reply parser: replies in the
 * shapes gpt-oss writes them (analysis then final, preambles, calls with
 * the recipient in the role or the channel header, stray headers, built-in
 * tool calls, replies cut short, replies with no header) split into
 * reasoning, content and calls, whole and as a stream cut at every one or
 * two places and byte by byte (the same pieces joined and the same calls);
 * the reasoning_format "none" rendering; then the tool-call side
 * (tool_call.h): the format found in gpt-oss's chat template
 * (tests/data/gpt-oss.jinja), a forced call's header, the refusal of
 * "required" among several tools, and vx_tool_parse on harmony replies.
 */
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "harmony.h"
#include "harmony_stream_check.h"
#include "testutil.h"
#include "tool_call.h"

typedef struct hcase {
    const char *text;
    bool split;
    int32_t max_calls;
    const char *reasoning, *content;
    int n_calls;
    const char *name[2], *args[2];
} hcase;

static const hcase CASES[] = {
    /* the two-message answer */
    {"<|channel|>analysis<|message|>User greets. Reply.<|end|><|start|>assistant<|channel|>final<|message|>Hello!",
     true, 0, "User greets. Reply.", "Hello!", 0, {0}, {0}},
    /* reasoning_format none: analysis verbatim in content */
    {"<|channel|>analysis<|message|>User greets.<|end|><|start|>assistant<|channel|>final<|message|>Hi there",
     false, 0, "", "<|channel|>analysis<|message|>User greets.<|end|>Hi there", 0, {0}, {0}},
    /* a call, recipient in the channel header, <|constrain|>json */
    {"<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
     "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}",
     true, 0, "Need weather.", "", 1, {"get_weather"}, {"{\"city\": \"Paris\"}"}},
    /* recipient in the role part, bare "json" content type, blanks around the arguments */
    {"<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>\n {\"q\":[1,2]} \n", true, 0, "",
     "", 1, {"lookup"}, {"{\"q\":[1,2]}"}},
    /* a preamble (commentary without a recipient) is content, then a call */
    {"<|channel|>commentary<|message|>Checking now.<|end|><|start|>assistant<|channel|>commentary to=functions.f"
     "<|message|>{}",
     true, 0, "", "Checking now.", 1, {"f"}, {"{}"}},
    /* gpt-oss's stray "<|channel|>commentary to=assistant" before the real header */
    {"<|channel|>commentary to=assistant<|channel|>analysis<|message|>Think.<|end|><|start|>assistant"
     "<|channel|>final<|message|>Done.",
     true, 0, "Think.", "Done.", 0, {0}, {0}},
    /* a built-in tool's call (not a function) is dropped */
    {"<|channel|>analysis<|message|>Search.<|end|><|start|>assistant<|channel|>commentary to=browser.search "
     "<|constrain|>json<|message|>{\"query\":\"x\"}",
     true, 0, "Search.", "", 0, {0}, {0}},
    /* a recipient that is no function name (a '%', a control byte): not a call, dropped */
    {"<|channel|>commentary to=functions.w%x<|message|>{}", true, 0, "", "", 0, {0}, {0}},
    {"<|channel|>commentary to=functions.\x01<|message|>{}", true, 0, "", "", 0, {0}, {0}},
    /* a call cut short (max_tokens): its body is content, no half call */
    {"<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": [1,", true, 0, "", "{\"a\": [1,", 0,
     {0}, {0}},
    /* two analysis messages, joined as they come; a message ended by the next one's <|start|> */
    {"<|channel|>analysis<|message|>One. <|end|><|start|>assistant<|channel|>analysis<|message|>Two."
     "<|start|>assistant<|channel|>final<|message|>Three",
     true, 0, "One. Two.", "Three", 0, {0}, {0}},
    /* no header: content, whole (a reply held to a JSON shape) */
    {"{\"answer\": 42}", true, 0, "", "{\"answer\": 42}", 0, {0}, {0}},
    {"Plain <|end|> text", true, 0, "", "Plain <|end|> text", 0, {0}, {0}},
    /* a reply that stopped inside its first header: the header text, as content */
    {"<|channel|>anal", true, 0, "", "<|channel|>anal", 0, {0}, {0}},
    /* stopped in a later header: nothing of it shows */
    {"<|channel|>final<|message|>A<|end|><|start|>assis", true, 0, "", "A", 0, {0}, {0}},
    /* markers' starts inside a body are text */
    {"<|channel|>final<|message|>a <| b <|en c <|startx", true, 0, "", "a <| b <|en c <|startx", 0, {0}, {0}},
    /* two calls; max_calls 1 keeps the first */
    {"<|channel|>commentary to=functions.a<|message|>{\"x\":1}<|end|><|start|>assistant<|channel|>commentary "
     "to=functions.b<|message|>[2]",
     true, 0, "", "", 2, {"a", "b"}, {"{\"x\":1}", "[2]"}},
    {"<|channel|>commentary to=functions.a<|message|>{\"x\":1}<|end|><|start|>assistant<|channel|>commentary "
     "to=functions.b<|message|>[2]",
     true, 1, "", "", 1, {"a"}, {"{\"x\":1}"}},
    /* a header too long to be one: the rest is content */
    {"<|channel|>xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "<|message|>z",
     true, 0, "",
     "<|channel|>xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "<|message|>z",
     0, {0}, {0}},
    {"", true, 0, "", "", 0, {0}, {0}},
};

static bool same(const vx_sbuf *b, const char *want) {
    return b->len == strlen(want) && (b->len == 0 || !memcmp(b->p, want, b->len));
}

/* Empty when the case comes out as it should, else what differs. */
static const char *check_case(const hcase *k, const size_t *cuts, int n_cuts) {
    vx_sbuf r = {0}, c = {0};
    vx_harmony_stream s;
    const char *why = "";
    if (!harmony_run(k->text, strlen(k->text), k->split, k->max_calls, cuts, n_cuts, &r, &c, &s))
        why = "out of memory or bytes held";
    else if (!same(&r, k->reasoning)) why = "reasoning";
    else if (!same(&c, k->content)) why = "content";
    else if (s.calls.n != k->n_calls) why = "number of calls";
    for (int i = 0; !why[0] && i < s.calls.n; i++) {
        const vx_tool_call *t = &s.calls.v[i];
        if (strcmp(t->name, k->name[i]) || strcmp(t->arguments, k->args[i])) why = "a call's name or arguments";
        else if (strncmp(t->id, "call_", 5) || strlen(t->id) != 29) why = "a call's id";
    }
    vx_harmony_stream_free(&s);
    vx_sbuf_free(&r);
    vx_sbuf_free(&c);
    return why;
}

static void test_cases(void) {
    long n_runs = 0;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const hcase *k = &CASES[i];
        const size_t len = strlen(k->text);
        const char *why = check_case(k, NULL, 0);
        CHECKF(!why[0], "case %zu whole: %s", i, why);
        int bad = 0;
        for (size_t a = 0; a <= len && !bad; a++) {
            why = check_case(k, &a, 1);
            if (why[0]) {
                bad = 1;
                CHECKF(0, "case %zu cut at %zu: %s", i, a, why);
            }
            for (size_t b = a; b <= len && !bad && len < 200; b++) {
                const size_t cuts[2] = {a, b};
                why = check_case(k, cuts, 2);
                if (why[0]) {
                    bad = 1;
                    CHECKF(0, "case %zu cut at %zu, %zu: %s", i, a, b, why);
                }
                n_runs++;
            }
        }
        size_t *bytes = malloc((len + 1) * sizeof *bytes);
        for (size_t b = 0; bytes && b < len; b++) bytes[b] = b;
        why = bytes ? check_case(k, bytes, (int)len) : "out of memory";
        CHECKF(!why[0], "case %zu byte by byte: %s", i, why);
        free(bytes);
    }
    CHECK(n_runs > 20000);
}

/* Replies put together from harmony's pieces (markers, headers, bodies,
 * JSON, blanks) by a fixed generator: the stream cut at every place, and
 * at two, gives what the whole reply gives. */
static void test_mixed(void) {
    static const char *const frag[] = {"<|channel|>", "analysis", "final", "commentary", "<|message|>", "<|end|>",
                                       "<|start|>", "assistant", " to=functions.f", " to=python", " to=assistant",
                                       "<|constrain|>", "json", "<|call|>", "<|return|>", "{\"a\": 1}", "[",
                                       " ", "\n", "hi", "<|", "<|en", "<|startx"};
    const int nf = (int)(sizeof frag / sizeof *frag);
    uint64_t x = 88172645463325252ull;
    int bad = 0;
    for (int it = 0; it < 300 && !bad; it++) {
        char text[512] = "";
        const int n = 1 + (int)(it % 13);
        for (int k = 0; k < n; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            strcat(text, frag[x % (uint64_t)nf]);
        }
        const size_t len = strlen(text);
        for (size_t a = 0; a <= len && !bad; a += 1) {
            for (size_t b = a; b <= len && !bad; b += 3) {
                const size_t cuts[2] = {a, b};
                const char *why = harmony_stream_check(text, len, (it & 1) != 0, (int32_t)(it % 3), cuts, 2);
                if (why[0]) {
                    bad = 1;
                    CHECKF(0, "\"%s\" cut at %zu, %zu: %s", text, a, b, why);
                }
            }
        }
    }
    CHECK(!bad);
}

/* What a stream releases at once: a body as soon as it cannot be a
 * marker, nothing of a header, a call only at the end. */
static void test_release(void) {
    vx_harmony_stream s;
    vx_harmony_stream_init(&s, true, 0);
    CHECK(vx_harmony_stream_feed(&s, "<|channel|>analysis", 19) && !s.reasoning.len && !s.content.len);
    CHECK(vx_harmony_stream_feed(&s, "<|message|>Let me <|e", 21) && same(&s.reasoning, "Let me "));
    CHECK(vx_harmony_stream_feed(&s, "nd|>", 4) && !s.reasoning.len && !s.content.len);
    CHECK(vx_harmony_stream_feed(&s, "<|start|>assistant<|channel|>final<|message|>Hi", 47) && same(&s.content, "Hi"));
    CHECK(vx_harmony_stream_feed(&s, " you", 4) && same(&s.content, " you"));
    CHECK(vx_harmony_stream_finish(&s) && !s.content.len && s.calls.n == 0);
    vx_harmony_stream_free(&s);

    vx_harmony_stream_init(&s, true, 0);
    CHECK(vx_harmony_stream_feed(&s, "<|channel|>commentary to=functions.f<|message|>{\"a\":", 52) && !s.content.len &&
          s.calls.n == 0);
    CHECK(vx_harmony_stream_feed(&s, "1}", 2) && !s.content.len && s.calls.n == 0);
    CHECK(vx_harmony_stream_finish(&s) && s.calls.n == 1 && !strcmp(s.calls.v[0].arguments, "{\"a\":1}"));
    vx_harmony_stream_free(&s);

    vx_harmony_stream_init(&s, true, 0); /* no header: released at once */
    CHECK(vx_harmony_stream_feed(&s, "Hi", 2) && same(&s.content, "Hi"));
    vx_harmony_stream_free(&s);
}

/* gpt-oss's own template (tests/data/gpt-oss.jinja): the harmony format
 * and its tool calls are found; a conversation with a call renders the
 * way the parser reads it back. */
static void test_template(void) {
    char *src = vx_test_read_file("tests/data/gpt-oss.jinja", NULL);
    CHECK(src != NULL);
    if (!src) return;
    CHECK(vx_harmony_detect(src));
    CHECK(vx_tool_format_detect(src) == VX_TOOL_FMT_HARMONY);
    CHECK(!strcmp(vx_tool_format_name(VX_TOOL_FMT_HARMONY), "harmony"));
    vx_chat_template *t = NULL;
    char err[256], *out = NULL;
    CHECKF(vx_chat_template_parse(src, &t, err, sizeof err) == VX_OK, "%s", err);
    vx_chat_render_params p = vx_chat_render_default_params();
    p.add_generation_prompt = true;
    p.messages_json =
        "[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
        "{\"role\":\"assistant\",\"content\":\"\",\"thinking\":\"Call the tool.\",\"tool_calls\":[{\"type\":"
        "\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}}]},"
        "{\"role\":\"tool\",\"content\":\"18C\"}]";
    p.extra_vars_json = "{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather.\",\"parameters\":"
                        "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}}]}";
    CHECKF(t && vx_chat_template_render_ex(t, NULL, 0, &p, &out, err, sizeof err) == VX_OK, "%s", err);
    /* the past call as the model wrote it, then the generation prompt */
    const char *call = out ? strstr(out, "<|start|>assistant to=functions.get_weather") : NULL;
    CHECKF(call != NULL, "%s", out ? out : "");
    CHECK(out && strstr(out, "<|start|>assistant<|channel|>analysis<|message|>Call the tool.<|end|>"));
    const size_t ol = out ? strlen(out) : 0;
    CHECK(ol > 18 && !strcmp(out + ol - 18, "<|start|>assistant"));
    if (call) { /* the past call, as a reply, parses back to the call */
        const char *body = call + strlen("<|start|>assistant");
        const char *e = strstr(body, "<|call|>");
        vx_tool_calls c;
        CHECK(e && vx_tool_parse(VX_TOOL_FMT_HARMONY, body, (size_t)(e - body), NULL, 0, 0, &c) == VX_OK &&
              c.n == 1 && !strcmp(c.v[0].name, "get_weather") && !strcmp(c.v[0].arguments, "{\"city\": \"Paris\"}") &&
              c.content_len == 0);
        if (e) vx_tool_calls_free(&c);
    }
    free(out);
    vx_chat_template_free(t);
    free(src);
}

static void test_force(void) {
    const char *one = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                      "\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}}}]";
    const char *two = "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}},"
                      "{\"type\":\"function\",\"function\":{\"name\":\"g\"}}]";
    char *prefix = NULL, *schema = NULL;
    /* "required" with one tool, and a named one among two: its header, its arguments' schema */
    CHECK(vx_tool_force(VX_TOOL_FMT_HARMONY, one, NULL, true, &prefix, &schema) == VX_OK);
    CHECK(prefix && !strcmp(prefix, "<|channel|>commentary to=functions.f <|constrain|>json<|message|>"));
    CHECK(schema && strstr(schema, "\"required\":[\"a\"]") && !strstr(schema, "\"name\""));
    free(prefix), free(schema);
    CHECK(vx_tool_force(VX_TOOL_FMT_HARMONY, two, "g", true, &prefix, &schema) == VX_OK);
    CHECK(prefix && strstr(prefix, "to=functions.g ") && schema);
    /* the forced header and a reply in its schema: a call of g */
    vx_sbuf r = {0};
    vx_sbuf_adds(&r, prefix ? prefix : "");
    vx_sbuf_adds(&r, "{}");
    vx_tool_calls c;
    CHECK(vx_tool_parse(VX_TOOL_FMT_HARMONY, r.p, r.len, NULL, 0, 0, &c) == VX_OK && c.n == 1 &&
          !strcmp(c.v[0].name, "g"));
    vx_tool_calls_free(&c);
    vx_sbuf_free(&r);
    free(prefix), free(schema);
    /* any of several: the header cannot leave the name open */
    CHECK(vx_tool_force(VX_TOOL_FMT_HARMONY, two, NULL, true, &prefix, &schema) == VX_EUNSUPPORTED);
    CHECK(!prefix && !schema);
    CHECK(vx_tool_force(VX_TOOL_FMT_HARMONY, two, "h", true, &prefix, &schema) == VX_EINVAL);
    /* vx_tool_parse: the answer, without the reasoning, trimmed */
    const char *reply = "<|channel|>analysis<|message|>hmm<|end|><|start|>assistant<|channel|>final<|message|> ok ";
    CHECK(vx_tool_parse(VX_TOOL_FMT_HARMONY, reply, strlen(reply), NULL, 0, 0, &c) == VX_OK && c.n == 0 &&
          !strcmp(c.content, "ok"));
    vx_tool_calls_free(&c);
}

int main(void) {
    test_cases();
    test_mixed();
    test_release();
    test_template();
    test_force();
    return vx_test_finish("test_harmony");
}
