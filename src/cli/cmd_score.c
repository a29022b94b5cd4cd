/* cmd_score.c — `lilac score`: a teacher-forced pass over token ids.
 *
 * Prints {"tokens": T, "nll": mean -log p(ids[t+1] | ids[..t]), "ppl": exp(nll),
 * "top1": [argmax at each position]} and optionally writes the logits
 * ([T, vocab] float32 little-endian, row-major).  Logits are produced and
 * written one chunk at a time, so memory does not grow with T. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/args.h"
#include "cli/cli_engine.h"
#include "cli/ids.h"

int cmd_score(int argc, char **argv, const cli_globals *g) {
    const char *model = NULL, *ids_spec = NULL, *logits_out = NULL;
    int chunk = 0;
    cli_opt opts[] = {
        {"model", 0, CLI_STR, &model, "DIR", "model directory (config.json + safetensors)", 0, 0},
        {"ids", 0, CLI_STR, &ids_spec, "IDS", "token ids: comma-separated, or @FILE with whitespace-separated ids", 0, 0},
        {"logits-out", 0, CLI_STR, &logits_out, "FILE", "write float32 little-endian logits [T, vocab] to FILE", 0, 0},
        {"chunk", 0, CLI_INT, &chunk, "N", "prefill chunk size in tokens (default 512)", 1, 65536},
    };
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    int help = 0, npos = 0;
    char *pos[1];
    lilac_error e = {0};
    if (cli_parse(argc, argv, opts, nopts, pos, 0, &npos, &help, &e)) return fprintf(stderr, "error: score: %s\n", e.msg), 2;
    if (help) {
        printf("Usage: lilac score --model DIR --ids IDS [--logits-out FILE] [--chunk N]\n\n"
               "Teacher-forced pass over the ids. Prints one JSON object:\n"
               "  {\"tokens\": T, \"nll\": mean negative log-likelihood of ids[1..], \"ppl\": exp(nll),\n"
               "   \"top1\": [argmax id at each position]}\n\nOptions:\n");
        cli_print_options(stdout, opts, nopts);
        cli_print_globals_help();
        return 0;
    }
    if (!ids_spec) return fprintf(stderr, "error: score: --ids is required\n"), 2;
    lilac_engine *eng = cli_open_engine(model, g, chunk, 0);
    if (!eng) return 1;
    lilac_engine_info info;
    lilac_engine_get_info(eng, &info);
    int rc = 1, T = 0;
    int32_t *ids = NULL, *top1 = NULL;
    float *logits = NULL;
    FILE *lf = NULL;
    lilac_session *s = NULL;
    if (cli_parse_ids(ids_spec, "--ids", info.vocab_size, &ids, &T, &e)) goto fail;
    const int V = info.vocab_size, step = info.chunk;
    top1 = malloc((size_t)T * sizeof *top1);
    logits = malloc((size_t)step * V * sizeof *logits);
    if (!top1 || !logits) {
        fprintf(stderr, "error: out of memory for %d-token chunks of logits\n", step);
        goto done;
    }
    if (logits_out && !(lf = fopen(logits_out, "wb"))) {
        fprintf(stderr, "error: cannot write %s\n", logits_out);
        goto done;
    }
    if (lilac_session_new(eng, T, &s, &e)) goto fail;
    double nll = 0.0;
    for (int off = 0; off < T; off += step) {
        int m = T - off < step ? T - off : step;
        if (lilac_session_feed(s, ids + off, m, logits, 1, &e)) goto fail;
        for (int i = 0; i < m; i++) {
            const float *row = logits + (size_t)i * V;
            int best = 0;
            float mx = row[0];
            for (int v = 1; v < V; v++)
                if (row[v] > mx) mx = row[v], best = v;
            top1[off + i] = best;
            if (off + i + 1 < T) {
                double se = 0.0;
                for (int v = 0; v < V; v++) se += exp((double)row[v] - mx);
                nll += (double)mx + log(se) - row[ids[off + i + 1]];
            }
        }
        if (lf && fwrite(logits, sizeof(float), (size_t)m * V, lf) != (size_t)m * V) {
            fprintf(stderr, "error: writing %s failed\n", logits_out);
            goto done;
        }
    }
    if (lf && fclose(lf) != 0) {
        lf = NULL;
        fprintf(stderr, "error: writing %s failed\n", logits_out);
        goto done;
    }
    lf = NULL;
    printf("{\"tokens\": %d, ", T);
    if (T > 1) printf("\"nll\": %.6f, \"ppl\": %.6f, ", nll / (T - 1), exp(nll / (T - 1)));
    else printf("\"nll\": null, \"ppl\": null, ");
    printf("\"top1\": [");
    for (int t = 0; t < T; t++) printf("%s%d", t ? ", " : "", top1[t]);
    printf("]}\n");
    rc = 0;
    goto done;
fail:
    cli_error(&e);
done:
    if (lf) fclose(lf);
    lilac_session_free(s);
    lilac_engine_close(eng);
    free(ids);
    free(top1);
    free(logits);
    return rc;
}
