/* cmd_generate.c — `lilac generate`: greedy continuation of token ids. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/args.h"
#include "cli/cli_engine.h"
#include "cli/ids.h"

int cmd_generate(int argc, char **argv, const cli_globals *g) {
    const char *model = NULL, *ids_spec = NULL;
    int n = 16, chunk = 0, print_ids = 0, ignore_eos = 0;
    cli_opt opts[] = {
        {"model", 0, CLI_STR, &model, "DIR", "model directory (config.json + safetensors)", 0, 0},
        {"ids", 0, CLI_STR, &ids_spec, "IDS", "prompt token ids: comma-separated, or @FILE", 0, 0},
        {"tokens", 'n', CLI_INT, &n, "N", "number of tokens to generate (default 16)", 1, 1 << 24},
        {"print-ids", 0, CLI_FLAG, &print_ids, NULL, "print the new ids as a JSON array", 0, 0},
        {"ignore-eos", 0, CLI_FLAG, &ignore_eos, NULL, "keep going past end-of-sequence tokens", 0, 0},
        {"chunk", 0, CLI_INT, &chunk, "N", "prefill chunk size in tokens (default 512)", 1, 65536},
    };
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    int help = 0, npos = 0;
    char *pos[1];
    lilac_error e = {0};
    if (cli_parse(argc, argv, opts, nopts, pos, 0, &npos, &help, &e)) return fprintf(stderr, "error: generate: %s\n", e.msg), 2;
    if (help) {
        printf("Usage: lilac generate --model DIR --ids IDS [-n N] [--print-ids]\n\n"
               "Greedy continuation of the prompt ids; stops early at an end-of-sequence id\n"
               "unless --ignore-eos.\n\nOptions:\n");
        cli_print_options(stdout, opts, nopts);
        cli_print_globals_help();
        return 0;
    }
    if (!ids_spec) return fprintf(stderr, "error: generate: --ids is required\n"), 2;
    lilac_engine *eng = cli_open_engine(model, g, chunk);
    if (!eng) return 1;
    lilac_engine_info info;
    lilac_engine_get_info(eng, &info);
    int rc = 1, T = 0, got = 0;
    int32_t *ids = NULL, *out = NULL;
    lilac_session *s = NULL;
    if (cli_parse_ids(ids_spec, info.vocab_size, &ids, &T, &e)) goto fail;
    if ((long)T + n > info.max_pos) {
        lilac_fail(&e, LILAC_EINVAL, "%d prompt + %d new tokens exceed the model's %d positions", T, n, info.max_pos);
        goto fail;
    }
    out = malloc((size_t)n * sizeof *out);
    if (!out) {
        lilac_fail(&e, LILAC_ENOMEM, "output ids");
        goto fail;
    }
    if (lilac_session_new(eng, T + n, &s, &e) || lilac_session_feed(s, ids, T, NULL, 0, &e) ||
        lilac_session_generate_greedy(s, n, !ignore_eos, out, &got, &e))
        goto fail;
    (void)print_ids; /* ids are the only output until a tokenizer is loaded */
    printf("[");
    for (int i = 0; i < got; i++) printf("%s%d", i ? ", " : "", out[i]);
    printf("]\n");
    rc = 0;
    goto done;
fail:
    cli_error(&e);
done:
    lilac_session_free(s);
    lilac_engine_close(eng);
    free(ids);
    free(out);
    return rc;
}
