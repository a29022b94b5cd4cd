/* commands.h — the lilac subcommands; one file each under src/cli/. */
#ifndef LILAC_CLI_COMMANDS_H
#define LILAC_CLI_COMMANDS_H

/* Options that apply to every command; given anywhere on the command line. */
typedef struct {
    int threads;         /* CPU worker threads, at most the cores available; 0 = the default */
    const char *backend; /* "auto", "cpu" or "cuda" */
} cli_globals;

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv, const cli_globals *g); /* returns the exit code */
} cli_command;

int cmd_score(int argc, char **argv, const cli_globals *g);
int cmd_generate(int argc, char **argv, const cli_globals *g);
int cmd_bench(int argc, char **argv, const cli_globals *g);
int cmd_synth(int argc, char **argv, const cli_globals *g);
int cmd_export_gguf(int argc, char **argv, const cli_globals *g);
int cmd_tokenize(int argc, char **argv, const cli_globals *g);
int cmd_detokenize(int argc, char **argv, const cli_globals *g);
int cmd_render(int argc, char **argv, const cli_globals *g);
int cmd_serve(int argc, char **argv, const cli_globals *g);
int cmd_chat(int argc, char **argv, const cli_globals *g);

/* The common tail of every command's --help. */
void cli_print_globals_help(void);

#endif
