/* cmd_render.c — `lilac render`: prints the prompt the Qwen3.6 chat template
 * makes of an OpenAI chat-completions request body (src/text/chat.h).
 *
 *   lilac render [--model DIR] [--info] REQUEST.json|-
 *
 * The prompt goes to stdout byte for byte, with no newline added.  Exit 0 on
 * success; 2 on a template error (the template's own message), a request of
 * the wrong shape, JSON that does not parse, or bad usage — each as one line
 * on stderr that says which. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "text/chat.h"

#define MAX_REQUEST_BYTES (256u << 20)

/* Reads a whole stream (for "-"). */
static char *read_stream(FILE *f, size_t *len) {
    lilac_buf b = LILAC_BUF_INIT;
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len <= MAX_REQUEST_BYTES) lilac_buf_append(&b, chunk, n);
    if (ferror(f) || b.oom || b.len > MAX_REQUEST_BYTES) {
        lilac_buf_free(&b);
        return NULL;
    }
    *len = b.len;
    return lilac_buf_take(&b);
}

static json_t *load_request(const char *path) {
    json_error_t jerr;
    json_t *req;
    /* \u0000 is valid JSON and Python accepts it; the renderer handles it */
    if (strcmp(path, "-") == 0) {
        size_t len = 0;
        char *text = read_stream(stdin, &len);
        if (!text) {
            fprintf(stderr, "error: render: cannot read the request from stdin (or it is over %u bytes)\n",
                    MAX_REQUEST_BYTES);
            return NULL;
        }
        req = json_loadb(text, len, JSON_ALLOW_NUL, &jerr);
        free(text);
    } else {
        req = json_load_file(path, JSON_ALLOW_NUL, &jerr);
    }
    if (!req && jerr.line < 0) /* jansson reports I/O failures without a position */
        fprintf(stderr, "error: render: %s\n", jerr.text);
    else if (!req)
        fprintf(stderr, "error: render: %s: not valid JSON: line %d, column %d: %s\n", path, jerr.line, jerr.column,
                jerr.text);
    return req;
}

static void print_info(const lilac_chat_info *info) {
    fprintf(stderr, "{\"message_offset\": [");
    for (size_t i = 0; i < info->n_messages; i++) fprintf(stderr, "%s%zu", i ? ", " : "", info->message_offset[i]);
    fprintf(stderr, "], \"generation_offset\": %zu, \"add_generation_prompt\": %s, \"thinking\": %s}\n",
            info->generation_offset, info->add_generation_prompt ? "true" : "false", info->thinking ? "true" : "false");
}

int cmd_render(int argc, char **argv, const cli_globals *g) {
    (void)g;
    const char *model = NULL;
    int show_info = 0, allow_media = 0;
    cli_opt opts[] = {
        {"model", 0, CLI_STR, &model, "DIR", "model directory (checked to exist; the template is built in)", 0, 0},
        {"info", 0, CLI_FLAG, &show_info, NULL, "also print message and generation-prompt offsets to stderr", 0, 0},
        {"allow-media", 0, CLI_FLAG, &allow_media, NULL,
         "render image/video parts as the template's placeholders (the server refuses them)", 0, 0},
    };
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    int help = 0, npos = 0;
    char *pos[1];
    lilac_error e = {0};
    if (cli_parse(argc, argv, opts, nopts, pos, 1, &npos, &help, &e))
        return fprintf(stderr, "error: render: %s\n", e.msg), 2;
    if (help) {
        printf("Usage: lilac render [--model DIR] [--info] REQUEST.json\n\n"
               "Prints the prompt that the Qwen3.6 chat template makes of an OpenAI\n"
               "chat-completions request body (messages, tools, add_generation_prompt,\n"
               "chat_template_kwargs), exactly, with no newline added.  REQUEST.json may be\n"
               "'-' for stdin.  Exits 2 on a template error, a malformed request or bad JSON,\n"
               "and on image, video or other non-text content parts unless --allow-media\n"
               "(lilac runs the text model only, as the server does).\n\n"
               "Options:\n");
        cli_print_options(stdout, opts, nopts);
        cli_print_globals_help();
        return 0;
    }
    if (npos != 1) return fprintf(stderr, "error: render: give one REQUEST.json (see 'lilac render --help')\n"), 2;
    struct stat st;
    if (model && (stat(model, &st) != 0 || !S_ISDIR(st.st_mode)))
        return fprintf(stderr, "error: render: --model %s: not a directory\n", model), 2;

    json_t *req = load_request(pos[0]);
    if (!req) return 2;
    lilac_buf out = LILAC_BUF_INIT;
    lilac_chat_info info;
    lilac_status s = allow_media ? LILAC_OK : lilac_chat_check_text_only(req, NULL, 0, &e);
    if (!s) s = lilac_chat_render(req, &out, &info, &e);
    else memset(&info, 0, sizeof info);
    json_decref(req);
    if (s) {
        const char *kind = s == LILAC_CHAT_ETEMPLATE  ? "template error"
                           : s == LILAC_CHAT_EREQUEST ? "bad request"
                                                      : lilac_status_name(s);
        fprintf(stderr, "error: render: %s: %s: %s\n", pos[0], kind, e.msg);
        lilac_buf_free(&out);
        return 2;
    }
    int rc = 0;
    if (out.len && fwrite(out.data, 1, out.len, stdout) != out.len) rc = 1;
    if (fflush(stdout) != 0) rc = 1;
    if (rc) fprintf(stderr, "error: render: writing the prompt to stdout failed\n");
    if (show_info) print_info(&info);
    lilac_chat_info_free(&info);
    lilac_buf_free(&out);
    return rc;
}
