/*
 * test_hf.c - Hugging Face model directories (src/hf_import.c,
 * src/hf_tokenizer.c).
 *
 * 1. The tokenizers: the fixtures' Llama 3 and Qwen3 tokenizer.json files
 *    (hf/) must give exactly the tokenizer keys of ggml-vocab-llama-bpe.gguf
 *    and ggml-vocab-qwen2.gguf, which the fixtures' authors wrote from the
 *    same files following llama.cpp's converter step by step (tokens, types,
 *    merges, special ids, flags, chat template), and tokenize the 46 test
 *    strings into llama.cpp's ids; Llama 2's vocabulary written as a
 *    SentencePiece tokenizer.model must come back the same way.
 * 2. The models: fixture GGUF models written out as Hugging Face
 *    directories (config.json, safetensors in HF tensor names, Llama's Q/K
 *    rows in HF's order, a tokenizer.json) must load and give the same
 *    logits, bit for bit, as the GGUF files they came from: the import
 *    rebuilds the same tensors. Also sharded checkpoints, BF16, tied and
 *    untied embeddings, and the errors for what is not supported. vx
 *    synth's tiny Gemma, Gemma 2, Gemma 3 (window pattern, local RoPE base,
 *    linear scaling; also as the text model of a Gemma3ForConditionalGeneration
 *    checkpoint), Qwen3-MoE (experts under mlp.experts) and gpt-oss (MXFP4
 *    experts as GptOssForCausalLM's blocks and scales, gate and up rows
 *    interleaved; the other weights F32; and unquantized, the experts
 *    transposed) the same way,
 *    and their configs vx cannot run refused with the reason.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common.h"
#include "gguf.h"
#include "hf_import.h"
#include "name_index.h"
#include "quant.h"
#include "testutil.h"
#include "vocab.h"
#include "vortex.h"

static char *gunzip(const char *path, size_t *len) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "gzip -dc '%s'", path);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 24, n = 0;
    char *buf = malloc(cap + 1);
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n, p)) > 0;) {
        n += k;
        if (n == cap) {
            char *b = realloc(buf, 2 * cap + 1);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
    }
    if (pclose(p) != 0 || !buf || n == 0) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

static void release_writer(void *w) { vx_gguf_writer_free(w); }

/* Whether key has the same value in both readers (both absent counts). */
static bool same_kv(const vx_gguf *a, const vx_gguf *b, const char *key) {
    const vx_gguf_kv *x = vx_gguf_find(a, key), *y = vx_gguf_find(b, key);
    if (!x || !y) {
        if (x || y) fprintf(stderr, "  %s: present in %s only\n", key, x ? "the import" : "the fixture");
        return !x && !y;
    }
    if (x->type == VX_GGUF_STRING && y->type == VX_GGUF_STRING)
        return x->v.str.len == y->v.str.len && memcmp(x->v.str.s, y->v.str.s, x->v.str.len) == 0;
    if (x->type == VX_GGUF_BOOL || y->type == VX_GGUF_BOOL) return x->type == y->type && x->v.b == y->v.b;
    if (x->type == VX_GGUF_ARRAY && y->type == VX_GGUF_ARRAY) {
        if (x->v.arr.n != y->v.arr.n) {
            fprintf(stderr, "  %s: %llu vs %llu elements\n", key, (unsigned long long)x->v.arr.n,
                    (unsigned long long)y->v.arr.n);
            return false;
        }
        for (uint64_t i = 0; i < x->v.arr.n; i++) {
            bool eq;
            if (x->v.arr.type == VX_GGUF_STRING || y->v.arr.type == VX_GGUF_STRING)
                eq = x->v.arr.type == y->v.arr.type && x->v.arr.strs[i].len == y->v.arr.strs[i].len &&
                     memcmp(x->v.arr.strs[i].s, y->v.arr.strs[i].s, x->v.arr.strs[i].len) == 0;
            else
                eq = vx_gguf_arr_i64(x, i) == vx_gguf_arr_i64(y, i);
            if (!eq) {
                fprintf(stderr, "  %s: element %llu differs\n", key, (unsigned long long)i);
                return false;
            }
        }
        return true;
    }
    int64_t u, v;
    return vx_gguf_get_i64(a, key, &u) == 1 && vx_gguf_get_i64(b, key, &v) == 1 && u == v;
}

/* The keys a SentencePiece vocabulary converted from Hugging Face files
 * must share with llama.cpp's (scores aside) */
static const char *const k_spm_keys[] = {"tokenizer.ggml.model",           "tokenizer.ggml.pre",
                                         "tokenizer.ggml.tokens",          "tokenizer.ggml.token_type",
                                         "tokenizer.ggml.bos_token_id",    "tokenizer.ggml.eos_token_id",
                                         "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.add_bos_token",
                                         "tokenizer.ggml.add_eos_token"};
#define N_SPM_KEYS (sizeof k_spm_keys / sizeof k_spm_keys[0])

/* The 46 .inp strings of a fixture vocabulary against its .out ids. With
 * first (Hugging Face's Metaspace, prepend_scheme "first"): a string that
 * starts with a space gets no "▁" prefix, so its ids are those first (a
 * vocabulary verified against llama.cpp's, which always prefixes) gives
 * the string without that space (" " alone is skipped: nothing is left). */
static int run_inp_as(const vx_vocab *v, const char *name, const vx_vocab *first, int *n_tests) {
    char rel[256];
    size_t inp_size = 0, out_size = 0;
    snprintf(rel, sizeof rel, "tokenizer/ggml-vocab-%s.gguf.inp", name);
    char *inp = vx_test_read_file(vx_test_fixture_path(rel), &inp_size);
    snprintf(rel, sizeof rel, "tokenizer/ggml-vocab-%s.gguf.out", name);
    char *outf = vx_test_read_file(vx_test_fixture_path(rel), &out_size);
    CHECKF(inp && outf, "%s: .inp/.out fixtures missing", name);
    int pass = 0;
    *n_tests = 0;
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char *line = outf;
    for (size_t pos = 0; inp && outf && pos < inp_size;) {
        const char *m = memmem(inp + pos, inp_size - pos, sep, sizeof sep - 1);
        const size_t end = m ? (size_t)(m - inp) : inp_size;
        const char *text = inp + pos;
        const size_t tlen = end - pos;
        pos = m ? end + sizeof sep - 1 : inp_size;
        char *nl = line ? strchr(line, '\n') : NULL;
        if (nl) *nl = 0;
        vx_token exp[1024], got[1024];
        int ne = 0;
        for (char *p = line; p && *p && ne < 1024;) {
            char *e;
            const long x = strtol(p, &e, 10);
            if (e == p) break;
            exp[ne++] = (vx_token)x;
            p = e;
        }
        line = nl ? nl + 1 : NULL;
        if (first && tlen == 1 && text[0] == ' ') continue; /* " " alone: "▁", among the literal cases */
        if (first && tlen > 0 && text[0] == ' ') ne = vx_tokenize(first, text + 1, (int32_t)tlen - 1, exp, 1024, false, false);
        const int32_t n = vx_tokenize(v, text, (int32_t)tlen, got, 1024, false, false);
        const bool ok = n == ne && memcmp(got, exp, (size_t)ne * sizeof *got) == 0;
        CHECKF(ok, "%s: test %d", name, *n_tests);
        pass += ok;
        ++*n_tests;
    }
    free(inp);
    free(outf);
    return pass;
}

static int run_inp(const vx_vocab *v, const char *name, int *n_tests) { return run_inp_as(v, name, NULL, n_tests); }

static void test_tokenizer(const char *hf, const char *vocab_name, int64_t n_vocab, const char *model_cfg) {
    char rel[256];
    size_t len = 0, clen = 0;
    snprintf(rel, sizeof rel, "tokenizer/hf/%s/tokenizer.json.gz", hf);
    char *json = gunzip(vx_test_fixture_path(rel), &len);
    snprintf(rel, sizeof rel, "tokenizer/hf/%s/tokenizer_config.json", hf);
    char *cfg = vx_test_read_file(vx_test_fixture_path(rel), &clen);
    CHECKF(json && cfg, "%s: fixture tokenizer files missing (gzip needed)", hf);
    if (!json || !cfg) {
        free(json);
        free(cfg);
        return;
    }
    char err[512] = "";
    vx_gguf_writer *w = vx_gguf_writer_init();
    vx_status st = vx_hf_tokenizer_to_gguf(json, len, cfg, clen, model_cfg, model_cfg ? strlen(model_cfg) : 0,
                                           n_vocab, w, err, sizeof err);
    CHECKF(st == VX_OK, "%s: %s", hf, err);
    vx_gguf *imp = NULL, *ref = NULL;
    if (!st) st = vx_gguf_writer_open_reader(w, release_writer, w, &imp, err, sizeof err);
    else vx_gguf_writer_free(w);
    CHECKF(st == VX_OK && imp, "%s: %s", hf, err);
    snprintf(rel, sizeof rel, "tokenizer/ggml-vocab-%s.gguf", vocab_name);
    CHECK(vx_gguf_open(vx_test_fixture_path(rel), &ref, err, sizeof err) == VX_OK);
    if (imp && ref) {
        static const char *const keys[] = {
            "tokenizer.ggml.model",          "tokenizer.ggml.pre",           "tokenizer.ggml.tokens",
            "tokenizer.ggml.token_type",     "tokenizer.ggml.merges",        "tokenizer.ggml.bos_token_id",
            "tokenizer.ggml.eos_token_id",   "tokenizer.ggml.padding_token_id", "tokenizer.ggml.unknown_token_id",
            "tokenizer.ggml.add_bos_token",  "tokenizer.ggml.add_eos_token", "tokenizer.chat_template"};
        int same = 0;
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            const bool eq = same_kv(imp, ref, keys[i]);
            CHECKF(eq, "%s: %s differs from %s's", hf, keys[i], vocab_name);
            same += eq;
        }
        /* every tokenizer key of the fixture is one of those */
        for (int64_t i = 0; i < vx_gguf_n_kv(ref); i++) {
            const char *k = vx_gguf_kv_at(ref, i)->key;
            if (strncmp(k, "tokenizer.", 10) != 0) continue;
            bool listed = false;
            for (size_t j = 0; j < sizeof keys / sizeof keys[0]; j++) listed |= strcmp(k, keys[j]) == 0;
            CHECKF(listed, "%s: the fixture has %s, which the test does not compare", hf, k);
        }
        vx_vocab *v = NULL;
        CHECK(vx_vocab_load(imp, &v, err, sizeof err) == VX_OK);
        int n_tests = 0, pass = v ? run_inp(v, vocab_name, &n_tests) : 0;
        printf("  tokenizer %-7s %d/%zu keys as ggml-vocab-%s.gguf, %d/%d .inp strings\n", hf, same,
               sizeof keys / sizeof keys[0], vocab_name, pass, n_tests);
        CHECK(n_tests == 46);
        vx_vocab_free(v);
    }
    vx_gguf_close(imp);
    vx_gguf_close(ref);
    free(json);
    free(cfg);
}

/* ------------------------------------------------ SentencePiece models */

typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
} bytes;

static void put(bytes *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_varint(bytes *b, uint64_t v) {
    do {
        uint8_t c = (uint8_t)(v & 0x7F);
        v >>= 7;
        if (v) c |= 0x80;
        put(b, &c, 1);
    } while (v);
}

/* A SentencePiece ModelProto of a GGUF "llama" vocabulary: pieces (text,
 * score, type), trainer_spec.model_type = BPE, normalizer_spec.add_dummy_prefix. */
static bytes spm_model_of(const vx_gguf *g) {
    bytes m = {0};
    const vx_gguf_kv *toks = vx_gguf_find(g, "tokenizer.ggml.tokens"), *sc = vx_gguf_find(g, "tokenizer.ggml.scores"),
                     *ty = vx_gguf_find(g, "tokenizer.ggml.token_type");
    for (uint64_t i = 0; toks && i < toks->v.arr.n; i++) {
        bytes piece = {0};
        const uint8_t k1 = 0x0A, k2 = 0x15, k3 = 0x18;
        put(&piece, &k1, 1);
        put_varint(&piece, toks->v.arr.strs[i].len);
        put(&piece, toks->v.arr.strs[i].s, toks->v.arr.strs[i].len);
        const float f = sc ? (float)vx_gguf_arr_f64(sc, i) : 0.0f;
        put(&piece, &k2, 1);
        put(&piece, &f, 4);
        const int64_t t = ty ? vx_gguf_arr_i64(ty, i) : 1;
        if (t != 1) {
            put(&piece, &k3, 1);
            put_varint(&piece, (uint64_t)t);
        }
        put(&m, &k1, 1);
        put_varint(&m, piece.n);
        put(&m, piece.p, piece.n);
        free(piece.p);
    }
    static const uint8_t specs[] = {0x12, 0x02, 0x18, 0x02, 0x1A, 0x02, 0x18, 0x01};
    put(&m, specs, sizeof specs);
    return m;
}

static const char k_llama2_cfg[] =
    "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"unk_token\": \"<unk>\", "
    "\"add_bos_token\": true, \"add_eos_token\": false}";

/* ggml-vocab-llama-spm.gguf (Llama 2's vocabulary) as a tokenizer.model:
 * the import must give back its keys and llama.cpp's ids for the 46
 * strings. The protobuf is written here from the fixture (no tokenizer.model
 * ships with the fixtures), so this checks the reader and the conversion
 * rules, not an independent file. */
static void test_spm(void) {
    char err[512] = "";
    vx_gguf *ref = NULL, *imp = NULL;
    CHECK(vx_gguf_open(vx_test_fixture_path("tokenizer/ggml-vocab-llama-spm.gguf"), &ref, err, sizeof err) == VX_OK);
    if (!ref) return;
    bytes m = spm_model_of(ref);
    vx_gguf_writer *w = vx_gguf_writer_init();
    vx_status st = vx_hf_spm_to_gguf(m.p, m.n, k_llama2_cfg, strlen(k_llama2_cfg), NULL, 0, NULL, 0, 32000, w, err,
                                     sizeof err);
    CHECKF(st == VX_OK, "spm: %s", err);
    if (!st) st = vx_gguf_writer_open_reader(w, release_writer, w, &imp, err, sizeof err);
    else vx_gguf_writer_free(w);
    if (imp) {
        const char *const *keys = k_spm_keys;
        int same = 0;
        for (size_t i = 0; i < N_SPM_KEYS; i++) {
            const bool eq = same_kv(imp, ref, keys[i]);
            CHECKF(eq, "spm: %s differs", keys[i]);
            same += eq;
        }
        const vx_gguf_kv *a = vx_gguf_find(imp, "tokenizer.ggml.scores"), *b = vx_gguf_find(ref, "tokenizer.ggml.scores");
        bool scores = a && b && a->v.arr.n == b->v.arr.n;
        for (uint64_t i = 0; scores && i < a->v.arr.n; i++) scores = vx_gguf_arr_f64(a, i) == vx_gguf_arr_f64(b, i);
        CHECK(scores);
        vx_vocab *v = NULL;
        CHECK(vx_vocab_load(imp, &v, err, sizeof err) == VX_OK);
        int n_tests = 0, pass = v ? run_inp(v, "llama-spm", &n_tests) : 0;
        printf("  tokenizer.model (Llama 2's vocabulary) %d/%zu keys + scores %s, %d/%d .inp strings\n", same,
               N_SPM_KEYS, scores ? "equal" : "DIFFER", pass, n_tests);
        vx_vocab_free(v);
    }
    /* bad protobufs: errors, never crashes */
    for (size_t cut = 1; cut < 64 && cut < m.n; cut += 7) {
        vx_gguf_writer *w2 = vx_gguf_writer_init();
        err[0] = 0;
        const vx_status s2 = vx_hf_spm_to_gguf(m.p, cut, NULL, 0, NULL, 0, NULL, 0, 0, w2, err, sizeof err);
        CHECKF(s2 == VX_EFORMAT && strstr(err, "tokenizer.model"), "cut at %zu: %s", cut, err);
        vx_gguf_writer_free(w2);
    }
    free(m.p);
    vx_gguf_close(imp);
    vx_gguf_close(ref);
}

/* ------------------------------------- byte-fallback BPE tokenizer.json */

typedef struct hf_merge {
    int32_t l, r;   /* token ids */
    float score;    /* of the piece l + r */
    int32_t ll, lr; /* lengths in characters */
    int64_t seq;    /* order before the sort */
} hf_merge;

static size_t n_chars(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static int cmp_local(const void *a, const void *b) {
    const hf_merge *x = a, *y = b;
    return x->l != y->l ? (x->l < y->l ? -1 : 1) : x->r != y->r ? (x->r < y->r ? -1 : 1) : 0;
}

/* transformers' generate_merges: sorted by (score, len(l), len(r)),
 * highest first, stable */
static int cmp_global(const void *a, const void *b) {
    const hf_merge *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->ll != y->ll) return x->ll > y->ll ? -1 : 1;
    if (x->lr != y->lr) return x->lr > y->lr ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static const char *str_at(const void *ctx, int64_t i) { return ((char *const *)ctx)[i]; }

/* ggml-vocab-llama-spm.gguf (Llama 2's vocabulary) as the tokenizer.json
 * Hugging Face's LlamaConverter writes from Llama 2's tokenizer.model:
 * every piece in model.vocab, byte_fallback, the merges generated from the
 * pieces' scores as transformers' SentencePieceExtractor does (every split
 * of a piece into two pieces, by the piece's score), <unk> <s> </s> as
 * special added tokens. metaspace: the later layout (a Metaspace
 * pre-tokenizer instead of the Prepend and Replace normalizers, merges as
 * [a, b] pairs). NULL if the fixture is missing. */
static char *llama2_tokenizer_json(const vx_gguf *ref, bool metaspace) {
    const vx_gguf_kv *toks = vx_gguf_find(ref, "tokenizer.ggml.tokens"), *sc = vx_gguf_find(ref, "tokenizer.ggml.scores");
    if (!toks || !sc) return NULL;
    const int64_t n = (int64_t)toks->v.arr.n;
    char **t = calloc((size_t)n, sizeof *t);
    vx_name_index ix = {0};
    for (int64_t i = 0; i < n; i++) {
        t[i] = strndup(toks->v.arr.strs[i].s, toks->v.arr.strs[i].len);
        vx_name_index_add(&ix, i, str_at, t);
    }
    size_t cap = 1 << 16, nm = 0;
    hf_merge *m = malloc(cap * sizeof *m);
    char buf[256];
    for (int64_t i = 0; i < n; i++) {
        const size_t len = strlen(t[i]), first = nm;
        for (size_t cut = 1; cut < len && len < sizeof buf; cut++) {
            if (((unsigned char)t[i][cut] & 0xC0) == 0x80) continue; /* inside a character */
            memcpy(buf, t[i], cut);
            buf[cut] = 0;
            const int64_t l = vx_name_index_find(&ix, buf, str_at, t), r = vx_name_index_find(&ix, t[i] + cut, str_at, t);
            if (l < 0 || r < 0) continue;
            if (nm == cap) m = realloc(m, (cap *= 2) * sizeof *m);
            m[nm++] = (hf_merge){(int32_t)l, (int32_t)r, (float)vx_gguf_arr_f64(sc, (uint64_t)i), (int32_t)n_chars(buf),
                                 (int32_t)n_chars(t[i] + cut), 0};
        }
        qsort(m + first, nm - first, sizeof *m, cmp_local);
    }
    for (size_t k = 0; k < nm; k++) m[k].seq = (int64_t)k;
    qsort(m, nm, sizeof *m, cmp_global);
    cJSON *root = cJSON_CreateObject(), *added = cJSON_AddArrayToObject(root, "added_tokens");
    for (int i = 0; i < 3; i++) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", i);
        cJSON_AddStringToObject(a, "content", t[i]);
        cJSON_AddBoolToObject(a, "normalized", false);
        cJSON_AddBoolToObject(a, "special", true);
        cJSON_AddItemToArray(added, a);
    }
    static const char *const ws = "\xE2\x96\x81";
    if (metaspace) {
        cJSON_AddNullToObject(root, "normalizer");
        cJSON *pt = cJSON_AddObjectToObject(root, "pre_tokenizer");
        cJSON_AddStringToObject(pt, "type", "Metaspace");
        cJSON_AddStringToObject(pt, "replacement", ws);
        cJSON_AddStringToObject(pt, "prepend_scheme", "first");
        cJSON_AddBoolToObject(pt, "split", false);
    } else {
        cJSON *nz = cJSON_AddObjectToObject(root, "normalizer"), *ns = cJSON_AddArrayToObject(nz, "normalizers");
        cJSON_AddStringToObject(nz, "type", "Sequence");
        cJSON *p = cJSON_CreateObject(), *r = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "type", "Prepend");
        cJSON_AddStringToObject(p, "prepend", ws);
        cJSON_AddStringToObject(r, "type", "Replace");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(r, "pattern"), "String", " ");
        cJSON_AddStringToObject(r, "content", ws);
        cJSON_AddItemToArray(ns, p);
        cJSON_AddItemToArray(ns, r);
        cJSON_AddNullToObject(root, "pre_tokenizer");
    }
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddStringToObject(model, "unk_token", "<unk>");
    cJSON_AddBoolToObject(model, "fuse_unk", true);
    cJSON_AddBoolToObject(model, "byte_fallback", true);
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab"), *merges = cJSON_AddArrayToObject(model, "merges");
    for (int64_t i = 0; i < n; i++) cJSON_AddNumberToObject(vocab, t[i], (double)i);
    for (size_t k = 0; k < nm; k++) {
        if (metaspace) {
            const char *pair[2] = {t[m[k].l], t[m[k].r]};
            cJSON_AddItemToArray(merges, cJSON_CreateStringArray(pair, 2));
        } else {
            snprintf(buf, sizeof buf, "%s %s", t[m[k].l], t[m[k].r]);
            cJSON_AddItemToArray(merges, cJSON_CreateString(buf));
        }
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    free(m);
    vx_name_index_free(&ix);
    for (int64_t i = 0; i < n; i++) free(t[i]);
    free(t);
    return json;
}

/* A tokenizer.json converted and loaded: its vocabulary (NULL and a
 * failed check when either fails); *g keeps the converted keys. */
static vx_vocab *spm_json_vocab(const char *json, vx_gguf **g, const char *what) {
    char err[512] = "";
    vx_gguf_writer *w = vx_gguf_writer_init();
    vx_vocab *v = NULL;
    *g = NULL;
    vx_status st = vx_hf_tokenizer_to_gguf(json, strlen(json), k_llama2_cfg, strlen(k_llama2_cfg), NULL, 0, 32000, w,
                                           err, sizeof err);
    CHECKF(st == VX_OK, "%s: %s", what, err);
    if (!st) st = vx_gguf_writer_open_reader(w, release_writer, w, g, err, sizeof err);
    else vx_gguf_writer_free(w);
    if (!st) st = vx_vocab_load(*g, &v, err, sizeof err);
    CHECKF(st == VX_OK, "%s: %s", what, err);
    return v;
}

/* json with its first `from` replaced by `to` (a copy) */
static char *json_edit(const char *json, const char *from, const char *to) {
    const char *at = strstr(json, from);
    if (!at) return NULL;
    const size_t lf = strlen(from), lt = strlen(to), lj = strlen(json), pre = (size_t)(at - json);
    char *b = malloc(lj - lf + lt + 1);
    memcpy(b, json, pre);
    memcpy(b + pre, to, lt);
    memcpy(b + pre + lt, at + lf, lj - pre - lf + 1);
    return b;
}

/* o200k's Split regex (GPT-4o's and gpt-oss's tokenizer.json) names the
 * "gpt-4o" pre-tokenizer: Llama 3's fixture tokenizer.json with its regex
 * swapped for o200k's, as tiktoken's o200k_base pattern is published. */
static void test_o200k_regex(void) {
    static const char o200k[] =
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
        "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    size_t len = 0;
    char *json = gunzip(vx_test_fixture_path("tokenizer/hf/llama3/tokenizer.json.gz"), &len);
    cJSON *j = json ? cJSON_ParseWithLength(json, len) : NULL;
    free(json);
    cJSON *pts = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "pre_tokenizer"), "pretokenizers");
    cJSON *pat = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(pts, 0), "pattern");
    CHECK(pat && cJSON_GetObjectItemCaseSensitive(pat, "Regex"));
    if (!pat) {
        cJSON_Delete(j);
        return;
    }
    cJSON_ReplaceItemInObjectCaseSensitive(pat, "Regex", cJSON_CreateString(o200k));
    char *t = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    char err[512] = "";
    vx_gguf_writer *w = vx_gguf_writer_init();
    vx_gguf *g = NULL;
    vx_status st = vx_hf_tokenizer_to_gguf(t, strlen(t), NULL, 0, NULL, 0, 0, w, err, sizeof err);
    if (!st) st = vx_gguf_writer_open_reader(w, release_writer, w, &g, err, sizeof err);
    else vx_gguf_writer_free(w);
    const char *pre = NULL;
    CHECKF(st == VX_OK && vx_gguf_get_str(g, "tokenizer.ggml.pre", &pre) == 1 && !strcmp(pre, "gpt-4o"), "%s: %s", err,
           pre ? pre : "(none)");
    vx_gguf_close(g);
    free(t);
}

/* Ids Hugging Face's tokenizers (the npm package tokenizers 0.23.2, the
 * Rust library) gave for these layouts of Llama 2's tokenizer.json,
 * special tokens parsed */
typedef struct hf_case {
    const char *text;
    int n;
    vx_token ids[6];
} hf_case;

static int check_cases(const vx_vocab *v, const hf_case *c, int n, const char *what) {
    int pass = 0;
    for (int i = 0; v && i < n; i++) {
        vx_token got[64];
        const int32_t k = vx_tokenize(v, c[i].text, -1, got, 64, false, true);
        const bool ok = k == c[i].n && !memcmp(got, c[i].ids, (size_t)c[i].n * sizeof *got);
        CHECKF(ok, "%s: '%s' gives %d ids (first %d), Hugging Face %d (first %d)", what, c[i].text, k, k > 0 ? got[0] : -1,
               c[i].n, c[i].ids[0]);
        pass += ok;
    }
    return pass;
}

/* A byte-fallback BPE tokenizer.json (Llama 2's vocabulary, both layouts)
 * must load as the SentencePiece vocabulary llama.cpp has for it (tokens,
 * types, special ids, flags) and tokenize as Hugging Face does: the
 * Prepend + Replace layout (which prefixes "▁" as llama.cpp does) into
 * llama.cpp's ids for the 46 strings; the Metaspace layout with its own
 * prefix rule (none on text starting with a space; "first": none after a
 * special token), its split, and with merges removed (a token no merge
 * makes is never made); what it cannot take is refused with the reason. */
static void test_spm_json(void) {
    char err[512] = "";
    vx_gguf *ref = NULL;
    CHECK(vx_gguf_open(vx_test_fixture_path("tokenizer/ggml-vocab-llama-spm.gguf"), &ref, err, sizeof err) == VX_OK);
    if (!ref) return;
    static const hf_case prep[] = {{" Hello", 2, {29871, 15043}},
                                   {"<s>Hello", 2, {1, 15043}},
                                   {"Hello <s> world", 5, {15043, 29871, 1, 29871, 3186}}};
    static const hf_case first[] = {{" Hello", 1, {15043}},
                                    {" ", 1, {29871}},
                                    {"<s>Hello", 2, {1, 10994}},
                                    {"<s> Hello", 2, {1, 15043}},
                                    {"Hello<s>world", 3, {15043, 1, 11526}},
                                    {"Hello <s> world", 4, {15043, 29871, 1, 3186}},
                                    {"   Hello", 2, {259, 15043}}};
    static const hf_case always[] = {{" Hello", 1, {15043}}, {"<s>Hello", 2, {1, 15043}}, {"Hello<s>world", 3, {15043, 1, 3186}}};
    static const hf_case split[] = {{"   Hello", 3, {29871, 29871, 15043}}, {"  ", 2, {29871, 29871}}, {"<s>Hello", 2, {1, 10994}}};
    static const hf_case unmade[] = {{"Hello world", 4, {6162, 417, 281, 1613}}, {" Hello", 2, {6162, 417}}};
    vx_vocab *v0 = NULL; /* the Prepend + Replace layout's */
    vx_gguf *g0 = NULL;
    for (int layout = 0; layout < 2; layout++) {
        char *json = llama2_tokenizer_json(ref, layout == 1);
        CHECK(json != NULL);
        if (!json) continue;
        vx_gguf *imp = NULL;
        vx_vocab *v = spm_json_vocab(json, &imp, layout ? "Metaspace layout" : "Prepend layout");
        if (imp) {
            const char *const *keys = k_spm_keys;
            int same = 0;
            for (size_t i = 0; i < N_SPM_KEYS; i++) {
                const bool eq = same_kv(imp, ref, keys[i]);
                CHECKF(eq, "byte-fallback tokenizer.json (layout %d): %s differs", layout, keys[i]);
                same += eq;
            }
            CHECK(vx_gguf_find(imp, "tokenizer.ggml.add_space_prefix") == NULL); /* the default: true */
            CHECK((vx_gguf_find(imp, "vortex.tokenizer.prepend_scheme") != NULL) == (layout == 1));
            int n_tests = 0, pass = v && (layout == 0 || v0) ? run_inp_as(v, "llama-spm", layout ? v0 : NULL, &n_tests) : 0;
            CHECK(n_tests == 46 - layout);
            const int nc = layout ? (int)(sizeof first / sizeof first[0]) : (int)(sizeof prep / sizeof prep[0]);
            const int pc = check_cases(v, layout ? first : prep, nc, layout ? "Metaspace" : "Prepend");
            printf("  tokenizer.json, byte-fallback BPE (Llama 2's vocabulary, %s) %d/%zu keys, %d/%d .inp strings%s, "
                   "%d/%d Hugging Face cases\n",
                   layout ? "Metaspace, [a, b] merges" : "Prepend + Replace, \"a b\" merges", same,
                   N_SPM_KEYS, pass, n_tests, layout ? " (as HF: no prefix on a leading space)" : "",
                   pc, nc);
        }
        if (layout == 0) {
            v0 = v, g0 = imp;
        } else {
            vx_vocab_free(v);
            vx_gguf_close(imp);
            /* Metaspace variants: "always", split, merges removed */
            static const struct {
                const char *from, *to;
                const hf_case *c;
                int n;
            } var[] = {{"\"prepend_scheme\":\"first\"", "\"prepend_scheme\":\"always\"", always, 3},
                       {"\"split\":false", "\"split\":true", split, 3},
                       {"[\"\xE2\x96\x81\",\"Hello\"],", "", unmade, 2}};
            for (size_t k = 0; k < sizeof var / sizeof var[0]; k++) {
                char *j2 = json_edit(json, var[k].from, var[k].to);
                /* the unmade case: the other merges that make "▁Hello",
                 * "ello" or "▁world" gone too (all there are) */
                static const char *const gone[] = {"[\"\xE2\x96\x81H\",\"ello\"],", "[\"\xE2\x96\x81Hel\",\"lo\"],",
                                                   "[\"\xE2\x96\x81Hell\",\"o\"],", "[\"el\",\"lo\"],", "[\"ell\",\"o\"],",
                                                   "[\"\xE2\x96\x81\",\"world\"],", "[\"\xE2\x96\x81w\",\"orld\"],",
                                                   "[\"\xE2\x96\x81wor\",\"ld\"],"};
                for (size_t q = 0; k == 2 && j2 && q < sizeof gone / sizeof gone[0]; q++) {
                    char *j3 = json_edit(j2, gone[q], "");
                    CHECKF(j3 != NULL, "merge %s is not in the tokenizer.json", gone[q]);
                    if (j3) free(j2), j2 = j3;
                }
                CHECKF(j2 != NULL, "variant %zu does not apply", k);
                if (!j2) continue;
                vx_gguf *g2 = NULL;
                vx_vocab *v2 = spm_json_vocab(j2, &g2, var[k].to);
                const int pc = check_cases(v2, var[k].c, var[k].n, var[k].to[0] ? var[k].to : "merges removed");
                printf("  tokenizer.json, byte-fallback BPE, Metaspace %s: %d/%d Hugging Face cases\n",
                       k == 0 ? "\"always\"" : k == 1 ? "split" : "without the merges of \"\xE2\x96\x81Hello\"", pc, var[k].n);
                vx_vocab_free(v2);
                vx_gguf_close(g2);
                free(j2);
            }
        }
        /* what is refused: a normalizer it does not know, spaces kept,
         * a merge that makes no token */
        static const struct {
            const char *from, *to, *want;
        } bad[] = {{"\"normalizer\":null", "\"normalizer\":{\"type\":\"NFKC\"}", "normalizer 'NFKC'"},
                   {"\"pre_tokenizer\":{\"type\":\"Metaspace\"", "\"pre_tokenizer\":{\"type\":\"Digits\"", "pre-tokenizer 'Digits'"},
                   {"{\"type\":\"Replace\",", "{\"type\":\"Lowercase\",", "normalizer 'Lowercase'"},
                   {"\"prepend\":\"\xE2\x96\x81\"},{\"type\":\"Replace\"", "\"prepend\":\"\xE2\x96\x81\"},{\"type\":\"Strip\"", "normalizer 'Strip'"},
                   {"\"merges\":[\"\xE2\x96\x81 t\"", "\"merges\":[\"\xE2\x96\x81 tq\"", "not in the vocabulary"},
                   {"\"merges\":[[\"\xE2\x96\x81\",\"t\"]", "\"merges\":[[\"\xE2\x96\x81\",\"tq\"]", "not in the vocabulary"},
                   {"\"prepend_scheme\":\"first\"", "\"prepend_scheme\":\"sometimes\"", "prepend_scheme 'sometimes'"}};
        int refused = 0, tried = 0;
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            char *b = json_edit(json, bad[i].from, bad[i].to);
            if (!b) continue;
            tried++;
            vx_gguf_writer *w2 = vx_gguf_writer_init();
            err[0] = 0;
            const vx_status s2 = vx_hf_tokenizer_to_gguf(b, strlen(b), NULL, 0, NULL, 0, 0, w2, err, sizeof err);
            refused += s2 != VX_OK && strstr(err, bad[i].want) != NULL;
            CHECKF(s2 != VX_OK && strstr(err, bad[i].want), "layout %d, %s: %s (wanted '%s')", layout, bad[i].to, err,
                   bad[i].want);
            vx_gguf_writer_free(w2);
            free(b);
        }
        CHECKF(tried == 3 + layout, "layout %d: %d of the refusal cases apply (want %d)", layout, tried, 3 + layout);
        free(json);
    }
    vx_vocab_free(v0);
    vx_gguf_close(g0);
    vx_gguf_close(ref);
}

/* ------------------------------------------------------------ models */

typedef struct st_ent {
    char name[128];
    const char *dtype;
    int nd;
    int64_t shape[4];
    const void *data;
    size_t size;
} st_ent;

/* A safetensors file of the entries (header padded to 8 bytes). */
static bool write_st(const char *path, const st_ent *e, int n) {
    cJSON *h = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(h, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        cJSON *t = cJSON_AddObjectToObject(h, e[i].name);
        cJSON_AddStringToObject(t, "dtype", e[i].dtype);
        cJSON *s = cJSON_AddArrayToObject(t, "shape");
        for (int d = 0; d < e[i].nd; d++) cJSON_AddItemToArray(s, cJSON_CreateNumber((double)e[i].shape[d]));
        cJSON *o = cJSON_AddArrayToObject(t, "data_offsets");
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(off + e[i].size)));
        off += e[i].size;
    }
    char *txt = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    FILE *f = fopen(path, "wb");
    if (!f || !txt) {
        if (f) fclose(f);
        free(txt);
        return false;
    }
    size_t hl = strlen(txt);
    const size_t pad = (8 - hl % 8) % 8;
    const uint64_t n8 = hl + pad;
    bool ok = fwrite(&n8, 8, 1, f) == 1 && fwrite(txt, 1, hl, f) == hl;
    for (size_t i = 0; i < pad; i++) ok &= fputc(' ', f) != EOF;
    for (int i = 0; i < n; i++) ok &= e[i].size == 0 || fwrite(e[i].data, 1, e[i].size, f) == e[i].size;
    ok &= fclose(f) == 0;
    free(txt);
    return ok;
}

static bool write_text(const char *dir, const char *name, const char *text) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    const bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

/* The HF name of a GGUF tensor name (NULL: none). */
static const char *hf_name(const char *g, char *buf, size_t size, bool gemma2) {
    /* Gemma 2's four norms per layer */
    static const char *const g2[][2] = {{"post_attention_norm.weight", "post_attention_layernorm.weight"},
                                        {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
                                        {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"}};
    unsigned gl;
    int gp = 0;
    if (gemma2 && sscanf(g, "blk.%u.%n", &gl, &gp) == 1 && gp)
        for (size_t i = 0; i < 3; i++)
            if (!strcmp(g + gp, g2[i][0])) {
                snprintf(buf, size, "model.layers.%u.%s", gl, g2[i][1]);
                return buf;
            }
    static const char *const top[][2] = {{"token_embd.weight", "model.embed_tokens.weight"},
                                         {"output_norm.weight", "model.norm.weight"},
                                         {"output.weight", "lm_head.weight"}};
    for (size_t i = 0; i < 3; i++)
        if (!strcmp(g, top[i][0])) return top[i][1];
    static const char *const layer[][2] = {
        {"attn_norm.weight", "input_layernorm.weight"}, {"ffn_norm.weight", "post_attention_layernorm.weight"},
        {"attn_q.weight", "self_attn.q_proj.weight"},   {"attn_k.weight", "self_attn.k_proj.weight"},
        {"attn_v.weight", "self_attn.v_proj.weight"},   {"attn_output.weight", "self_attn.o_proj.weight"},
        {"attn_q.bias", "self_attn.q_proj.bias"},       {"attn_k.bias", "self_attn.k_proj.bias"},
        {"attn_v.bias", "self_attn.v_proj.bias"},       {"attn_q_norm.weight", "self_attn.q_norm.weight"},
        {"attn_k_norm.weight", "self_attn.k_norm.weight"}, {"attn_qkv.weight", "self_attn.qkv_proj.weight"},
        {"ffn_gate.weight", "mlp.gate_proj.weight"},    {"ffn_down.weight", "mlp.down_proj.weight"},
        /* Qwen2-MoE's shared expert and its gate */
        {"ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight"},
        {"ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight"},
        {"ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight"},
        {"ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight"}};
    unsigned il;
    int pos = 0;
    if (sscanf(g, "blk.%u.%n", &il, &pos) != 1 || !pos) return NULL;
    for (size_t i = 0; i < sizeof layer / sizeof layer[0]; i++)
        if (!strcmp(g + pos, layer[i][0])) {
            snprintf(buf, size, "model.layers.%u.%s", il, layer[i][1]);
            return buf;
        }
    return NULL;
}

typedef struct hf_opts {
    int shards;             /* 1: model.safetensors; 2: an index and two shards */
    const char *arch_class; /* NULL: the GGUF architecture's */
    const char *bad_dtype;  /* relabel the embedding with this dtype */
    bool no_tokenizer;
    bool spm; /* tokenizer.model (SentencePiece) instead of tokenizer.json */
    int fp8;  /* weight matrices as FP8 e4m3: 1 with 48 x 40 block scales, 2 with row scales;
               * -1 / -2: the same quantization written as the BF16 values it stands for */
    int gptq; /* weight matrices as int4 in groups of 64: 1 GPTQ symmetric, 2 GPTQ asymmetric (v1 zeros),
               * 3 AWQ (GEMM layout, asymmetric), 4 GPTQ asymmetric act-order (desc_act: groups of shuffled
               * inputs), 5 the same with g_idx[0] past the last group; -1 .. -4: the F32 values they stand for */
} hf_opts;

/* e4m3fn value of byte b (b < 0x7F: the finite non-negative ones) */
static float e4m3(int b) {
    const int e = b >> 3 & 15, m = b & 7;
    return e ? ldexpf((float)(8 | m), e - 10) : ldexpf((float)m, -9);
}

/* the e4m3fn byte nearest to x (|x| <= 448): the values of bytes
 * 0..0x7E increase with the byte, so a binary search finds it */
static uint8_t to_e4m3(float x) {
    const float a = fabsf(x);
    int lo = 0, hi = 0x7E;
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (e4m3(mid) < a) lo = mid + 1;
        else hi = mid;
    }
    const int best = lo > 0 && a - e4m3(lo - 1) <= e4m3(lo) - a ? lo - 1 : lo;
    return (uint8_t)(best | (x < 0 ? 0x80 : 0));
}

/* The rows x cols F16 matrix src as FP8 (mode 1: 48 x 40 blocks, 2: rows)
 * with its scales; ref: the BF16 values that stand for instead. */
static void fp8_quantize(const uint16_t *src, int64_t rows, int64_t cols, int mode, uint8_t *q, float *scale,
                         int64_t *sr, int64_t *sc, uint16_t *ref) {
    const int64_t br = mode == 1 ? 48 : 1, bc = mode == 1 ? 40 : cols;
    *sr = (rows + br - 1) / br;
    *sc = (cols + bc - 1) / bc;
    for (int64_t R = 0; R < *sr; R++)
        for (int64_t C = 0; C < *sc; C++) {
            float amax = 0;
            for (int64_t r = R * br; r < rows && r < (R + 1) * br; r++)
                for (int64_t j = C * bc; j < cols && j < (C + 1) * bc; j++)
                    amax = fmaxf(amax, fabsf(vx_fp16_to_fp32(src[r * cols + j])));
            const float s = amax > 0 ? amax / 448.0f : 1.0f;
            scale[R * *sc + C] = s;
            for (int64_t r = R * br; r < rows && r < (R + 1) * br; r++)
                for (int64_t j = C * bc; j < cols && j < (C + 1) * bc; j++) {
                    const uint8_t b = to_e4m3(vx_fp16_to_fp32(src[r * cols + j]) / s);
                    q[r * cols + j] = b;
                    ref[r * cols + j] = vx_fp32_to_bf16((b & 0x80 ? -e4m3(b & 0x7F) : e4m3(b)) * s);
                }
        }
}

/* GPTQ int4 of the rows x cols F16 matrix src (HF orientation: rows are
 * outputs), groups of 64 inputs: qweight [cols/8][rows], qzeros
 * [groups][rows/8] (v1: zero - 1), scales F16 [groups][rows], g_idx;
 * awq: AutoAWQ's GEMM layout instead, qweight [cols][rows/8] and qzeros
 * [groups][rows/8] with outputs 0 2 4 6 1 3 5 7 in a word's nibbles 0..7,
 * zeros as they are, no g_idx; act: act-order, group g the inputs at
 * places g G .. g G + G - 1 of a fixed shuffle (g_idx says which); deq:
 * the values they stand for (F32, rows x cols). */
static void gptq_quantize(const uint16_t *src, int64_t rows, int64_t cols, bool sym, bool awq, bool act, uint32_t *qw,
                          uint32_t *qz, uint16_t *sc, int32_t *gidx, float *deq) {
    static const int awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    int nib_of[8]; /* AWQ: the nibble output n % 8 goes to */
    for (int i = 0; i < 8; i++) nib_of[awq_order[i]] = i;
    const int64_t G = 64, ng = cols / G;
    memset(qw, 0, (size_t)(cols / 8 * rows) * 4);
    memset(qz, 0, (size_t)(ng * rows / 8) * 4);
    int64_t *order = malloc((size_t)cols * sizeof *order);
    uint32_t rs = 12345;
    for (int64_t i = 0; i < cols; i++) order[i] = i;
    for (int64_t i = cols - 1; i > 0 && act; i--) { /* Fisher-Yates */
        rs = rs * 1103515245u + 12345u;
        const int64_t j = (int64_t)(rs >> 8) % (i + 1), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    for (int64_t i = 0; i < cols && gidx; i++) gidx[order[i]] = (int32_t)(i / G);
    for (int64_t n = 0; n < rows; n++)
        for (int64_t g = 0; g < ng; g++) {
            float lo = 0, hi = 0, amax = 0;
            for (int64_t i = g * G; i < (g + 1) * G; i++) {
                const int64_t k = order[i];
                const float w = vx_fp16_to_fp32(src[n * cols + k]);
                lo = fminf(lo, w), hi = fmaxf(hi, w), amax = fmaxf(amax, fabsf(w));
            }
            float s = sym ? amax / 7.0f : (hi - lo) / 15.0f;
            if (s == 0) s = 1;
            s = vx_fp16_to_fp32(vx_fp32_to_fp16(s));
            const int z = sym ? 8 : (int)fminf(15, fmaxf(0, roundf(-lo / s)));
            sc[g * rows + n] = vx_fp32_to_fp16(s);
            if (awq) qz[g * (rows / 8) + n / 8] |= (uint32_t)z << (4 * nib_of[n % 8]);
            else qz[g * (rows / 8) + n / 8] |= (uint32_t)((z - 1) & 15) << (4 * (n % 8));
            for (int64_t i = g * G; i < (g + 1) * G; i++) {
                const int64_t k = order[i];
                const int q = (int)fminf(15, fmaxf(0, roundf(vx_fp16_to_fp32(src[n * cols + k]) / s) + (float)z));
                if (awq) qw[k * (rows / 8) + n / 8] |= (uint32_t)q << (4 * nib_of[n % 8]);
                else qw[(k / 8) * rows + n] |= (uint32_t)q << (4 * (k % 8));
                deq[n * cols + k] = s * (float)(q - z);
            }
        }
    free(order);
}

/* A fixture's path, or rel itself when it is absolute (a model the test wrote) */
static const char *model_path(const char *rel) { return rel[0] == '/' ? rel : vx_test_fixture_path(rel); }

/* Writes the GGUF model at rel as a Hugging Face directory dir. */
/* gpt-oss's tensors as GptOssForCausalLM's checkpoints hold them: the
 * experts of a layer in one tensor each, MXFP4 as blocks [E, rows, n/32,
 * 16] (element 2j in the low nibble of byte j) and scales [E, rows, n/32],
 * gate and up rows interleaved in gate_up_proj (gate the even ones), the
 * biases likewise; the router, the sinks and the post-attention norm under
 * their names. Fills e[0..r) (r returned; 0: not one of these, handled by
 * the common code; -1: a failure) with malloc'd data in bufs. */
static int export_oss_tensor(const vx_gguf *g, const vx_gguf_tensor *t, st_ent *e, void **bufs) {
    unsigned il;
    int pos = 0;
    if (sscanf(t->name, "blk.%u.%n", &il, &pos) != 1 || !pos) return 0;
    const char *r = t->name + pos;
    static const char *const plain[][2] = {{"post_attention_norm.weight", "post_attention_layernorm.weight"},
                                           {"attn_sinks.weight", "self_attn.sinks"},
                                           {"ffn_gate_inp.weight", "mlp.router.weight"},
                                           {"ffn_gate_inp.bias", "mlp.router.bias"},
                                           {"attn_output.bias", "self_attn.o_proj.bias"}};
    for (size_t i = 0; i < sizeof plain / sizeof *plain; i++)
        if (!strcmp(r, plain[i][0])) {
            snprintf(e->name, sizeof e->name, "model.layers.%u.%s", il, plain[i][1]);
            e->dtype = t->type == VX_TYPE_F32 ? "F32" : t->type == VX_TYPE_F16 ? "F16" : "BF16";
            e->nd = t->ne[1] > 1 ? 2 : 1;
            e->shape[0] = e->nd == 2 ? t->ne[1] : t->ne[0];
            e->shape[1] = t->ne[0];
            e->data = t->data;
            e->size = (size_t)t->size;
            return 1;
        }
    if (!strcmp(r, "ffn_up_exps.weight") || !strcmp(r, "ffn_up_exps.bias")) return -2; /* with the gate's */
    const bool gw = !strcmp(r, "ffn_gate_exps.weight"), dw = !strcmp(r, "ffn_down_exps.weight");
    const bool gb = !strcmp(r, "ffn_gate_exps.bias"), db = !strcmp(r, "ffn_down_exps.bias");
    if (!gw && !dw && !gb && !db) return 0;
    const vx_gguf_tensor *u = NULL;
    char un[64];
    if (gw || gb) {
        snprintf(un, sizeof un, "blk.%u.ffn_up_exps.%s", il, gw ? "weight" : "bias");
        if (!(u = vx_gguf_find_tensor(g, un))) return -1;
    }
    const char *proj = gw || gb ? "gate_up_proj" : "down_proj";
    if (gb || db) { /* [R, E] F32 -> [E, rows] */
        const int64_t R = t->ne[0], E = t->ne[1], rows = gb ? 2 * R : R;
        float *f = malloc((size_t)(E * rows) * 4);
        if (!f || t->type != VX_TYPE_F32) return free(f), -1;
        for (int64_t x = 0; x < E; x++)
            for (int64_t k = 0; k < rows; k++)
                f[x * rows + k] = gb ? ((const float *)(k & 1 ? u : t)->data)[x * R + k / 2] : ((const float *)t->data)[x * R + k];
        snprintf(e->name, sizeof e->name, "model.layers.%u.mlp.experts.%s_bias", il, proj);
        e->dtype = "F32";
        e->nd = 2;
        e->shape[0] = E;
        e->shape[1] = rows;
        e->data = *bufs = f;
        e->size = (size_t)(E * rows) * 4;
        return 1;
    }
    const int64_t n_in = t->ne[0], R = t->ne[1], E = t->ne[2], nb = n_in / 32, rows = gw ? 2 * R : R;
    if (t->type == VX_TYPE_F32 && (!u || u->type == VX_TYPE_F32)) { /* unquantized: [E, n_in, rows], transposed */
        float *f = malloc((size_t)(E * n_in * rows) * 4);
        if (!f) return -1;
        for (int64_t x = 0; x < E; x++)
            for (int64_t i = 0; i < n_in; i++)
                for (int64_t k = 0; k < rows; k++)
                    f[(x * n_in + i) * rows + k] =
                        ((const float *)(gw && (k & 1) ? u : t)->data)[(x * R + (gw ? k / 2 : k)) * n_in + i];
        snprintf(e->name, sizeof e->name, "model.layers.%u.mlp.experts.%s", il, proj);
        e->dtype = "F32";
        e->nd = 3;
        e->shape[0] = E, e->shape[1] = n_in, e->shape[2] = rows;
        e->data = *bufs = f;
        e->size = (size_t)(E * n_in * rows) * 4;
        return 1;
    }
    if (t->type != VX_TYPE_MXFP4 || (u && u->type != VX_TYPE_MXFP4)) return -1;
    uint8_t *blocks = malloc((size_t)(E * rows * nb) * 16), *scales = malloc((size_t)(E * rows * nb));
    if (!blocks || !scales) return free(blocks), free(scales), -1;
    for (int64_t x = 0; x < E; x++)
        for (int64_t k = 0; k < rows; k++)
            for (int64_t b = 0; b < nb; b++) {
                const vx_gguf_tensor *s = gw && (k & 1) ? u : t;
                const vx_block_mxfp4 *q = (const vx_block_mxfp4 *)s->data + (x * R + (gw ? k / 2 : k)) * nb + b;
                const size_t d = (size_t)((x * rows + k) * nb + b);
                scales[d] = q->e;
                for (int j = 0; j < 16; j++) { /* elements 2j and 2j + 1 of the block */
                    const int lo = 2 * j, hi = 2 * j + 1;
                    const int cl = lo < 16 ? q->qs[lo] & 0x0F : q->qs[lo - 16] >> 4;
                    const int ch = hi < 16 ? q->qs[hi] & 0x0F : q->qs[hi - 16] >> 4;
                    blocks[16 * d + (size_t)j] = (uint8_t)(cl | ch << 4);
                }
            }
    snprintf(e[0].name, sizeof e[0].name, "model.layers.%u.mlp.experts.%s_blocks", il, proj);
    e[0].dtype = "U8";
    e[0].nd = 4;
    e[0].shape[0] = E, e[0].shape[1] = rows, e[0].shape[2] = nb, e[0].shape[3] = 16;
    e[0].data = bufs[0] = blocks;
    e[0].size = (size_t)(E * rows * nb) * 16;
    snprintf(e[1].name, sizeof e[1].name, "model.layers.%u.mlp.experts.%s_scales", il, proj);
    e[1].dtype = "U8";
    e[1].nd = 3;
    e[1].shape[0] = E, e[1].shape[1] = rows, e[1].shape[2] = nb;
    e[1].data = bufs[1] = scales;
    e[1].size = (size_t)(E * rows * nb);
    return 2;
}

static bool export_hf(const char *rel, const char *dir, const hf_opts *o) {
    char err[512];
    vx_gguf *g = NULL;
    if (vx_gguf_open(model_path(rel), &g, err, sizeof err) != VX_OK) {
        fprintf(stderr, "%s: %s\n", rel, err);
        return false;
    }
    const char *arch = NULL;
    vx_gguf_get_str(g, "general.architecture", &arch);
    char key[128];
    int64_t E = 0, L = 0, F = 0, H = 0, HKV = 0, HD = 0, CTX = 0;
    double eps = 1e-5, theta = 10000;
#define GI(s, v) (snprintf(key, sizeof key, "%s.%s", arch, s), vx_gguf_get_i64(g, key, &v))
#define GF(s, v) (snprintf(key, sizeof key, "%s.%s", arch, s), vx_gguf_get_f64(g, key, &v))
    GI("embedding_length", E), GI("block_count", L), GI("feed_forward_length", F), GI("attention.head_count", H);
    HKV = H;
    GI("attention.head_count_kv", HKV);
    HD = E / H;
    GI("attention.key_length", HD);
    GI("context_length", CTX);
    GF("attention.layer_norm_rms_epsilon", eps), GF("rope.freq_base", theta);
#undef GI
#undef GF
    /* Granite: Llama's tensors (permuted q/k too) */
    const bool granite = !strcmp(arch, "granite"), llama = !strcmp(arch, "llama") || granite,
               tied = !vx_gguf_find_tensor(g, "output.weight");
    int64_t X = 0, XU = 0;
    snprintf(key, sizeof key, "%s.expert_count", arch);
    vx_gguf_get_i64(g, key, &X);
    snprintf(key, sizeof key, "%s.expert_used_count", arch);
    vx_gguf_get_i64(g, key, &XU);

    cJSON *cfg = cJSON_CreateObject();
    cJSON *archs = cJSON_AddArrayToObject(cfg, "architectures");
    const char *cls = o->arch_class ? o->arch_class
                      : granite ? "GraniteForCausalLM"
                      : llama && X > 0 ? "MixtralForCausalLM"
                      : llama       ? "LlamaForCausalLM"
                      : !strcmp(arch, "qwen2") ? "Qwen2ForCausalLM"
                      : !strcmp(arch, "qwen3") ? "Qwen3ForCausalLM"
                      : !strcmp(arch, "gemma") ? "GemmaForCausalLM"
                      : !strcmp(arch, "gemma2") ? "Gemma2ForCausalLM"
                      : !strcmp(arch, "gemma3") ? "Gemma3ForCausalLM"
                      : !strcmp(arch, "qwen3moe") ? "Qwen3MoeForCausalLM"
                      : !strcmp(arch, "qwen2moe") ? "Qwen2MoeForCausalLM"
                      : !strcmp(arch, "gpt-oss") ? "GptOssForCausalLM"
                                               : "Phi3ForCausalLM";
    cJSON_AddItemToArray(archs, cJSON_CreateString(cls));
    cJSON_AddNumberToObject(cfg, "hidden_size", (double)E);
    cJSON_AddNumberToObject(cfg, "num_hidden_layers", (double)L);
    cJSON_AddNumberToObject(cfg, "intermediate_size", (double)F);
    cJSON_AddNumberToObject(cfg, "num_attention_heads", (double)H);
    cJSON_AddNumberToObject(cfg, "num_key_value_heads", (double)HKV);
    cJSON_AddNumberToObject(cfg, "head_dim", (double)HD);
    cJSON_AddNumberToObject(cfg, "max_position_embeddings", (double)CTX);
    cJSON_AddNumberToObject(cfg, "rms_norm_eps", eps);
    cJSON_AddNumberToObject(cfg, "rope_theta", theta);
    cJSON_AddBoolToObject(cfg, "tie_word_embeddings", tied);
    cJSON_AddNullToObject(cfg, "rope_scaling");
    if (!strcmp(arch, "gemma2")) {
        double acap = 0, fcap = 0;
        int64_t swa = 0;
        snprintf(key, sizeof key, "gemma2.attn_logit_softcapping");
        vx_gguf_get_f64(g, key, &acap);
        snprintf(key, sizeof key, "gemma2.final_logit_softcapping");
        vx_gguf_get_f64(g, key, &fcap);
        snprintf(key, sizeof key, "gemma2.attention.sliding_window");
        vx_gguf_get_i64(g, key, &swa);
        cJSON_AddNumberToObject(cfg, "attn_logit_softcapping", acap);
        cJSON_AddNumberToObject(cfg, "final_logit_softcapping", fcap);
        cJSON_AddNumberToObject(cfg, "sliding_window", (double)swa);
        cJSON_AddNumberToObject(cfg, "query_pre_attn_scalar", (double)HD);
        cJSON_AddStringToObject(cfg, "hidden_activation", "gelu_pytorch_tanh");
    }
    if (!strcmp(arch, "gemma3")) { /* the window, its pattern and base, linear scaling as the 4B+ models */
        int64_t swa = 0;
        double factor = 0;
        snprintf(key, sizeof key, "gemma3.attention.sliding_window");
        vx_gguf_get_i64(g, key, &swa);
        snprintf(key, sizeof key, "gemma3.rope.scaling.factor");
        vx_gguf_get_f64(g, key, &factor);
        cJSON_AddNumberToObject(cfg, "sliding_window", (double)swa);
        cJSON_AddNumberToObject(cfg, "sliding_window_pattern", 6);
        cJSON_AddNumberToObject(cfg, "rope_local_base_freq", 10000);
        cJSON_AddNumberToObject(cfg, "query_pre_attn_scalar", (double)HD);
        cJSON_AddNullToObject(cfg, "attn_logit_softcapping");
        cJSON_AddNullToObject(cfg, "final_logit_softcapping");
        cJSON_AddStringToObject(cfg, "hidden_activation", "gelu_pytorch_tanh");
        if (factor > 0) {
            cJSON_DeleteItemFromObject(cfg, "rope_scaling");
            cJSON *rs = cJSON_AddObjectToObject(cfg, "rope_scaling");
            cJSON_AddStringToObject(rs, "rope_type", "linear");
            cJSON_AddNumberToObject(rs, "factor", factor);
        }
    }
    const bool oss = !strcmp(arch, "gpt-oss");
    if (oss) { /* GptOssConfig: the experts' length, the window on every other layer, YaRN */
        int64_t FX = F, swa = 0, orig = 0;
        double factor = 0;
        vx_gguf_get_i64(g, "gpt-oss.expert_feed_forward_length", &FX);
        vx_gguf_get_i64(g, "gpt-oss.attention.sliding_window", &swa);
        vx_gguf_get_f64(g, "gpt-oss.rope.scaling.factor", &factor);
        vx_gguf_get_i64(g, "gpt-oss.rope.scaling.original_context_length", &orig);
        cJSON_ReplaceItemInObject(cfg, "intermediate_size", cJSON_CreateNumber((double)FX));
        cJSON_AddNumberToObject(cfg, "sliding_window", (double)swa);
        cJSON *lt = cJSON_AddArrayToObject(cfg, "layer_types");
        for (int64_t il = 0; il < L; il++)
            cJSON_AddItemToArray(lt, cJSON_CreateString(il % 2 ? "full_attention" : "sliding_attention"));
        cJSON_AddNumberToObject(cfg, "swiglu_limit", 7.0);
        cJSON_AddBoolToObject(cfg, "attention_bias", true);
        cJSON_DeleteItemFromObject(cfg, "rope_scaling");
        cJSON *rs = cJSON_AddObjectToObject(cfg, "rope_scaling");
        cJSON_AddStringToObject(rs, "rope_type", "yarn");
        cJSON_AddNumberToObject(rs, "factor", factor);
        cJSON_AddNumberToObject(rs, "original_max_position_embeddings", (double)orig);
        cJSON_AddNumberToObject(rs, "beta_fast", 32.0);
        cJSON_AddNumberToObject(rs, "beta_slow", 1.0);
        cJSON_AddBoolToObject(rs, "truncate", false);
    }
    if (granite) { /* GraniteConfig's multipliers */
        static const char *const gk[4][2] = {{"embedding_scale", "embedding_multiplier"},
                                             {"residual_scale", "residual_multiplier"},
                                             {"attention.scale", "attention_multiplier"},
                                             {"logit_scale", "logits_scaling"}};
        for (int i = 0; i < 4; i++) {
            double v = 1;
            snprintf(key, sizeof key, "granite.%s", gk[i][0]);
            vx_gguf_get_f64(g, key, &v);
            cJSON_AddNumberToObject(cfg, gk[i][1], v);
        }
    }
    if (!strcmp(arch, "qwen3moe") || !strcmp(arch, "qwen2moe")) { /* experts of their own length */
        const bool q2 = !strcmp(arch, "qwen2moe");
        int64_t FX = 0, FS = 0;
        snprintf(key, sizeof key, "%s.expert_feed_forward_length", arch);
        vx_gguf_get_i64(g, key, &FX);
        cJSON_AddNumberToObject(cfg, "moe_intermediate_size", (double)FX);
        cJSON_AddNumberToObject(cfg, "num_experts", (double)X);
        cJSON_AddBoolToObject(cfg, "norm_topk_prob", !q2);
        snprintf(key, sizeof key, "%s.expert_shared_feed_forward_length", arch);
        if (q2 && vx_gguf_get_i64(g, key, &FS) == 1) cJSON_AddNumberToObject(cfg, "shared_expert_intermediate_size", (double)FS);
        cJSON_AddNumberToObject(cfg, "decoder_sparse_step", 1);
        cJSON_AddArrayToObject(cfg, "mlp_only_layers");
    }
    if (o->gptq == 3) {
        cJSON *qc = cJSON_AddObjectToObject(cfg, "quantization_config");
        cJSON_AddStringToObject(qc, "quant_method", "awq");
        cJSON_AddNumberToObject(qc, "bits", 4);
        cJSON_AddNumberToObject(qc, "group_size", 64);
        cJSON_AddBoolToObject(qc, "zero_point", true);
        cJSON_AddStringToObject(qc, "version", "gemm");
    } else if (o->gptq > 0) {
        cJSON *qc = cJSON_AddObjectToObject(cfg, "quantization_config");
        cJSON_AddStringToObject(qc, "quant_method", "gptq");
        cJSON_AddNumberToObject(qc, "bits", 4);
        cJSON_AddNumberToObject(qc, "group_size", 64);
        cJSON_AddBoolToObject(qc, "desc_act", o->gptq >= 4);
        cJSON_AddBoolToObject(qc, "sym", o->gptq == 1);
    }
    if (o->fp8 == 1) {
        cJSON *qc = cJSON_AddObjectToObject(cfg, "quantization_config");
        cJSON_AddStringToObject(qc, "quant_method", "fp8");
        cJSON *bs = cJSON_AddArrayToObject(qc, "weight_block_size");
        cJSON_AddItemToArray(bs, cJSON_CreateNumber(48));
        cJSON_AddItemToArray(bs, cJSON_CreateNumber(40));
    }
    if (X > 0) {
        if (strcmp(arch, "qwen3moe")) cJSON_AddNumberToObject(cfg, "num_local_experts", (double)X);
        cJSON_AddNumberToObject(cfg, "num_experts_per_tok", (double)XU);
    }
    /* Gemma 3's multimodal checkpoints: the text model's config nested,
     * without the keys whose defaults Gemma3TextConfig has */
    const bool mm = o->arch_class && !strcmp(o->arch_class, "Gemma3ForConditionalGeneration");
    if (mm) {
        cJSON *top = cJSON_CreateObject();
        cJSON_AddItemToObject(top, "architectures", cJSON_DetachItemFromObject(cfg, "architectures"));
        cJSON *qcfg = cJSON_DetachItemFromObject(cfg, "quantization_config"); /* the checkpoint's, not the text's */
        if (qcfg) cJSON_AddItemToObject(top, "quantization_config", qcfg);
        cJSON_DeleteItemFromObject(cfg, "max_position_embeddings");
        cJSON_AddStringToObject(cfg, "model_type", "gemma3_text");
        cJSON_AddItemToObject(top, "text_config", cfg);
        cJSON_AddStringToObject(top, "model_type", "gemma3");
        cfg = top;
    }
    char *cfg_txt = cJSON_Print(cfg);
    cJSON_Delete(cfg);
    bool ok = write_text(dir, "config.json", cfg_txt);
    free(cfg_txt);

    if (o->spm) {
        bytes m = spm_model_of(g);
        char path[4096];
        snprintf(path, sizeof path, "%s/tokenizer.model", dir);
        FILE *f = fopen(path, "wb");
        ok &= f && fwrite(m.p, 1, m.n, f) == m.n;
        if (f) ok &= fclose(f) == 0;
        free(m.p);
        ok &= write_text(dir, "tokenizer_config.json", k_llama2_cfg);
    }
    /* a byte-level BPE tokenizer.json over the model's token strings */
    if (!o->no_tokenizer && !o->spm) {
        const vx_gguf_kv *toks = vx_gguf_find(g, "tokenizer.ggml.tokens");
        cJSON *tj = cJSON_CreateObject(), *model = cJSON_AddObjectToObject(tj, "model");
        cJSON_AddStringToObject(model, "type", "BPE");
        cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
        for (uint64_t i = 0; toks && i < toks->v.arr.n; i++)
            cJSON_AddNumberToObject(vocab, toks->v.arr.strs[i].s, (double)i);
        cJSON_AddArrayToObject(model, "merges");
        cJSON *pt = cJSON_AddObjectToObject(tj, "pre_tokenizer");
        cJSON_AddStringToObject(pt, "type", "ByteLevel");
        cJSON_AddBoolToObject(pt, "add_prefix_space", false);
        cJSON_AddBoolToObject(pt, "use_regex", true);
        char *t = cJSON_PrintUnformatted(tj);
        cJSON_Delete(tj);
        ok &= t && write_text(dir, "tokenizer.json", t);
        free(t);
    }

    /* the tensors, Q/K rows back in HF's order for Llama */
    const int64_t nt = vx_gguf_n_tensors(g);
    const size_t cap = (size_t)nt * (size_t)(X > 0 ? X : 1) * 4;
    st_ent *e = calloc(cap, sizeof *e);
    void **bufs = calloc(cap, sizeof *bufs);
    int n = 0;
    for (int64_t i = 0; i < nt; i++) {
        const vx_gguf_tensor *t = vx_gguf_tensor_at(g, i);
        if (oss) {
            const int r = export_oss_tensor(g, t, e + n, bufs + n);
            if (r == -1) ok = false;
            if (r != 0) {
                n += r > 0 ? r : 0;
                continue;
            }
        }
        char b[128];
        static const char *const exps[3][2] = {{"ffn_gate_exps", "w1"}, {"ffn_down_exps", "w2"}, {"ffn_up_exps", "w3"}};
        static const char *const qexps[3] = {"gate_proj", "down_proj", "up_proj"}; /* Qwen3-MoE's names */
        const bool q3 = !strcmp(arch, "qwen3moe") || !strcmp(arch, "qwen2moe");
        bool expert = false;
        for (int k = 0; k < 3; k++) {
            unsigned il;
            int pos = 0;
            char rest[64];
            snprintf(rest, sizeof rest, "%s.weight", exps[k][0]);
            if (sscanf(t->name, "blk.%u.%n", &il, &pos) != 1 || !pos || strcmp(t->name + pos, rest) != 0) continue;
            /* one HF tensor per expert: slices of the stacked one */
            const size_t one = (size_t)t->size / (size_t)t->ne[2];
            for (int64_t x = 0; x < t->ne[2]; x++, n++) {
                snprintf(e[n].name, sizeof e[n].name, "model.layers.%u.%s.experts.%lld.%s.weight", il,
                         q3 ? "mlp" : "block_sparse_moe", (long long)x, q3 ? qexps[k] : exps[k][1]);
                e[n].dtype = t->type == VX_TYPE_F32 ? "F32" : t->type == VX_TYPE_F16 ? "F16" : "BF16";
                e[n].nd = 2;
                e[n].shape[0] = t->ne[1];
                e[n].shape[1] = t->ne[0];
                e[n].data = (const uint8_t *)t->data + one * (size_t)x;
                e[n].size = one;
            }
            expert = true;
        }
        if (expert) continue;
        if (strstr(t->name, ".ffn_gate_inp.weight")) {
            unsigned il;
            sscanf(t->name, "blk.%u.", &il);
            snprintf(b, sizeof b, "model.layers.%u.%s.gate.weight", il, q3 ? "mlp" : "block_sparse_moe");
        }
        const char *hn =
            strstr(t->name, ".ffn_gate_inp.weight") ? b : hf_name(t->name, b, sizeof b, !strncmp(arch, "gemma", 5) && arch[5]);
        const char *suffix = strchr(t->name, '.') ? strchr(strchr(t->name, '.') + 1, '.') : NULL;
        if (!hn && suffix && !strcmp(suffix, ".ffn_up.weight")) {
            unsigned il;
            sscanf(t->name, "blk.%u.", &il);
            snprintf(b, sizeof b, "model.layers.%u.mlp.%s.weight", il, t->ne[1] == 2 * F ? "gate_up_proj" : "up_proj");
            hn = b;
        }
        if (!hn) {
            fprintf(stderr, "no HF name for %s\n", t->name);
            ok = false;
            continue;
        }
        snprintf(e[n].name, sizeof e[n].name, "%s", hn);
        e[n].dtype = t->type == VX_TYPE_F32 ? "F32" : t->type == VX_TYPE_F16 ? "F16" : "BF16";
        if (o->bad_dtype && !strcmp(t->name, "token_embd.weight")) e[n].dtype = o->bad_dtype;
        /* Qwen2-MoE's shared expert gate is a [1, n_embd] row in checkpoints */
        e[n].nd = t->ne[1] > 1 || strstr(t->name, "ffn_gate_inp_shexp") ? 2 : 1;
        e[n].shape[0] = e[n].nd == 2 ? t->ne[1] : t->ne[0];
        e[n].shape[1] = t->ne[0];
        e[n].data = t->data;
        e[n].size = (size_t)t->size;
        const size_t tl = strlen(t->name);
        if (!strncmp(arch, "gemma", 5) && tl > 11 && !strcmp(t->name + tl - 11, "norm.weight") && t->type == VX_TYPE_F32) {
            /* Gemma's checkpoints hold w, GGUF 1 + w (exact: w near 1) */
            float *p = malloc((size_t)t->size);
            for (int64_t j = 0; j < t->ne[0]; j++) p[j] = ((const float *)t->data)[j] - 1.0f;
            bufs[n] = p;
            e[n].data = p;
        }
        const bool q = strstr(t->name, "attn_q.") != NULL, k = strstr(t->name, "attn_k.") != NULL;
        if (llama && (q || k)) {
            /* HF row h hd + s hd/2 + j = GGUF row h hd + 2j + s */
            const size_t row = (size_t)t->size / (size_t)(e[n].nd == 2 ? t->ne[1] : t->ne[0]);
            const int64_t rows = e[n].nd == 2 ? t->ne[1] : t->ne[0];
            uint8_t *p = malloc((size_t)t->size);
            for (int64_t h = 0; h < rows / HD; h++)
                for (int64_t j = 0; j < HD / 2; j++)
                    for (int64_t s = 0; s < 2; s++)
                        memcpy(p + (size_t)(h * HD + s * HD / 2 + j) * row,
                               (const uint8_t *)t->data + (size_t)(h * HD + 2 * j + s) * row, row);
            bufs[n] = p;
            e[n].data = p;
        }
        if (o->gptq && e[n].nd == 2 && t->type == VX_TYPE_F16 && strcmp(t->name, "token_embd.weight") != 0 &&
            strcmp(t->name, "output.weight") != 0) {
            const int64_t rows = e[n].shape[0], cols = e[n].shape[1], ng = cols / 64;
            uint32_t *qw = malloc((size_t)(cols / 8 * rows) * 4), *qz = malloc((size_t)(ng * rows / 8) * 4);
            uint16_t *sc = malloc((size_t)(ng * rows) * 2);
            int32_t *gi = malloc((size_t)cols * 4);
            float *deq = malloc((size_t)(rows * cols) * 4);
            const int mode = o->gptq < 0 ? -o->gptq : o->gptq;
            gptq_quantize(e[n].data, rows, cols, mode == 1, mode == 3, mode >= 4, qw, qz, sc, gi, deq);
            if (mode == 5) gi[0] = (int32_t)ng;
            free(bufs[n]);
            if (o->gptq < 0) {
                free(qw), free(qz), free(sc), free(gi);
                bufs[n] = deq;
                e[n].dtype = "F32";
                e[n].data = deq;
                e[n].size = (size_t)(rows * cols) * 4;
            } else {
                free(deq);
                char base[128];
                snprintf(base, sizeof base, "%.*s", (int)(strlen(e[n].name) - 7), e[n].name); /* - ".weight" */
                const struct {
                    const char *suffix, *dtype;
                    int64_t s0, s1;
                    void *p;
                    size_t size;
                } parts[4] = {{"qweight", "I32", mode == 3 ? cols : cols / 8, mode == 3 ? rows / 8 : rows, qw,
                               (size_t)(cols / 8 * rows) * 4},
                              {"qzeros", "I32", ng, rows / 8, qz, (size_t)(ng * rows / 8) * 4},
                              {"scales", "F16", ng, rows, sc, (size_t)(ng * rows) * 2},
                              {"g_idx", "I32", cols, 0, gi, (size_t)cols * 4}};
                if (mode == 3) free(gi); /* AWQ has no g_idx */
                for (int part = 0; part < (mode == 3 ? 3 : 4); part++, n++) {
                    char nm[200];
                    snprintf(nm, sizeof nm, "%.100s.%s", base, parts[part].suffix);
                    memcpy(e[n].name, nm, sizeof e[n].name);
                    e[n].dtype = parts[part].dtype;
                    e[n].nd = parts[part].s1 ? 2 : 1;
                    e[n].shape[0] = parts[part].s0;
                    e[n].shape[1] = parts[part].s1;
                    e[n].data = parts[part].p;
                    e[n].size = parts[part].size;
                    bufs[n] = parts[part].p;
                }
                continue;
            }
        }
        if (o->fp8 && e[n].nd == 2 && t->type == VX_TYPE_F16 && strcmp(t->name, "token_embd.weight") != 0 &&
            strcmp(t->name, "output.weight") != 0) {
            const int64_t rows = e[n].shape[0], cols = e[n].shape[1];
            const int mode = o->fp8 < 0 ? -o->fp8 : o->fp8;
            uint8_t *codes = malloc((size_t)(rows * cols));
            float *sc = malloc((size_t)(rows * cols) * sizeof *sc); /* at most one per value */
            uint16_t *ref = malloc((size_t)(rows * cols) * 2);
            int64_t sr, scn;
            fp8_quantize(e[n].data, rows, cols, mode, codes, sc, &sr, &scn, ref);
            free(bufs[n]);
            if (o->fp8 > 0) {
                free(ref);
                bufs[n] = codes;
                e[n].dtype = "F8_E4M3";
                e[n].data = codes;
                e[n].size = (size_t)(rows * cols);
                n++;
                char sname[160];
                snprintf(sname, sizeof sname, "%.100s_scale%s", e[n - 1].name, mode == 1 ? "_inv" : "");
                memcpy(e[n].name, sname, sizeof e[n].name);
                e[n].dtype = "F32";
                e[n].nd = 2;
                e[n].shape[0] = sr;
                e[n].shape[1] = scn;
                e[n].data = sc;
                e[n].size = (size_t)(sr * scn) * 4;
                bufs[n] = sc;
            } else {
                free(codes);
                free(sc);
                bufs[n] = ref;
                e[n].dtype = "BF16";
                e[n].data = ref;
            }
        }
        n++;
    }
    if (mm) { /* the text model under language_model, a vision tower beside it */
        for (int i = 0; i < n; i++) {
            char nm[160];
            snprintf(nm, sizeof nm, "language_model.%s", e[i].name);
            snprintf(e[i].name, sizeof e[i].name, "%.127s", nm);
        }
        static const float vt[4] = {1, 2, 3, 4};
        snprintf(e[n].name, sizeof e[n].name, "vision_tower.vision_model.post_layernorm.weight");
        e[n].dtype = "F32";
        e[n].nd = 1;
        e[n].shape[0] = 4;
        e[n].data = vt;
        e[n].size = sizeof vt;
        n++;
    }
    char path[4096];
    if (o->shards == 2) {
        const int half = n / 2;
        snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
        ok &= write_st(path, e, half);
        snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
        ok &= write_st(path, e + half, n - half);
        cJSON *idx = cJSON_CreateObject(), *map = cJSON_AddObjectToObject(idx, "weight_map");
        for (int i = 0; i < n; i++)
            cJSON_AddStringToObject(map, e[i].name, i < half ? "model-00001-of-00002.safetensors"
                                                             : "model-00002-of-00002.safetensors");
        char *t = cJSON_Print(idx);
        cJSON_Delete(idx);
        ok &= write_text(dir, "model.safetensors.index.json", t);
        free(t);
    } else {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        ok &= write_st(path, e, n);
    }
    for (int i = 0; i < n; i++) free(bufs[i]);
    free(bufs);
    free(e);
    vx_gguf_close(g);
    return ok;
}

static char g_tmp[256];

static void rm_dir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *de;
    char p[4096];
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

/* logits of the fixture prompt, all positions: [n][n_vocab] */
static float *prompt_logits_ex(vx_model *m, bool f32_matmul, int *n_out, int *nv_out) {
    size_t sz;
    char *pj = vx_test_read_file(vx_test_fixture_path("models/prompt.json"), &sz);
    cJSON *p = pj ? cJSON_Parse(pj) : NULL;
    free(pj);
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(p, "ids");
    const int n = cJSON_GetArraySize(ids);
    vx_token tok[64];
    vx_pos pos[64];
    vx_seq_id seq[64];
    int8_t want[64];
    for (int i = 0; i < n && i < 64; i++) {
        tok[i] = (vx_token)cJSON_GetArrayItem(ids, i)->valuedouble;
        pos[i] = i;
        seq[i] = 0;
        want[i] = 1;
    }
    cJSON_Delete(p);
    vx_context_params cp = vx_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    cp.f32_matmul = f32_matmul;
    vx_context *ctx = NULL;
    if (n <= 0 || n > 64 || vx_context_init(m, &cp, &ctx, NULL, 0) != VX_OK) return NULL;
    vx_batch b = {n, tok, pos, seq, want, NULL};
    float *out = NULL;
    const int nv = vx_context_n_vocab(ctx);
    if (vx_decode(ctx, &b) == VX_OK && (out = malloc((size_t)n * (size_t)nv * sizeof *out)))
        for (int i = 0; i < n; i++) memcpy(out + (size_t)i * nv, vx_get_logits_ith(ctx, i), (size_t)nv * sizeof *out);
    vx_context_free(ctx);
    *n_out = n;
    *nv_out = nv;
    return out;
}

static float *prompt_logits(vx_model *m, int *n_out, int *nv_out) { return prompt_logits_ex(m, false, n_out, nv_out); }

static void test_model(const char *rel, const hf_opts *o) {
    char dir[300];
    snprintf(dir, sizeof dir, "%s/m", g_tmp);
    mkdir(dir, 0700);
    CHECKF(export_hf(rel, dir, o), "%s: writing the HF directory", rel);
    char err[512] = "";
    vx_model *a = NULL, *b = NULL;
    vx_status sa = vx_model_load(model_path(rel), NULL, &a, err, sizeof err);
    CHECKF(sa == VX_OK, "%s: %s", rel, err);
    vx_status sb = vx_model_load(dir, NULL, &b, err, sizeof err);
    CHECKF(sb == VX_OK, "%s as HF: %s", rel, err);
    if (a && b) {
        int na = 0, nb = 0, va = 0, vb = 0;
        float *la = prompt_logits(a, &na, &va), *lb = prompt_logits(b, &nb, &vb);
        CHECK(la && lb && na == nb && va == vb);
        if (la && lb && na == nb && va == vb) {
            size_t diff = 0;
            for (size_t i = 0; i < (size_t)na * (size_t)va; i++) diff += memcmp(&la[i], &lb[i], 4) != 0;
            CHECKF(diff == 0, "%s: %zu of %d x %d logits differ from the GGUF file's", rel, diff, na, va);
            printf("  %-28s as HF (%s, %s): %d x %d logits, %zu differ from the GGUF file's\n", rel,
                   o->shards == 2 ? "2 shards" : "1 file", o->spm ? "tokenizer.model" : "tokenizer.json", na, va, diff);
        }
        free(la);
        free(lb);
        if (o->spm) { /* the same tokenizer: the same ids */
            static const char text[] = "Hello world, it's 2024! \xc3\xa9t\xc3\xa9 <s> x";
            vx_token ta[64], tb[64];
            const int32_t n1 = vx_tokenize(vx_model_get_vocab(a), text, (int32_t)strlen(text), ta, 64, true, true);
            const int32_t n2 = vx_tokenize(vx_model_get_vocab(b), text, (int32_t)strlen(text), tb, 64, true, true);
            CHECKF(n1 > 3 && n1 == n2 && !memcmp(ta, tb, (size_t)n1 * sizeof *ta), "%s: tokenization differs", rel);
        }
        CHECK(strcmp(vx_model_arch(a), vx_model_arch(b)) == 0);
        CHECK(vx_model_n_layer(a) == vx_model_n_layer(b));
    }
    vx_model_free(a);
    vx_model_free(b);
    rm_dir(dir);
}

/* FP8 weights (mode 1: block scales, 2: row scales): the import must give
 * the logits, bit for bit, of a directory holding the BF16 values the FP8
 * codes and scales stand for (the same dequantization, done here). */
static void test_fp8(const char *rel, int mode) {
    char d8[300], dr[300], err[512] = "";
    snprintf(d8, sizeof d8, "%s/f8", g_tmp);
    snprintf(dr, sizeof dr, "%s/r8", g_tmp);
    mkdir(d8, 0700);
    mkdir(dr, 0700);
    const hf_opts o8 = {1, NULL, NULL, false, false, mode, 0}, oref = {1, NULL, NULL, false, false, -mode, 0};
    CHECK(export_hf(rel, d8, &o8) && export_hf(rel, dr, &oref));
    vx_model *a = NULL, *b = NULL;
    CHECKF(vx_model_load(d8, NULL, &a, err, sizeof err) == VX_OK, "%s FP8: %s", rel, err);
    CHECKF(vx_model_load(dr, NULL, &b, err, sizeof err) == VX_OK, "%s FP8 reference: %s", rel, err);
    if (a && b) {
        int na = 0, nb = 0, va = 0, vb = 0;
        float *la = prompt_logits(a, &na, &va), *lb = prompt_logits(b, &nb, &vb);
        size_t diff = 0;
        const bool shapes = la && lb && na == nb && va == vb;
        for (size_t i = 0; shapes && i < (size_t)na * (size_t)va; i++) diff += memcmp(&la[i], &lb[i], 4) != 0;
        CHECKF(shapes && diff == 0, "%s FP8 (%s scales): %zu logits differ from the dequantized BF16 directory's", rel,
               mode == 1 ? "block" : "row", diff);
        printf("  %-28s FP8 e4m3 (%s scales): %d x %d logits, %zu differ from its BF16 dequantization's\n", rel,
               mode == 1 ? "48x40 block" : "row", na, va, diff);
        free(la);
        free(lb);
    }
    vx_model_free(a);
    vx_model_free(b);
    rm_dir(d8);
    rm_dir(dr);
}

/* int4 (mode 1 GPTQ symmetric, 2 GPTQ asymmetric, 3 AWQ, 4 GPTQ asymmetric
 * act-order; groups of 64): every weight matrix must arrive as Q4_0 / Q4_1
 * blocks standing for the values the codes, zeros and scales stand for
 * (exactly for Q4_0; within m's fp16 rounding for Q4_1) or, act-order, as
 * Q8_0 rows within their rounding, and the model must run close to those
 * values in F32. */
static void test_gptq(const char *rel, int mode) {
    const char *what = mode == 3 ? "AWQ" : mode == 4 ? "GPTQ act-order" : "GPTQ";
    const int want_type = mode == 1 ? VX_TYPE_Q4_0 : mode == 4 ? VX_TYPE_Q8_0 : VX_TYPE_Q4_1;
    char dq[300], dr[300], err[512] = "";
    snprintf(dq, sizeof dq, "%s/gq", g_tmp);
    snprintf(dr, sizeof dr, "%s/gr", g_tmp);
    mkdir(dq, 0700);
    mkdir(dr, 0700);
    const hf_opts oq = {1, NULL, NULL, false, false, 0, mode}, oref = {1, NULL, NULL, false, false, 0, -mode};
    CHECK(export_hf(rel, dq, &oq) && export_hf(rel, dr, &oref));
    vx_gguf *gq = NULL, *gr = NULL;
    CHECKF(vx_hf_open(dq, &gq, err, sizeof err) == VX_OK, "%s %s: %s", rel, what, err);
    CHECKF(vx_hf_open(dr, &gr, err, sizeof err) == VX_OK, "%s %s reference: %s", rel, what, err);
    int n_mats = 0, n_bad = 0;
    double worst = -1;
    for (int64_t i = 0; gq && gr && i < vx_gguf_n_tensors(gr); i++) {
        const vx_gguf_tensor *r = vx_gguf_tensor_at(gr, i), *q = vx_gguf_find_tensor(gq, r->name);
        if (r->type != VX_TYPE_F32 || r->ne[1] == 1) continue; /* the weight matrices */
        n_mats++;
        if (!q || q->type != want_type || q->ne[0] != r->ne[0] || q->ne[1] != r->ne[1]) {
            n_bad++;
            continue;
        }
        const vx_type_traits *tr = vx_type_get_traits(q->type);
        float *row = malloc((size_t)r->ne[0] * sizeof *row);
        const size_t rs = (size_t)q->size / (size_t)q->ne[1];
        uint8_t *want_q8 = malloc(rs);
        for (int64_t y = 0; y < r->ne[1]; y++) {
            if (mode == 4) { /* act-order: the reference quantizer's Q8_0 row of the values, to the bit */
                memcpy(row, (const uint8_t *)r->data + (size_t)y * (size_t)r->ne[0] * 4, (size_t)r->ne[0] * 4);
                tr->from_float(row, want_q8, r->ne[0]);
                if (memcmp(want_q8, (const uint8_t *)q->data + (size_t)y * rs, rs)) worst = 1;
                continue;
            }
            tr->to_float((const uint8_t *)q->data + (size_t)y * rs, row, r->ne[0]);
            for (int64_t x = 0; x < r->ne[0]; x++) {
                float want;
                memcpy(&want, (const uint8_t *)r->data + ((size_t)y * (size_t)r->ne[0] + (size_t)x) * 4, 4);
                /* Q4_1: m = -s z rounded to fp16, off by half an fp16 ulp of m at most (+ f32 rounding) */
                double allowed = 0;
                if (mode != 1) {
                    const vx_block_q4_1 *blk = (const vx_block_q4_1 *)(const void *)((const uint8_t *)q->data +
                                                                                   (size_t)y * rs) + x / 32;
                    allowed = fabs(vx_fp16_to_fp32(blk->m)) * ldexp(1, -11) + fabs(want) * ldexp(1, -22);
                }
                const double d = fabs((double)row[x] - want) - allowed;
                if (d > worst) worst = d;
            }
        }
        free(row);
        free(want_q8);
    }
    CHECKF(n_mats > 0 && n_bad == 0, "%s: %d of %d %s matrices not %s", rel, n_bad, n_mats, what,
           vx_type_get_traits(want_type)->name);
    /* Q4_0: d (q - 8) with d the fp16 scale is exactly s (q - z); Q4_1 within its m's rounding;
     * act-order Q8_0 the reference quantizer's rows of s (q - z) */
    CHECKF(worst <= 0, "%s: %s blocks off by %g beyond their rounding", rel, what, worst);
    vx_gguf_close(gq);
    vx_gguf_close(gr);
    vx_model *a = NULL, *b = NULL;
    CHECK(vx_model_load(dq, NULL, &a, err, sizeof err) == VX_OK);
    CHECK(vx_model_load(dr, NULL, &b, err, sizeof err) == VX_OK);
    if (a && b) {
        /* with f32 matmuls (weight rows dequantized, activations kept in
         * f32) the two models differ only by Q4_1's m rounding and the
         * summation order, whatever kernels the machine has */
        int na = 0, nb = 0, va = 0, vb = 0;
        float *la = prompt_logits_ex(a, true, &na, &va), *lb = prompt_logits_ex(b, true, &nb, &vb);
        double se = 0, sr = 0;
        for (size_t i = 0; la && lb && i < (size_t)na * (size_t)va; i++)
            se += ((double)la[i] - lb[i]) * ((double)la[i] - lb[i]), sr += (double)lb[i] * lb[i];
        /* act-order: Q8_0's rounding of the values; the fixtures' own
         * qwen2 Q8_0 and F16 reference logits differ by 4.2% */
        const double rel_rmse = sr > 0 ? sqrt(se / sr) : 1, bound = mode == 1 ? 1e-5 : mode == 4 ? 8e-2 : 1e-2;
        CHECKF(la && lb && na == nb && rel_rmse < bound, "%s: %s logits rel_rmse %g against its F32 values (bound %g)",
               rel, what, rel_rmse, bound);
        printf("  %-28s %s int4 (%s, groups of 64) as %s: %d matrices, blocks exact%s, logits rel_rmse %.2e vs F32 (f32 matmuls)\n",
               rel, what, mode == 1 ? "sym" : "asym", vx_type_get_traits(want_type)->name, n_mats,
               mode == 1 ? "" : mode == 4 ? " as Q8_0 of the values" : " up to m's fp16 rounding", rel_rmse);
        free(la);
        free(lb);
    }
    vx_model_free(a);
    vx_model_free(b);
    rm_dir(dq);
    rm_dir(dr);
}

/* chat_template.jinja, else chat_template.json, over tokenizer_config.json's
 * template (transformers' and the converter's order); a JSON side file
 * without the string is refused. */
static void test_chat_template_files(void) {
    char dir[300], err[512] = "";
    snprintf(dir, sizeof dir, "%s/ct", g_tmp);
    mkdir(dir, 0700);
    const hf_opts o = {1, NULL, NULL, false, false, 0, 0};
    CHECK(export_hf("models/qwen2/qwen2-F16.gguf", dir, &o));
    static const char jinja[] = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}";
    static const char json_tmpl[] = "{{ messages[0].content }} (from chat_template.json)";
    const char *got = NULL, *base = NULL;
    vx_gguf *g = NULL;
    /* tokenizer_config.json's template alone */
    CHECK(write_text(dir, "tokenizer_config.json", "{\"chat_template\": \"{{ 'from tokenizer_config' }}\"}"));
    CHECKF(vx_hf_open(dir, &g, err, sizeof err) == VX_OK, "%s", err);
    CHECK(g && vx_gguf_get_str(g, "tokenizer.chat_template", &base) == 1 && base &&
          !strcmp(base, "{{ 'from tokenizer_config' }}"));
    vx_gguf_close(g);
    g = NULL;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "chat_template", json_tmpl);
    char *jt = cJSON_Print(j);
    CHECK(write_text(dir, "chat_template.json", jt));
    free(jt);
    cJSON_Delete(j);
    CHECKF(vx_hf_open(dir, &g, err, sizeof err) == VX_OK, "%s", err);
    CHECK(g && vx_gguf_get_str(g, "tokenizer.chat_template", &got) == 1 && got && !strcmp(got, json_tmpl));
    vx_gguf_close(g);
    g = NULL;
    CHECK(write_text(dir, "chat_template.jinja", jinja));
    CHECKF(vx_hf_open(dir, &g, err, sizeof err) == VX_OK, "%s", err);
    CHECK(g && vx_gguf_get_str(g, "tokenizer.chat_template", &got) == 1 && got && !strcmp(got, jinja));
    vx_gguf_close(g);
    g = NULL;
    char path[400];
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    unlink(path);
    CHECK(write_text(dir, "chat_template.json", "{\"template\": 1}"));
    CHECK(vx_hf_open(dir, &g, err, sizeof err) == VX_EFORMAT && !g && strstr(err, "chat_template.json"));
    rm_dir(dir);
    printf("  chat_template.jinja over chat_template.json over tokenizer_config.json's template\n");
}

/* An import that must fail with status want and a message holding what. */
static void test_error(const char *rel, const hf_opts *o, vx_status want, const char *what) {
    char dir[300];
    snprintf(dir, sizeof dir, "%s/e", g_tmp);
    mkdir(dir, 0700);
    CHECK(export_hf(rel, dir, o));
    char err[512] = "";
    vx_model *m = NULL;
    const vx_status st = vx_model_load(dir, NULL, &m, err, sizeof err);
    CHECKF(st == want && !m && strstr(err, what), "got %s '%s', expected %s with '%s'", vx_status_str(st), err,
           vx_status_str(want), what);
    vx_model_free(m);
    rm_dir(dir);
}

/* dir/name's JSON with key set to the JSON value v (NULL: removed) */
static void patch_json(const char *dir, const char *name, const char *key, const char *v) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t n;
    char *t = vx_test_read_file(path, &n);
    cJSON *j = t ? cJSON_Parse(t) : NULL;
    free(t);
    cJSON *obj = j;
    const char *k = key;
    if (!strncmp(key, "weight_map.", 11)) {
        obj = cJSON_GetObjectItemCaseSensitive(j, "weight_map");
        k = key + 11;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(obj, k);
    if (v) cJSON_AddItemToObject(obj, k, cJSON_Parse(v));
    char *o = cJSON_Print(j);
    CHECK(o && write_text(dir, name, o));
    free(o);
    cJSON_Delete(j);
}

/* Directories edited after export (the adversarial review's findings): each
 * must fail with a message naming the problem, never crash or hang. */
static void test_patched(void) {
    static const struct {
        const char *rel, *file, *key, *value;
        int shards;
        vx_status want;
        const char *what;
        int gptq; /* hf_opts.gptq of the export */
    } cases[] = {
        {"models/qwen2/qwen2-F16.gguf", "model.safetensors.index.json", "weight_map.model.norm.weight",
         "\"../x.safetensors\"", 2, VX_EFORMAT, "'model.norm.weight' maps to no file name", 0},
        {"models/qwen2/qwen2-F16.gguf", "model.safetensors.index.json", "weight_map.lm_head.weight",
         "\"model-00001-of-00002.safetensors\"", 2, VX_EFORMAT, "maps 'lm_head.weight' to model-00001", 0},
        {"models/qwen2/qwen2-F16.gguf", "config.json", "tie_word_embeddings", "false", 1, VX_EFORMAT,
         "no lm_head.weight", 0},
        {"models/qwen2/qwen2-F16.gguf", "config.json", "rope_theta", "\"x\"", 1, VX_EFORMAT, "rope_theta must be a number", 0},
        {"models/qwen2/qwen2-F16.gguf", "config.json", "hidden_size", "128", 1, VX_EFORMAT, "not [vocabulary, 128]", 0},
        {"models/llama/llama-F16.gguf", "config.json", "partial_rotary_factor", "0.5", 1, VX_EUNSUPPORTED,
         "partial_rotary_factor", 0},
        {"models/moe/moe-F16.gguf", "config.json", "num_local_experts", "200", 1, VX_EFORMAT, "expert tensors", 0},
        {"models/qwen2/qwen2-F16.gguf", "config.json", "num_hidden_layers", "8", 1, VX_EFORMAT, "blk.4", 0},
        {"models/qwen2/qwen2-F16.gguf", "config.json", "quantization_config",
         "{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 64, \"version\": \"gemv\"}", 1, VX_EUNSUPPORTED,
         "AWQ version 'gemv'", 3},
        /* GPTQ's tensors read as AWQ's: the shapes must not fit */
        {"models/qwen2/qwen2-F16.gguf", "config.json", "quantization_config",
         "{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 64}", 1, VX_EFORMAT, "do not fit groups of 64", 2},
    };
    char dir[300], err[512];
    snprintf(dir, sizeof dir, "%s/p", g_tmp);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mkdir(dir, 0700);
        const hf_opts o = {cases[i].shards, NULL, NULL, false, false, 0, cases[i].gptq};
        CHECK(export_hf(cases[i].rel, dir, &o));
        patch_json(dir, cases[i].file, cases[i].key, cases[i].value);
        vx_model *m = NULL;
        err[0] = 0;
        const vx_status st = vx_model_load(dir, NULL, &m, err, sizeof err);
        CHECKF(st == cases[i].want && !m && strstr(err, cases[i].what), "case %zu (%s = %s): %s '%s'", i,
               cases[i].key, cases[i].value, vx_status_str(st), err);
        vx_model_free(m);
        rm_dir(dir);
    }
    /* a FIFO as config.json: refused at once (opening it used to wait for a writer) */
    mkdir(dir, 0700);
    char fifo[400];
    snprintf(fifo, sizeof fifo, "%s/config.json", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    vx_model *m = NULL;
    CHECKF(vx_model_load(dir, NULL, &m, err, sizeof err) == VX_EIO && strstr(err, "not a regular file"), "fifo: %s", err);
    rm_dir(dir);
    printf("  %zu edited directories and a FIFO refused with their messages\n", sizeof cases / sizeof cases[0]);
}

/* The logits of the HF directory dir (NULL: it does not load) */
static float *dir_logits(const char *dir, int *n, int *nv) {
    vx_model *m = NULL;
    char err[512] = "";
    CHECKF(vx_model_load(dir, NULL, &m, err, sizeof err) == VX_OK, "%s: %s", dir, err);
    float *l = m ? prompt_logits(m, n, nv) : NULL;
    vx_model_free(m);
    return l;
}

/* Whether directories a and b give the same logits, bit for bit */
static bool same_logits(const char *a, const char *b) {
    int na = 0, nb = 0, va = 0, vb = 0;
    float *la = dir_logits(a, &na, &va), *lb = dir_logits(b, &nb, &vb);
    const bool same = la && lb && na == nb && va == vb && !memcmp(la, lb, (size_t)na * (size_t)va * sizeof *la);
    free(la);
    free(lb);
    return same;
}

/* Newer transformers' rope_parameters in place of rope_theta,
 * rope_local_base_freq and rope_scaling (Gemma 3: per layer type), and a
 * GPTQ Gemma 3 multimodal checkpoint (quantization_config at its top,
 * int4 tensors under language_model): each as its plain export. */
static void test_gemma3_variants(void) {
    char gm[400], d1[400], d2[400];
    snprintf(gm, sizeof gm, "%s/g3v.gguf", g_tmp);
    snprintf(d1, sizeof d1, "%s/v1", g_tmp);
    snprintf(d2, sizeof d2, "%s/v2", g_tmp);
    const hf_opts spm = {1, NULL, NULL, false, true, 0, 0};
    CHECK(vx_test_synth("gemma3-tiny", "F32", gm));
    mkdir(d1, 0700), mkdir(d2, 0700);
    CHECK(export_hf(gm, d1, &spm) && export_hf(gm, d2, &spm));
    patch_json(d2, "config.json", "rope_theta", NULL);
    patch_json(d2, "config.json", "rope_local_base_freq", NULL);
    patch_json(d2, "config.json", "rope_scaling", NULL);
    patch_json(d2, "config.json", "rope_parameters",
               "{\"full_attention\": {\"rope_type\": \"linear\", \"factor\": 8.0, \"rope_theta\": 1000000.0}, "
               "\"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0}}");
    CHECKF(same_logits(d1, d2), "Gemma 3 with rope_parameters: other logits than with rope_theta and rope_scaling");
    rm_dir(d1), rm_dir(d2);
    CHECK(vx_test_synth("gemma3-tiny", "F16", gm));
    const hf_opts q1 = {1, NULL, NULL, false, true, 0, 1}, q2 = {1, "Gemma3ForConditionalGeneration", NULL, false, true, 0, 1};
    mkdir(d1, 0700), mkdir(d2, 0700);
    CHECK(export_hf(gm, d1, &q1) && export_hf(gm, d2, &q2));
    CHECKF(same_logits(d1, d2), "GPTQ Gemma 3 as a multimodal checkpoint: other logits than as Gemma3ForCausalLM");
    rm_dir(d1), rm_dir(d2);
    remove(gm);
    printf("  gemma3-tiny with rope_parameters, and GPTQ under language_model: the same logits as plain\n");
}

typedef struct bad_cfg {
    const char *key, *value, *what;
} bad_cfg;

/* The model at gm as HF directories with one config.json key patched
 * each: all refused as unsupported, with the reason */
/* A copy of the GGUF file src whose quantized tensors but MXFP4 are F32
 * (the values they hold): gpt-oss's checkpoints keep only the experts
 * quantized. */
static bool dequant_but_mxfp4(const char *src, const char *dst) {
    char err[256];
    vx_gguf *g = NULL;
    vx_gguf_writer *w = vx_gguf_writer_init();
    bool ok = w && vx_gguf_open(src, &g, err, sizeof err) == VX_OK && vx_gguf_copy_kv(w, g) == VX_OK;
    void **bufs = ok ? calloc((size_t)vx_gguf_n_tensors(g), sizeof *bufs) : NULL;
    for (int64_t i = 0; ok && bufs && i < vx_gguf_n_tensors(g); i++) {
        const vx_gguf_tensor *t = vx_gguf_tensor_at(g, i);
        const vx_type_traits *tr = vx_type_get_traits(t->type);
        if (t->type == VX_TYPE_F32 || t->type == VX_TYPE_MXFP4 || !tr || !tr->to_float) {
            ok = vx_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size, true) == VX_OK;
            continue;
        }
        int64_t n = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) n *= t->ne[d];
        float *f = bufs[i] = malloc((size_t)n * 4);
        ok = f != NULL;
        if (ok) tr->to_float(t->data, f, n);
        ok = ok && vx_gguf_add_tensor(w, t->name, VX_TYPE_F32, t->n_dims, t->ne, f, (uint64_t)n * 4, true) == VX_OK;
    }
    ok = ok && bufs && vx_gguf_write_file(w, dst, err, sizeof err) == VX_OK;
    for (int64_t i = 0; bufs && i < vx_gguf_n_tensors(g); i++) free(bufs[i]);
    free(bufs);
    vx_gguf_writer_free(w);
    vx_gguf_close(g);
    return ok;
}

static void refused_configs(const char *gm, const hf_opts *o, const bad_cfg *bad, size_t n) {
    char gd[400], err[512];
    snprintf(gd, sizeof gd, "%s/bad", g_tmp);
    for (size_t i = 0; i < n; i++) {
        mkdir(gd, 0700);
        CHECK(export_hf(gm, gd, o));
        patch_json(gd, "config.json", bad[i].key, bad[i].value);
        vx_model *m = NULL;
        err[0] = 0;
        const vx_status st = vx_model_load(gd, NULL, &m, err, sizeof err);
        CHECKF(st == VX_EUNSUPPORTED && !m && strstr(err, bad[i].what), "%s: %s = %s: %s '%s'", gm, bad[i].key,
               bad[i].value, vx_status_str(st), err);
        vx_model_free(m);
        rm_dir(gd);
    }
}

int main(void) {
    test_o200k_regex();
    printf("tokenizer.json as GGUF keys:\n");
    test_tokenizer("llama3", "llama-bpe", 128256, NULL);
    /* Qwen3-0.6B's published config.json: bos 151643 (its tokenizer_config has no bos_token) */
    test_tokenizer("qwen3", "qwen2", 151936, "{\"bos_token_id\": 151643, \"eos_token_id\": 151645}");
    test_spm();
    test_spm_json();

    snprintf(g_tmp, sizeof g_tmp, "/tmp/vx_test_hf_XXXXXX");
    CHECK(mkdtemp(g_tmp) != NULL);
    printf("models from Hugging Face directories:\n");
    const hf_opts one = {1, NULL, NULL, false, false, 0, 0}, two = {2, NULL, NULL, false, false, 0, 0},
                  spm = {1, NULL, NULL, false, true, 0, 0};
    test_model("models/llama/llama-F16.gguf", &spm);
    test_model("models/llama/llama-BF16.gguf", &two);
    test_model("models/llama/llama-F32.gguf", &one);
    test_model("models/qwen2/qwen2-F16.gguf", &two);
    test_model("models/qwen3/qwen3-F16.gguf", &one);
    test_model("models/phi3/phi3-F16.gguf", &one);
    test_model("models/moe/moe-F16.gguf", &two);
    {
        /* Gemma and Gemma 2 (no fixtures): vx synth's gemma-tiny and
         * gemma2-tiny, their norms written as the checkpoints hold them (w,
         * not 1 + w), Gemma 2's four per layer under its own names */
        char gm[400];
        snprintf(gm, sizeof gm, "%s/gemma-tiny.gguf", g_tmp);
        CHECK(vx_test_synth("gemma-tiny", "F32", gm));
        test_model(gm, &spm);
        remove(gm);
        /* Gemma 3: Gemma 2's norms, q/k norms, the window's pattern and
         * base, linear RoPE scaling; Qwen3-MoE: experts under mlp.experts */
        snprintf(gm, sizeof gm, "%s/granite-tiny.gguf", g_tmp); /* Granite's multipliers from config.json */
        CHECK(vx_test_synth("granite-tiny", "F32", gm));
        test_model(gm, &one);
        remove(gm);
        /* gpt-oss: MXFP4 experts in GptOssForCausalLM's layout, sinks,
         * biases, the router, the window on every other layer, YaRN */
        char mx[400];
        snprintf(mx, sizeof mx, "%s/gpt-oss-mx.gguf", g_tmp);
        snprintf(gm, sizeof gm, "%s/gpt-oss-tiny.gguf", g_tmp);
        CHECK(vx_test_synth("gpt-oss-tiny", "MXFP4_MOE", mx) && dequant_but_mxfp4(mx, gm));
        test_model(gm, &one);
        static const bad_cfg ossbad[] = {
            {"swiglu_limit", "8.0", "swiglu_limit 8"},
            {"layer_types", "[\"full_attention\",\"sliding_attention\",\"full_attention\",\"sliding_attention\"]",
             "layer_types[0]"}, /* its 4 layers, the window on the odd ones */
        };
        refused_configs(gm, &one, ossbad, sizeof ossbad / sizeof ossbad[0]);
        remove(mx);
        remove(gm);
        CHECK(vx_test_synth("gpt-oss-tiny", "F32", gm)); /* a BF16-style checkpoint: the experts transposed */
        test_model(gm, &one);
        remove(gm);
        snprintf(gm, sizeof gm, "%s/qwen2moe-tiny.gguf", g_tmp); /* experts, a shared one and its gate */
        CHECK(vx_test_synth("qwen2moe-tiny", "F32", gm));
        test_model(gm, &one);
        remove(gm);
        static const char *const more[] = {"gemma3-tiny", "qwen3moe-tiny"};
        static const bad_cfg g3bad[] = {
            {"query_pre_attn_scalar", "128", "query_pre_attn_scalar 128"},
            {"attn_logit_softcapping", "50", "attn_logit_softcapping 50"},
            {"layer_types", "[\"sliding_attention\", \"full_attention\", \"full_attention\", \"sliding_attention\", "
                            "\"sliding_attention\", \"sliding_attention\", \"sliding_attention\", \"sliding_attention\"]",
             "without a period"}};
        static const bad_cfg q3bad[] = {{"norm_topk_prob", "false", "without norm_topk_prob"},
                                        {"mlp_only_layers", "[1]", "with dense layers"},
                                        {"decoder_sparse_step", "2", "decoder_sparse_step 2"}};
        const hf_opts mm = {2, "Gemma3ForConditionalGeneration", NULL, false, true, 0, 0};
        for (size_t i = 0; i < 2; i++) {
            snprintf(gm, sizeof gm, "%s/%s.gguf", g_tmp, more[i]);
            CHECK(vx_test_synth(more[i], "F32", gm));
            test_model(gm, i == 0 ? &spm : &one);
            if (i == 0) test_model(gm, &mm); /* as the text model of a multimodal checkpoint */
            refused_configs(gm, i == 0 ? &spm : &one, i == 0 ? g3bad : q3bad, 3);
            if (i == 0) { /* newer transformers spell the pattern as layer_types: a period of 3 here */
                char gd[400], err[512] = "", info[4096] = "";
                snprintf(gd, sizeof gd, "%s/lt", g_tmp);
                mkdir(gd, 0700);
                CHECK(export_hf(gm, gd, &spm));
                patch_json(gd, "config.json", "layer_types",
                           "[\"sliding_attention\", \"sliding_attention\", \"full_attention\", \"sliding_attention\", "
                           "\"sliding_attention\", \"full_attention\", \"sliding_attention\", \"sliding_attention\"]");
                vx_model *m = NULL;
                CHECKF(vx_model_load(gd, NULL, &m, err, sizeof err) == VX_OK, "layer_types: %s", err);
                if (m) vx_model_describe(m, info, sizeof info);
                CHECKF(strstr(info, "on 2 of every 3 layers"), "layer_types: %s", info);
                vx_model_free(m);
                rm_dir(gd);
            }
            remove(gm);
        }
        snprintf(gm, sizeof gm, "%s/gemma2-tiny.gguf", g_tmp);
        CHECK(vx_test_synth("gemma2-tiny", "F32", gm));
        test_model(gm, &spm);
        /* what vx does not do is refused, not run wrong */
        static const bad_cfg g2bad[] = {{"query_pre_attn_scalar", "144", "query_pre_attn_scalar 144"},
                                        {"hidden_activation", "\"silu\"", "hidden_activation 'silu'"},
                                        {"attn_logit_softcapping", "-1", "soft caps -1"}};
        refused_configs(gm, &spm, g2bad, sizeof g2bad / sizeof g2bad[0]);
        remove(gm);
    }
    test_fp8("models/llama/llama-F16.gguf", 1);
    test_fp8("models/qwen2/qwen2-F16.gguf", 2);
    test_gptq("models/llama/llama-F16.gguf", 1);
    test_gptq("models/qwen2/qwen2-F16.gguf", 2);
    test_gptq("models/llama/llama-F16.gguf", 3);
    test_gptq("models/qwen2/qwen2-F16.gguf", 4);
    test_gemma3_variants();

    printf("errors:\n");
    const hf_opts bad_arch = {1, "GPT2LMHeadModel", NULL, false, false, 0, 0}, i16 = {1, NULL, "I16", false, false, 0, 0},
                  no_tok = {1, NULL, NULL, true, false, 0, 0};
    test_error("models/qwen2/qwen2-F16.gguf", &bad_arch, VX_EUNSUPPORTED, "GPT2LMHeadModel is not supported");
    test_error("models/qwen2/qwen2-F16.gguf", &no_tok, VX_EUNSUPPORTED, "no tokenizer.json");
    test_error("models/qwen2/qwen2-F16.gguf", &i16, VX_EUNSUPPORTED, "is I16: only F32, F16, BF16 and FP8");
    const hf_opts bad_gidx = {1, NULL, NULL, false, false, 0, 5};
    test_error("models/qwen2/qwen2-F16.gguf", &bad_gidx, VX_EFORMAT, "is not a group (0..");
    test_patched();
    test_chat_template_files();
    /* a directory without config.json: says so */
    char err[512] = "";
    vx_model *m = NULL;
    CHECK(vx_model_load(g_tmp, NULL, &m, err, sizeof err) == VX_EIO && !m && strstr(err, "config.json"));
    rmdir(g_tmp);
    return vx_test_finish("test_hf");
}
