/* cmd_run.c - `vx run`: tokenize a prompt, evaluate it in batches, then
 * sample and stream tokens until -n tokens or an end-of-generation token. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "grammar.h"
#include "json_check.h"
#include "json_schema.h"

/* llama.h-style time source, kept local to the tool. */
#include <time.h>
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void run_usage(void) {
    printf("usage: vx run -m MODEL.gguf -p PROMPT [options]\n"
           "\n"
           "  -m, --model PATH        GGUF file or Hugging Face model directory (default: $VX_MODEL)\n"
           "  -p, --prompt TEXT       prompt text\n"
           "  -f, --file FILE         read the prompt from a file\n"
           "  -n, --n-predict N       tokens to generate (default 128, -1 = until end/context)\n"
           "  -c, --ctx-size N        context size (default 4096, capped at the model's)\n"
           "  -b, --batch-size N      prompt tokens per forward (default 512)\n"
           "  -t, --threads N         threads (default: all cores)\n"
           "  -ngl N                  accepted for llama.cpp's command lines, ignored (CPU only)\n"
           "  --temp T                temperature (default 0.8; 0 = greedy)\n"
           "  --top-k K               top-k (default 40; 0 = off)\n"
           "  --top-p P               top-p (default 0.95; 1 = off)\n"
           "  --min-p P               min-p (default 0.05; 0 = off)\n"
           "  --repeat-penalty F      repetition penalty (default 1.0 = off)\n"
           "  --repeat-last-n N       penalty window (default 64)\n"
           "  --presence-penalty F    presence penalty (default 0)\n"
           "  --frequency-penalty F   frequency penalty (default 0)\n"
           "  -s, --seed N            RNG seed (default -1 = random)\n"
           "  --json                  constrain the output to one JSON object (llama.cpp's json\n"
           "                          grammar; OpenAI's json_object); stops when it closes\n"
           "  -j, --json-schema JSON  the same, conforming to this JSON Schema (a subset: see README)\n"
           "  --grammar GBNF          constrain the output to this GBNF grammar (llama.cpp's format);\n"
           "                          stops when the text can only end\n"
           "  --grammar-file FILE     the same, the grammar read from FILE\n"
           "  --ignore-eos            keep generating after an end-of-generation token\n"
           "  --no-bos                do not add BOS to the prompt\n"
           "  --no-display-prompt     do not echo the prompt\n"
           "  --kv-type f16|f32|q8_0 KV cache type (default f16)\n"
           "  -md, --model-draft PATH speculative decoding with this draft model (same vocabulary;\n"
           "                          the model's own draws kept while they match the draft: for a\n"
           "                          --seed the same text as without it)\n"
           "  --draft N               tokens drafted per step (default 5)\n"
           "  --batch-invariant       a token's logits the same bits whatever batch it is in (with\n"
           "                          a draft model: exactly the output without it)\n"
           "  --no-mmap               read the model into memory instead of mapping it\n"
           "  --no-repack             keep weights in the file's layout (no 8-row packing)\n"
           "  --check-tensors         verify every weight is finite while loading\n");
}

/* Decodes token t at position p of sequence *seq; false (said on stderr)
 * when that fails. */
static bool decode_one(vx_context *c, vx_token t, vx_pos p, const vx_seq_id *seq) {
    const vx_batch b = {1, &t, &p, seq, NULL, NULL};
    if (vx_decode(c, &b) == VX_OK) return true;
    fprintf(stderr, "\nerror: %s\n", vx_context_errmsg(c));
    return false;
}

int vx_cmd_run(int argc, char **argv) {
    const char *path = getenv("VX_MODEL"), *prompt = NULL, *pfile = NULL;
    char *piece = NULL; /* cli_piece's buffer */
    int32_t piece_cap = 0;
    long n_predict = 128, n_ctx = 4096, n_batch = 512, threads = 0, n_draft = 5;
    bool ignore_eos = false, add_bos = true, show_prompt = true, invariant = false, json = false;
    vx_jfilter jf; /* --json, --json-schema */
    vx_jvocab *jv = NULL;
    vx_jschema *schema = NULL;
    const char *schema_text = NULL;
    const char *grammar_text = NULL, *grammar_path = NULL;
    char *grammar_owned = NULL;
    vx_grammar *grammar = NULL;
    vx_gvocab *gv = NULL;
    vx_gfilter *gf = NULL; /* --grammar, --grammar-file */
    const char *draft_path = NULL;
    vx_model_params mp = vx_model_default_params();
    vx_kv_type kvt = VX_KV_F16;
    vx_sampler_params sp = vx_sampler_default_params();
    cli_args a = {argc, argv, 0, false};
    for (a.i = 1; a.i < argc && !a.error; a.i++) {
        const char *o = argv[a.i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            run_usage();
            return 0;
        } else if (!strcmp(o, "-m") || !strcmp(o, "--model")) path = cli_value(&a);
        else if (!strcmp(o, "-p") || !strcmp(o, "--prompt")) prompt = cli_value(&a), pfile = NULL; /* the last wins */
        else if (!strcmp(o, "-f") || !strcmp(o, "--file")) pfile = cli_value(&a), prompt = NULL;
        else if (!strcmp(o, "-n") || !strcmp(o, "--n-predict")) cli_int(&a, -1, 1 << 24, &n_predict);
        else if (!strcmp(o, "-c") || !strcmp(o, "--ctx-size")) cli_int(&a, 0, 1 << 24, &n_ctx);
        else if (!strcmp(o, "-b") || !strcmp(o, "--batch-size")) cli_int(&a, 1, 1 << 16, &n_batch);
        else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) cli_int(&a, 0, 512, &threads);
        else if (cli_sampling_option(&a, &sp) || cli_gpu_option(&a) || cli_llama_option(&a)) continue;
        else if (!strcmp(o, "--ignore-eos")) ignore_eos = true;
        else if (!strcmp(o, "--json")) json = true;
        else if (!strcmp(o, "-j") || !strcmp(o, "--json-schema")) schema_text = cli_value(&a), json = true;
        else if (!strcmp(o, "--grammar")) grammar_text = cli_value(&a), grammar_path = NULL;
        else if (!strcmp(o, "--grammar-file")) grammar_path = cli_value(&a), grammar_text = NULL;
        else if (!strcmp(o, "--no-bos")) add_bos = false;
        else if (!strcmp(o, "--no-display-prompt")) show_prompt = false;
        else if (!strcmp(o, "--no-mmap")) mp.use_mmap = false;
        else if (!strcmp(o, "--no-repack")) mp.repack = false;
        else if (!strcmp(o, "--check-tensors")) mp.check_tensors = true;
        else if (!strcmp(o, "-md") || !strcmp(o, "--model-draft")) draft_path = cli_value(&a);
        else if (!strcmp(o, "--draft") || !strcmp(o, "--draft-max")) cli_int(&a, 1, 64, &n_draft);
        else if (!strcmp(o, "--batch-invariant")) invariant = true;
        else if (!strcmp(o, "--kv-type")) {
            const char *v = cli_value(&a);
            if (v && !cli_kv_type(v, &kvt)) return 2;
        } else {
            fprintf(stderr, "error: unknown option '%s' (see vx run --help)\n", o);
            return 2;
        }
    }
    if (a.error) return 2;
    if ((grammar_text || grammar_path) && (json || draft_path)) {
        fprintf(stderr, "error: --grammar / --grammar-file do not go with --json, --json-schema or a draft model\n");
        return 2;
    }
    if (grammar_path && !(grammar_text = grammar_owned = cli_read_file(grammar_path, NULL))) return 1;
    char *owned = NULL;
    if (pfile) {
        owned = cli_read_file(pfile, NULL);
        if (!owned) return free(grammar_owned), 1;
        prompt = owned;
    }
    if (!prompt) prompt = "";
    if (!cli_model_given(path)) {
        free(owned), free(grammar_owned);
        return 2;
    }
    int rc = 1;
    vx_model *m = cli_load_model_ex(path, &mp), *dm = NULL;
    vx_context *c = NULL, *dc = NULL;
    vx_spec_stats spec = {0, 0, 0};
    vx_sampler *smp = NULL;
    vx_token *toks = NULL;
    vx_pos *pos = NULL;
    vx_seq_id *seq = NULL;
    if (!m || !cli_generative(m)) goto done;
    const vx_vocab *v = vx_model_get_vocab(m);
    vx_context_params cp = vx_context_default_params();
    if (n_ctx == 0 || n_ctx > vx_model_n_ctx_train(m)) n_ctx = vx_model_n_ctx_train(m);
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)(n_batch < n_ctx ? n_batch : n_ctx);
    cp.n_threads = (int32_t)threads;
    cp.kv_type = kvt;
    cp.batch_invariant = invariant;
    char err[VX_ERRMSG_MAX];
    if (vx_context_init(m, &cp, &c, err, sizeof err) != VX_OK) {
        fprintf(stderr, "error: %s\n", err);
        goto done;
    }
    if (draft_path) {
        if (!(dm = cli_load_local_model(draft_path, &mp)) || !cli_generative(dm)) goto done;
        if (vx_context_init(dm, &cp, &dc, err, sizeof err) != VX_OK) {
            fprintf(stderr, "error: draft model: %s\n", err);
            goto done;
        }
        if (vx_context_n_vocab(dc) != vx_context_n_vocab(c)) {
            fprintf(stderr, "error: the draft model's vocabulary has %d tokens, the model's %d\n",
                    vx_context_n_vocab(dc), vx_context_n_vocab(c));
            goto done;
        }
    }
    int32_t plen = (int32_t)strlen(prompt);
    pos = malloc((size_t)cp.n_batch * sizeof *pos);
    seq = calloc((size_t)cp.n_batch, sizeof *seq);
    if (!pos || !seq) {
        fprintf(stderr, "error: out of memory\n");
        goto done;
    }
    /* room for the generated tokens too (n_ctx) */
    const int32_t n_prompt = cli_tokenize(v, prompt, plen, add_bos, false, (int32_t)n_ctx, &toks);
    if (n_prompt < 0) goto done;
    if (n_prompt == 0) {
        fprintf(stderr, "error: the prompt is empty and %s\n",
                add_bos ? "the model adds no BOS token" : "--no-bos leaves no token to start from");
        goto done;
    }
    if (n_prompt >= n_ctx) {
        fprintf(stderr, "error: the prompt has %d tokens; the context holds %ld (use -c)\n",
                n_prompt, n_ctx);
        goto done;
    }
    if (vx_sampler_init(&sp, vx_context_n_vocab(c), &smp) != VX_OK) {
        fprintf(stderr, "error: cannot create the sampler\n");
        goto done;
    }
    if (json) {
        if (dc) {
            fprintf(stderr, "error: --json / --json-schema do not work with a draft model (-md)\n");
            goto done;
        }
        if (schema_text && vx_jschema_compile(schema_text, strlen(schema_text), &schema, err, sizeof err) != VX_OK) {
            fprintf(stderr, "error: --json-schema: %s\n", err);
            goto done;
        }
        if (!(jv = vx_jvocab_new(v))) {
            fprintf(stderr, "error: out of memory\n");
            goto done;
        }
        vx_jfilter_init(&jf, jv, schema);
        vx_sampler_set_filter(smp, vx_jfilter_allows, &jf);
    }
    if (grammar_text) {
        if (vx_grammar_parse(grammar_text, strlen(grammar_text), &grammar, err, sizeof err) != VX_OK) {
            fprintf(stderr, "error: %s: %s\n", grammar_path ? grammar_path : "--grammar", err);
            goto done;
        }
        if (!(gv = vx_gvocab_new(v)) || !(gf = vx_gfilter_new(grammar, gv))) {
            fprintf(stderr, "error: out of memory\n");
            goto done;
        }
        vx_sampler_set_filter(smp, vx_gfilter_allows, gf);
    }
    if (show_prompt) {
        fwrite(prompt, 1, (size_t)plen, stdout);
        fflush(stdout);
    }
    for (int32_t i = 0; i < n_prompt; i++) vx_sampler_accept(smp, toks[i]);

    double t0 = now_s();
    for (int32_t i0 = 0; i0 < n_prompt; i0 += (int32_t)cp.n_batch) {
        int32_t nb = n_prompt - i0 < (int32_t)cp.n_batch ? n_prompt - i0 : (int32_t)cp.n_batch;
        for (int32_t j = 0; j < nb; j++) pos[j] = i0 + j;
        vx_batch b = {nb, toks + i0, pos, seq, NULL, NULL};
        if (vx_decode(c, &b) != VX_OK) {
            fprintf(stderr, "\nerror: %s\n", vx_context_errmsg(c));
            goto done;
        }
        if (dc && vx_decode(dc, &b) != VX_OK) {
            fprintf(stderr, "\nerror: draft model: %s\n", vx_context_errmsg(dc));
            goto done;
        }
    }
    double t_prompt = now_s() - t0;
    int32_t last = (n_prompt - 1) % (int32_t)cp.n_batch;
    int32_t n_gen = 0, cur = n_prompt;
    t0 = now_s();
    const char *stop = "length";
    /* speculative: the tokens of the last step not emitted yet */
    vx_token pend[65];
    int32_t n_pend = 0, i_pend = 0;
    while (n_predict < 0 || n_gen < n_predict) {
        vx_token t;
        bool taken = false; /* in smp's history already (a speculative step's draw) */
        if (dc && i_pend < n_pend) {
            t = pend[i_pend++];
            taken = true;
        } else if (dc && n_gen > 0 && cur + 1 < n_ctx) {
            /* both caches hold [0, cur); pend's last token is at cur, its
             * drafts (n_draft >= 1) fit before n_ctx */
            const int32_t k = (int32_t)(n_draft < n_ctx - cur - 1 ? n_draft : n_ctx - cur - 1);
            if (vx_spec_step_sample(c, dc, smp, pend[n_pend - 1], cur, k, pend, &n_pend, &spec) != VX_OK) {
                fprintf(stderr, "\nerror: %s / draft: %s\n", vx_context_errmsg(c), vx_context_errmsg(dc));
                goto done;
            }
            cur += n_pend;
            i_pend = 0;
            t = pend[i_pend++];
            taken = true;
        } else {
            if (dc && n_gen > 0) {
                /* no room for a draft: pend's last token (at cur < n_ctx,
                 * else the run stopped after it) decoded alone; the next
                 * token is at n_ctx, the last, so the draft cache needs
                 * no copy */
                if (!decode_one(c, pend[n_pend - 1], cur++, seq)) goto done;
                last = 0;
            }
            t = vx_sampler_sample(smp, vx_get_logits_ith(c, last));
            if (dc) pend[0] = t, n_pend = i_pend = 1;
        }
        if (gf && vx_gfilter_limited(gf)) {
            stop = "no token can be sampled (the grammar is too ambiguous: its parses grew past vx's bounds)";
            break;
        }
        if (t < 0) {
            stop = json  ? "no token can be sampled (none continues the JSON object)"
                   : gf ? "no token can be sampled (none continues the text in the grammar)"
                        : "no token can be sampled (every logit is -inf or NaN: a corrupt model?)";
            break;
        }
        if (!taken) vx_sampler_accept(smp, t);
        if (json) vx_jfilter_feed(&jf, t); /* the filter allowed it */
        if (gf && !vx_gfilter_feed(gf, t)) { /* the mask allowed it: only memory can be short */
            stop = "no token can be sampled (out of memory while matching the grammar)";
            break;
        }
        n_gen++;
        if (!ignore_eos && vx_vocab_is_eog(v, t)) {
            stop = "end of generation token";
            break;
        }
        const int32_t pl = cli_piece(v, t, false, &piece, &piece_cap);
        if (pl > 0) {
            fwrite(piece, 1, (size_t)pl, stdout);
            fflush(stdout);
        }
        if (json && vx_jcheck_done(&jf.jc)) {
            stop = "JSON object complete";
            break;
        }
        if (gf && vx_gfilter_done(gf)) {
            stop = "the grammar's text is complete";
            break;
        }
        /* t's position: with drafts, pend's last token is at cur */
        if ((dc ? cur - n_pend + i_pend : cur) >= n_ctx) {
            stop = "context full";
            break;
        }
        if (n_predict >= 0 && n_gen >= n_predict) break;
        if (dc) continue; /* the next step decodes it */
        if (!decode_one(c, t, cur++, seq)) goto done;
        last = 0;
    }
    double t_gen = now_s() - t0;
    printf("\n");
    fprintf(stderr, "\n[stopped: %s]\n", stop);
    fprintf(stderr, "prompt:     %5d tokens in %8.1f ms (%8.2f t/s)\n", n_prompt, t_prompt * 1e3,
            t_prompt > 0 ? n_prompt / t_prompt : 0.0);
    fprintf(stderr, "generation: %5d tokens in %8.1f ms (%8.2f t/s)\n", n_gen, t_gen * 1e3,
            t_gen > 0 ? n_gen / t_gen : 0.0);
    if (dc)
        fprintf(stderr, "draft:      %5d of %d drafted tokens accepted (%.1f%%), %d target passes, %.2f tokens each\n",
                spec.n_accepted, spec.n_drafted, spec.n_drafted ? 100.0 * spec.n_accepted / spec.n_drafted : 0.0,
                spec.n_steps, spec.n_steps ? (double)(n_gen - 1) / spec.n_steps : 0.0);
    rc = strncmp(stop, "no token", 8) == 0; /* the sampling failure is an error */
done:
    free(toks); free(pos); free(seq); free(owned); free(piece);
    vx_sampler_free(smp);
    vx_jvocab_free(jv);
    vx_jschema_free(schema);
    vx_gfilter_free(gf);
    vx_gvocab_free(gv);
    vx_grammar_free(grammar);
    free(grammar_owned);
    vx_context_free(dc);
    vx_model_free(dm);
    vx_context_free(c);
    vx_model_free(m);
    return rc;
}
