/* bench_tokenizer.c — placeholder until the tokenizer lands. */
#include <stdio.h>
#include "cli/commands.h"

int bench_tokenizer(int argc, char **argv, const cli_globals *g) {
    (void)argc; (void)argv; (void)g;
    fprintf(stderr, "error: the tokenizer benchmark is not built yet\n");
    return 2;
}
