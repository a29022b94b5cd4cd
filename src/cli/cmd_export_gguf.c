/* cmd_export_gguf.c — `lilac export-gguf DIR OUT.gguf`: a model directory
 * (MLX 4-bit or HF bf16 layout) as a GGUF of llama.cpp's qwen35moe
 * architecture, for running the same weights in both engines. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "model/gguf_export.h"
#include "util/progress.h"

int cmd_export_gguf(int argc, char **argv, const cli_globals *g) {
    int f32 = 0, quiet = 0;
    cli_opt opts[] = {
        {"f32", 0, CLI_FLAG, &f32, NULL, "every tensor as F32 (dequantised; for testing)", 0, 0},
        {"quiet", 'q', CLI_FLAG, &quiet, NULL, "no progress or summary on stderr", 0, 0},
    };
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    int help = 0, npos = 0;
    char *pos[2];
    lilac_error e = {0};
    if (cli_parse(argc, argv, opts, nopts, pos, 2, &npos, &help, &e))
        return fprintf(stderr, "error: export-gguf: %s\n", e.msg), 2;
    if (help) {
        printf("Usage: lilac export-gguf DIR OUT.gguf [--f32]\n\n"
               "Writes the model in DIR as a GGUF that llama.cpp loads as qwen35moe.  4-bit matrices are Q4_0\n"
               "when every group's bias is exactly -8 x its scale (lilac synth --gguf-exact: the same codes,\n"
               "4.5 bits per weight), else Q4_1 (the same codes with the bias as Q4_1's minimum: 5 bits per\n"
               "weight); the 8-bit router and shared-expert gate, norms, conv taps, dt_bias and A_log are F32.\n"
               "No tokenizer is written (tokenizer.ggml.model = none): the file is for token-id input.\n\nOptions:\n");
        cli_print_options(stdout, opts, nopts);
        return 0;
    }
    (void)g;
    if (npos != 2) return fprintf(stderr, "error: export-gguf: give DIR and OUT.gguf\n"), 2;
    lilac_progress_sink sink = {.quiet = quiet};
    lilac_gguf_export_opts o = {f32, lilac_progress_sink_cb, &sink};
    lilac_gguf_export_report rep;
    lilac_status st = lilac_gguf_export(pos[0], pos[1], &o, &rep, &e);
    lilac_progress_sink_end(&sink);
    if (st) return fprintf(stderr, "error: %s\n", e.msg), 1;
    if (!quiet) {
        fprintf(stderr, "export-gguf: %s: %d tensors: %d Q4_0, %d Q4_1, %d F32 (general.file_type %d)\n", pos[1], rep.n_tensors,
                rep.n_q4_0, rep.n_q4_1, rep.n_f32, rep.file_type);
        if (rep.n_q4_1)
            fprintf(stderr, "export-gguf: note: %d 4-bit tensors are Q4_1 (5 bits per weight, not Q4_0's 4.5): their biases "
                            "are not -8 x scale (lilac synth --gguf-exact writes ones that are)\n",
                    rep.n_q4_1);
        if (rep.q4_1_inexact_groups)
            fprintf(stderr, "export-gguf: warning: %lld groups have a scale or bias that fp16 cannot hold exactly (rounded)\n",
                    rep.q4_1_inexact_groups);
    }
    return 0;
}
