/* bench_grammar.c — `lilac bench grammar`: the cost of constrained decoding
 * per token, on the CPU, without a model.
 *
 *   lilac bench grammar --model DIR [--schema FILE | --tools FILE] [-n STEPS] [--seed S]
 *
 * Builds the vocabulary index of DIR's tokenizer (timed), compiles the
 * grammar (a JSON Schema, an OpenAI tools array for tool_choice "required",
 * or with neither "any JSON object"; the corpus files of tests/fixtures/schemas,
 * {"schema": ...} and {"tool": ...}, work too), then walks it: at each step the mask
 * is computed (timed) and one allowed id is drawn uniformly (the end id with
 * probability 1/8 once allowed), so walks spend most steps where most of
 * the vocabulary is allowed (string contents), the costly case.  A finished
 * walk starts the next with the grammar's classifications kept (as one
 * request's grammar keeps them).  Reported: per-step mask time (mean, p50,
 * p99, max), the first walk's steps (classifications made on the way), the
 * accept time, and the classification cache.  Use the 248K synthetic
 * tokenizer (tools/make_synthetic_tokenizer.py) for Qwen3.6's vocabulary size.
 *
 * Then the GPU part (when the CUDA backend runs here and DIR has weights;
 * else one "skipped: ..." line): the time per generated token of the decode
 * step unconstrained (the device loop), masked on the device (a new mask
 * uploaded every token, or the same one), and masked on the host loop
 * (LILAC_MASK=host), greedy and sampled; their difference is the mask's
 * cost per token in the step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "lilac.h"
#include "text/grammar.h"
#include "text/tokenizer.h"
#include "util/file.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t xs(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The grammar for the bench: tools, a schema, or any object. */
static lg_grammar *make_grammar(const char *schema_file, const char *tools_file, const lilac_tokenizer *t, lilac_error *e) {
    const char *file = tools_file ? tools_file : schema_file;
    json_t *doc = NULL;
    if (file) {
        json_error_t je;
        if (!(doc = json_load_file(file, JSON_DECODE_ANY, &je))) {
            lilac_fail(e, LILAC_EFORMAT, "%s:%d: %s", file, je.line, je.text);
            return NULL;
        }
    }
    /* the corpus's files (tests/fixtures/schemas) wrap theirs: {"schema": ...}, {"tool": ...} */
    json_t *inner = json_object_get(doc, tools_file ? "tool" : "schema");
    if (inner) {
        inner = tools_file ? json_pack("[O]", inner) : json_incref(inner);
        json_decref(doc);
        doc = inner;
    }
    lg_grammar *g = lg_new();
    int r;
    if (tools_file) {
        lg_tokens tk = {lilac_tokenizer_id(t, "<tool_call>"), lilac_tokenizer_id(t, "</tool_call>")};
        r = lg_tool_calls(g, doc, 1, &tk, tools_file, e);
    } else if (schema_file) {
        r = lg_json_schema(g, doc, schema_file, e);
    } else {
        r = lg_json_object_any(g);
    }
    json_decref(doc);
    if (r < 0 || lg_finalize(g, lg_answer_root(g, r), e)) {
        lg_free(g);
        return NULL;
    }
    return g;
}

/* ---- the mask on the GPU ---------------------------------------------------- */

/* A constraint of fixed masks (every id but the end ids, and that minus one
 * more id): the grammar's own time is left out (the CPU table has it), so
 * what is measured is the mask's upload and its use in the sampler.  flip:
 * alternate the two masks, so every token uploads one; else the same mask
 * every token (after the first, the device path skips the upload). */
typedef struct {
    const uint32_t *a, *b;
    int words, flip, k;
} fixed_mask;

static int fm_mask(void *ctx, uint32_t *bits) {
    fixed_mask *f = ctx;
    memcpy(bits, f->flip && (f->k++ & 1) ? f->b : f->a, (size_t)f->words * sizeof *bits);
    return LILAC_MASK_SOME;
}

static int fm_accept(void *ctx, int32_t id) {
    (void)ctx;
    (void)id;
    return 0;
}

/* Seconds per token of n tokens generated from a copy of base (median of 3,
 * after one untimed run); host: LILAC_MASK=host. */
static double gpu_run(lilac_session *base, lilac_session *s, const lilac_gen_params *p, int host, int n, lilac_error *e) {
    double t[3];
    for (int r = -1; r < 3; r++) {
        if (lilac_session_copy(s, base, e)) return -1;
        if (host) setenv("LILAC_MASK", "host", 1);
        int got = 0;
        lilac_finish why;
        double t0 = now_s();
        lilac_status st = lilac_session_generate(s, p, NULL, NULL, &got, &why, e);
        double dt = now_s() - t0;
        if (host) unsetenv("LILAC_MASK");
        if (st) return -1;
        if (got != n) {
            lilac_fail(e, LILAC_EBACKEND, "generated %d of %d tokens", got, n);
            return -1;
        }
        if (r >= 0) t[r] = dt / n;
    }
    qsort(t, 3, sizeof *t, cmp_double);
    return t[1];
}

/* The per-token cost of the masked device step against the unmasked one, on
 * DIR's model on the GPU (the real model's or the tiny fixture's weights). */
static void bench_gpu(const char *model, int n, int ctx, const cli_globals *gl) {
    printf("\n## The mask on the GPU\n\n");
    lilac_error e = {0};
    if (gl && gl->backend && strcmp(gl->backend, "cpu") == 0) {
        printf("- skipped: --backend cpu\n");
        return;
    }
    if (!lilac_backend_pick("cuda", &e)) {
        printf("- skipped: no CUDA device (%s)\n", e.msg);
        return;
    }
    lilac_engine_opts o = {.model_dir = model, .backend = "cuda", .threads = gl ? gl->threads : 0};
    lilac_engine *g = NULL;
    if (lilac_engine_open(&o, &g, &e)) {
        printf("- skipped: %s does not load on the GPU: %s\n", model, e.msg);
        return;
    }
    lilac_engine_info info;
    lilac_engine_get_info(g, &info);
    const int V = info.vocab_size, words = (V + 31) / 32;
    if (ctx + n + 2 > info.max_pos) ctx = info.max_pos - n - 2 > 1 ? info.max_pos - n - 2 : 1;
    uint32_t *a = malloc((size_t)words * sizeof *a), *b = malloc((size_t)words * sizeof *b);
    lilac_session *base = NULL, *s = NULL;
    if (!a || !b || lilac_session_new(g, ctx + n + 2, &base, &e) || lilac_session_new(g, ctx + n + 2, &s, &e)) {
        printf("- skipped: %s\n", a && b ? e.msg : "out of memory");
        goto out;
    }
    if (lilac_session_fill_random(base, ctx, 1, &e)) { /* a context of random KV and state, then one token */
        int32_t one = 0;
        if (lilac_session_feed(base, &one, 1, NULL, 0, &e)) {
            printf("- skipped: %s\n", e.msg);
            goto out;
        }
    }
    memset(a, 0xff, (size_t)words * sizeof *a);
    if (V % 32) a[words - 1] = (1u << (V % 32)) - 1;
    for (int k = 0; k < info.n_eos; k++)
        if (info.eos[k] >= 0 && info.eos[k] < V) a[info.eos[k] >> 5] &= ~(1u << (info.eos[k] & 31));
    memcpy(b, a, (size_t)words * sizeof *b);
    b[(V - 1) >> 5] &= ~(1u << ((V - 1) & 31));
    printf("- model: %s on %s; context %d tokens, %d generated per run (median of 3)\n", model, info.device,
           lilac_session_len(base), n);
    printf("- the masks are fixed (every id but the end ids), so the grammar's own time (above) is not in these\n\n");
    printf("| per token | greedy | sampled (T 0.7, top_k 20, top_p 0.8) |\n| --- | --- | --- |\n");
    const char *rows[4] = {"unconstrained (device loop, runs ahead)", "masked on the device, a new mask every token",
                           "masked on the device, the same mask (no upload)", "masked on the host (LILAC_MASK=host)"};
    double us[4][2];
    for (int mode = 0; mode < 2; mode++) {
        lilac_gen_params p = {0};
        p.max_tokens = n;
        p.sampling = lilac_sampling_greedy();
        if (mode) p.sampling.temperature = 0.7f, p.sampling.top_k = 20, p.sampling.top_p = 0.8f, p.sampling.seed = 1;
        fixed_mask fm = {a, b, words, 1, 0};
        lilac_constraint c = {fm_mask, fm_accept, &fm};
        for (int r = 0; r < 4; r++) {
            fm.flip = r != 2;
            p.constraint = r ? &c : NULL;
            double t = gpu_run(base, s, &p, r == 3, n, &e);
            if (t < 0) {
                printf("- failed: %s\n", e.msg);
                goto out;
            }
            us[r][mode] = t * 1e6;
        }
    }
    for (int r = 0; r < 4; r++) printf("| %s | %.1f us | %.1f us |\n", rows[r], us[r][0], us[r][1]);
    printf("| **mask cost: new mask every token - unconstrained** | **%.1f us** | **%.1f us** |\n", us[1][0] - us[0][0],
           us[1][1] - us[0][1]);
out:
    lilac_session_free(s);
    lilac_session_free(base);
    free(a);
    free(b);
    lilac_engine_close(g);
}

int bench_grammar(int argc, char **argv, const cli_globals *gl) {
    const char *model = NULL, *schema = NULL, *tools = NULL;
    int steps = 2000, seed = 1, gpu_tokens = 128, gpu_ctx = 1024, no_gpu = 0;
    cli_opt opts[] = {
        {"model", 'm', CLI_STR, &model, "DIR", "model directory with tokenizer.json (required)", 0, 0},
        {"schema", 0, CLI_STR, &schema, "FILE", "a JSON Schema (response_format json_schema)", 0, 0},
        {"tools", 0, CLI_STR, &tools, "FILE", "an OpenAI tools array (tool_choice \"required\")", 0, 0},
        {"steps", 'n', CLI_INT, &steps, "N", "tokens to draw in all (default 2000)", 1, 10000000},
        {"seed", 0, CLI_INT, &seed, "S", "random draws (default 1)", 0, 1 << 30},
        {"gpu-tokens", 0, CLI_INT, &gpu_tokens, "N", "GPU part: tokens per timed generation (default 128)", 1, 100000},
        {"gpu-ctx", 0, CLI_INT, &gpu_ctx, "N", "GPU part: context before them (default 1024)", 0, 1 << 20},
        {"no-gpu", 0, CLI_FLAG, &no_gpu, NULL, "leave out the GPU part", 0, 0},
    };
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    int help = 0, npos = 0;
    char *pos[1];
    lilac_error e = {0};
    if (cli_parse(argc, argv, opts, nopts, pos, 0, &npos, &help, &e))
        return fprintf(stderr, "error: bench grammar: %s\n", e.msg), 2;
    if (help) {
        printf("Usage: lilac bench grammar --model DIR [--schema FILE | --tools FILE] [-n STEPS] [--seed S]\n"
               "                           [--gpu-tokens N] [--gpu-ctx N] [--no-gpu]\n\n"
               "Measures constrained decoding on the CPU: the vocabulary index build, the grammar\n"
               "compile, and the allowed-token mask per generated token, over random walks through\n"
               "the grammar (without --schema/--tools: any JSON object).  Then, when the CUDA\n"
               "backend runs here and DIR has weights, the mask's cost in the GPU's decode step:\n"
               "time per token unconstrained, masked on the device (mask uploaded and applied in\n"
               "the sampler) and masked on the host (LILAC_MASK=host).\n\nOptions:\n");
        cli_print_options(stdout, opts, nopts);
        cli_print_globals_help();
        return 0;
    }
    if (!model) return fprintf(stderr, "error: bench grammar: --model DIR is required\n"), 2;
    if (schema && tools) return fprintf(stderr, "error: bench grammar: --schema and --tools exclude each other\n"), 2;
    lilac_tokenizer *t = NULL;
    if (lilac_tokenizer_load(model, &t, &e)) return fprintf(stderr, "error: bench grammar: %s\n", e.msg), 1;
    const int V = lilac_tokenizer_n_ids(t), W = (V + 31) / 32;
    double t0 = now_s();
    lg_vocab *v = NULL;
    if (lg_vocab_new(t, V, &v, &e)) {
        lilac_tokenizer_free(t);
        return fprintf(stderr, "error: bench grammar: %s\n", e.msg), 1;
    }
    double t_vocab = now_s() - t0;
    int32_t ends[2] = {lilac_tokenizer_id(t, "<|im_end|>"), lilac_tokenizer_id(t, "<|endoftext|>")};
    t0 = now_s();
    lg_grammar *g = make_grammar(schema, tools, t, &e);
    double t_compile = now_s() - t0;
    uint32_t *bits = malloc((size_t)W * sizeof *bits);
    int32_t *allowed = malloc((size_t)V * sizeof *allowed);
    double *mask_t = malloc((size_t)steps * sizeof *mask_t);
    int rc = 1;
    if (!g || !bits || !allowed || !mask_t) {
        fprintf(stderr, "error: bench grammar: %s\n", g ? "out of memory" : e.msg);
        goto out;
    }
    int rules = 0;
    size_t elems = lg_size(g, &rules);
    uint64_t rs = 0x9E3779B97F4A7C15ull ^ (uint64_t)seed * 0x2545F4914F6CDD1Dull;
    double accept_s = 0, first_walk_s = 0, first_walk_max = 0, allowed_sum = 0;
    int n = 0, walks = 0, first_walk_steps = 0, finished = 0;
    lg_matcher *m = NULL;
    while (n < steps) {
        if (!m && lg_matcher_new(g, v, ends, 2, &m, &e)) {
            fprintf(stderr, "error: bench grammar: %s\n", e.msg);
            goto out;
        }
        double a = now_s();
        int na = lg_matcher_mask(m, bits, &e);
        double dt = now_s() - a;
        if (na < 0) {
            fprintf(stderr, "error: bench grammar: %s\n", e.msg);
            goto out;
        }
        mask_t[n++] = dt;
        allowed_sum += na;
        if (walks == 0) {
            first_walk_s += dt;
            first_walk_steps++;
            if (dt > first_walk_max) first_walk_max = dt;
        }
        int k = 0, end_ok = 0;
        for (int w = 0; w < W; w++)
            for (uint32_t x = bits[w]; x; x &= x - 1) {
                int id = w * 32 + __builtin_ctz(x);
                if (id == ends[0] || id == ends[1]) end_ok = 1;
                else allowed[k++] = id;
            }
        int32_t pick = end_ok && (k == 0 || xs(&rs) % 8 == 0) ? (ends[0] >= 0 ? ends[0] : ends[1]) : allowed[xs(&rs) % (uint64_t)(k ? k : 1)];
        if (na == 0) pick = -1;
        a = now_s();
        int ok = pick >= 0 && lg_matcher_accept(m, pick) == 0;
        accept_s += now_s() - a;
        if (!ok && pick >= 0) {
            fprintf(stderr, "error: bench grammar: an allowed id (%d) was not accepted\n", pick);
            goto out;
        }
        if (na == 0 || lg_matcher_finished(m)) {
            finished += lg_matcher_finished(m);
            lg_matcher_free(m);
            m = NULL;
            walks++;
        }
    }
    int positions = 0;
    size_t cache_bytes = 0;
    lg_cache_stats(g, &positions, &cache_bytes);
    lg_matcher_free(m);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += mask_t[i];
    qsort(mask_t, (size_t)n, sizeof *mask_t, cmp_double);
    printf("# lilac bench grammar\n\n");
    printf("- tokenizer: %s (%d ids, %zu trie nodes); index built in %.1f ms\n", model, V, lg_vocab_nodes(v), t_vocab * 1e3);
    printf("- grammar: %s (%d rules, %zu elements); compiled in %.2f ms\n",
           tools ? tools : schema ? schema : "any JSON object", rules, elems, t_compile * 1e3);
    printf("- walk: %d tokens over %d walks (%d finished), seed %d; %.0f ids allowed per step on average\n\n", n, walks,
           finished, seed, allowed_sum / n);
    printf("| mask per token | mean | p50 | p99 | max |\n| --- | --- | --- | --- | --- |\n");
    printf("| all steps | %.1f us | %.1f us | %.1f us | %.1f us |\n", sum / n * 1e6, mask_t[n / 2] * 1e6,
           mask_t[(size_t)((n - 1) * 0.99)] * 1e6, mask_t[n - 1] * 1e6);
    printf("| first walk (classifying as it goes) | %.1f us | | | %.1f us |\n\n", first_walk_s / first_walk_steps * 1e6,
           first_walk_max * 1e6);
    printf("- accept per token: %.1f us mean\n", accept_s / n * 1e6);
    printf("- classified positions: %d, %.1f MB\n", positions, cache_bytes / 1048576.0);
    fflush(stdout);
    if (!no_gpu) bench_gpu(model, gpu_tokens, gpu_ctx, gl);
    rc = 0;
out:
    free(bits);
    free(allowed);
    free(mask_t);
    lg_free(g);
    lg_vocab_free(v);
    lilac_tokenizer_free(t);
    return rc;
}
