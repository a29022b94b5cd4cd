/* cmd_bench.c — `lilac bench`: benchmarks, one subcommand each.
 *
 *   lilac bench tokenizer ...   tokenizer load and encode speed (bench_tokenizer.c)
 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

int bench_tokenizer(int argc, char **argv, const cli_globals *g);

int cmd_bench(int argc, char **argv, const cli_globals *g) {
    if (argc >= 1 && strcmp(argv[0], "tokenizer") == 0) return bench_tokenizer(argc - 1, argv + 1, g);
    if (argc == 0 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        printf("Usage: lilac bench SUBCOMMAND [options]\n\n"
               "Subcommands:\n"
               "  tokenizer    tokenizer.json load time and encode throughput\n");
        return argc == 0 ? 2 : 0;
    }
    fprintf(stderr, "error: unknown bench '%s' (see 'lilac bench --help')\n", argv[0]);
    return 2;
}
