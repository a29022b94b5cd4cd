/* main.c — the lilac command line: global options, then one subcommand.
 *
 *   lilac [--threads N] [--backend auto|cpu|cuda] COMMAND [options]
 *
 * Global options may appear anywhere; they are removed before the command
 * parses its own.  Commands live in src/cli/cmd_*.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "util/version.h"
#include "backend/backend.h"
#include "lilac.h"
#include "util/threadpool.h"

static const cli_command commands[] = {
    {"score", "teacher-forced pass over token ids: NLL, perplexity, top-1, logits", cmd_score},
    {"generate", "continue token ids, a text prompt or a chat message (greedy, or sampled)", cmd_generate},
    {"bench", "benchmarks (tokenizer, decode speed)", cmd_bench},
    {"synth", "write a random model of the real shapes (for backend comparisons)", cmd_synth},
    {"export-gguf", "write a model directory as a llama.cpp GGUF (qwen35moe)", cmd_export_gguf},
    {"tokenize", "print the token ids of a text (JSON array)", cmd_tokenize},
    {"detokenize", "print the text of token ids", cmd_detokenize},
    {"render", "print the prompt the chat template makes of a chat-completions request", cmd_render},
    {"chat", "interactive chat in the terminal (streamed, multi-turn, prefix reuse)", cmd_chat},
    {"serve", "OpenAI- and Anthropic-compatible HTTP server (chat, messages, completions, metrics)", cmd_serve},
};
static const int ncommands = (int)(sizeof commands / sizeof commands[0]);

void cli_print_globals_help(void) {
    printf("\nGlobal options (anywhere on the command line):\n"
           "      --threads N                CPU worker threads, at most the cores available (default: 1 on\n"
           "                                 a machine of <= 2 cores, where it is fastest; else one per core)\n"
           "      --backend auto|cpu|cuda    compute backend (default: auto = CUDA when a GPU is present)\n");
}

static void usage(FILE *f) {
    fprintf(f, "lilac %s — an inference engine and OpenAI-compatible server for Qwen3.6-35B-A3B\n\n"
               "Usage: lilac [global options] COMMAND [options]\n\nCommands:\n",
            LILAC_VERSION);
    for (int i = 0; i < ncommands; i++) fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun 'lilac COMMAND --help' for the options of a command; 'lilac --version' for the build.\n");
}

static void version(void) {
    printf("lilac %s (commit %s)\n", LILAC_VERSION, lilac_commit);
    char gpu[512];
    lilac_backend_describe_gpu(gpu, sizeof gpu);
    printf("backends: %s\n", lilac_backends_compiled());
    printf("gpu: %s\n", gpu);
    int cores = lilac_cores_available();
    printf("cpu: %d core%s available, %d worker thread%s by default\n", cores, cores == 1 ? "" : "s",
           lilac_pool_default_threads(), lilac_pool_default_threads() == 1 ? "" : "s");
}

int main(int argc, char **argv) {
    cli_globals g = {0, "auto"};
    /* Pull the global options out of argv wherever they are. */
    int n = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        int which = 0; /* 1 threads, 2 backend */
        if (strncmp(a, "--threads", 9) == 0 && (a[9] == 0 || a[9] == '=')) which = 1;
        if (strncmp(a, "--backend", 9) == 0 && (a[9] == 0 || a[9] == '=')) which = 2;
        if (!which) {
            argv[1 + n++] = argv[i];
            continue;
        }
        if (a[9] == '=') val = a + 10;
        else if (i + 1 < argc) val = argv[++i];
        else {
            fprintf(stderr, "error: %s needs a value\n", a);
            return 2;
        }
        if (which == 1) {
            long t;
            if (!cli_parse_long(val, 0, 1024, &t)) {
                fprintf(stderr, "error: --threads: '%s' is not an integer in [0, 1024]\n", val);
                return 2;
            }
            g.threads = (int)t;
        } else {
            if (strcmp(val, "auto") && strcmp(val, "cpu") && strcmp(val, "cuda")) {
                fprintf(stderr, "error: --backend: '%s' is not one of auto, cpu, cuda\n", val);
                return 2;
            }
            g.backend = val;
        }
    }
    argc = 1 + n;
    /* More threads than cores only adds hand-offs (a 50-token request took
     * 104 s at --threads 1024 on 2 cores): clamp, and say so once. */
    int cores = lilac_cores_available();
    if (g.threads > cores) {
        fprintf(stderr, "note: --threads %d is more than the %d core%s available; using %d\n", g.threads, cores,
                cores == 1 ? "" : "s", cores);
        g.threads = cores;
    }

    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        version();
        return 0;
    }
    for (int i = 0; i < ncommands; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 2, argv + 2, &g);
    fprintf(stderr, "error: unknown command '%s' (see 'lilac --help')\n", argv[1]);
    return 2;
}
