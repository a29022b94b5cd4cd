/* cmd_chat.c — `lilac chat`: an interactive multi-turn chat in the terminal,
 * on the engine directly (no server).
 *
 * Each turn renders the whole conversation with the chat template, tokenizes
 * it, and starts from the longest state whose tokens begin the prompt: the
 * working session itself, or a snapshot from the prefix cache the server
 * uses (src/server/prefix_cache.c).  The snapshot point is the one the
 * server takes: just after the turn's "<|im_start|>assistant\n", which the
 * next turn re-renders identically even though the template drops this
 * turn's think block then.  So a turn prefills only the previous answer (as
 * re-rendered) and the new message.
 *
 * With --cache-dir DIR the snapshots go to DIR (written when the cache
 * evicts them and at exit; read back when they prefix a prompt, as the
 * server's --cache-dir does) and the conversation to DIR/chat.json when it
 * changes (a turn, /reset, /system, /think, /load; chat_store.c); --resume
 * continues it, and its next turn starts from the snapshots instead of
 * prefilling it all again.
 *
 * On a terminal: a line editor with history (lineedit.c), answers streamed
 * as they come, reasoning dimmed (hidden when stdout is not a terminal),
 * Ctrl-C stops the answer (or prefill) and keeps the program, Ctrl-D exits.
 * Not a terminal: one message (or command) per input line, answers on
 * stdout one after another, for scripts.  Commands: see HELP. */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/chat_store.h"
#include "cli/cli_engine.h"
#include "cli/lineedit.h"
#include "server/server.h"
#include "text/chat.h"
#include "text/parse.h"
#include "text/tokenizer.h"
#include "util/file.h"

#define GEN_PROMPT "<|im_start|>assistant\n"
#define SLOTS 4

static const char HELP[] =
    "Commands:\n"
    "  /help            this text\n"
    "  /reset           start a new conversation (the system prompt stays)\n"
    "  /system [TEXT]   set the system prompt (none: remove it)\n"
    "  /think           switch thinking on or off\n"
    "  /stats           tokens and speeds of the last turn\n"
    "  /save FILE       write the conversation as a chat-completions request (JSON)\n"
    "  /load FILE       read a conversation written by /save (or any {\"messages\": [...]})\n"
    "  /quit            leave (or Ctrl-D)\n"
    "Ctrl-C stops an answer.\n";

static volatile int interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

typedef struct {
    lilac_engine *eng;
    lilac_engine_info info;
    lilac_tokenizer *tok;
    lilac_session *cur;
    srv_pcache *pc;
    int ctx, quiet;
    int max_tokens; /* per answer; 0 = the rest of the context */
    json_t *msgs;  /* the conversation without the system prompt */
    char *system;  /* NULL: none */
    int think;
    lilac_gen_params gen;
    int32_t stops[2], im_end, nl;
    int tty_in, tty_out;
    const char *cache_dir; /* NULL: nothing kept after exit */
    int cur_at_turn_end;   /* cur holds the conversation as the last turn wrote it (<|im_end|>\n fed) */
    /* the last turn */
    int st_prompt, st_cached, st_gen;
    double st_prefill_s, st_decode_s;
    int have_stats;
} chat;

/* --------------------------------------------------------------- output */

typedef struct {
    chat *c;
    lilac_tok_stream ts;
    lilac_buf piece;
    lilac_parser *parser;
    int in_reasoning; /* the dim attribute is on */
    int wrote;        /* something was printed */
    int last_nl;      /* the last byte printed was a newline */
    int n;
    int32_t last;
    double t_first;
} turn_out;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void show(turn_out *o, const char *p, size_t n, int reasoning) {
    if (!n) return;
    if (reasoning && !o->c->tty_out) return; /* scripts get answers only */
    if (o->c->tty_out && reasoning != o->in_reasoning) {
        fputs(reasoning ? "\x1b[2m" : "\x1b[0m", stdout);
        if (!reasoning && o->wrote && !o->last_nl) fputs("\n", stdout);
        o->in_reasoning = reasoning;
    }
    fwrite(p, 1, n, stdout);
    o->wrote = 1;
    o->last_nl = p[n - 1] == '\n';
    fflush(stdout);
}

static void on_delta(void *ctx, const lilac_delta *d) {
    turn_out *o = ctx;
    if (d->kind == LILAC_DELTA_REASONING) show(o, d->text, d->len, 1);
    else if (d->kind == LILAC_DELTA_CONTENT) show(o, d->text, d->len, 0);
}

static int on_token(void *ctx, const lilac_token_info *t) {
    turn_out *o = ctx;
    if (interrupted) return 1;
    if (t->index == 0) o->t_first = now_s();
    o->n = t->index + 1;
    o->last = t->id;
    lilac_buf_clear(&o->piece);
    lilac_error e = {0};
    if (lilac_tok_stream_push(&o->ts, t->id, &o->piece, &e) == LILAC_OK && o->piece.len)
        lilac_parser_feed(o->parser, o->piece.data, o->piece.len, on_delta, o, &e);
    return 0;
}

/* ---------------------------------------------------------- the prompt */

static json_t *request(const chat *c) {
    json_t *r = json_object(), *m = json_array();
    if (c->system) json_array_append_new(m, json_pack("{s:s, s:s}", "role", "system", "content", c->system));
    json_array_extend(m, c->msgs);
    json_object_set_new(r, "messages", m);
    /* said either way: a conversation loaded (or resumed) later gets this switch back */
    json_object_set_new(r, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", c->think));
    return r;
}

/* Renders and tokenizes the conversation; *split is the token index just
 * after the final "<|im_start|>assistant\n" (0 when the text there is not a
 * safe place to cut: it must start with an added token, "<think>"). */
static lilac_status prompt_ids(chat *c, lilac_ids *ids, int *split, int *thinking, lilac_error *e) {
    json_t *rq = request(c);
    lilac_buf p = LILAC_BUF_INIT;
    lilac_chat_info info;
    lilac_status st = rq ? lilac_chat_render(rq, &p, &info, e) : lilac_fail(e, LILAC_ENOMEM, "request");
    json_decref(rq);
    if (st) {
        lilac_buf_free(&p);
        return st;
    }
    *thinking = info.thinking;
    size_t b = info.generation_offset + strlen(GEN_PROMPT);
    int safe = info.add_generation_prompt && b < p.len && !memcmp(p.data + info.generation_offset, GEN_PROMPT, strlen(GEN_PROMPT)) &&
               !strncmp(p.data + b, "<think>", 7) && lilac_tokenizer_id(c->tok, "<think>") >= 0;
    lilac_chat_info_free(&info);
    *split = 0;
    if (safe && !(st = lilac_tokenizer_encode(c->tok, p.data, b, 0, ids, e))) {
        *split = (int)ids->len;
        st = lilac_tokenizer_encode(c->tok, p.data + b, p.len - b, 0, ids, e);
    } else if (!safe) {
        st = lilac_tokenizer_encode(c->tok, p.data, p.len, 0, ids, e);
    }
    lilac_buf_free(&p);
    return st;
}

/* The state to start from: returns the prompt tokens it already holds. */
static int reuse(chat *c, const int32_t *ids, int n) {
    int len = 0, slot = srv_pcache_find(c->pc, ids, n, &len);
    int cl = lilac_session_len(c->cur);
    int cur_ok = cl > 0 && cl <= n && !memcmp(lilac_session_tokens(c->cur), ids, (size_t)cl * sizeof *ids);
    /* a longer prefix on disk (--cache-dir) comes into a slot first */
    int dlen = 0, dslot = srv_pcache_fetch(c->pc, ids, n, cur_ok && cl > len ? cl : len, &dlen, NULL);
    if (dslot >= 0) slot = dslot, len = dlen;
    if (cur_ok && cl >= len) return cl;
    lilac_error e = {0};
    if (slot >= 0 && srv_pcache_restore(c->pc, slot, c->cur, &e) == LILAC_OK) return len;
    lilac_session_reset(c->cur);
    return 0;
}

/* The conversation to DIR/chat.json (--cache-dir); a failure is one line. */
static void persist(chat *c) {
    if (!c->cache_dir) return;
    json_t *r = request(c);
    lilac_error e = {0};
    if (!r || cli_chat_store_save(c->cache_dir, lilac_engine_model_id(c->eng), r, &e))
        fprintf(stderr, "lilac chat: warning: conversation not saved: %s\n", r ? e.msg : "out of memory");
    json_decref(r);
}

/* ------------------------------------------------------------ one turn */

static void turn(chat *c, const char *text) {
    lilac_error e = {0};
    json_t *um = json_pack("{s:s, s:s%}", "role", "user", "content", text, strlen(text));
    if (!um) {
        fprintf(stderr, "error: the message is not valid UTF-8\n");
        return;
    }
    json_array_append_new(c->msgs, um);
    lilac_ids ids = LILAC_IDS_INIT;
    int split = 0, thinking = 0;
    turn_out o = {.c = c, .last = -1};
    lilac_status st = prompt_ids(c, &ids, &split, &thinking, &e);
    const int n = (int)ids.len;
    if (!st && n + 1 >= c->ctx)
        st = lilac_fail(&e, LILAC_EINVAL, "the conversation (%d tokens) fills the context of %d tokens: /reset, or --ctx", n,
                        c->ctx);
    if (st) {
        fprintf(stderr, "error: %s\n", e.msg);
        json_array_remove(c->msgs, json_array_size(c->msgs) - 1);
        lilac_ids_free(&ids);
        return;
    }
    interrupted = 0;
    c->cur_at_turn_end = 0;
    double t0 = now_s();
    int start = reuse(c, ids.v, n);
    c->st_cached = start;
    if (split > start && split < n) {
        st = cli_feed(c->cur, ids.v + start, split - start, c->info.chunk, c->quiet, &interrupted, &e);
        if (!st && srv_pcache_store(c->pc, c->cur, SRV_SNAP_ANCHOR, &e)) fprintf(stderr, "note: snapshot: %s\n", e.msg);
        start = split;
    }
    if (!st && start < n) st = cli_feed(c->cur, ids.v + start, n - start, c->info.chunk, c->quiet, &interrupted, &e);
    double t1 = now_s();
    int n_out = 0;
    lilac_finish why = LILAC_FINISH_LENGTH;
    if (!st) {
        lilac_tok_stream_init(&o.ts, c->tok, LILAC_TOK_SKIP_SPECIAL);
        st = lilac_parser_new(NULL, thinking ? LILAC_PARSE_THINK_OPEN : 0, 0, &o.parser, &e);
    }
    if (!st) {
        c->gen.max_tokens = c->max_tokens > 0 && c->max_tokens < c->ctx - n ? c->max_tokens : c->ctx - n;
        st = lilac_session_generate(c->cur, &c->gen, on_token, &o, &n_out, &why, &e);
        lilac_buf_clear(&o.piece);
        lilac_tok_stream_finish(&o.ts, &o.piece);
        if (o.piece.len) lilac_parser_feed(o.parser, o.piece.data, o.piece.len, on_delta, &o, &e);
        lilac_parser_finish(o.parser, on_delta, &o, &e);
    }
    double t2 = now_s();
    if (c->tty_out && o.in_reasoning) fputs("\x1b[0m", stdout);
    int cut = interrupted || st == LILAC_ECANCELLED;
    if (o.wrote && !o.last_nl) fputs("\n", stdout);
    if (cut) fputs(c->tty_out ? "\x1b[2m[stopped]\x1b[0m\n" : "[stopped]\n", stdout);
    else if (!st && why == LILAC_FINISH_LENGTH && n + n_out >= c->ctx - 1)
        fprintf(stdout, "[the context of %d tokens is full: /reset or --ctx]\n", c->ctx);
    if (!c->tty_out) fputs("\n", stdout); /* a blank line ends each answer for scripts */
    fflush(stdout);
    if (st && st != LILAC_ECANCELLED) fprintf(stderr, "error: %s\n", e.msg);
    if ((st && !cut) || n_out == 0) {
        /* nothing was said: the message is taken back, and a state that may
         * be partly advanced is not trusted */
        json_array_remove(c->msgs, json_array_size(c->msgs) - 1);
        if (st) lilac_session_reset(c->cur);
    } else {
        size_t nc = 0, nr = 0;
        const char *content = lilac_parser_content(o.parser, &nc), *reasoning = lilac_parser_reasoning(o.parser, &nr);
        /* (invalid UTF-8 from the model is repaired as the server does) */
        json_t *am = json_pack("{s:s, s:o}", "role", "assistant", "content", srv_json_str(content, content ? nc : 0));
        if (am && reasoning) json_object_set_new(am, "reasoning_content", srv_json_str(reasoning, nr));
        if (am) json_array_append_new(c->msgs, am);
        /* a turn that ended as the template writes it: feed <|im_end|>\n, so
         * the working session is ready for a template that keeps the turn */
        if (!cut && why == LILAC_FINISH_EOS && o.last == c->im_end && c->nl >= 0 &&
            lilac_session_len(c->cur) + 2 <= lilac_session_capacity(c->cur)) {
            int32_t tail[2] = {o.last, c->nl};
            if (lilac_session_feed(c->cur, tail, 2, NULL, 0, &e)) lilac_session_reset(c->cur);
            else c->cur_at_turn_end = 1;
        }
        persist(c);
    }
    c->st_prompt = n;
    c->st_gen = n_out;
    c->st_prefill_s = t1 - t0;
    c->st_decode_s = t2 - t1;
    c->have_stats = 1;
    interrupted = 0;
    lilac_buf_free(&o.piece);
    lilac_parser_free(o.parser);
    lilac_ids_free(&ids);
}

/* ------------------------------------------------------------ commands */

static void stats(const chat *c) {
    if (!c->have_stats) {
        printf("no turn yet\n");
        return;
    }
    int prefilled = c->st_prompt - c->st_cached;
    printf("prompt %d tokens (%d cached, %d prefilled), generated %d tokens\n", c->st_prompt, c->st_cached, prefilled,
           c->st_gen);
    printf("prefill %.1f tokens/s (%.3f s), decode %.1f tokens/s (%.3f s)\n",
           c->st_prefill_s > 0 ? prefilled / c->st_prefill_s : 0.0, c->st_prefill_s,
           c->st_decode_s > 0 ? c->st_gen / c->st_decode_s : 0.0, c->st_decode_s);
}

static void save(const chat *c, const char *path) {
    json_t *r = request(c);
    int rc = r ? json_dump_file(r, path, JSON_INDENT(2) | JSON_ENSURE_ASCII) : -1;
    json_decref(r);
    if (rc) fprintf(stderr, "error: /save %s: cannot write (%s)\n", path, strerror(errno));
    else printf("saved %zu messages to %s\n", json_array_size(c->msgs) + (c->system != NULL), path);
}

/* Makes the request r ({"messages": [...], "chat_template_kwargs"}) the
 * conversation: a first system message becomes the system prompt.  Returns
 * NULL, or what is wrong with r (the conversation is then unchanged). */
static const char *adopt(chat *c, json_t *r, char *why, size_t cap) {
    json_t *m = json_object_get(r, "messages");
    if (!json_is_array(m)) return "no \"messages\" array";
    size_t i;
    json_t *x;
    json_array_foreach(m, i, x) {
        if (!json_is_object(x) || !json_is_string(json_object_get(x, "role"))) {
            snprintf(why, cap, "messages[%zu] is not an object with a \"role\"", i);
            return why;
        }
    }
    json_t *rest = json_array();
    char *sys = NULL;
    json_array_foreach(m, i, x) {
        const char *role = json_string_value(json_object_get(x, "role"));
        const char *content = json_string_value(json_object_get(x, "content"));
        if (i == 0 && !strcmp(role, "system") && content) sys = strdup(content);
        else json_array_append(rest, x);
    }
    json_t *kw = json_object_get(r, "chat_template_kwargs");
    if (json_is_boolean(json_object_get(kw, "enable_thinking"))) c->think = json_is_true(json_object_get(kw, "enable_thinking"));
    json_decref(c->msgs);
    c->msgs = rest;
    free(c->system);
    c->system = sys;
    return NULL;
}

static void load(chat *c, const char *path) {
    json_error_t je;
    json_t *r = json_load_file(path, 0, &je);
    if (!r) {
        fprintf(stderr, "error: /load %s: %s (line %d)\n", path, je.text, je.line);
        return;
    }
    char why[128];
    const char *bad = adopt(c, r, why, sizeof why);
    json_decref(r);
    if (bad) fprintf(stderr, "error: /load %s: %s\n", path, bad);
    else
        printf("loaded %zu messages from %s (thinking %s)\n", json_array_size(c->msgs) + (c->system != NULL), path,
               c->think ? "on" : "off");
}

/* The longest cached prefix (slots or disk) of what the next turn sends:
 * the conversation and a new user message (whose text does not matter: an
 * added token starts it). */
static int cached_for_next_turn(chat *c) {
    json_array_append_new(c->msgs, json_pack("{s:s, s:s}", "role", "user", "content", "."));
    lilac_ids ids = LILAC_IDS_INIT;
    int split = 0, thinking = 0, best = 0;
    lilac_error e = {0};
    if (prompt_ids(c, &ids, &split, &thinking, &e) == LILAC_OK) best = srv_pcache_longest(c->pc, ids.v, (int)ids.len);
    json_array_remove(c->msgs, json_array_size(c->msgs) - 1);
    lilac_ids_free(&ids);
    return best;
}

/* --resume: the conversation in DIR/chat.json; a bad file is one warning line
 * and a new conversation.  Returns whether it resumed. */
static int resume(chat *c) {
    json_t *r = NULL;
    int absent = 0;
    lilac_error e = {0};
    char path[4200], why[128];
    snprintf(path, sizeof path, "%s/%s", c->cache_dir, CLI_CHAT_FILE);
    if (cli_chat_store_load(c->cache_dir, lilac_engine_model_id(c->eng), &r, &absent, &e)) {
        if (absent) {
            if (!c->quiet) fprintf(stderr, "lilac chat: nothing to resume in %s: a new conversation\n", c->cache_dir);
        } else {
            fprintf(stderr, "lilac chat: warning: ignoring %s: a new conversation\n", e.msg);
        }
        return 0;
    }
    const char *bad = adopt(c, r, why, sizeof why);
    json_decref(r);
    if (bad) fprintf(stderr, "lilac chat: warning: ignoring %s: %s: a new conversation\n", path, bad);
    return !bad;
}

/* Returns 0 to go on, 1 to quit. */
static int command(chat *c, char *line) {
    char *arg = line + strcspn(line, " \t");
    if (*arg) *arg++ = 0;
    arg += strspn(arg, " \t");
    size_t al = strlen(arg);
    while (al && (arg[al - 1] == ' ' || arg[al - 1] == '\t')) arg[--al] = 0;
    if (!strcmp(line, "/help") || !strcmp(line, "/?")) {
        fputs(HELP, stdout);
    } else if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) {
        return 1;
    } else if (!strcmp(line, "/reset")) {
        json_array_clear(c->msgs);
        printf("new conversation%s\n", c->system ? " (the system prompt stays)" : "");
        persist(c);
    } else if (!strcmp(line, "/system")) {
        free(c->system);
        c->system = *arg ? strdup(arg) : NULL;
        printf(*arg ? "system prompt set\n" : "system prompt removed\n");
        persist(c);
    } else if (!strcmp(line, "/think")) {
        c->think = !c->think;
        printf("thinking %s\n", c->think ? "on" : "off");
        persist(c);
    } else if (!strcmp(line, "/stats")) {
        stats(c);
    } else if (!strcmp(line, "/save") || !strcmp(line, "/load")) {
        if (!*arg) fprintf(stderr, "error: %s needs a FILE\n", line);
        else if (line[1] == 's') save(c, arg);
        else load(c, arg), persist(c);
    } else {
        fprintf(stderr, "unknown command %s (/help lists them)\n", line);
    }
    fflush(stdout);
    return 0;
}

/* ------------------------------------------------------------ sampling */

/* The model's recommended sampling (generation_config.json), as the server
 * takes it; greedy when the file is absent. */
static void sampling_defaults(const char *dir, lilac_sampling *s) {
    *s = lilac_sampling_greedy();
    char path[4096];
    lilac_error e = {0};
    if (lilac_path_join(path, sizeof path, dir, "generation_config.json", &e) || !lilac_file_exists(path)) return;
    json_t *g = json_load_file(path, 0, NULL), *v;
    if (!json_is_object(g)) {
        json_decref(g);
        return;
    }
    s->temperature = 1.0f;
    if (json_is_number(v = json_object_get(g, "temperature"))) s->temperature = (float)json_number_value(v);
    if (json_is_number(v = json_object_get(g, "top_p"))) s->top_p = (float)json_number_value(v);
    if (json_is_integer(v = json_object_get(g, "top_k")) && json_integer_value(v) > 0) s->top_k = (int)json_integer_value(v);
    if (json_is_number(v = json_object_get(g, "min_p"))) s->min_p = (float)json_number_value(v);
    if (json_is_number(v = json_object_get(g, "repetition_penalty"))) s->repetition_penalty = (float)json_number_value(v);
    if (json_is_number(v = json_object_get(g, "presence_penalty"))) s->presence_penalty = (float)json_number_value(v);
    if (json_is_false(json_object_get(g, "do_sample"))) s->temperature = 0;
    if (!(s->temperature >= 0 && s->top_p > 0 && s->top_p <= 1 && s->min_p >= 0 && s->min_p <= 1 && s->repetition_penalty > 0))
        *s = lilac_sampling_greedy();
    json_decref(g);
}

/* ---------------------------------------------------------------- main */

int cmd_chat(int argc, char **argv, const cli_globals *g) {
    const char *model = NULL, *system = NULL, *cache_dir = NULL, *cache_disk = NULL;
    int resume_flag = 0;
    int ctx = 0, no_think = 0, quiet = 0, max_tokens = 0, ignore_eos = 0, top_k = -1, seed = -1, chunk = 0;
    double temperature = -1, top_p = -1;
    cli_opt opts[] = {
        {"model", 'm', CLI_STR, &model, "DIR", "model directory (config.json, safetensors, tokenizer.json)", 0, 0},
        {"system", 's', CLI_STR, &system, "TEXT", "system prompt", 0, 0},
        {"no-think", 0, CLI_FLAG, &no_think, NULL, "start with thinking off (/think switches it)", 0, 0},
        {"ctx", 0, CLI_INT, &ctx, "N", "tokens of the whole conversation (default min(32768, model))", 16, 1 << 30},
        {"max-tokens", 'n', CLI_INT, &max_tokens, "N", "at most N tokens per answer (default: the rest of the context)", 1,
         1 << 30},
        {"temperature", 0, CLI_REAL, &temperature, "T", "sampling temperature (default: generation_config.json, else 0)", 0, 0},
        {"top-p", 0, CLI_REAL, &top_p, "P", "nucleus mass (default: generation_config.json)", 0, 0},
        {"top-k", 0, CLI_INT, &top_k, "K", "keep the K most likely tokens (default: generation_config.json)", 0, 1 << 24},
        {"seed", 0, CLI_INT, &seed, "S", "random seed (default: from the clock)", 0, 1 << 30},
        {"ignore-eos", 0, CLI_FLAG, &ignore_eos, NULL, "do not stop at end tokens (tests)", 0, 0},
        {"chunk", 0, CLI_INT, &chunk, "N", "prefill chunk in tokens (default: the backend's)", 1, 65536},
        {"cache-dir", 0, CLI_STR, &cache_dir, "DIR",
         "keep the prefix-cache snapshots and the conversation in DIR (created if missing), for --resume", 0, 0},
        {"cache-disk", 0, CLI_STR, &cache_disk, "BYTES", "most bytes of snapshots in --cache-dir (K/M/G/T; default 16G)", 0, 0},
        {"resume", 0, CLI_FLAG, &resume_flag, NULL,
         "continue the conversation saved in --cache-dir, from its snapshots (--system, --no-think still apply)", 0, 0},
        {"quiet", 'q', CLI_FLAG, &quiet, NULL, "no progress or banner on stderr", 0, 0},
    };
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    int help = 0, npos = 0;
    char *pos[1];
    lilac_error e = {0};
    if (cli_parse(argc, argv, opts, nopts, pos, 0, &npos, &help, &e)) return fprintf(stderr, "error: chat: %s\n", e.msg), 2;
    if (help) {
        printf("Usage: lilac chat --model DIR [--system TEXT] [--no-think] [--ctx N] [--temperature T] ...\n\n"
               "An interactive chat on the engine (no server).  On a terminal: line editing and history,\n"
               "answers streamed, reasoning dimmed, Ctrl-C stops an answer, Ctrl-D leaves.  With stdin not\n"
               "a terminal, each input line is one message or command, and only the answers are printed.\n"
               "Turns reuse the state of the conversation so far: a turn prefills only its new tokens.\n"
               "With --cache-dir DIR the conversation (DIR/chat.json) and its snapshots outlive the program;\n"
               "--resume continues it without prefilling it again.\n\n"
               "%s\nOptions:\n",
               HELP);
        cli_print_options(stdout, opts, nopts);
        cli_print_globals_help();
        return 0;
    }
    if (!model) return fprintf(stderr, "error: chat: --model DIR is required (see 'lilac chat --help')\n"), 2;
    if ((temperature != -1 && !(temperature >= 0)) || (top_p != -1 && !(top_p > 0 && top_p <= 1)))
        return fprintf(stderr, "error: chat: --temperature >= 0, --top-p in (0, 1]\n"), 2;
    uint64_t disk_max = (uint64_t)16 << 30;
    if (cache_disk && !(disk_max = cli_parse_bytes(cache_disk)))
        return fprintf(stderr, "error: chat: --cache-disk '%s': expected a positive byte count (e.g. 8G, 500M)\n", cache_disk), 2;
    if ((cache_disk || resume_flag) && !cache_dir)
        return fprintf(stderr, "error: chat: %s needs --cache-dir DIR\n", resume_flag ? "--resume" : "--cache-disk"), 2;
    if (cache_dir && !*cache_dir) return fprintf(stderr, "error: chat: --cache-dir is empty\n"), 2;

    chat c = {.think = !no_think, .quiet = quiet, .im_end = -1, .nl = -1};
    c.tty_in = isatty(STDIN_FILENO);
    c.tty_out = isatty(STDOUT_FILENO);
    int rc = 1;
    if (lilac_tokenizer_load(model, &c.tok, &e)) return cli_error(&e);
    if (!(c.eng = cli_open_engine(model, g, chunk, quiet))) {
        lilac_tokenizer_free(c.tok);
        return 1;
    }
    lilac_engine_get_info(c.eng, &c.info);
    c.ctx = ctx > 0 ? ctx : c.info.max_pos < 32768 ? c.info.max_pos : 32768;
    if (c.ctx > c.info.max_pos) {
        fprintf(stderr, "error: chat: --ctx %d is more than the model's %d positions\n", c.ctx, c.info.max_pos);
        goto out;
    }
    if (lilac_session_new(c.eng, c.ctx, &c.cur, &e) || srv_pcache_new(c.eng, SLOTS, c.ctx, &c.pc, &e)) {
        cli_error(&e);
        goto out;
    }
    srv_pcache_set_log(c.pc, "lilac chat", !quiet);
    if (cache_dir) {
        if (srv_pcache_open_dir(c.pc, cache_dir, disk_max, &e)) {
            cli_error(&e);
            goto out;
        }
        c.cache_dir = cache_dir;
        uint64_t bytes = 0;
        int nf = srv_pcache_disk_count(c.pc, &bytes);
        if (!quiet)
            fprintf(stderr, "lilac chat: cache %s: %d snapshot%s (%.1f MiB)\n", cache_dir, nf, nf == 1 ? "" : "s",
                    bytes / 1048576.0);
    }
    c.msgs = json_array();
    int resumed = resume_flag && resume(&c);
    if (system) { /* given on the command line: it wins over a resumed one */
        free(c.system);
        c.system = strdup(system);
    }
    if (no_think) c.think = 0;
    if (resumed && !quiet)
        fprintf(stderr, "lilac chat: resumed %zu messages from %s/%s (thinking %s); the next turn reuses %d cached tokens\n",
                json_array_size(c.msgs) + (c.system != NULL), cache_dir, CLI_CHAT_FILE, c.think ? "on" : "off",
                cached_for_next_turn(&c));
    sampling_defaults(model, &c.gen.sampling);
    if (temperature >= 0) c.gen.sampling.temperature = (float)temperature;
    if (top_p > 0) c.gen.sampling.top_p = (float)top_p;
    if (top_k >= 0) c.gen.sampling.top_k = top_k;
    c.gen.sampling.seed = seed >= 0 ? (uint64_t)seed : (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull;
    c.max_tokens = max_tokens;
    c.gen.stop_at_eos = !ignore_eos;
    c.im_end = lilac_tokenizer_id(c.tok, "<|im_end|>");
    lilac_ids nl = LILAC_IDS_INIT;
    if (lilac_tokenizer_encode(c.tok, "\n", 1, 0, &nl, &e) == LILAC_OK && nl.len == 1) c.nl = nl.v[0];
    lilac_ids_free(&nl);
    if (!ignore_eos) {
        const char *names[2] = {"<|im_end|>", "<|endoftext|>"};
        for (int i = 0; i < 2; i++) {
            int32_t id = lilac_tokenizer_id(c.tok, names[i]);
            if (id >= 0 && id < c.info.vocab_size) c.stops[c.gen.n_stop_ids++] = id;
        }
        c.gen.stop_ids = c.stops;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint; /* no SA_RESTART: a read in progress returns */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    if (c.tty_in && !quiet)
        fprintf(stderr, "lilac chat: %s on %s, context %d tokens, thinking %s; /help for commands, Ctrl-D to leave\n", model,
                c.info.device, c.ctx, c.think ? "on" : "off");

    cli_history hist = {0};
    char *line = NULL;
    size_t cap = 0;
    for (;;) {
        char *msg = NULL;
        if (c.tty_in) {
            int r = cli_readline(STDIN_FILENO, STDOUT_FILENO, c.tty_out ? "\x1b[1m>\x1b[0m " : "> ", &hist, &msg);
            if (r == CLI_LINE_INTERRUPT) continue;
            if (r == CLI_LINE_EOF) break;
            if (r != CLI_LINE_OK) {
                fprintf(stderr, "error: chat: cannot read the terminal\n");
                break;
            }
            cli_history_add(&hist, msg);
        } else {
            ssize_t n = getline(&line, &cap, stdin);
            if (n < 0) break; /* end of input, or Ctrl-C while waiting */
            while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
            msg = strdup(line);
        }
        if (!msg) break;
        char *p = msg + strspn(msg, " \t");
        int quit = 0;
        if (*p == '/') quit = command(&c, p);
        else if (*p) turn(&c, msg);
        free(msg);
        if (quit) break;
    }
    free(line);
    cli_history_free(&hist);
    /* the working session, when it ends as the conversation does, goes with
     * the other snapshots (srv_pcache_free writes them); the conversation
     * was saved when it last changed, so a run that changed nothing leaves
     * chat.json as it was */
    if (c.cache_dir && c.cur_at_turn_end && srv_pcache_store(c.pc, c.cur, SRV_SNAP_GEN, &e))
        fprintf(stderr, "lilac chat: warning: %s\n", e.msg);
    rc = 0;
out:
    json_decref(c.msgs);
    free(c.system);
    srv_pcache_free(c.pc);
    lilac_session_free(c.cur);
    lilac_engine_close(c.eng);
    lilac_tokenizer_free(c.tok);
    return rc;
}
