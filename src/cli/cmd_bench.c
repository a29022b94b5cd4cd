/* cmd_bench.c — `lilac bench`: prefill and decode sweeps (default), the
 * tokenizer (bench_tokenizer.c).
 *
 *   lilac bench --synthetic [--prefill LIST] [--decode LIST | --ctx N] ...   random weights of
 *                                                the real shapes, generated on the GPU
 *   lilac bench --model DIR ...                  a real checkpoint
 *
 * With neither list, both sweeps run over the ten lengths 256 .. 128K.  A
 * prefill measurement feeds a prompt of random ids into a fresh session and
 * generates one token (time to first token); a decode measurement puts a
 * context of that length into the state (random KV entries and recurrent
 * state, or with --real-context a real prefill of random ids), then times N
 * greedy steps after a warm-up.  Every measurement runs --repeats times and
 * is reported as median, min and max.  stdout gets a markdown report (the
 * machine, the build, a table per sweep); --json FILE the same numbers with
 * every run.  The measurements are bench_prefill.c's. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "cli/args.h"
#include "cli/bench_prefill.h"
#include "model/config.h"
#include "cli/bench_stats.h"
#include "cli/cli_engine.h"
#include "util/err.h"
#include "util/progress.h"
#include "util/version.h"

int bench_tokenizer(int argc, char **argv, const cli_globals *g);
int bench_grammar(int argc, char **argv, const cli_globals *g);

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static json_t *stat_json(bench_stat s) {
    return json_pack("{s:f, s:f, s:f}", "median", s.median, "min", s.min, "max", s.max);
}

static json_t *runs_json(const double *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_real(v[i]));
    return a;
}

static json_t *classes_json(const lilac_profile *p) {
    json_t *o = json_object();
    for (int k = 0; k < p->nclass; k++) json_object_set_new(o, p->class_name[k], json_real(p->class_ms[k]));
    return o;
}

/* The LILAC_* variables of this run (the kernel knobs: LILAC_DECODE_TRY,
 * LILAC_MOE, LILAC_GEMV, ...), so that a report says which kernels it timed. */
extern char **environ;
static json_t *knobs_json(void) {
    json_t *a = json_array();
    for (char **v = environ; a && *v; v++)
        if (strncmp(*v, "LILAC_", 6) == 0) json_array_append_new(a, json_string(*v));
    return a;
}

static void print_clock(int mhz) {
    if (mhz >= 0) printf("%d MHz", mhz);
    else printf("unknown");
}

int cmd_bench(int argc, char **argv, const cli_globals *g) {
    if (argc >= 1 && strcmp(argv[0], "tokenizer") == 0) return bench_tokenizer(argc - 1, argv + 1, g);
    if (argc >= 1 && strcmp(argv[0], "grammar") == 0) return bench_grammar(argc - 1, argv + 1, g);
    const char *model = NULL, *config = LILAC_CONFIG_BUILTIN, *json_out = NULL;
    const char *prefill_list = NULL, *decode_list = NULL;
    int synthetic = 0, ctx = 0, n = 64, warmup = 16, repeats = 3, no_profile = 0, chunk = 0, no_decode = 0,
        no_prefill = 0, real_context = 0, quiet = 0;
    cli_opt opts[] = {
        {"synthetic", 0, CLI_FLAG, &synthetic, NULL, "random weights of the real shapes, generated on the GPU", 0, 0},
        {"config", 0, CLI_STR, &config, "DIR", "config.json for --synthetic (default: the real Qwen3.6-35B-A3B config, built in)", 0, 0},
        {"model", 0, CLI_STR, &model, "DIR", "benchmark a real checkpoint instead", 0, 0},
        {"prefill", 0, CLI_STR, &prefill_list, "LIST", "prompt lengths to time, e.g. 512,4K,32K (K = 1024)", 0, 0},
        {"decode", 0, CLI_STR, &decode_list, "LIST", "context lengths to time decoding at, e.g. 4K,128K", 0, 0},
        {"ctx", 0, CLI_INT, &ctx, "N", "one decode context (the same as --decode N)", 1, 1 << 24},
        {"real-context", 0, CLI_FLAG, &real_context, NULL, "prefill each decode context (random ids) instead of filling the state", 0, 0},
        {"tokens", 'n', CLI_INT, &n, "N", "decode tokens to time per run (default 64)", 1, 1 << 20},
        {"warmup", 0, CLI_INT, &warmup, "N", "decode tokens generated before timing (default 16)", 0, 1 << 20},
        {"repeats", 0, CLI_INT, &repeats, "R", "runs of every measurement: median, min, max (default 3)", 1, BENCH_MAX_REPEATS},
        {"no-decode", 0, CLI_FLAG, &no_decode, NULL, "time only the prefills", 0, 0},
        {"no-prefill", 0, CLI_FLAG, &no_prefill, NULL, "time only decoding", 0, 0},
        {"no-profile", 0, CLI_FLAG, &no_profile, NULL, "skip the per-kernel-class profiles", 0, 0},
        {"chunk", 0, CLI_INT, &chunk, "N", "prefill chunk in tokens (default: the backend's)", 0, 1 << 16},
        {"json", 0, CLI_STR, &json_out, "FILE", "also write the results (every run) as JSON", 0, 0},
        {"quiet", 'q', CLI_FLAG, &quiet, NULL, "no progress on stderr", 0, 0},
    };
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    int help = 0, npos = 0;
    char *pos[1];
    lilac_error e = {0};
    if (cli_parse(argc, argv, opts, nopts, pos, 0, &npos, &help, &e)) return fprintf(stderr, "error: bench: %s\n", e.msg), 2;
    if (help) {
        printf("Usage: lilac bench (--synthetic | --model DIR) [--prefill LIST] [--decode LIST | --ctx N] [--real-context]\n"
               "                   [-n N] [--warmup N] [--repeats R] [--no-prefill] [--no-decode] [--json FILE]\n"
               "       lilac bench tokenizer --help\n"
               "       lilac bench grammar --help   (constrained decoding: mask cost per token)\n\n"
               "Prefill speed and time to first token per prompt length, decode speed at batch 1 per context\n"
               "length, each measured --repeats times (median, min, max).  With neither --prefill nor --decode\n"
               "(--ctx), both sweeps run over the ten lengths 256,512,1K,2K,4K,8K,16K,32K,64K,128K; with one\n"
               "of them, only that one.  A markdown report goes to stdout (device, driver, SM clock, commit),\n"
               "a progress line per run to stderr.  Decode contexts are filled with random state (a GPU\n"
               "backend feature) unless --real-context prefills them.\n\nOptions:\n");
        cli_print_options(stdout, opts, nopts);
        cli_print_globals_help();
        return 0;
    }
    if (!synthetic && !model) return fprintf(stderr, "error: bench: give --synthetic or --model DIR\n"), 2;
    if (synthetic && model) return fprintf(stderr, "error: bench: --synthetic and --model exclude each other\n"), 2;
    if (ctx && decode_list) return fprintf(stderr, "error: bench: --ctx N is --decode N: give one of them\n"), 2;
    if (no_decode && no_prefill) return fprintf(stderr, "error: bench: --no-decode and --no-prefill leave nothing to time\n"), 2;
    int plens[BENCH_MAX_LENGTHS], dlens[BENCH_MAX_LENGTHS], np = 0, nd = 0;
    const int defaults = !prefill_list && !decode_list && !ctx;
    if (defaults) {
        np = nd = 10;
        memcpy(plens, bench_default_lengths, sizeof bench_default_lengths);
        memcpy(dlens, bench_default_lengths, sizeof bench_default_lengths);
    }
    if (prefill_list && (np = bench_parse_length_list("--prefill", prefill_list, plens, BENCH_MAX_LENGTHS, &e)) < 0)
        return fprintf(stderr, "error: bench: %s\n", e.msg), 2;
    if (decode_list && (nd = bench_parse_length_list("--decode", decode_list, dlens, BENCH_MAX_LENGTHS, &e)) < 0)
        return fprintf(stderr, "error: bench: %s\n", e.msg), 2;
    if (ctx) dlens[0] = ctx, nd = 1;
    if (no_decode) nd = 0;
    if (no_prefill) np = 0;
    if (!np && !nd) return fprintf(stderr, "error: bench: nothing to time (give --prefill or --decode lengths)\n"), 2;

    /* The sweeps are GPU benchmarks: on the CPU backend they run only when
     * asked for explicitly, and decoding needs a real context there. */
    const lilac_backend_ops *ops = lilac_backend_pick(g->backend ? g->backend : "auto", &e);
    if (!ops) return cli_error(&e);
    const int is_gpu = strcmp(ops->name, "cuda") == 0;
    if (!is_gpu && synthetic)
        return fprintf(stderr, "error: bench: --synthetic needs the CUDA backend (it generates the weights on the GPU); "
                               "this run has the %s backend (no GPU found, or built without CUDA)\n",
                       ops->name),
               1;
    if (!is_gpu && defaults)
        return fprintf(stderr, "error: bench: the default sweep (256 .. 128K) is a GPU benchmark and this run has the %s "
                               "backend; give --prefill/--decode lengths to time it anyway\n",
                       ops->name),
               1;
    if (!is_gpu && nd && !real_context)
        return fprintf(stderr, "error: bench: decode on the %s backend needs --real-context (only a GPU backend fills a "
                               "context with random state)\n",
                       ops->name),
               1;

    /* the JSON file is opened first: a bad path should not cost a sweep */
    FILE *jf = NULL;
    if (json_out && !(jf = fopen(json_out, "w")))
        return fprintf(stderr, "error: bench: %s: cannot write the JSON results\n", json_out), 1;
    bench_gpu_facts gpu0 = {0}, gpu1 = {0};
    if (is_gpu) bench_query_gpu(&gpu0);
    else snprintf(gpu0.name, sizeof gpu0.name, "none"), snprintf(gpu0.driver, sizeof gpu0.driver, "none"),
         gpu0.sm_clock_mhz = gpu0.sm_clock_max_mhz = -1;
    time_t wall = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&wall));

    lilac_progress_sink sink = {.quiet = quiet};
    lilac_engine_opts o = {.model_dir = synthetic ? config : model, .backend = g->backend, .threads = g->threads,
                           .synthetic = synthetic, .chunk = chunk, .progress = lilac_progress_sink_cb, .progress_ctx = &sink};
    lilac_engine *eng = NULL;
    if (!quiet) fprintf(stderr, "bench: loading %s\n", synthetic ? "a synthetic model" : model);
    double t0 = now_s();
    lilac_status ost = lilac_engine_open(&o, &eng, &e);
    lilac_progress_sink_end(&sink);
    if (ost) {
        if (jf) fclose(jf);
        return cli_error(&e);
    }
    double t_load = now_s() - t0;
    lilac_engine_info info;
    lilac_engine_get_info(eng, &info);
    int rc = 1;
    bench_prefill_result *pre = calloc(BENCH_MAX_LENGTHS, sizeof *pre);
    bench_decode_result *dec = calloc(BENCH_MAX_LENGTHS, sizeof *dec);
    if (!pre || !dec) {
        lilac_fail(&e, LILAC_ENOMEM, "bench results");
        goto fail;
    }
    if (np && bench_prefill(eng, plens, np, repeats, quiet, pre, &e)) goto fail;
    bench_decode_opts dopt = {n, warmup, repeats, real_context, !no_profile, quiet};
    for (int i = 0; i < nd; i++)
        if (bench_decode(eng, dlens[i], &dopt, &dec[i], &e)) goto fail;
    if (is_gpu) bench_query_gpu(&gpu1);
    else gpu1 = gpu0;

    /* the report */
    printf("# lilac bench\n\n");
    printf("- date: %s\n", date);
    printf("- lilac: %s, commit %s\n", LILAC_VERSION, lilac_commit);
    printf("- device: %s (backend %s), driver %s, ", info.device, info.backend, gpu0.driver);
    printf("SM clock ");
    print_clock(gpu0.sm_clock_mhz);
    printf(" at the start, ");
    print_clock(gpu1.sm_clock_mhz);
    printf(" at the end (max ");
    print_clock(gpu0.sm_clock_max_mhz);
    printf(")\n- model: %s, %d layers, %.2f GB of weights, loaded in %.1f s\n",
           synthetic ? "synthetic (random weights, real shapes)" : model, info.n_layers, info.weight_bytes / 1e9, t_load);
    printf("- runs: %d per measurement (median, min, max)", repeats);
    if (nd) printf("; decode: %d tokens timed after %d warm-up, context %s", n, warmup, real_context ? "prefilled" : "filled with random state");
    if (np) printf("; prefill: chunks of %d, random ids", info.chunk);
    printf("\n- knobs:");
    json_t *knobs = knobs_json();
    for (size_t i = 0; knobs && i < json_array_size(knobs); i++)
        printf("%s %s", i ? "," : "", json_string_value(json_array_get(knobs, i)));
    printf("%s\n", knobs && json_array_size(knobs) ? "" : " none (the default kernels)");
    json_decref(knobs);
    if (np) {
        const int mem = pre[0].dev_used_bytes > 0;
        printf("\n## Prefill\n\n| prompt tokens | tokens/s | min | max | TTFT s | min | max |%s\n"
               "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |%s\n",
               mem ? " device memory GB |" : "", mem ? " ---: |" : "");
        for (int i = 0; i < np; i++) {
            printf("| %d | %.0f | %.0f | %.0f | %.4f | %.4f | %.4f |", pre[i].tokens, pre[i].tps.median, pre[i].tps.min,
                   pre[i].tps.max, pre[i].ttft.median, pre[i].ttft.min, pre[i].ttft.max);
            if (mem) printf(" %.2f |", pre[i].dev_used_bytes / 1e9);
            printf("\n");
        }
        if (mem)
            printf("\n(device memory: in use with the prompt's session alive, weights and the one-chunk prefill scratch "
                   "included: its growth with the prompt is the session's KV)\n");
        if (pre[0].have_prof) {
            /* expert FLOPs per token: (routed + shared) x (gate, up, down) x I x D x 2 */
            const double ex_flop = 2.0 * (info.n_experts_per_tok + 1) * 3 * info.moe_inter * info.hidden * info.n_layers;
            printf("\nPrefill time by kernel class (ms, first run):\n\n| prompt tokens |");
            for (int k = 0; k < pre[0].prof.nclass; k++) printf(" %s |", pre[0].prof.class_name[k]);
            /* the bf16 dense GEMM rate measured on the H200 (../shared/spec/kernel-notes.md):
             * the experts' ceiling, where the device is one */
            const double peak = strstr(info.device, "H200") ? 790.0 : 0.0;
            printf(" experts TFLOP/s |%s\n| ---: |", peak > 0 ? " of the bf16 peak (790) |" : "");
            for (int k = 0; k <= pre[0].prof.nclass + (peak > 0); k++) printf(" ---: |");
            printf("\n");
            for (int i = 0; i < np; i++) {
                if (!pre[i].have_prof) continue;
                printf("| %d |", pre[i].tokens);
                for (int k = 0; k < pre[i].prof.nclass; k++) printf(" %.1f |", pre[i].prof.class_ms[k]);
                const double ms = pre[i].prof.class_ms[0], tf = ms > 0 ? ex_flop * pre[i].tokens / (ms * 1e-3) / 1e12 : 0.0;
                printf(" %.0f |", tf);
                if (peak > 0) printf(" %.0f%% |", 100.0 * tf / peak);
                printf("\n");
            }
        }
    }
    if (nd) {
        printf("\n## Decode\n\n| context | tokens/s | min | max | ms/token | GB/s moved (profile) |\n"
               "| ---: | ---: | ---: | ---: | ---: | ---: |\n");
        for (int i = 0; i < nd; i++) {
            printf("| %d | %.1f | %.1f | %.1f | %.3f |", dec[i].context, dec[i].tps.median, dec[i].tps.min, dec[i].tps.max,
                   dec[i].ms.median);
            if (dec[i].have_prof && dec[i].prof.step_ms > 0)
                printf(" %.0f |\n", dec[i].prof.bytes_per_step / (dec[i].prof.step_ms * 1e-3) / 1e9);
            else printf(" |\n");
        }
        if (nd == 1 && dec[0].have_prof) {
            const lilac_profile *prof = &dec[0].prof;
            double gbps = prof->bytes_per_step / (prof->step_ms * 1e-3) / 1e9;
            printf("\nstep:      %.3f ms per graph replay (%d kernels), %.2f GB moved per step\n", prof->step_ms,
                   prof->kernels, prof->bytes_per_step / 1e9);
            printf("roofline:  %.0f GB/s effective = %.0f%% of the measured copy bandwidth (%.0f GB/s)\n", gbps,
                   prof->copy_gbps > 0 ? 100 * gbps / prof->copy_gbps : 0.0, prof->copy_gbps);
            double sum = 0;
            printf("profile:   kernels launched one by one (ms per step):\n");
            for (int k = 0; k < prof->nclass; k++) {
                printf("             %-24s %8.3f\n", prof->class_name[k], prof->class_ms[k]);
                sum += prof->class_ms[k];
            }
            printf("             %-24s %8.3f\n", "sum", sum);
            printf("             %-24s %8.3f  (graph step - sum; negative = launch overhead hidden by the graph)\n", "gaps",
                   prof->step_ms - sum);
        }
    }
    fflush(stdout);
    if (jf) {
        json_t *root = json_object();
        json_object_set_new(root, "date", json_string(date));
        json_object_set_new(root, "lilac", json_pack("{s:s, s:s}", "version", LILAC_VERSION, "commit", lilac_commit));
        json_object_set_new(root, "device",
                            json_pack("{s:s, s:s, s:s, s:i, s:i, s:i}", "name", info.device, "backend", info.backend,
                                      "driver", gpu0.driver, "sm_clock_mhz_start", gpu0.sm_clock_mhz, "sm_clock_mhz_end",
                                      gpu1.sm_clock_mhz, "sm_clock_mhz_max", gpu0.sm_clock_max_mhz));
        json_object_set_new(root, "model",
                            json_pack("{s:s, s:b, s:i, s:f, s:f}", "dir", synthetic ? config : model, "synthetic", synthetic,
                                      "layers", info.n_layers, "weight_bytes", (double)info.weight_bytes, "load_s", t_load));
        json_object_set_new(root, "repeats", json_integer(repeats));
        json_object_set_new(root, "knobs", knobs_json());
        json_t *pa = json_array();
        for (int i = 0; i < np; i++) {
            json_t *x = json_pack("{s:i, s:o, s:o, s:o, s:o}", "tokens", pre[i].tokens, "tokens_per_s", stat_json(pre[i].tps),
                                  "ttft_s", stat_json(pre[i].ttft), "prefill_s_runs",
                                  runs_json(pre[i].run_prefill_s, pre[i].runs), "ttft_s_runs",
                                  runs_json(pre[i].run_ttft_s, pre[i].runs));
            if (pre[i].have_prof) json_object_set_new(x, "classes_ms", classes_json(&pre[i].prof));
            if (pre[i].dev_used_bytes > 0) json_object_set_new(x, "device_memory_bytes", json_real(pre[i].dev_used_bytes));
            json_array_append_new(pa, x);
        }
        json_object_set_new(root, "prefill", json_pack("{s:i, s:o}", "chunk", info.chunk, "results", pa));
        json_t *da = json_array();
        for (int i = 0; i < nd; i++) {
            json_t *x = json_pack("{s:i, s:i, s:o, s:o, s:o}", "context", dec[i].context, "tokens", dec[i].tokens,
                                  "tokens_per_s", stat_json(dec[i].tps), "ms_per_token", stat_json(dec[i].ms),
                                  "tokens_per_s_runs", runs_json(dec[i].run_tps, dec[i].runs));
            if (dec[i].have_prof)
                json_object_set_new(x, "profile",
                                    json_pack("{s:f, s:i, s:f, s:f, s:o}", "step_ms", dec[i].prof.step_ms, "kernels",
                                              dec[i].prof.kernels, "bytes_per_step", dec[i].prof.bytes_per_step,
                                              "copy_gbps", dec[i].prof.copy_gbps, "classes_ms", classes_json(&dec[i].prof)));
            json_array_append_new(da, x);
        }
        json_object_set_new(root, "decode",
                            json_pack("{s:i, s:i, s:b, s:o}", "tokens", n, "warmup", warmup, "real_context", real_context,
                                      "results", da));
        int bad = json_dumpf(root, jf, JSON_INDENT(1) | JSON_REAL_PRECISION(7)) != 0 || fputc('\n', jf) == EOF;
        json_decref(root);
        bad |= fclose(jf) != 0;
        jf = NULL;
        if (bad) {
            lilac_fail(&e, LILAC_EIO, "bench: %s: cannot write the JSON results", json_out);
            goto fail;
        }
    }
    rc = 0;
    goto done;
fail:
    cli_error(&e);
done:
    if (jf) fclose(jf);
    free(pre);
    free(dec);
    lilac_engine_close(eng);
    return rc;
}
