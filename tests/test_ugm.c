/*
 * test_ugm.c - the Unigram tokenizer ("t5": T5, XLM-RoBERTa / bge-m3)
 * against SentencePiece itself.
 *
 * Debian's sentencepiece tools (spm_train, spm_encode, spm_decode; CI
 * installs them) train two small Unigram models on this repository's
 * README plus the test lines: one with SentencePiece's defaults (nmt_nfkc
 * charsmap, extra spaces removed, dummy prefix) and one with nfkc_cf
 * (case folding), spaces kept, no dummy prefix and byte fallback. Each
 * tokenizer.model goes through vx_hf_spm_to_gguf and vx_vocab_load, and
 * vx_tokenize must give spm_encode's ids for every line: fixed ones
 * (spaces, tabs, NFKC cases, invalid UTF-8, unknown scripts, emoji) and
 * 300 random ones drawn from such characters. Lines without unknowns must
 * also decode to spm_decode's text. Without the tools the test fails under
 * CI (CI=true) and is skipped elsewhere.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "hf_import.h"
#include "testutil.h"
#include "tok_internal.h"
#include "vocab.h"

static char g_dir[64];

static const char *const k_fixed[] = {
    "Hello world",
    "  leading and   multiple   spaces  ",
    "The quick brown fox jumps over the lazy dog.",
    "\xef\xbd\x86\xef\xbd\x95\xef\xbd\x8c\xef\xbd\x8c width \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3 \xef\xbc\x91\xef\xbc\x92\xef\xbc\x93",
    "\xef\xac\x81ne ligatures and \xc2\xbd fractions",
    "caf\xc3\xa9 cafe\xcc\x81 na\xc3\xafve",
    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88 and \xe4\xb8\xad\xe6\x96\x87",
    "emoji \xf0\x9f\x98\x80 test \xf0\x9f\x9a\x80",
    "tab\tseparated\tvalues",
    "non breaking\xc2\xa0space",
    "bad utf8 \xff\xfe here \xe2\x96",
    "overlong \xc0\xaf and surrogate \xed\xa0\x80 end",
    "vx bench -m FILE -p 512 -n 128",
    "KV cache, prefix sharing; copy-on-write!",
    "x",
    "",
    "   ",
    "ctrl\x01\x7f" " chars \xe2\x80\x8b zero width",
    "\xe2\x85\xab \xe3\x8d\xbf \xef\xbe\x8a\xef\xbe\x9d\xef\xbd\xb6\xef\xbd\xb8 \xe3\x8c\x94",
    "\xe2\x96\x81" "already escaped\xe2\x96\x81\xe2\x96\x81 marks",
    "UPPER lower MiXeD \xc3\x84\xc3\x96\xc3\x9c \xc3\x9f",
};

/* characters the random lines are drawn from */
static const char *const k_pool[] = {
    "a", "e", "i", "o", "n", "s", "t", "r", "h", "l", "T", "K", "V", "0", "1", "5", " ", " ", " ", "  ", "\t",
    ".", ",", "-", "'", "(", ")", "\xc3\xa9", "e\xcc\x81", "\xc3\x9f", "\xef\xbd\x81", "\xef\xbc\xa2", "\xef\xac\x81",
    "\xc2\xa0", "\xe2\x80\x8b", "\xe6\x97\xa5", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "\xff", "\xe2\x96", "\xe2\x96\x81",
    "\xe3\x8c\x94", "\xef\xbe\x8a", "the", "cache", " and ", "\xd0\x96", "\xce\xa9",
};

static bool run(const char *cmd) {
    const int rc = system(cmd);
    if (rc != 0) fprintf(stderr, "  '%s' exited %d\n", cmd, rc);
    return rc == 0;
}

/* The lines of path (without their newlines), n of them. */
static char **read_lines(const char *path, int *n) {
    size_t size = 0;
    char *all = vx_test_read_file(path, &size);
    *n = 0;
    if (!all) return NULL;
    char **v = malloc((size + 2) * sizeof *v);
    char *p = all;
    for (char *nl; (nl = memchr(p, '\n', size - (size_t)(p - all))); p = nl + 1) {
        *nl = 0;
        v[(*n)++] = strdup(p);
    }
    free(all);
    return v;
}

static void free_lines(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* ids of a line of spm_encode's output */
static int parse_ids(const char *s, vx_token *ids, int cap) {
    int n = 0;
    while (*s && n < cap) {
        char *e;
        const long x = strtol(s, &e, 10);
        if (e == s) break;
        ids[n++] = (vx_token)x;
        s = e;
    }
    return n;
}

static void test_model(const char *name, const char *train_flags, char **inp, int n_inp) {
    char cmd[1024], path[256];
    snprintf(cmd, sizeof cmd,
             "spm_train --input=%s/corpus.txt --model_prefix=%s/%s --vocab_size=600 --model_type=unigram "
             "--hard_vocab_limit=false --minloglevel=2 %s > %s/%s.train.log 2>&1",
             g_dir, g_dir, name, train_flags, g_dir, name);
    CHECK(run(cmd));
    snprintf(cmd, sizeof cmd, "spm_encode --model=%s/%s.model --output_format=id < %s/inp.txt > %s/%s.ids", g_dir, name,
             g_dir, g_dir, name);
    CHECK(run(cmd));
    snprintf(cmd, sizeof cmd,
             "spm_decode --model=%s/%s.model --input_format=id < %s/%s.ids > %s/%s.dec", g_dir, name, g_dir, name, g_dir,
             name);
    CHECK(run(cmd));
    int n_ids = 0, n_dec = 0;
    snprintf(path, sizeof path, "%s/%s.ids", g_dir, name);
    char **want = read_lines(path, &n_ids);
    snprintf(path, sizeof path, "%s/%s.dec", g_dir, name);
    char **dec = read_lines(path, &n_dec);
    CHECKF(want && n_ids == n_inp && dec && n_dec == n_inp, "%s: %d id lines, %d decoded, for %d inputs", name, n_ids,
           n_dec, n_inp);
    size_t msize = 0;
    snprintf(path, sizeof path, "%s/%s.model", g_dir, name);
    char *model = vx_test_read_file(path, &msize);
    CHECK(model != NULL);
    char err[512] = "";
    vx_gguf_writer *w = vx_gguf_writer_init();
    vx_gguf *g = NULL;
    vx_vocab *v = NULL;
    if (model && w &&
        vx_hf_spm_to_gguf((const uint8_t *)model, msize, NULL, 0, NULL, 0, NULL, 0, 0, w, err, sizeof err) == VX_OK &&
        vx_gguf_writer_open_reader(w, (void (*)(void *))vx_gguf_writer_free, w, &g, err, sizeof err) == VX_OK) {
        w = NULL;
        const char *kind = NULL;
        CHECK(vx_gguf_get_str(g, "tokenizer.ggml.model", &kind) == 1 && !strcmp(kind, "t5"));
        CHECKF(vx_vocab_load(g, &v, err, sizeof err) == VX_OK, "%s: %s", name, err);
    } else {
        CHECKF(0, "%s: conversion failed: %s", name, err);
    }
    vx_gguf_writer_free(w);
    int same = 0, decoded = 0, n_dec_checked = 0, shown = 0;
    enum { CAP = 4096 };
    vx_token *exp = malloc(CAP * sizeof *exp), *got = malloc(CAP * sizeof *got);
    char *text = malloc(1 << 16);
    for (int i = 0; v && want && i < n_inp && i < n_ids; i++) {
        const int ne = parse_ids(want[i], exp, CAP);
        const int ng = vx_tokenize(v, inp[i], (int32_t)strlen(inp[i]), got, CAP, false, false);
        const bool eq = ng == ne && !memcmp(exp, got, (size_t)(ne > 0 ? ne : 0) * sizeof *exp);
        same += eq;
        if (!eq && shown++ < 5) {
            fprintf(stderr, "  %s line %d '%s':\n    spm: %s\n    vx: ", name, i, inp[i], want[i]);
            for (int k = 0; k < ng; k++) fprintf(stderr, " %d", got[k]);
            fputc('\n', stderr);
        }
        bool has_unk = false;
        for (int k = 0; k < ne; k++) has_unk |= exp[k] == v->unk;
        if (!eq || has_unk || !dec || i >= n_dec) continue;
        n_dec_checked++;
        const int nt = vx_detokenize(v, got, ng, text, 1 << 16, false, false);
        if (nt >= 0 && (size_t)nt == strlen(dec[i]) && !memcmp(text, dec[i], (size_t)nt)) decoded++;
        else if (shown++ < 5) fprintf(stderr, "  %s line %d decodes to '%.*s', spm_decode '%s'\n", name, i, nt > 0 ? nt : 0, text, dec[i]);
    }
    CHECKF(same == n_inp, "%s: %d of %d lines as spm_encode", name, same, n_inp);
    CHECKF(decoded == n_dec_checked && n_dec_checked > n_inp / 4, "%s: %d of %d lines decoded as spm_decode", name,
           decoded, n_dec_checked);
    printf("  %-9s %d/%d lines tokenized as spm_encode, %d/%d without unknowns decoded as spm_decode\n", name, same,
           n_inp, decoded, n_dec_checked);
    free(exp), free(got), free(text);
    vx_vocab_free(v);
    vx_gguf_close(g);
    free(model);
    if (want) free_lines(want, n_ids);
    if (dec) free_lines(dec, n_dec);
}

/* A corrupt charsmap is an error, never a crash. */
static void test_bad_charsmap(void) {
    char err[256];
    static const uint8_t bad[][8] = {{1, 0, 0, 0}, {8, 0, 0, 0, 1, 2, 3, 4}, {4, 0, 0}};
    static const size_t len[] = {4, 8, 3};
    vx_vocab dummy = {0};
    for (size_t i = 0; i < 3; i++) {
        vx_ugm *u = NULL;
        err[0] = 0;
        CHECKF(vx_ugm_create(&dummy, bad[i], len[i], true, true, &u, err, sizeof err) == VX_EFORMAT && !u &&
                   strstr(err, "precompiled_charsmap"),
               "charsmap %zu: %s", i, err);
    }
}

int main(void) {
    if (system("command -v spm_train > /dev/null 2>&1 && command -v spm_encode > /dev/null 2>&1 && "
               "command -v spm_decode > /dev/null 2>&1") != 0) {
        const char *ci = getenv("CI");
        CHECKF(!(ci && *ci), "sentencepiece's spm_train / spm_encode / spm_decode are not installed (apt-get install sentencepiece)");
        printf("  SKIP: sentencepiece's tools are not installed (apt-get install sentencepiece)\n");
        return vx_test_finish("test_ugm");
    }
    snprintf(g_dir, sizeof g_dir, "/tmp/vx_ugm_XXXXXX");
    if (!mkdtemp(g_dir)) {
        CHECK(0);
        return vx_test_finish("test_ugm");
    }
    /* the input lines: fixed, then random */
    enum { N_RANDOM = 300 };
    const int n_fixed = (int)(sizeof k_fixed / sizeof k_fixed[0]), n_inp = n_fixed + N_RANDOM;
    char **inp = malloc((size_t)n_inp * sizeof *inp);
    for (int i = 0; i < n_fixed; i++) inp[i] = strdup(k_fixed[i]);
    uint32_t s = 7;
    const int n_pool = (int)(sizeof k_pool / sizeof k_pool[0]);
    for (int i = 0; i < N_RANDOM; i++) {
        char line[512];
        size_t o = 0;
        s = s * 1103515245u + 12345u;
        const int nc = 1 + (int)(s >> 16) % 40;
        for (int c = 0; c < nc; c++) {
            s = s * 1103515245u + 12345u;
            const char *p = k_pool[(s >> 16) % (uint32_t)n_pool];
            const size_t l = strlen(p);
            memcpy(line + o, p, l);
            o += l;
        }
        line[o] = 0;
        inp[n_fixed + i] = strdup(line);
    }
    char path[256];
    snprintf(path, sizeof path, "%s/inp.txt", g_dir);
    FILE *f = fopen(path, "wb");
    for (int i = 0; f && i < n_inp; i++) fprintf(f, "%s\n", inp[i]);
    if (f) fclose(f);
    /* the corpus: the README and the fixed lines, five times */
    snprintf(path, sizeof path, "%s/corpus.txt", g_dir);
    f = fopen(path, "wb");
    size_t rsize = 0;
    char *readme = vx_test_read_file("README.md", &rsize);
    if (f && readme) fwrite(readme, 1, rsize, f);
    for (int r = 0; f && r < 5; r++)
        for (int i = 0; i < n_fixed; i++) fprintf(f, "%s\n", k_fixed[i]);
    if (f) fclose(f);
    free(readme);
    CHECK(f != NULL);

    printf("Unigram (t5) tokenizer against SentencePiece %s\n", g_dir);
    test_model("default", "", inp, n_inp);
    test_model("cf_bytes", "--normalization_rule_name=nfkc_cf --remove_extra_whitespaces=false --add_dummy_prefix=false --byte_fallback=true",
               inp, n_inp);
    test_bad_charsmap();

    free_lines(inp, n_inp);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    CHECK(system(cmd) == 0);
    return vx_test_finish("test_ugm");
}
