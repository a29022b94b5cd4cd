/* cmd_serve.c — `lilac serve`: the OpenAI-compatible HTTP server
 * (src/server/).  This file only reads the options. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "server/server.h"

/* --cors: a comma-separated list of origins as browsers send them
 * (scheme://host[:port], no path, no trailing slash).  0, or -1 after
 * printing what is wrong. */
static int check_cors(const char *list) {
    const char *p = list;
    for (int i = 1;; i++) {
        const char *end = strchr(p, ',');
        int len = end ? (int)(end - p) : (int)strlen(p);
        const char *sep = memchr(p, ':', (size_t)len);
        if (len == 1 && *p == '*') {
            fprintf(stderr, "error: serve: --cors: '*' would let every web page call this server; say "
                            "--cors-any-origin if that is what you want\n");
            return -1;
        }
        int ok = len > 0 && sep && sep > p && len - (sep - p) > 3 && sep[1] == '/' && sep[2] == '/' &&
                 !memchr(sep + 3, '/', (size_t)(len - (sep - p) - 3));
        for (int k = 0; ok && k < len; k++) ok = p[k] > ' ' && p[k] < 127;
        if (!ok) {
            fprintf(stderr, "error: serve: --cors: origin %d ('%.*s') is not scheme://host[:port] (e.g. "
                            "http://localhost:3000)\n", i, len > 200 ? 200 : len, p);
            return -1;
        }
        if (!end) return 0;
        p = end + 1;
    }
}

int cmd_serve(int argc, char **argv, const cli_globals *g) {
    srv_opts o = {0};
    o.host = "127.0.0.1";
    o.port = 8080;
    o.queue = 16;
    o.slots = 8;
    o.max_conns = 64;
    o.timeout_s = 120;
    o.reasoning_budget = -1;
    int max_body = 16 << 20;
    const char *cache_disk = NULL, *cache_ram = NULL;
    const char *env_key = getenv("LILAC_API_KEY");
    o.api_key = env_key;
    cli_opt opts[] = {
        {"model", 'm', CLI_STR, &o.model_dir, "DIR", "model directory (config.json, safetensors, tokenizer.json)", 0, 0},
        {"host", 0, CLI_STR, &o.host, "ADDR", "address to bind (default 127.0.0.1; 0.0.0.0 or :: for all)", 0, 0},
        {"port", 'p', CLI_INT, &o.port, "N", "TCP port (default 8080; 0 = any free port, printed at start)", 0, 65535},
        {"api-key", 0, CLI_STR, &o.api_key, "KEY",
         "require 'Authorization: Bearer KEY' on /v1/* (default: $LILAC_API_KEY, else none)", 0, 0},
        {"served-model-name", 0, CLI_STR, &o.served_name, "NAME", "model name in responses (default: the directory's name)", 0, 0},
        {"ctx", 0, CLI_INT, &o.ctx, "N", "tokens per request, prompt + completion, >= 32 (default min(32768, model))", 32, 1 << 30},
        {"queue", 0, CLI_INT, &o.queue, "N", "requests that may wait for the engine before 429 (default 16)", 1, 100000},
        {"slots", 0, CLI_INT, &o.slots, "N", "prefix-cache snapshots kept (default 8; 0 = no prefix reuse)", 0, 4096},
        {"cache-dir", 0, CLI_STR, &o.cache_dir, "DIR",
         "keep prefix-cache snapshots in DIR across restarts (written when evicted and at shutdown)", 0, 0},
        {"cache-disk", 0, CLI_STR, &cache_disk, "BYTES", "most bytes of snapshots in --cache-dir (K/M/G/T suffixes; default 16G)", 0, 0},
        {"cache-ram", 0, CLI_STR, &cache_ram, "BYTES",
         "keep snapshots evicted from the slots in host memory, at most BYTES (K/M/G/T), before --cache-dir or dropping", 0, 0},
        {"max-body", 0, CLI_INT, &max_body, "BYTES", "largest request body (default 16777216)", 1024, 1 << 30},
        {"max-conns", 0, CLI_INT, &o.max_conns, "N", "simultaneous connections (default 64)", 1, 10000},
        {"timeout", 0, CLI_INT, &o.timeout_s, "S", "idle connection timeout in seconds (default 120)", 1, 86400},
        {"chunk", 0, CLI_INT, &o.chunk, "N", "prefill chunk in tokens (default: the backend's)", 1, 65536},
        {"quiet", 'q', CLI_FLAG, &o.quiet, NULL, "no log line per request", 0, 0},
        {"metrics-open", 0, CLI_FLAG, &o.metrics_open, NULL, "serve GET /metrics without the API key", 0, 0},
        {"cors", 0, CLI_STR, &o.cors, "ORIGINS",
         "let browser pages from these origins call the server (comma-separated, e.g. http://localhost:3000)", 0, 0},
        {"cors-any-origin", 0, CLI_FLAG, &o.cors_any, NULL, "let a page from any origin call it (Access-Control-Allow-Origin: *)", 0, 0},
        {"reasoning-budget", 0, CLI_INT, &o.reasoning_budget, "N",
         "default thinking budget: after N reasoning tokens the answer is forced to start (0 = thinking off; "
         "requests override it with thinking_budget / thinking.budget_tokens)", 0, 1 << 30},
    };
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    int help = 0, npos = 0;
    char *pos[1];
    lilac_error e = {0};
    if (cli_parse(argc, argv, opts, nopts, pos, 0, &npos, &help, &e)) return fprintf(stderr, "error: serve: %s\n", e.msg), 2;
    if (help) {
        printf("Usage: lilac serve --model DIR [--host ADDR] [--port N] [--api-key KEY] [--ctx N]\n"
               "                   [--queue N] [--slots N] [--cache-ram BYTES] [--cache-dir DIR [--cache-disk BYTES]]\n"
               "                   [--reasoning-budget N]\n"
               "                   [--max-body BYTES] [--backend ...]\n\n"
               "An OpenAI-compatible HTTP server: POST /v1/chat/completions, POST /v1/completions,\n"
               "GET /v1/models[/ID], GET /health, POST /tokenize, POST /detokenize (HEAD on the GET\n"
               "routes, OPTIONS for CORS preflight); Anthropic's POST /v1/messages (+ /count_tokens);\n"
               "GET /metrics (Prometheus).  One engine thread runs requests in arrival order;\n"
               "a prefix cache of session snapshots reuses the state of earlier prompts.\n"
               "SIGINT/SIGTERM stop it cleanly.\n\nOptions:\n");
        cli_print_options(stdout, opts, nopts);
        cli_print_globals_help();
        return 0;
    }
    if (!o.model_dir) return fprintf(stderr, "error: serve: --model DIR is required (see 'lilac serve --help')\n"), 2;
    /* An empty key is refused rather than read as "no authentication": it is
     * what --api-key "$KEY" gives when KEY is unset. */
    if (o.api_key && !*o.api_key) {
        if (o.api_key == env_key)
            fprintf(stderr, "error: serve: LILAC_API_KEY is set but empty; set a key, or unset it to run without one\n");
        else
            fprintf(stderr, "error: serve: --api-key is empty (an unset variable?); give a key, or leave out --api-key%s "
                            "to run without one\n", env_key ? " and unset LILAC_API_KEY" : "");
        return 2;
    }
    o.api_key_source = !o.api_key ? NULL : o.api_key == env_key ? "$LILAC_API_KEY" : "--api-key";
    if (o.cors && check_cors(o.cors)) return 2;
    if (o.served_name && (!*o.served_name || strlen(o.served_name) > 255))
        return fprintf(stderr, "error: serve: --served-model-name must be 1 to 255 bytes (got %zu)\n", strlen(o.served_name)), 2;
    o.cache_disk = (uint64_t)16 << 30;
    if (cache_disk && !(o.cache_disk = cli_parse_bytes(cache_disk)))
        return fprintf(stderr, "error: serve: --cache-disk '%s': expected a positive byte count (e.g. 8G, 500M, 1048576)\n",
                       cache_disk), 2;
    if (cache_disk && !o.cache_dir) return fprintf(stderr, "error: serve: --cache-disk needs --cache-dir\n"), 2;
    if (o.cache_dir && !*o.cache_dir) return fprintf(stderr, "error: serve: --cache-dir is empty\n"), 2;
    if (o.cache_dir && o.slots == 0)
        return fprintf(stderr, "error: serve: --cache-dir needs prefix-cache slots (--slots 0 turns the cache off)\n"), 2;
    if (cache_ram && !(o.cache_ram = cli_parse_bytes(cache_ram)))
        return fprintf(stderr, "error: serve: --cache-ram '%s': expected a positive byte count (e.g. 8G, 500M, 1048576)\n",
                       cache_ram), 2;
    if (cache_ram && o.slots == 0)
        return fprintf(stderr, "error: serve: --cache-ram needs prefix-cache slots (--slots 0 turns the cache off)\n"), 2;
    o.max_body = (size_t)max_body;
    o.backend = g->backend;
    o.threads = g->threads;
    return srv_run(&o);
}
