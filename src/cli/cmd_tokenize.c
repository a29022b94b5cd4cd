/* cmd_tokenize.c — `lilac tokenize` and `lilac detokenize` (src/text/tokenizer.h).
 *
 *   lilac tokenize --model DIR [--split-special] (TEXT | --file F)
 *       prints the ids as a JSON array on one line, e.g. [9707,11,1879,0]
 *   lilac detokenize --model DIR [--skip-special] IDS
 *       prints the text exactly, with no newline added; IDS is "1,2,3" or
 *       "@FILE" (whitespace-separated)
 *
 * DIR needs tokenizer.json; tokenizer_config.json is read when present.
 * Exit 0 on success, 1 when the tokenizer cannot be loaded or an id is not in
 * the vocabulary, 2 on bad usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/ids.h"
#include "text/tokenizer.h"
#include "util/file.h"

#define MAX_TEXT_BYTES ((size_t)1 << 30)

static int load(const char *cmd, const char *model, lilac_tokenizer **t) {
    lilac_error e = {0};
    if (!model) return fprintf(stderr, "error: %s: --model DIR is required (see 'lilac %s --help')\n", cmd, cmd), 2;
    if (lilac_tokenizer_load(model, t, &e)) return fprintf(stderr, "error: %s: %s\n", cmd, e.msg), 1;
    return 0;
}

int cmd_tokenize(int argc, char **argv, const cli_globals *g) {
    (void)g;
    const char *model = NULL, *file = NULL;
    int split_special = 0;
    cli_opt opts[] = {
        {"model", 'm', CLI_STR, &model, "DIR", "model directory with tokenizer.json (required)", 0, 0},
        {"file", 'f', CLI_STR, &file, "F", "read the text from file F (exact bytes) instead of TEXT", 0, 0},
        {"split-special", 0, CLI_FLAG, &split_special, NULL,
         "read special added tokens (<|im_start|> ...) as plain text", 0, 0},
    };
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    int help = 0, npos = 0;
    char *pos[1];
    lilac_error e = {0};
    if (cli_parse(argc, argv, opts, nopts, pos, 1, &npos, &help, &e))
        return fprintf(stderr, "error: tokenize: %s\n", e.msg), 2;
    if (help) {
        printf("Usage: lilac tokenize --model DIR (TEXT | --file F)\n\n"
               "Prints the token ids of TEXT as a JSON array, as Hugging Face tokenizers'\n"
               "encode(TEXT, add_special_tokens=False) gives them (added tokens such as\n"
               "<|im_start|> are matched in the text).\n\nOptions:\n");
        cli_print_options(stdout, opts, nopts);
        cli_print_globals_help();
        return 0;
    }
    if ((npos == 1) == (file != NULL))
        return fprintf(stderr, "error: tokenize: give either TEXT or --file F (see 'lilac tokenize --help')\n"), 2;
    char *text = NULL;
    size_t len = 0;
    if (file) {
        if (lilac_read_file(file, MAX_TEXT_BYTES, &text, &len, &e))
            return fprintf(stderr, "error: tokenize: %s\n", e.msg), 1;
    }
    lilac_tokenizer *t = NULL;
    int rc = load("tokenize", model, &t);
    if (rc) {
        free(text);
        return rc;
    }
    lilac_ids ids = LILAC_IDS_INIT;
    const char *src = file ? text : pos[0];
    if (lilac_tokenizer_encode(t, src, file ? len : strlen(src), split_special ? LILAC_TOK_SPLIT_SPECIAL : 0, &ids,
                               &e)) {
        fprintf(stderr, "error: tokenize: %s\n", e.msg);
        rc = 1;
    } else {
        lilac_buf out = LILAC_BUF_INIT;
        lilac_buf_putc(&out, '[');
        for (size_t i = 0; i < ids.len; i++) lilac_buf_printf(&out, i ? ",%d" : "%d", ids.v[i]);
        lilac_buf_puts(&out, "]\n");
        if (out.oom || fwrite(out.data, 1, out.len, stdout) != out.len || fflush(stdout) != 0) {
            fprintf(stderr, "error: tokenize: writing the ids failed\n");
            rc = 1;
        }
        lilac_buf_free(&out);
    }
    lilac_ids_free(&ids);
    lilac_tokenizer_free(t);
    free(text);
    return rc;
}

int cmd_detokenize(int argc, char **argv, const cli_globals *g) {
    (void)g;
    const char *model = NULL;
    int skip_special = 0;
    cli_opt opts[] = {
        {"model", 'm', CLI_STR, &model, "DIR", "model directory with tokenizer.json (required)", 0, 0},
        {"skip-special", 0, CLI_FLAG, &skip_special, NULL, "leave out special added tokens", 0, 0},
    };
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    int help = 0, npos = 0;
    char *pos[1];
    lilac_error e = {0};
    if (cli_parse(argc, argv, opts, nopts, pos, 1, &npos, &help, &e))
        return fprintf(stderr, "error: detokenize: %s\n", e.msg), 2;
    if (help) {
        printf("Usage: lilac detokenize --model DIR IDS\n\n"
               "Prints the text of token ids exactly (no newline added).  IDS is a\n"
               "comma-separated list (1,2,3) or @FILE with whitespace-separated ids.\n"
               "Invalid UTF-8 in the decoded bytes becomes U+FFFD.\n\nOptions:\n");
        cli_print_options(stdout, opts, nopts);
        cli_print_globals_help();
        return 0;
    }
    if (npos != 1) return fprintf(stderr, "error: detokenize: give the ids (see 'lilac detokenize --help')\n"), 2;
    lilac_tokenizer *t = NULL;
    int rc = load("detokenize", model, &t);
    if (rc) return rc;
    int32_t *ids = NULL;
    int n = 0;
    lilac_buf out = LILAC_BUF_INIT;
    if (cli_parse_ids(pos[0], "IDS", lilac_tokenizer_n_ids(t), &ids, &n, &e) ||
        lilac_tokenizer_decode(t, ids, (size_t)n, skip_special ? LILAC_TOK_SKIP_SPECIAL : 0, &out, &e)) {
        fprintf(stderr, "error: detokenize: %s\n", e.msg);
        rc = 1;
    } else if ((out.len && fwrite(out.data, 1, out.len, stdout) != out.len) || fflush(stdout) != 0) {
        fprintf(stderr, "error: detokenize: writing the text failed\n");
        rc = 1;
    }
    lilac_buf_free(&out);
    free(ids);
    lilac_tokenizer_free(t);
    return rc;
}
