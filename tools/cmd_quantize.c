/* cmd_quantize.c - `vx quantize IN.gguf OUT.gguf TYPE`: converts a model to
 * another tensor type or llama.cpp quantization mix (src/model_quantize.c
 * does the work; this file parses arguments and prints progress). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "model_quantize.h"
#include "quant.h"

static void usage(FILE *f) {
    fprintf(f, "usage: vx quantize IN.gguf OUT.gguf TYPE [--threads N] [--allow-requantize] "
               "[--pure]\n"
               "Converts the weight matrices of a model (IN: a GGUF file or a Hugging Face model\n"
               "directory, converted as convert_hf_to_gguf.py would); norms, biases and small tensors keep\n"
               "their type. The _S/_M/_L mixes give more bits to sensitive matrices, as\n"
               "llama-quantize does.\n"
               "  --threads N         conversion threads (default: all CPUs)\n"
               "  --allow-requantize  accept an input that is already quantized (lossy)\n"
               "  --pure              every weight matrix gets the base type (no mix rules)\n"
               "types:\n");
    for (int i = 0; vx_quant_mix_at(i); i++)
        if (vx_type_get_traits(vx_quant_mix_at(i)->base)->from_float) /* not the synth-only ones */
            fprintf(f, "  %-8s %s\n", vx_quant_mix_at(i)->name, vx_quant_mix_at(i)->desc);
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static void on_tensor(const vx_quant_tensor_info *t, void *ud) {
    VX_UNUSED(ud);
    char shape[96];
    snprintf(shape, sizeof shape, "[%5lld, %5lld, %5lld, %5lld]", (long long)t->ne[0],
             (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
    printf("[%4lld/%4lld] %36s - %s, type = %6s, ", (long long)t->index + 1, (long long)t->count,
           t->name, shape, vx_type_name(t->src_type));
    if (t->converted)
        printf("converting to %s%s .. size = %8.2f MiB -> %8.2f MiB\n",
               vx_type_name(t->dst_type), t->fallback ? " (fallback: row length)" : "",
               mib(t->src_bytes), mib(t->dst_bytes));
    else
        printf("size = %8.3f MiB\n", mib(t->src_bytes));
    fflush(stdout);
}

int vx_cmd_quantize(int argc, char **argv) {
    const char *pos[3] = {NULL, NULL, NULL};
    int n_pos = 0;
    vx_quantize_params p;
    memset(&p, 0, sizeof p);
    cli_args a = {argc, argv, 0, false};
    for (a.i = 1; a.i < argc && !a.error; a.i++) {
        const char *o = argv[a.i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) {
            long n;
            if (cli_int(&a, 1, 512, &n)) p.n_threads = (int)n;
        } else if (!strcmp(o, "--allow-requantize")) {
            p.allow_requantize = true;
        } else if (!strcmp(o, "--pure")) {
            p.pure = true;
        } else if (o[0] == '-' && o[1]) {
            fprintf(stderr, "error: unknown option '%s'\n", o);
            return 2;
        } else if (n_pos < 3) {
            pos[n_pos++] = o;
        } else {
            fprintf(stderr, "error: unexpected argument '%s'\n", o);
            return 2;
        }
    }
    if (a.error) return 2;
    if (n_pos != 3) {
        usage(stderr);
        return 2;
    }
    p.mix = vx_quant_mix_find(pos[2]);
    if (!p.mix) {
        fprintf(stderr, "error: unknown type '%s'\n\n", pos[2]);
        usage(stderr);
        return 2;
    }
    p.on_tensor = on_tensor;
    printf("quantizing %s to %s as %s (file type %d)\n", pos[0], pos[1], p.mix->name,
           p.mix->ftype);
    char err[VX_ERRMSG_MAX];
    vx_quantize_stats st;
    int64_t t0 = vx_time_us();
    vx_status s = vx_quantize_model(pos[0], pos[1], &p, &st, err, sizeof err);
    if (s != VX_OK) {
        fprintf(stderr, "error: %s\n", err);
        if (s == VX_EINVAL && strstr(err, "already quantized"))
            fprintf(stderr, "(pass --allow-requantize to convert it anyway)\n");
        return 1;
    }
    printf("model size  = %8.2f MiB\n", mib(st.src_bytes));
    printf("quant size  = %8.2f MiB (%lld of %lld tensors converted", mib(st.dst_bytes),
           (long long)st.n_converted, (long long)st.n_tensors);
    if (st.n_fallback)
        printf(", %lld with a fallback type for their row length", (long long)st.n_fallback);
    printf(")\ntime        = %.2f s\n", (double)(vx_time_us() - t0) / 1e6);
    return 0;
}
