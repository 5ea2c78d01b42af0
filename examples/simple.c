/*
 * simple.c - the smallest complete use of the Vortex API: load a model,
 * tokenize a prompt, evaluate it in one batch, then sample and print tokens.
 *
 *   build/simple MODEL.gguf "Once upon a time" [n_tokens]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vortex.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N]\n", argv[0]);
        return 2;
    }
    const int n_gen = argc > 3 ? atoi(argv[3]) : 32;
    char err[VX_ERRMSG_MAX];
    vx_model *model = NULL;
    vx_model_params mp = vx_model_default_params();
    if (vx_model_load(argv[1], &mp, &model, err, sizeof err) != VX_OK) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    const vx_vocab *vocab = vx_model_get_vocab(model);
    vx_context *ctx = NULL;
    vx_context_params cp = vx_context_default_params();
    cp.n_ctx = 512;
    if (vx_context_init(model, &cp, &ctx, err, sizeof err) != VX_OK) {
        fprintf(stderr, "error: %s\n", err);
        vx_model_free(model);
        return 1;
    }
    vx_token toks[512];
    int n = vx_tokenize(vocab, argv[2], (int32_t)strlen(argv[2]), toks, 512 - n_gen, true, false);
    if (n <= 0) {
        fprintf(stderr, "error: prompt does not fit\n");
        return 1;
    }
    vx_pos pos[512];
    vx_seq_id seq[512] = {0};
    for (int i = 0; i < n; i++) pos[i] = i;
    vx_batch batch = {n, toks, pos, seq, NULL, NULL}; /* logits of the last token only */

    vx_sampler_params sp = vx_sampler_default_params();
    sp.temperature = 0; /* greedy */
    vx_sampler *smp = NULL;
    vx_sampler_init(&sp, vx_context_n_vocab(ctx), &smp);
    printf("%s", argv[2]);
    int last = n - 1;
    for (int i = 0; i < n_gen; i++) {
        if (vx_decode(ctx, &batch) != VX_OK) {
            fprintf(stderr, "\nerror: %s\n", vx_context_errmsg(ctx));
            break;
        }
        vx_token t = vx_sampler_sample(smp, vx_get_logits_ith(ctx, last));
        if (vx_vocab_is_eog(vocab, t)) break;
        char piece[128];
        int len = vx_token_to_piece(vocab, t, piece, sizeof piece, false);
        if (len > 0) fwrite(piece, 1, (size_t)len, stdout);
        fflush(stdout);
        toks[n] = t; /* the next batch: one token at the next position */
        pos[n] = n;
        batch = (vx_batch){1, &toks[n], &pos[n], seq, NULL, NULL};
        last = 0;
        n++;
    }
    printf("\n");
    vx_sampler_free(smp);
    vx_context_free(ctx);
    vx_model_free(model);
    return 0;
}
