/* cmd_bench.c — `lilac bench`: decode speed (default) and the tokenizer.
 *
 *   lilac bench --synthetic [--config DIR] [--ctx N] [-n N]   random weights of the real
 *                                                          shapes, generated on the GPU
 *   lilac bench --model DIR [--ctx N] [-n N]               a real checkpoint
 *   lilac bench tokenizer ...                              see bench_tokenizer.c
 *
 * The context is filled with random KV entries and recurrent state (a decode
 * step costs the same whatever the values), then N greedy tokens are
 * generated on the device after a warm-up, and one step is profiled by
 * kernel class.  Prints a summary and, with --json FILE, the numbers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/args.h"
#include "cli/bench_prefill.h"
#include "model/config.h"
#include "cli/cli_engine.h"
#include "util/err.h"
#include "util/progress.h"

int bench_tokenizer(int argc, char **argv, const cli_globals *g);

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int count_cb(void *ctx, const lilac_token_info *t) {
    (void)t;
    ++*(int *)ctx;
    return 0;
}

int cmd_bench(int argc, char **argv, const cli_globals *g) {
    if (argc >= 1 && strcmp(argv[0], "tokenizer") == 0) return bench_tokenizer(argc - 1, argv + 1, g);
    const char *model = NULL, *config = LILAC_CONFIG_BUILTIN, *json_out = NULL;
    const char *prefill_list = NULL;
    int synthetic = 0, ctx = 4096, n = 128, warmup = 16, no_profile = 0, chunk = 0, no_decode = 0, quiet = 0;
    cli_opt opts[] = {
        {"synthetic", 0, CLI_FLAG, &synthetic, NULL, "random weights of the real shapes, generated on the GPU", 0, 0},
        {"config", 0, CLI_STR, &config, "DIR", "config.json for --synthetic (default: the real Qwen3.6-35B-A3B config, built in)", 0, 0},
        {"model", 0, CLI_STR, &model, "DIR", "benchmark a real checkpoint instead", 0, 0},
        {"ctx", 0, CLI_INT, &ctx, "N", "context length before decoding (default 4096)", 0, 1 << 24},
        {"tokens", 'n', CLI_INT, &n, "N", "tokens to time (default 128)", 1, 1 << 20},
        {"warmup", 0, CLI_INT, &warmup, "N", "tokens generated before timing (default 16)", 0, 1 << 20},
        {"no-profile", 0, CLI_FLAG, &no_profile, NULL, "skip the per-kernel-class profile", 0, 0},
        {"prefill", 0, CLI_STR, &prefill_list, "LIST", "also time prefills of these prompt lengths (random ids), e.g. 512,4K,32K", 0, 0},
        {"no-decode", 0, CLI_FLAG, &no_decode, NULL, "time only the prefills", 0, 0},
        {"chunk", 0, CLI_INT, &chunk, "N", "prefill chunk in tokens (default: the backend's)", 0, 1 << 16},
        {"json", 0, CLI_STR, &json_out, "FILE", "also write the results as JSON", 0, 0},
        {"quiet", 'q', CLI_FLAG, &quiet, NULL, "no progress on stderr", 0, 0},
    };
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    int help = 0, npos = 0;
    char *pos[1];
    lilac_error e = {0};
    if (cli_parse(argc, argv, opts, nopts, pos, 0, &npos, &help, &e)) return fprintf(stderr, "error: bench: %s\n", e.msg), 2;
    if (help) {
        printf("Usage: lilac bench (--synthetic | --model DIR) [--ctx N] [-n N] [--warmup N] [--prefill LIST] [--no-decode] [--json FILE]\n"
               "       lilac bench tokenizer --help\n\n"
               "Decode speed at batch 1: tokens/s, ms/token, and the bytes a step must move divided by\n"
               "the step time, as a fraction of the GPU's measured copy bandwidth.\n\nOptions:\n");
        cli_print_options(stdout, opts, nopts);
        cli_print_globals_help();
        return 0;
    }
    if (!synthetic && !model) return fprintf(stderr, "error: bench: give --synthetic or --model DIR\n"), 2;
    lilac_progress_sink sink = {.quiet = quiet};
    lilac_engine_opts o = {.model_dir = synthetic ? config : model, .backend = g->backend, .threads = g->threads,
                           .synthetic = synthetic, .chunk = chunk, .progress = lilac_progress_sink_cb, .progress_ctx = &sink};
    lilac_engine *eng = NULL;
    const int steps = 4 + (prefill_list != NULL) + !no_profile;
    int step = 0;
#define BENCH_STEP(...)                                                                                                \
    do {                                                                                                               \
        if (!quiet) fprintf(stderr, "bench: [%d/%d] ", ++step, steps), fprintf(stderr, __VA_ARGS__), fputc('\n', stderr); \
    } while (0)
    BENCH_STEP("loading %s", synthetic ? "a synthetic model" : model);
    double t0 = now_s();
    lilac_status ost = lilac_engine_open(&o, &eng, &e);
    lilac_progress_sink_end(&sink);
    if (ost) return cli_error(&e);
    double t_load = now_s() - t0;
    lilac_engine_info info;
    lilac_engine_get_info(eng, &info);
    int rc = 1;
    lilac_session *s = NULL;
    enum { MAXLEN = 16 };
    int lens[MAXLEN], nlen = 0;
    bench_prefill_result pre[MAXLEN];
    if (prefill_list) BENCH_STEP("prefills of %s tokens", prefill_list);
    if (prefill_list && ((nlen = bench_parse_lengths(prefill_list, lens, MAXLEN, &e)) < 0 ||
                         bench_prefill(eng, lens, nlen, quiet, pre, &e)))
        goto fail;
    if (nlen) {
        /* expert FLOPs per token: (routed + shared) x (gate, up, down) x I x D x 2 */
        const double ex_flop = 2.0 * (info.n_experts_per_tok + 1) * 3 * info.moe_inter * info.hidden * info.n_layers;
        printf("prefill:   (chunks of %d)\n", info.chunk);
        printf("  %8s %10s %12s %10s", "tokens", "seconds", "tokens/s", "TTFT s");
        if (pre[0].have_prof)
            for (int k = 0; k < pre[0].prof.nclass; k++) printf(" %12.12s", pre[0].prof.class_name[k]);
        printf("\n");
        for (int i = 0; i < nlen; i++) {
            printf("  %8d %10.3f %12.0f %10.3f", pre[i].tokens, pre[i].prefill_s, pre[i].tokens / pre[i].prefill_s, pre[i].ttft_s);
            if (pre[i].have_prof) {
                for (int k = 0; k < pre[i].prof.nclass; k++) printf(" %9.1f ms", pre[i].prof.class_ms[k]);
                const double ms = pre[i].prof.class_ms[0];
                if (ms > 0) printf("  experts %.0f TFLOP/s (bf16 mma probe: ~790)", ex_flop * pre[i].tokens / (ms * 1e-3) / 1e12);
            }
            printf("\n");
        }
    }
    if (no_decode) {
        rc = 0;
        goto done;
    }
    const int cap = ctx + 1 + warmup + n + 64;
    BENCH_STEP("filling a %d-token context", ctx);
    if (lilac_session_new(eng, cap, &s, &e) || lilac_session_fill_random(s, ctx, 1234, &e)) goto fail;
    BENCH_STEP("%d warm-up tokens", warmup);
    lilac_gen_params p = {0};
    p.sampling = lilac_sampling_greedy();
    int got = 0;
    lilac_finish why;
    if (warmup) {
        p.max_tokens = warmup;
        if (lilac_session_generate(s, &p, count_cb, &got, &got, &why, &e)) goto fail;
    }
    /* the next generate needs fresh logits: feed one token */
    int32_t one = 1;
    if (lilac_session_feed(s, &one, 1, NULL, 0, &e)) goto fail;
    int counted = 0;
    p.max_tokens = n;
    BENCH_STEP("timing %d tokens", n);
    double t1 = now_s();
    if (lilac_session_generate(s, &p, count_cb, &counted, &got, &why, &e)) goto fail;
    double dt = now_s() - t1;
    lilac_profile prof = {0};
    int have_prof = 0;
    if (!no_profile) {
        BENCH_STEP("per-kernel profile");
        if (lilac_session_profile(s, &prof, &e) == LILAC_OK) have_prof = 1;
        else fprintf(stderr, "note: no profile: %s\n", e.msg);
    }
    printf("device:    %s (backend %s)\n", info.device, info.backend);
    printf("model:     %s, %d layers, %.2f GB of weights, loaded in %.1f s\n",
           synthetic ? "synthetic (random weights, real shapes)" : model, info.n_layers, info.weight_bytes / 1e9, t_load);
    printf("decode:    %d tokens after %d warm-up, context %d\n", got, warmup, ctx);
    printf("speed:     %.1f tokens/s, %.3f ms/token\n", got / dt, dt * 1e3 / got);
    if (have_prof) {
        double gbps = prof.bytes_per_step / (prof.step_ms * 1e-3) / 1e9;
        printf("step:      %.3f ms per graph replay (%d kernels), %.2f GB moved per step\n", prof.step_ms, prof.kernels,
               prof.bytes_per_step / 1e9);
        printf("roofline:  %.0f GB/s effective = %.0f%% of the measured copy bandwidth (%.0f GB/s)\n", gbps,
               prof.copy_gbps > 0 ? 100 * gbps / prof.copy_gbps : 0.0, prof.copy_gbps);
        double sum = 0;
        printf("profile:   kernels launched one by one (ms per step):\n");
        for (int k = 0; k < prof.nclass; k++) {
            printf("             %-24s %8.3f\n", prof.class_name[k], prof.class_ms[k]);
            sum += prof.class_ms[k];
        }
        printf("             %-24s %8.3f\n", "sum", sum);
        printf("             %-24s %8.3f  (graph step - sum; negative = launch overhead hidden by the graph)\n",
               "gaps", prof.step_ms - sum);
    }
    if (json_out) {
        FILE *f = fopen(json_out, "w");
        if (f) {
            fprintf(f, "{\"device\": \"%s\", \"synthetic\": %s, \"ctx\": %d, \"tokens\": %d, \"tokens_per_s\": %.2f, "
                       "\"ms_per_token\": %.4f",
                    info.device, synthetic ? "true" : "false", ctx, got, got / dt, dt * 1e3 / got);
            if (nlen) {
                fprintf(f, ", \"prefill\": [");
                for (int i = 0; i < nlen; i++) {
                    fprintf(f, "%s{\"tokens\": %d, \"seconds\": %.4f, \"tokens_per_s\": %.1f, \"ttft_s\": %.4f", i ? ", " : "",
                            pre[i].tokens, pre[i].prefill_s, pre[i].tokens / pre[i].prefill_s, pre[i].ttft_s);
                    if (pre[i].have_prof) {
                        fprintf(f, ", \"classes_ms\": {");
                        for (int k = 0; k < pre[i].prof.nclass; k++)
                            fprintf(f, "%s\"%s\": %.3f", k ? ", " : "", pre[i].prof.class_name[k], pre[i].prof.class_ms[k]);
                        fprintf(f, "}");
                    }
                    fprintf(f, "}");
                }
                fprintf(f, "]");
            }
            if (have_prof) {
                fprintf(f, ", \"step_ms\": %.4f, \"kernels\": %d, \"bytes_per_step\": %.0f, \"copy_gbps\": %.1f, \"classes\": {",
                        prof.step_ms, prof.kernels, prof.bytes_per_step, prof.copy_gbps);
                for (int k = 0; k < prof.nclass; k++)
                    fprintf(f, "%s\"%s\": %.4f", k ? ", " : "", prof.class_name[k], prof.class_ms[k]);
                fprintf(f, "}");
            }
            fprintf(f, "}\n");
            fclose(f);
        }
    }
    rc = 0;
    goto done;
fail:
    cli_error(&e);
done:
    lilac_session_free(s);
    lilac_engine_close(eng);
    return rc;
}
