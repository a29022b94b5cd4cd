/* cmd_synth.c — `lilac synth`: write a random model of a config's shapes (MLX
 * 4-bit layout) for backend comparisons at the real width. */
#include <stdio.h>

#include "cli/args.h"
#include "model/config.h"
#include "cli/commands.h"
#include "model/synth_write.h"
#include "util/progress.h"

int cmd_synth(int argc, char **argv, const cli_globals *g) {
    const char *config = LILAC_CONFIG_BUILTIN, *out = NULL;
    int layers = 0, seed = 1, quiet = 0, gguf_exact = 0;
    cli_opt opts[] = {
        {"config", 0, CLI_STR, &config, "DIR", "directory whose config.json gives the shapes (default: the real Qwen3.6 config, built in)", 0, 0},
        {"layers", 0, CLI_INT, &layers, "N", "keep only the first N decoder layers, N >= 1 (default: all)", 1, 256},
        {"out", 'o', CLI_STR, &out, "DIR", "output directory (created)", 0, 0},
        {"seed", 0, CLI_INT, &seed, "S", "random seed (default 1)", 0, 1 << 30},
        {"gguf-exact", 0, CLI_FLAG, &gguf_exact, NULL, "4-bit biases = -8 x scale: every group is two llama.cpp Q4_0 blocks", 0, 0},
        {"quiet", 'q', CLI_FLAG, &quiet, NULL, "no progress on stderr", 0, 0},
    };
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    int help = 0, npos = 0;
    char *pos[1];
    lilac_error e = {0};
    if (cli_parse(argc, argv, opts, nopts, pos, 0, &npos, &help, &e)) return fprintf(stderr, "error: synth: %s\n", e.msg), 2;
    if (help) {
        printf("Usage: lilac synth --out DIR [--config DIR] [--layers N] [--seed S] [--gguf-exact]\n\n"
               "Writes DIR/config.json and DIR/model.safetensors: random weights in the MLX 4-bit layout\n"
               "of mlx-community/Qwen3.6-35B-A3B-4bit (a 4-layer model of the real width is about 2.4 GB).\n"
               "With --gguf-exact each 4-bit group's bias is exactly -8 x its scale, so `lilac export-gguf`\n"
               "writes every group as two Q4_0 blocks with the same codes (the same weights in both engines).\n\nOptions:\n");
        cli_print_options(stdout, opts, nopts);
        cli_print_globals_help();
        return 0;
    }
    if (!out) return fprintf(stderr, "error: synth: --out DIR is required\n"), 2;
    (void)g;
    lilac_progress_sink sink = {.quiet = quiet};
    lilac_status st = lilac_synth_write_ex(config, layers, out, (uint64_t)seed, gguf_exact, lilac_progress_sink_cb, &sink, &e);
    lilac_progress_sink_end(&sink);
    if (st) return fprintf(stderr, "error: synth: %s\n", e.msg), 1;
    return 0;
}
