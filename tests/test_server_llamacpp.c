/*
 * test_server_llamacpp.c - llama-server's /completion, /infill and /props
 * layer without a network: the translation into the OpenAI completion
 * request that means the same (checked through vx_oai_parse_request's
 * result), what is refused and why, /infill's prompt layout on a real
 * vocabulary with FIM tokens (Qwen2's), and the reply and /props JSON
 * (parsed back with cJSON).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server_llamacpp.h"
#include "testutil.h"

/* The Qwen2 vocabulary of the tokenizer fixtures (FIM and repo tokens) */
static vx_model *g_model;
static const vx_vocab *g_vocab;

static bool translate(vx_lcpp_kind kind, const char *body, int32_t n_ctx, int32_t n_batch, vx_lcpp_request *l,
                      vx_oai_request *q, vx_oai_error *e) {
    memset(e, 0, sizeof *e);
    memset(q, 0, sizeof *q);
    if (!vx_lcpp_translate(kind, body, strlen(body), g_vocab, n_ctx, n_batch, l, e)) return false;
    if (!vx_oai_parse_request(VX_OAI_COMPLETION, l->oai_body, l->oai_len, vx_vocab_n_tokens(g_vocab), 0, q, e)) {
        vx_lcpp_request_free(l);
        return false;
    }
    q->max_tokens = l->max_tokens;
    return true;
}

static void done(vx_lcpp_request *l, vx_oai_request *q) {
    vx_lcpp_request_free(l);
    vx_oai_request_free(q);
}

static void expect_refused(int line, vx_lcpp_kind kind, const char *body, const char *what) {
    vx_lcpp_request l;
    vx_oai_request q;
    vx_oai_error e;
    const bool ok = translate(kind, body, 4096, 512, &l, &q, &e);
    vx_test_checks++;
    if (ok || e.status != 400 || !strstr(e.message, what)) {
        vx_test_failures++;
        fprintf(stderr, "test_server_llamacpp.c:%d: %s\n  expected a 400 naming '%s', got %s %d: %s\n", line, body, what,
                ok ? "success" : "error", e.status, e.message);
    }
    if (ok) done(&l, &q);
}
#define REFUSED(kind, body, what) expect_refused(__LINE__, kind, body, what)

static void test_completion(void) {
    vx_lcpp_request l;
    vx_oai_request q;
    vx_oai_error e;
    /* llama-server's defaults; n_predict -1: no limit; a random seed */
    CHECK(translate(VX_LCPP_COMPLETION, "{\"prompt\":\"Hello\",\"seed\":-1}", 4096, 512, &l, &q, &e));
    CHECKF(fabsf(q.sampling.temperature - 0.8f) < 1e-6f && q.sampling.top_k == 40 &&
               fabsf(q.sampling.top_p - 0.95f) < 1e-6f && fabsf(q.sampling.min_p - 0.05f) < 1e-6f &&
               q.sampling.repeat_penalty == 1.0f && q.sampling.penalty_last_n == 64 && q.max_tokens == -1 &&
               q.sampling.seed == UINT64_MAX && !q.stream && q.prompt && !strcmp(q.prompt, "Hello") && l.n_probs == 0,
           "defaults: temp %g top_k %d top_p %g min_p %g max %d", q.sampling.temperature, q.sampling.top_k,
           q.sampling.top_p, q.sampling.min_p, q.max_tokens);
    done(&l, &q);
    /* the request's values, n_probs, json_schema, stop, stream, return_tokens, response_fields */
    const char *body = "{\"prompt\":[1,2,3],\"n_predict\":7,\"temperature\":0,\"top_k\":5,\"top_p\":0.5,\"min_p\":0,"
                       "\"repeat_penalty\":1.2,\"repeat_last_n\":16,\"seed\":42,\"stop\":[\"\\n\"],\"stream\":true,"
                       "\"n_probs\":3,\"json_schema\":{\"type\":\"object\"},\"return_tokens\":true,"
                       "\"response_fields\":[\"content\",\"timings/prompt_n\"],\"cache_prompt\":true,\"id_slot\":-1,"
                       "\"samplers\":[\"top_k\"],\"mirostat\":0,\"typical_p\":1,\"grammar\":\"\",\"lora\":[],"
                       "\"xtc_probability\":0,\"dry_multiplier\":0}";
    CHECK(translate(VX_LCPP_COMPLETION, body, 4096, 512, &l, &q, &e));
    CHECKF(q.max_tokens == 7 && q.sampling.temperature == 0 && q.sampling.top_k == 5 && q.sampling.top_p == 0.5f &&
               q.sampling.min_p == 0 && fabsf(q.sampling.repeat_penalty - 1.2f) < 1e-6f &&
               q.sampling.penalty_last_n == 16 && q.sampling.seed == 42 && q.n_stop == 1 && q.stream &&
               q.logprobs && q.top_logprobs == 3 && l.n_probs == 3 && q.json_schema && q.n_prompt_ids == 3 &&
               l.return_tokens && l.n_fields == 2 && !strcmp(l.fields[1], "timings/prompt_n"),
           "%s: %s", body, e.message);
    done(&l, &q);
    /* logit_bias as pairs: ids, false (never), and a string's tokens */
    CHECK(translate(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"logit_bias\":[[15,1.5],[16,false],[\"Hello\",-2]]}", 4096,
                    512, &l, &q, &e));
    vx_token hello[8];
    const int32_t nh = vx_tokenize(g_vocab, "Hello", -1, hello, 8, false, false);
    bool b15 = false, b16 = false, bh = nh > 0;
    for (int32_t i = 0; i < q.n_logit_bias; i++) {
        b15 |= q.logit_bias[i].token == 15 && q.logit_bias[i].bias == 1.5f;
        b16 |= q.logit_bias[i].token == 16 && q.logit_bias[i].bias <= -100.0f;
    }
    for (int32_t k = 0; k < nh; k++) {
        bool found = false;
        for (int32_t i = 0; i < q.n_logit_bias; i++) found |= q.logit_bias[i].token == hello[k] && q.logit_bias[i].bias == -2.0f;
        bh &= found;
    }
    CHECKF(b15 && b16 && bh, "logit_bias pairs: %d entries", q.n_logit_bias);
    done(&l, &q);
    /* a mixed prompt: the first string with BOS (where the vocabulary adds
     * one), special tokens parsed, ids as they are */
    CHECK(translate(VX_LCPP_COMPLETION, "{\"prompt\":[\"<|im_start|>a\",7,\"b\"]}", 4096, 512, &l, &q, &e));
    vx_token want[16];
    int32_t w = vx_tokenize(g_vocab, "<|im_start|>a", -1, want, 16, true, true);
    want[w++] = 7;
    w += vx_tokenize(g_vocab, "b", -1, want + w, 16 - w, false, true);
    CHECKF(q.n_prompt_ids == w && !memcmp(q.prompt_ids, want, (size_t)w * sizeof *want) && want[0] == 151644,
           "mixed prompt: %d ids, want %d", q.n_prompt_ids, w);
    done(&l, &q);
    /* n_predict 0: the prompt evaluated and one token, as llama-server */
    CHECK(translate(VX_LCPP_COMPLETION, "{\"prompt\":\"Hi\",\"n_predict\":0}", 4096, 512, &l, &q, &e) &&
          q.max_tokens == 1);
    done(&l, &q);
    /* one prompt in an array is that prompt */
    CHECK(translate(VX_LCPP_COMPLETION, "{\"prompt\":[\"Hi\"],\"max_tokens\":3}", 4096, 512, &l, &q, &e) && q.prompt &&
          !strcmp(q.prompt, "Hi") && q.max_tokens == 3);
    done(&l, &q);

    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"mirostat\":2}", "mirostat");
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"post_sampling_probs\":true}", "post_sampling_probs");
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"typical_p\":0.9}", "typical_p");
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"xtc_probability\":0.5}", "xtc_probability");
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"dry_multiplier\":0.8}", "dry_multiplier");
    /* grammar: passed on as the OpenAI request's (GBNF, compiled there) */
    CHECK(translate(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"grammar\":\"root ::= \\\"a\\\"\"}", 4096, 512, &l, &q, &e) &&
          q.grammar && !strcmp(q.grammar, "root ::= \"a\""));
    done(&l, &q);
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"grammar\":\"root ::= a\"}", "Invalid GBNF grammar");
    /* speculative.*: the engine's per-request draft limits (n_max 0: none; p_min 0 stays "draft everything") */
    CHECK(translate(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"speculative.n_max\":5,\"speculative.n_min\":2,"
                                        "\"speculative.p_min\":0.5}", 4096, 512, &l, &q, &e) &&
          l.draft_max == 5 && l.draft_min == 2 && l.draft_p_min == 0.5f);
    done(&l, &q);
    CHECK(translate(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"speculative.n_max\":0,\"speculative.p_min\":0}", 4096,
                    512, &l, &q, &e) &&
          l.draft_max == -1 && l.draft_min == 0 && l.draft_p_min > 0 && l.draft_p_min < 1e-20f);
    done(&l, &q);
    CHECK(translate(VX_LCPP_COMPLETION, "{\"prompt\":\"x\"}", 4096, 512, &l, &q, &e) && l.draft_max == 0 &&
          l.draft_min == 0 && l.draft_p_min == 0);
    done(&l, &q);
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"speculative.n_max\":-1}", "speculative.n_max");
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"speculative.n_min\":2.5}", "speculative.n_min");
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"speculative.p_min\":1.5}", "speculative.p_min");
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"speculative.p_min\":\"high\"}", "speculative.p_min");
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"lora\":[{\"id\":0,\"scale\":1}]}", "LoRA");
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":[\"a\",\"b\"]}", "several prompts");
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":[[1],[2]]}", "several prompts");
    REFUSED(VX_LCPP_COMPLETION, "{\"n_predict\":3}", "'prompt' is required");
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"n_probs\":99}", "n_probs");
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"n_predict\":1.5}", "n_predict");
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"response_fields\":\"content\"}", "response_fields");
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"logit_bias\":[[1]]}", "logit_bias");
    {
        vx_sbuf big = {0}; /* 4,097 pairs: refused before the per-pair work */
        vx_sbuf_adds(&big, "{\"prompt\":\"x\",\"logit_bias\":[");
        for (int i = 0; i <= VX_OAI_MAX_BIAS; i++) vx_sbuf_addf(&big, i ? ",[%d,1]" : "[%d,1]", i);
        vx_sbuf_adds(&big, "]}");
        if (big.p) REFUSED(VX_LCPP_COMPLETION, big.p, "more than 4096 entries");
        vx_sbuf_free(&big);
    }
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"logit_bias\":[[1e20,1]]}", "not an id of the vocabulary");
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"logit_bias\":[[-1,1]]}", "not an id of the vocabulary");
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"logit_bias\":[[1,1e309]]}", "out of range");
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"seed\":1e309}", "seed");
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"top_p\":-1e309}", "top_p");
    REFUSED(VX_LCPP_COMPLETION, "[1,2]", "not a JSON object");
    REFUSED(VX_LCPP_COMPLETION, "{\"prompt\":\"x\",\"temperature\":\"hot\"}", "temperature");
}

/* Appends the tokens of text (no specials) to want. */
static int32_t tok(const char *text, vx_token *want, int32_t w) {
    return w + vx_tokenize(g_vocab, text, -1, want + w, 4096 - w, false, false);
}

static void test_infill(void) {
    vx_token pre, suf, mid, rep, sep;
    CHECK(vx_vocab_fim(g_vocab, &pre, &suf, &mid) && vx_vocab_fim_repo(g_vocab, &rep, &sep) && rep >= 0 && sep >= 0);
    vx_lcpp_request l;
    vx_oai_request q;
    vx_oai_error e;
    /* [REP] myproject, [SEP] file + text per chunk, [SEP] filename, PRE prefix prompt, SUF suffix, MID */
    const char *body = "{\"input_prefix\":\"def add(a, b):\\n    \",\"input_suffix\":\"\\n\\nprint(add(1, 2))\\n\","
                       "\"prompt\":\"return\",\"input_extra\":[{\"filename\":\"util.py\",\"text\":\"import os\\n\"},"
                       "{\"text\":\"x = 1\\n\"}],\"n_predict\":16,\"temperature\":0}";
    CHECK(translate(VX_LCPP_INFILL, body, 4096, 512, &l, &q, &e));
    static vx_token want[4096];
    int32_t w = 0;
    want[w++] = rep;
    w = tok("myproject\n", want, w);
    want[w++] = sep;
    w = tok("util.py\n", want, w);
    w = tok("import os\n", want, w);
    want[w++] = sep;
    w = tok("tmp\n", want, w);
    w = tok("x = 1\n", want, w);
    want[w++] = sep;
    w = tok("filename\n", want, w);
    want[w++] = pre;
    w = tok("def add(a, b):\n    ", want, w);
    w = tok("return", want, w);
    want[w++] = suf;
    w = tok("\n\nprint(add(1, 2))\n", want, w);
    want[w++] = mid;
    CHECKF(q.n_prompt_ids == w && !memcmp(q.prompt_ids, want, (size_t)w * sizeof *want) && q.max_tokens == 16,
           "infill: %d ids, want %d", q.n_prompt_ids, w);
    done(&l, &q);
    /* budgets: a batch of 16 keeps the prefix's last 12 tokens and the
     * suffix's first 16/4 - 2 - |prompt| = 2; a context of 32 gives the
     * extra chunks 32 - 16 + 2 = 18 tokens (llama-server's budget with its
     * server-wide n_predict -1, whatever the request's), cut to the 14
     * that leave the prompt within the context (31 of 32) */
    body = "{\"input_prefix\":\"a b c d e f g h i j k l m n o p q r s t\",\"input_suffix\":\"u v w x y z\","
           "\"input_extra\":[{\"filename\":\"f\",\"text\":\"one two three four five six seven eight nine ten\"}],"
           "\"n_predict\":4}";
    CHECK(translate(VX_LCPP_INFILL, body, 32, 16, &l, &q, &e));
    static vx_token px[256], sx[256], ex[256];
    const int32_t np = tok("a b c d e f g h i j k l m n o p q r s t", px, 0), ns = tok("u v w x y z", sx, 0);
    int32_t nx = 0;
    ex[nx++] = rep;
    nx = tok("myproject\n", ex, nx);
    ex[nx++] = sep;
    nx = tok("f\n", ex, nx);
    nx = tok("one two three four five six seven eight nine ten", ex, nx);
    ex[nx++] = sep;
    nx = tok("filename\n", ex, nx);
    w = 0;
    memcpy(want, ex + nx - 14, 14 * sizeof *want);
    w = 14;
    want[w++] = pre;
    memcpy(want + w, px + np - 12, 12 * sizeof *want);
    w += 12;
    want[w++] = suf;
    memcpy(want + w, sx, 2 * sizeof *want);
    w += 2;
    want[w++] = mid;
    CHECKF(np > 12 && ns > 2 && nx > 18 && w == 31 && q.n_prompt_ids == w && !memcmp(q.prompt_ids, want, (size_t)w * sizeof *want),
           "infill budgets: %d ids, want %d", q.n_prompt_ids, w);
    done(&l, &q);
    /* the prompt's special tokens are parsed (the prefix's and suffix's are text) */
    CHECK(translate(VX_LCPP_INFILL, "{\"input_prefix\":\"<|im_start|>\",\"input_suffix\":\"\",\"prompt\":\"<|im_start|>\"}",
                    4096, 512, &l, &q, &e));
    CHECKF(q.n_prompt_ids > 4 && q.prompt_ids[q.n_prompt_ids - 3] == 151644 && q.prompt_ids[1] != 151644,
           "infill prompt specials: %d ids", q.n_prompt_ids);
    done(&l, &q);
    REFUSED(VX_LCPP_INFILL, "{\"input_suffix\":\"x\"}", "input_prefix");
    REFUSED(VX_LCPP_INFILL, "{\"input_prefix\":\"x\"}", "input_suffix");
    REFUSED(VX_LCPP_INFILL, "{\"input_prefix\":\"x\",\"input_suffix\":\"y\",\"input_extra\":{}}", "input_extra");
    REFUSED(VX_LCPP_INFILL, "{\"input_prefix\":\"x\",\"input_suffix\":\"y\",\"input_extra\":[{\"filename\":\"a\"}]}",
            "input_extra");
    REFUSED(VX_LCPP_INFILL, "{\"input_prefix\":\"x\",\"input_suffix\":\"y\",\"prompt\":[1]}", "prompt");
}

/* A model without FIM tokens: /infill is refused with the reason */
static void test_infill_without_fim(void) {
    vx_model_params mp = vx_model_default_params();
    mp.vocab_only = true;
    vx_model *m = NULL;
    char err[VX_ERRMSG_MAX];
    CHECK(vx_model_load(vx_test_fixture_path("tokenizer/ggml-vocab-llama-spm.gguf"), &mp, &m, err, sizeof err) == VX_OK);
    if (!m) return;
    vx_lcpp_request l;
    vx_oai_error e;
    const char *body = "{\"input_prefix\":\"a\",\"input_suffix\":\"b\"}";
    CHECK(!vx_lcpp_translate(VX_LCPP_INFILL, body, strlen(body), vx_model_get_vocab(m), 4096, 512, &l, &e) &&
          e.status == 400 && strstr(e.message, "Infill is not supported"));
    vx_model_free(m);
}

static cJSON *reply(const vx_lcpp_reply *r) {
    vx_sbuf b = {0};
    vx_lcpp_reply_json(&b, r);
    cJSON *j = b.p ? cJSON_Parse(b.p) : NULL;
    CHECKF(j != NULL, "reply JSON: %s", b.p ? b.p : "(null)");
    vx_sbuf_free(&b);
    return j;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(x) ? x->valuestring : "";
}

static void test_replies(void) {
    vx_lcpp_request l;
    vx_oai_request q;
    vx_oai_error e;
    CHECK(translate(VX_LCPP_COMPLETION, "{\"prompt\":\"Hi\",\"n_probs\":2,\"stop\":[\"END\"],\"return_tokens\":true}",
                    4096, 512, &l, &q, &e));
    vx_oai_logprob lp = {.token = 100, .logprob = -0.5f, .n_top = 2, .top_id = {100, 200}, .top_logprob = {-0.5f, -1.5f}};
    const vx_token toks[2] = {100, 101};
    vx_lcpp_reply r = {.lreq = &l, .req = &q, .model = "m", .text = "a\nb", .text_len = 3, .tokens = toks,
                       .n_tokens = 2, .lp = &lp, .n_lp = 1, .vocab = g_vocab, .final = true, .stop_type = "word",
                       .stopping_word = "END", .prompt = "Hi", .prompt_len = 2, .n_predicted = 2, .n_evaluated = 5,
                       .n_reused = 1, .n_cached = 6, .prompt_ms = 8, .predicted_ms = 20};
    cJSON *j = reply(&r);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "timings");
    const cJSON *cp = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "completion_probabilities"), 0);
    const cJSON *gs = cJSON_GetObjectItemCaseSensitive(j, "generation_settings");
    CHECKF(!strcmp(str(j, "content"), "a\nb") && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "stop")) &&
               !strcmp(str(j, "stop_type"), "word") && !strcmp(str(j, "stopping_word"), "END") &&
               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "has_new_line")) && num(j, "tokens_predicted") == 2 &&
               num(j, "tokens_evaluated") == 5 && num(j, "tokens_cached") == 6 && !strcmp(str(j, "prompt"), "Hi") &&
               cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "tokens")) == 2 && num(t, "prompt_n") == 4 &&
               num(t, "prompt_ms") == 8 && num(t, "predicted_per_second") == 100 && num(cp, "id") == 100 &&
               num(cp, "logprob") == -0.5 &&
               cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cp, "top_logprobs")) == 2 &&
               num(gs, "n_probs") == 2 && num(gs, "n_predict") == -1,
           "final reply");
    cJSON_Delete(j);
    /* a streaming piece: its text and tokens, stop false */
    r.final = false;
    j = reply(&r);
    CHECK(!strcmp(str(j, "content"), "a\nb") && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "stop")) &&
          !cJSON_GetObjectItemCaseSensitive(j, "timings") &&
          cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "completion_probabilities")) == 1);
    cJSON_Delete(j);
    /* a streamed final object: has_new_line from the pieces (new_line) */
    r.final = true;
    r.text_len = 1; /* "a" */
    r.new_line = true;
    j = reply(&r);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "has_new_line")));
    cJSON_Delete(j);
    r.new_line = false;
    j = reply(&r);
    CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "has_new_line")));
    cJSON_Delete(j);
    r.text_len = 3;
    done(&l, &q);
    /* response_fields: only those, under their paths */
    CHECK(translate(VX_LCPP_COMPLETION, "{\"prompt\":\"Hi\",\"response_fields\":[\"content\",\"timings/predicted_n\","
                                        "\"nope\",\"timings/nope\",\"//content\",\"content/\",\"content\"]}",
                    4096, 512, &l, &q, &e));
    r.lreq = &l;
    r.req = &q;
    j = reply(&r);
    CHECKF(cJSON_GetArraySize(j) == 2 && !strcmp(str(j, "content"), "a\nb") && num(j, "timings/predicted_n") == 2,
           "response_fields: %d members", cJSON_GetArraySize(j));
    cJSON_Delete(j);
    done(&l, &q);
    /* /props */
    const vx_lcpp_props p = {.model_path = "/m.gguf", .chat_template = "{{x}}", .bos_token = "<s>", .eos_token = "</s>",
                             .n_ctx = 2048, .total_slots = 4};
    char *s = vx_lcpp_props_json(&p);
    j = s ? cJSON_Parse(s) : NULL;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "default_generation_settings");
    CHECKF(j && num(d, "n_ctx") == 2048 && num(j, "total_slots") == 4 && !strcmp(str(j, "model_path"), "/m.gguf") &&
               !strcmp(str(j, "chat_template"), "{{x}}") && !strcmp(str(j, "eos_token"), "</s>") &&
               num(cJSON_GetObjectItemCaseSensitive(d, "params"), "top_k") == 40,
           "props: %s", s ? s : "(null)");
    cJSON_Delete(j);
    free(s);
}

int main(void) {
    vx_model_params mp = vx_model_default_params();
    mp.vocab_only = true;
    char err[VX_ERRMSG_MAX];
    CHECKF(vx_model_load(vx_test_fixture_path("tokenizer/ggml-vocab-qwen2.gguf"), &mp, &g_model, err, sizeof err) ==
               VX_OK,
           "%s", err);
    if (g_model) {
        g_vocab = vx_model_get_vocab(g_model);
        test_completion();
        test_infill();
        test_replies();
    }
    test_infill_without_fim();
    vx_model_free(g_model);
    return vx_test_finish("test_server_llamacpp");
}
