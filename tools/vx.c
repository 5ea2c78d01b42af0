/* vx.c - the `vx` command: dispatches to subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "vx %s - Vortex LLM inference engine\n"
            "\n"
            "usage: vx COMMAND [options]\n"
            "\n"
            "commands:\n"
            "  run       generate text from a prompt (vx run -m MODEL.gguf -p \"...\")\n"
            "  chat      talk with a model, using its chat template\n"
            "  serve     OpenAI-compatible HTTP server with continuous batching\n"
            "  info      show a model's architecture, hyperparameters and tensor types\n"
            "  tokenize  print the tokens of a text\n"
            "  logits    evaluate token ids and write the logits of every position\n"
            "  embed     print the embedding vector of texts (like llama-embedding)\n"
            "  bench     measure prompt and generation speed (like llama-bench)\n"
            "  quantize  convert a GGUF model or HF directory to a GGUF type or mix (like llama-quantize)\n"
            "  synth     write a GGUF file with a real model's shapes and random weights\n"
            "\n"
            "Run 'vx COMMAND --help' for the options of a command.\n"
            "Models: any GGUF file of a supported architecture (llama, mistral, qwen2, qwen3,\n"
            "phi3, Mixtral-style MoE), e.g. from https://huggingface.co (search \"GGUF\"), or a\n"
            "Hugging Face model directory (config.json, *.safetensors, tokenizer files).\n",
            VX_VERSION);
}

static int run_command(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("vx %s (%s)\n", VX_VERSION, vx_cpu_features());
        return 0;
    }
    if (!strcmp(cmd, "run")) return vx_cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "chat")) return vx_cmd_chat(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve")) return vx_cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "info")) return vx_cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "tokenize")) return vx_cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "logits")) return vx_cmd_logits(argc - 1, argv + 1);
    if (!strcmp(cmd, "embed")) return vx_cmd_embed(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return vx_cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "quantize")) return vx_cmd_quantize(argc - 1, argv + 1);
    if (!strcmp(cmd, "synth")) return vx_cmd_synth(argc - 1, argv + 1);
    fprintf(stderr, "error: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}

/* Under mpirun every process starts here: process 0 runs the command,
 * with its models split over the group; the others carry out its calls
 * (vx_dist_serve) until it is done. */
int main(int argc, char **argv) {
    vx_dist *d = NULL;
    char err[VX_ERRMSG_MAX];
    if (vx_dist_init(&argc, &argv, &d, err, sizeof err) != VX_OK) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    int rc;
    if (vx_dist_rank(d) > 0) {
        rc = vx_dist_serve(d) == VX_OK ? 0 : 1;
    } else {
        cli_set_group(d);
        rc = run_command(argc, argv);
    }
    vx_dist_free(d);
    return rc;
}
