/* cmd_serve.c — `lilac serve`: the OpenAI-compatible HTTP server
 * (src/server/).  This file only reads the options. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "server/server.h"

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
    o.api_key = getenv("LILAC_API_KEY");
    cli_opt opts[] = {
        {"model", 'm', CLI_STR, &o.model_dir, "DIR", "model directory (config.json, safetensors, tokenizer.json)", 0, 0},
        {"host", 0, CLI_STR, &o.host, "ADDR", "address to bind (default 127.0.0.1; 0.0.0.0 or :: for all)", 0, 0},
        {"port", 'p', CLI_INT, &o.port, "N", "TCP port (default 8080; 0 = any free port, printed at start)", 0, 65535},
        {"api-key", 0, CLI_STR, &o.api_key, "KEY",
         "require 'Authorization: Bearer KEY' on /v1/* (default: $LILAC_API_KEY, else none)", 0, 0},
        {"served-model-name", 0, CLI_STR, &o.served_name, "NAME", "model name in responses (default: the directory's name)", 0, 0},
        {"ctx", 0, CLI_INT, &o.ctx, "N", "tokens per request, prompt + completion (default min(32768, model))", 1, 1 << 30},
        {"queue", 0, CLI_INT, &o.queue, "N", "requests that may wait for the engine before 429 (default 16)", 1, 100000},
        {"slots", 0, CLI_INT, &o.slots, "N", "prefix-cache snapshots kept (default 8; 0 = no prefix reuse)", 0, 4096},
        {"max-body", 0, CLI_INT, &max_body, "BYTES", "largest request body (default 16777216)", 1024, 1 << 30},
        {"max-conns", 0, CLI_INT, &o.max_conns, "N", "simultaneous connections (default 64)", 1, 10000},
        {"timeout", 0, CLI_INT, &o.timeout_s, "S", "idle connection timeout in seconds (default 120)", 1, 86400},
        {"chunk", 0, CLI_INT, &o.chunk, "N", "prefill chunk in tokens (default: the backend's)", 1, 65536},
        {"quiet", 'q', CLI_FLAG, &o.quiet, NULL, "no log line per request", 0, 0},
        {"metrics-open", 0, CLI_FLAG, &o.metrics_open, NULL, "serve GET /metrics without the API key", 0, 0},
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
               "                   [--queue N] [--slots N] [--reasoning-budget N] [--max-body BYTES] [--backend ...]\n\n"
               "An OpenAI-compatible HTTP server: POST /v1/chat/completions, POST /v1/completions,\n"
               "GET /v1/models, GET /health; Anthropic's POST /v1/messages (+ /count_tokens);\n"
               "GET /metrics (Prometheus).  One engine thread runs requests in arrival order;\n"
               "a prefix cache of session snapshots reuses the state of earlier prompts.\n"
               "SIGINT/SIGTERM stop it cleanly.\n\nOptions:\n");
        cli_print_options(stdout, opts, nopts);
        cli_print_globals_help();
        return 0;
    }
    if (!o.model_dir) return fprintf(stderr, "error: serve: --model DIR is required (see 'lilac serve --help')\n"), 2;
    if (o.api_key && !*o.api_key) o.api_key = NULL;
    o.max_body = (size_t)max_body;
    o.backend = g->backend;
    o.threads = g->threads;
    return srv_run(&o);
}
