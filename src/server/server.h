/* server.h — the OpenAI-compatible HTTP server of lilac (`lilac serve`):
 * the types its files share.  Nothing here is public API.
 *
 * Threads and ownership:
 *   - HTTP threads (libmicrohttpd, one per connection; http.c) read and check
 *     a request (openai_req.c), render and tokenize the prompt, and put a
 *     srv_job on the bounded queue (queue.c).  Then they wait on the job:
 *     streaming responses copy its SSE bytes out as they appear, others wait
 *     for the end and write the body (openai_resp.c).
 *   - One engine thread (worker.c) owns the engine, its working session and
 *     the prefix cache (prefix_cache.c).  It runs jobs one at a time in
 *     arrival order; the per-token text work (detokenizing, stop strings,
 *     the reasoning/tool-call parser, SSE chunks; output.c) runs in its token
 *     callback, because a stop string has to end generation at that token.
 *   - A job is shared by one HTTP thread and the engine thread: reference
 *     counted, `mu` guards `sse`, `done` and the error; everything the engine
 *     writes besides those is read by the HTTP side only after `done`.
 */
#ifndef LILAC_SERVER_SERVER_H
#define LILAC_SERVER_SERVER_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "lilac.h"
#include "text/grammar.h"
#include "text/parse.h"
#include "text/tokenizer.h"
#include "util/buf.h"

/* ------------------------------------------------------------------ options */

typedef struct {
    const char *model_dir;
    const char *host;        /* default 127.0.0.1 */
    int port;                /* 0: any free port (printed at start) */
    const char *api_key;     /* NULL: no authentication; never "" */
    const char *api_key_source; /* "--api-key" or "$LILAC_API_KEY" (for the start-up line) */
    const char *served_name; /* the model name in responses; default: basename of model_dir */
    const char *backend;     /* global --backend */
    int threads;             /* global --threads */
    int chunk;               /* prefill chunk (0: the engine's default) */
    int ctx;                 /* tokens per session (prompt + completion) */
    int queue;               /* waiting requests before 429 */
    int slots;               /* prefix-cache snapshots; 0 disables reuse */
    const char *cache_dir;   /* NULL: snapshots are not kept across restarts */
    uint64_t cache_disk;     /* bytes the cache directory may hold */
    uint64_t cache_ram;      /* bytes of host memory for snapshots evicted from the slots (0: none) */
    size_t max_body;         /* bytes */
    int max_conns;           /* simultaneous HTTP connections */
    int timeout_s;           /* idle connection timeout */
    int quiet;               /* no per-request log lines */
    int metrics_open;        /* GET /metrics without the API key */
    const char *cors;        /* comma-separated origins browsers may call from (NULL: none) */
    int cors_any;            /* any origin (Access-Control-Allow-Origin: *) */
    int reasoning_budget;    /* default thinking budget in tokens; -1: none (0 = thinking off) */
} srv_opts;

/* Defaults for omitted sampling fields (generation_config.json, else OpenAI's). */
typedef struct {
    lilac_sampling s;
} srv_defaults;

typedef struct srv_queue srv_queue;
typedef struct srv_pcache srv_pcache;
typedef struct srv_metrics srv_metrics;

/* The prefix cache's tiers, fastest first: the slots (sessions on the
 * backend: device memory on a GPU, and the working session), host memory
 * (--cache-ram) and files (--cache-dir).  A snapshot the slots evict goes to
 * the next tier that exists; a hit is counted in the tier it came from. */
typedef enum { SRV_TIER_DEVICE, SRV_TIER_RAM, SRV_TIER_DISK, SRV_TIER_N } srv_tier;
extern const char *const srv_tier_name[SRV_TIER_N]; /* "device", "ram", "disk" */

typedef struct {
    long hits;          /* requests whose reused prefix came from this tier */
    long reused_tokens; /* the prompt tokens those reused */
    long evictions;     /* snapshots its bound pushed out (to the next tier, or gone) */
    long snapshots;     /* held now */
    uint64_t bytes;     /* what they occupy now */
    uint64_t capacity;  /* its bound in bytes (0: the tier is off) */
} srv_tier_stats;

/* Counters reported by GET /health; updated under srv_ctx.stats_mu. */
typedef struct {
    long requests, completed, cancelled, rejected_busy, errors;
    long cache_lookups, cache_hits;
    long prompt_tokens, cached_tokens, generated_tokens, reasoning_tokens;
    long cache_evictions;   /* snapshots pushed out of the LRU to make room */
    long cache_superseded;  /* snapshots dropped because a longer prompt end extends them */
    long cache_snapshots;   /* snapshots held now */
    srv_tier_stats tiers[SRV_TIER_N];
} srv_stats;

typedef struct {
    srv_opts o;
    lilac_engine *eng;
    lilac_engine_info info;
    lilac_tokenizer *tok;
    char model_name[256];
    long long started; /* time(NULL) at start: /v1/models' "created" */
    srv_defaults defaults;
    int32_t *stop_ids; /* end tokens beyond info.eos: generation_config eos, <|im_end|>, <|endoftext|> */
    int n_stop_ids;
    int32_t im_end;    /* id of <|im_end|>, or -1 */
    int32_t nl_ids[4]; /* the ids of "\n" (the template writes it after <|im_end|>) */
    int n_nl;
    /* The reasoning budget's tokens: </think> (-1 when the tokenizer lacks
     * it: budgets are then refused) and the closing sequence the engine
     * feeds, "\n</think>\n\n" (how the model and the template close a think
     * block). */
    int32_t think_close;
    int32_t think_end[LILAC_MAX_THINK_END];
    int n_think_end;
    /* Constrained decoding (grammar_req.c): the vocabulary index, the ids
     * that end a constrained answer (eos and stop ids), the tool-call tokens. */
    lg_vocab *gvocab;
#define SRV_MAX_END_IDS 16
    int32_t end_ids[SRV_MAX_END_IDS];
    int n_end_ids;
    int32_t tool_call_open, tool_call_close;
    /* added tokens (content, length), for safe tokenization split points */
    char **added;
    size_t *added_len;
    int n_added;
    srv_queue *q;
    atomic_int stopping;
    pthread_mutex_t stats_mu;
    srv_stats stats;
    srv_metrics *metrics; /* GET /metrics (metrics.c); its own lock */
} srv_ctx;

/* ----------------------------------------------------------------- errors */

/* An OpenAI error object and its HTTP status. */
typedef struct {
    int status;       /* 400, 401, 404, 405, 413, 429, 500, 503 */
    const char *type; /* "invalid_request_error", "server_error", ... */
    const char *code; /* NULL or e.g. "context_length_exceeded" */
    char param[64];   /* "" when none */
    char msg[640];
} srv_err;

int srv_errf(srv_err *e, int status, const char *param, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* -------------------------------------------------------------------- jobs */

typedef enum { SRV_CHAT, SRV_COMPLETION } srv_kind;
/* The API whose shapes the answer takes: a chat job is OpenAI's
 * chat.completion or Anthropic's message (anthropic_req.c/_resp.c). */
typedef enum { SRV_API_OPENAI, SRV_API_ANTHROPIC } srv_api;

#define SRV_MAX_SPLIT 3

typedef struct srv_job srv_job;
struct srv_job {
    const srv_ctx *srv;

    /* --- set by the HTTP thread before queueing, read-only afterwards --- */
    srv_kind kind;
    srv_api api;
    int stream, include_usage;
    int logprobs, top_logprobs; /* logprobs: chat true/false; completions: n >= 0 (legacy) */
    char id[64];
    long long created;
    int32_t *prompt; /* [n_prompt] */
    int n_prompt;
    int split[SRV_MAX_SPLIT]; /* token indices inside the prompt worth an anchor snapshot, ascending */
    int n_split;
    lilac_gen_params gen;
    char **stop;     /* [n_stop] stop strings */
    size_t *stop_len;
    int n_stop;
    size_t stop_max; /* longest stop string */
    lilac_parser *parser; /* chat only */
    int chat_snapshot_end; /* feed <|im_end|>\n after a turn that ended with <|im_end|> */
    lg_constraint *constraint; /* response_format / tool_choice: the grammar (gen.constraint), or NULL */
    int think_open;    /* the prompt ends inside an open think block (chat) */

    /* --- the engine thread's, until done --- */
    lilac_tok_stream ts;
    lilac_buf piece;   /* scratch: text completed by one token */
    lilac_buf hold;    /* text held back: it could be the start of a stop string */
    lilac_buf text;    /* completions: the text so far */
    json_t *lp_all;    /* logprob entries of every token (chat: content[] items) */
    json_t *lp_pend;   /* streaming: entries not yet sent in a chunk */
    int n_gen, cached;
    int in_think;         /* the output is still inside the think block */
    int reasoning_tokens; /* generated before </think>, forced tokens not counted */
    lilac_finish why;
    int stop_hit;      /* a stop string ended it */
    int stop_which;    /* which one: an index into stop[], -1 */
    int32_t last_id;
    double t_created, t_token; /* monotonic seconds: job made, last token (metrics) */
    /* Anthropic content blocks, built from the parser's deltas in their order
     * (streaming or not, so both see the same blocks). */
    json_t *blocks;    /* the closed blocks, [{type: thinking|text|tool_use, ...}] */
    int blk_kind;      /* the open block: -1 none, else a lilac_delta_kind (TOOL_START for tool_use) */
    json_t *blk;       /* the open block's object (without its text or input yet) */
    lilac_buf blk_text; /* the open block's thinking, text, or input JSON so far */
    int anth_started;  /* message_start was sent */

    /* --- shared --- */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    lilac_buf sse;     /* SSE bytes not yet sent (streaming) */
    int done;          /* the engine is finished with it */
    int failed;        /* err is set */
    srv_err err;
    atomic_int cancel; /* the client left, or the server stops */
    atomic_int refs;
    int queued;        /* on the queue's list (queue mutex) */
    srv_job *next, *prev;
};

srv_job *srv_job_new(const srv_ctx *srv, srv_kind kind);
void srv_job_release(srv_job *j);
/* Appends SSE bytes and wakes the HTTP thread. */
void srv_job_push_sse(srv_job *j, const char *p, size_t n);
/* Marks the job finished (after setting failed/err if it failed). */
void srv_job_finish(srv_job *j);
/* Fails a job with err (the engine or shutdown). */
void srv_job_fail(srv_job *j, const srv_err *err);

/* ------------------------------------------------------------------- queue */

enum { SRV_Q_OK = 0, SRV_Q_FULL = 1, SRV_Q_STOPPED = 2 };

srv_queue *srv_queue_new(int cap);
void srv_queue_free(srv_queue *q);
/* Adds j (taking a reference for the engine) or says why not. */
int srv_queue_push(srv_queue *q, srv_job *j);
/* Next job in arrival order; blocks; NULL once stopped and empty.  The
 * caller owns the queue's reference. */
srv_job *srv_queue_pop(srv_queue *q);
/* The client left: a waiting job is removed and finished, a running one is
 * asked to stop at its next token. */
void srv_queue_cancel(srv_queue *q, srv_job *j);
/* Shutdown: waiting jobs fail with 503, the running one is cancelled, pop
 * returns NULL from now on. */
void srv_queue_stop(srv_queue *q);
void srv_queue_clear_running(srv_queue *q);
int srv_queue_waiting(srv_queue *q);
int srv_queue_busy(srv_queue *q); /* a job is running */

/* ------------------------------------------------------------ prefix cache */

/* An LRU of session snapshots (slots sessions of ctx tokens, made lazily). */
lilac_status srv_pcache_new(lilac_engine *g, int slots, int ctx, srv_pcache **out, lilac_error *e);
void srv_pcache_free(srv_pcache *c);
/* The slot holding the longest token sequence that is a prefix of
 * ids[0..n) (its length in *len), or -1. */
int srv_pcache_find(srv_pcache *c, const int32_t *ids, int n, int *len);
/* dst becomes a copy of the slot; the slot becomes the most recently used. */
lilac_status srv_pcache_restore(srv_pcache *c, int slot, lilac_session *dst, lilac_error *e);
typedef enum {
    SRV_SNAP_ANCHOR, /* inside a prompt: a point later requests share; kept longer */
    SRV_SNAP_PROMPT, /* the end of a prompt: drops the non-anchor snapshots it extends */
    SRV_SNAP_GEN,    /* the end of a generation */
} srv_snap;
/* Keeps a copy of src (unless an equal one is there), replacing the least
 * recently used slot (after the drops SRV_SNAP_PROMPT makes). */
lilac_status srv_pcache_store(srv_pcache *c, const lilac_session *src, srv_snap kind, lilac_error *e);
/* Slots holding a snapshot. */
int srv_pcache_used(const srv_pcache *c);
/* Makes the anchors whose whole sequence prefixes ids[0..n) the most recently used. */
void srv_pcache_touch_anchors(srv_pcache *c, const int32_t *ids, int n);
/* Snapshots replaced by the LRU of the slots to make room, and dropped as
 * superseded, so far. */
void srv_pcache_counts(const srv_pcache *c, long *evictions, long *superseded);
/* The RAM tier: snapshots evicted from the slots are kept in host memory
 * (at most max_bytes; least recently used first out, to disk when there is
 * a directory).  0 turns it off. */
void srv_pcache_set_ram(srv_pcache *c, uint64_t max_bytes);
/* The prefix of its log lines (default "lilac serve"; a static string), and
 * whether it writes its summary lines at the end (warnings always). */
void srv_pcache_set_log(srv_pcache *c, const char *who, int verbose);
/* The disk tier (prefix_cache.c says when files are written and read):
 * creates DIR if needed and indexes its snapshots; at most max_bytes of
 * files stay there. */
lilac_status srv_pcache_open_dir(srv_pcache *c, const char *dir, uint64_t max_bytes, lilac_error *e);
/* Loads the longest snapshot in RAM or on disk that prefixes ids[0..n) and
 * is longer than min_len into a slot (the least recently used one, which
 * moves down a tier first); returns the slot (its length in *len, the tier
 * it came from in *from), or -1. */
int srv_pcache_fetch(srv_pcache *c, const int32_t *ids, int n, int min_len, int *len, srv_tier *from);
/* The length of the longest snapshot of any tier that prefixes ids[0..n)
 * (0: none), without loading anything. */
int srv_pcache_longest(const srv_pcache *c, const int32_t *ids, int n);
/* Counts a request that reused `tokens` prompt tokens from tier t. */
void srv_pcache_hit(srv_pcache *c, srv_tier t, int tokens);
/* Per-tier counters and sizes now (zeros for a tier that is off). */
void srv_pcache_tier_stats(const srv_pcache *c, srv_tier_stats out[SRV_TIER_N]);
/* Snapshot files indexed, and their bytes. */
int srv_pcache_disk_count(const srv_pcache *c, uint64_t *bytes);
/* Snapshots held in RAM, and their bytes. */
int srv_pcache_ram_count(const srv_pcache *c, uint64_t *bytes);

/* ------------------------------------------------------------ engine thread */

typedef struct srv_worker srv_worker;
lilac_status srv_worker_start(srv_ctx *srv, srv_worker **out, lilac_error *e);
/* Joins the thread (after srv_queue_stop) and frees it. */
void srv_worker_join(srv_worker *w);

/* ----------------------------------------------- per-token output (output.c) */

/* Prepares the job's output state (tokenizer stream, logprob arrays). */
int srv_output_begin(srv_job *j);
/* The generate callback: returns nonzero to stop (cancel or stop string). */
int srv_output_token(void *job, const lilac_token_info *t);
/* The end: flushes held text and the parser, writes the final SSE events. */
void srv_output_end(srv_job *j);

/* -------------------------------------------------- requests (openai_req.c) */

/* Checks a chat-completions or completions body and fills the job (prompt
 * tokens, sampling, stop strings, parser).  Returns 0, or fills err. */
int srv_req_chat(const srv_ctx *srv, json_t *body, srv_job *j, srv_err *err);
int srv_req_completion(const srv_ctx *srv, json_t *body, srv_job *j, srv_err *err);

/* ------------------------------------ constrained decoding (grammar_req.c) */

/* What a request asks the output to be. */
typedef struct {
    const json_t *format;   /* response_format json_object / json_schema, or NULL */
    const json_t *calls;    /* tool_choice required / named: the tools a call may use, or NULL */
    const json_t *tools;    /* tool_choice auto with a format: calls stay possible; or NULL */
    int parallel;           /* parallel_tool_calls (default true) */
    int think_open;         /* the output starts inside a think block */
} srv_grammar_req;

/* Checks response_format (param "response_format"); 0 or fills err. */
int srv_check_response_format(json_t *rf, srv_err *err);
/* Compiles the request's grammar into j->constraint and j->gen.constraint
 * (nothing when neither a format nor calls are asked for); 0 or fills err
 * (400 naming the unsupported keyword and its place). */
int srv_req_grammar(const srv_ctx *srv, const srv_grammar_req *r, srv_job *j, srv_err *err);

/* ------------------------------------------------- responses (openai_resp.c) */

/* Malloc'd JSON text of an error object. */
char *srv_resp_error(const srv_err *e);
/* The first SSE chunk of a stream (the assistant role, or nothing). */
void srv_resp_stream_start(srv_job *j);
/* Streaming deltas, built in the engine thread. */
void srv_resp_chat_delta(srv_job *j, const lilac_delta *d);
void srv_resp_text_delta(srv_job *j, const char *text, size_t n);
/* The finish chunk, the usage chunk when asked, and [DONE]. */
void srv_resp_stream_end(srv_job *j);
/* An error inside a stream that already started. */
void srv_resp_stream_error(srv_job *j, const srv_err *e);
/* A logprob entry for a token (chat or legacy form); appended to the job's arrays. */
void srv_resp_logprob(srv_job *j, const lilac_token_info *t, size_t text_offset);
/* The whole non-streaming body, malloc'd JSON text. */
char *srv_resp_body(const srv_job *j);
const char *srv_finish_reason(const srv_job *j);
/* GET /v1/models, GET /v1/models/{id} (the served model), GET /health */
char *srv_resp_models(const srv_ctx *srv);
char *srv_resp_model(const srv_ctx *srv);
char *srv_resp_health(srv_ctx *srv);
/* A JSON string of n bytes (invalid UTF-8 repaired); never NULL unless out of memory. */
json_t *srv_json_str(const char *s, size_t n);

/* ----------------------------------------- Anthropic Messages (anthropic_*.c) */

/* POST /v1/messages: checks an Anthropic body, maps it to the chat request
 * it means and fills the job through srv_req_chat (so the prompt, the
 * sampling and the parser are the chat endpoint's).  Returns 0, or fills err. */
int srv_req_messages(const srv_ctx *srv, json_t *body, srv_job *j, srv_err *err);
/* POST /v1/messages/count_tokens: malloc'd {"input_tokens": N}, or NULL with err. */
char *srv_req_count_tokens(const srv_ctx *srv, json_t *body, srv_err *err);
/* {"type": "error", "error": {"type", "message"}}, malloc'd. */
char *srv_anth_error(const srv_err *e);
/* Engine thread: message_start + ping (once the cached prefix is known). */
void srv_anth_stream_start(srv_job *j);
/* A parser delta: opens, extends or closes content blocks (SSE when streaming). */
void srv_anth_delta(srv_job *j, const lilac_delta *d);
/* The end: closes the open block; streams message_delta + message_stop. */
void srv_anth_end(srv_job *j);
void srv_anth_stream_error(srv_job *j, const srv_err *e);
char *srv_anth_body(const srv_job *j);
const char *srv_anth_stop_reason(const srv_job *j);

/* ------------------------------------------------------ metrics (metrics.c) */

typedef enum {
    SRV_EP_CHAT, SRV_EP_COMPLETIONS, SRV_EP_MESSAGES, SRV_EP_COUNT_TOKENS, SRV_EP_MODELS, SRV_EP_HEALTH,
    SRV_EP_METRICS, SRV_EP_PAGE, SRV_EP_OTHER, SRV_EP_N
} srv_endpoint;

srv_metrics *srv_metrics_new(void);
void srv_metrics_free(srv_metrics *m);
/* An answer's status (HTTP threads). */
void srv_metrics_request(srv_metrics *m, srv_endpoint ep, int status);
/* Engine thread: a job's first token (seconds since it was made), the gap
 * between two tokens, and a finished job's prefill and decode work. */
void srv_metrics_ttft(srv_metrics *m, double s);
void srv_metrics_token_gap(srv_metrics *m, double s);
void srv_metrics_job(srv_metrics *m, int prefilled, double prefill_s, int decoded, double decode_s);
/* Engine thread: snapshots held by the prefix cache and their bytes. */
void srv_metrics_snapshots(srv_metrics *m, int n, size_t bytes);
/* The Prometheus text exposition of everything, malloc'd. */
char *srv_metrics_render(srv_ctx *srv);
double srv_now(void); /* monotonic seconds */

/* The web chat page served at / (src/server/web/chat.html, embedded by
 * tools/embed.sh into $(BUILD)/gen/web_page.c). */
extern const unsigned char lilac_web_page[];
extern const size_t lilac_web_page_len;
/* ------------------------------------ /tokenize, /detokenize (tokenize_ep.c) */

/* llama.cpp's shapes: {"content": "..."} -> {"tokens": [...]} and
 * {"tokens": [...]} -> {"content": "..."}.  Malloc'd JSON text, or NULL
 * with err filled. */
char *srv_tokenize(const srv_ctx *srv, json_t *body, srv_err *err);
char *srv_detokenize(const srv_ctx *srv, json_t *body, srv_err *err);

/* ----------------------------------------------------------------- http.c */

typedef struct srv_http srv_http;
/* Binds and starts serving; *port_out receives the bound port. */
int srv_http_start(srv_ctx *srv, srv_http **out, int *port_out, char *msg, size_t msgcap);
void srv_http_quiesce(srv_http *h);
void srv_http_stop(srv_http *h);

/* ---------------------------------------------------------- server.c (run) */

int srv_run(const srv_opts *o);
void srv_stat_add(srv_ctx *srv, long *field, long v);

#endif
