/* cmd_generate.c — `lilac generate`: continue token ids, a raw prompt, or a
 * one-message chat, printing the new ids (--print-ids) or streaming the text.
 *
 * Greedy by default; --temperature and friends sample on the engine, with a
 * random seed unless --seed (as the server does).  Text
 * is decoded as tokens arrive, never splitting a UTF-8 character. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli_engine.h"
#include "cli/ids.h"
#include "text/chat.h"
#include "text/tokenizer.h"

static uint64_t random_seed(void) {
    uint64_t x = 0;
    if (getrandom(&x, sizeof x, 0) != (ssize_t)sizeof x) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        x = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec ^ (uint64_t)getpid() << 32;
    }
    return x;
}

typedef struct {
    lilac_tok_stream ts;
    int have_tok;
    int32_t *out;
    lilac_buf text;
} gen_ctx;

static int on_token(void *vctx, const lilac_token_info *t) {
    gen_ctx *g = vctx;
    g->out[t->index] = t->id;
    if (g->have_tok) {
        lilac_error e;
        lilac_buf_clear(&g->text);
        if (lilac_tok_stream_push(&g->ts, t->id, &g->text, &e) == LILAC_OK && g->text.len) {
            fwrite(g->text.data, 1, g->text.len, stdout);
            fflush(stdout);
        }
    }
    return 0;
}

/* The prompt ids: --ids, or the tokens of --prompt, or of --chat rendered
 * with the chat template. */
static lilac_status prompt_ids(const char *ids_spec, const char *prompt, const char *chat, int no_think, int vocab,
                               const lilac_tokenizer *tok, int32_t **ids, int *n, lilac_error *e) {
    if (ids_spec) return cli_parse_ids(ids_spec, "--ids", vocab, ids, n, e);
    lilac_buf rendered = LILAC_BUF_INIT;
    const char *text = prompt;
    size_t len = prompt ? strlen(prompt) : 0;
    lilac_status st = LILAC_OK;
    if (chat) {
        json_t *req = json_pack("{s:[{s:s,s:s}]}", "messages", "role", "user", "content", chat);
        if (req && no_think) json_object_set_new(req, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", 0));
        if (!req) return lilac_fail(e, LILAC_EINVAL, "--chat: the text is not valid UTF-8");
        st = lilac_chat_render(req, &rendered, NULL, e);
        json_decref(req);
        if (st) return st;
        text = rendered.data, len = rendered.len;
    }
    lilac_ids v = LILAC_IDS_INIT;
    if (!(st = lilac_tokenizer_encode(tok, text ? text : "", len, 0, &v, e)) && v.len == 0)
        st = lilac_fail(e, LILAC_EINVAL, "the prompt has no tokens");
    for (size_t i = 0; !st && i < v.len; i++)
        if (v.v[i] >= vocab) st = lilac_fail(e, LILAC_EINVAL, "token id %d of the prompt is outside the model's vocabulary", v.v[i]);
    lilac_buf_free(&rendered);
    if (st) {
        lilac_ids_free(&v);
        return st;
    }
    *ids = v.v, *n = (int)v.len;
    return LILAC_OK;
}

int cmd_generate(int argc, char **argv, const cli_globals *g) {
    const char *model = NULL, *ids_spec = NULL, *prompt = NULL, *chat = NULL;
    int n = 16, chunk = 0, print_ids = 0, ignore_eos = 0, no_think = 0, top_k = 0, seed = -1, quiet = 0;
    double temperature = 0, top_p = 1, min_p = 0;
    cli_opt opts[] = {
        {"model", 0, CLI_STR, &model, "DIR", "model directory (config.json + safetensors [+ tokenizer.json])", 0, 0},
        {"ids", 0, CLI_STR, &ids_spec, "IDS", "prompt token ids: comma-separated, or @FILE", 0, 0},
        {"prompt", 0, CLI_STR, &prompt, "TEXT", "raw prompt text (tokenized with DIR/tokenizer.json)", 0, 0},
        {"chat", 0, CLI_STR, &chat, "TEXT", "a user message, rendered with the Qwen3.6 chat template", 0, 0},
        {"no-think", 0, CLI_FLAG, &no_think, NULL, "with --chat: enable_thinking=false", 0, 0},
        {"tokens", 'n', CLI_INT, &n, "N", "number of tokens to generate (default 16)", 1, 1 << 24},
        {"print-ids", 0, CLI_FLAG, &print_ids, NULL, "print the new ids as a JSON array instead of text", 0, 0},
        {"ignore-eos", 0, CLI_FLAG, &ignore_eos, NULL, "keep going past end-of-sequence tokens", 0, 0},
        {"temperature", 0, CLI_REAL, &temperature, "T", "sampling temperature (default 0: greedy)", 0, 0},
        {"top-p", 0, CLI_REAL, &top_p, "P", "nucleus sampling mass (default 1: off)", 0, 0},
        {"top-k", 0, CLI_INT, &top_k, "K", "keep the K most likely tokens (default 0: off)", 0, 1 << 24},
        {"min-p", 0, CLI_REAL, &min_p, "P", "drop tokens below P times the best (default 0: off)", 0, 0},
        {"seed", 0, CLI_INT, &seed, "S", "random seed for sampling (default: a random one, as the server draws)", 0, 1 << 30},
        {"chunk", 0, CLI_INT, &chunk, "N", "prefill chunk size in tokens (default 512)", 1, 65536},
        {"quiet", 'q', CLI_FLAG, &quiet, NULL, "no progress (model load, long prefills) on stderr", 0, 0},
    };
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    int help = 0, npos = 0;
    char *pos[1];
    lilac_error e = {0};
    if (cli_parse(argc, argv, opts, nopts, pos, 0, &npos, &help, &e)) return fprintf(stderr, "error: generate: %s\n", e.msg), 2;
    if (help) {
        printf("Usage: lilac generate --model DIR (--ids IDS | --prompt TEXT | --chat TEXT) [-n N] [--print-ids]\n\n"
               "Continues the prompt; stops early at an end-of-sequence token unless --ignore-eos.\n"
               "Prints the generated text as it comes (needs DIR/tokenizer.json), or with --print-ids\n"
               "the new ids as a JSON array.\n\nOptions:\n");
        cli_print_options(stdout, opts, nopts);
        cli_print_globals_help();
        return 0;
    }
    if (!!ids_spec + !!prompt + !!chat != 1)
        return fprintf(stderr, "error: generate: give exactly one of --ids, --prompt, --chat\n"), 2;
    if (!(temperature >= 0) || !(top_p > 0 && top_p <= 1) || !(min_p >= 0 && min_p <= 1))
        return fprintf(stderr, "error: generate: --temperature >= 0, --top-p in (0, 1], --min-p in [0, 1]\n"), 2;
    lilac_tokenizer *tok = NULL;
    if (model && (prompt || chat || !print_ids)) {
        lilac_status st = lilac_tokenizer_load(model, &tok, &e);
        if (st && (prompt || chat)) return cli_error(&e);
        if (st) tok = NULL; /* ids in, ids out: no tokenizer needed */
    }
    lilac_engine *eng = cli_open_engine(model, g, chunk, quiet);
    if (!eng) {
        lilac_tokenizer_free(tok);
        return 1;
    }
    lilac_engine_info info;
    lilac_engine_get_info(eng, &info);
    int rc = 1, T = 0, got = 0;
    int32_t *ids = NULL, *out = NULL, stops[2];
    lilac_session *s = NULL;
    gen_ctx gc = {0};
    if (prompt_ids(ids_spec, prompt, chat, no_think, info.vocab_size, tok, &ids, &T, &e)) goto fail;
    if ((long)T + n > info.max_pos) {
        lilac_fail(&e, LILAC_EINVAL, "%d prompt + %d new tokens exceed the model's %d positions", T, n, info.max_pos);
        goto fail;
    }
    out = malloc((size_t)n * sizeof *out);
    if (!out) {
        lilac_fail(&e, LILAC_ENOMEM, "output ids");
        goto fail;
    }
    lilac_gen_params p = {0};
    p.max_tokens = n;
    p.sampling = lilac_sampling_greedy();
    p.sampling.temperature = (float)temperature;
    p.sampling.top_p = (float)top_p;
    p.sampling.top_k = top_k;
    p.sampling.min_p = (float)min_p;
    /* like the server: without --seed, every sampled run is different */
    p.sampling.seed = seed >= 0 ? (uint64_t)seed : random_seed();
    p.stop_at_eos = !ignore_eos;
    if (tok && !ignore_eos) { /* the chat end tokens, whatever config.json lists */
        const char *names[2] = {"<|im_end|>", "<|endoftext|>"};
        for (int i = 0; i < 2; i++) {
            int32_t id = lilac_tokenizer_id(tok, names[i]);
            if (id >= 0 && id < info.vocab_size) stops[p.n_stop_ids++] = id;
        }
        p.stop_ids = stops;
    }
    gc.out = out;
    gc.have_tok = tok && !print_ids;
    if (gc.have_tok) lilac_tok_stream_init(&gc.ts, tok, LILAC_TOK_SKIP_SPECIAL);
    lilac_finish why;
    if (lilac_session_new(eng, T + n, &s, &e) || cli_feed(s, ids, T, info.chunk, quiet, NULL, &e) ||
        lilac_session_generate(s, &p, on_token, &gc, &got, &why, &e))
        goto fail;
    if (gc.have_tok) {
        lilac_buf_clear(&gc.text);
        lilac_tok_stream_finish(&gc.ts, &gc.text);
        fwrite(gc.text.data ? gc.text.data : "", 1, gc.text.len, stdout);
        printf("\n");
    } else {
        printf("[");
        for (int i = 0; i < got; i++) printf("%s%d", i ? ", " : "", out[i]);
        printf("]\n");
    }
    rc = 0;
    goto done;
fail:
    cli_error(&e);
done:
    lilac_buf_free(&gc.text);
    lilac_session_free(s);
    lilac_engine_close(eng);
    lilac_tokenizer_free(tok);
    free(ids);
    free(out);
    return rc;
}
