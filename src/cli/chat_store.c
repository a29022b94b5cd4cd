/* chat_store.c — DIR/chat.json, the conversation of `lilac chat
 * --cache-dir` (the format is in chat_store.h).  The header is a line of
 * its own, so that the file stays readable and a reader can check the
 * model, the length and the checksum before it parses the messages. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/chat_store.h"
#include "util/buf.h"
#include "util/file.h"
#include "util/hash.h"

#define MAX_FILE (64u << 20) /* a 1M-token conversation is far less */

static lilac_status path_in(const char *dir, char *out, size_t cap, lilac_error *e) {
    return lilac_path_join(out, cap, dir, CLI_CHAT_FILE, e);
}

lilac_status cli_chat_store_save(const char *dir, uint64_t model_id, const json_t *request, lilac_error *e) {
    char path[4096], tmp[4200];
    lilac_status st = path_in(dir, path, sizeof path, e);
    if (st) return st;
    lilac_buf body = LILAC_BUF_INIT;
    char *text = json_dumps(request, JSON_INDENT(1) | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
    if (text) lilac_buf_printf(&body, "%s\n", text); /* the newline is counted and hashed with the rest */
    free(text);
    if (!text || body.oom) {
        lilac_buf_free(&body);
        return lilac_fail(e, LILAC_ENOMEM, "%s: the conversation as JSON", path);
    }
    char head[160];
    snprintf(head, sizeof head,
             "{\"lilac_chat\": %d, \"model\": \"%016" PRIx64 "\", \"bytes\": %zu, \"xxh64\": \"%016" PRIx64 "\"}\n",
             CLI_CHAT_VERSION, model_id, body.len, lilac_hash64(body.data, body.len, 0));
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        lilac_buf_free(&body);
        return lilac_fail(e, LILAC_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    }
    int bad = fputs(head, f) < 0 || fwrite(body.data, 1, body.len, f) != body.len || fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    lilac_buf_free(&body);
    if (bad || rename(tmp, path) != 0) {
        st = lilac_fail(e, LILAC_EIO, "%s: cannot write: %s", path, strerror(errno));
        unlink(tmp);
    }
    return st;
}

/* A JSON string of 16 lowercase hex digits, as a number. */
static int hex64(const json_t *v, uint64_t *out) {
    const char *s = json_string_value(v);
    if (!s || strlen(s) != 16 || strspn(s, "0123456789abcdef") != 16) return 0;
    *out = strtoull(s, NULL, 16);
    return 1;
}

lilac_status cli_chat_store_load(const char *dir, uint64_t model_id, json_t **request, int *absent, lilac_error *e) {
    *request = NULL;
    *absent = 0;
    char path[4096];
    lilac_status st = path_in(dir, path, sizeof path, e);
    if (st) return st;
    struct stat sb;
    if (stat(path, &sb) != 0 && errno == ENOENT) {
        *absent = 1;
        return lilac_fail(e, LILAC_EIO, "%s: no saved conversation", path);
    }
    char *data = NULL;
    size_t len = 0;
    if ((st = lilac_read_file(path, MAX_FILE, &data, &len, e))) return st;
    const char *nl = memchr(data, '\n', len);
    json_t *h = nl ? json_loadb(data, (size_t)(nl - data), 0, NULL) : NULL;
    json_t *ver = json_object_get(h, "lilac_chat"), *bytes = json_object_get(h, "bytes");
    uint64_t id = 0, sum = 0;
    if (!json_is_object(h) || !json_is_integer(ver) || !hex64(json_object_get(h, "model"), &id) ||
        !json_is_integer(bytes) || json_integer_value(bytes) < 0 || !hex64(json_object_get(h, "xxh64"), &sum)) {
        st = lilac_fail(e, LILAC_EFORMAT, "%s: not a lilac conversation file (no valid header line)", path);
    } else if (json_integer_value(ver) != CLI_CHAT_VERSION) {
        st = lilac_fail(e, LILAC_EFORMAT, "%s: conversation format version %" JSON_INTEGER_FORMAT " (this lilac reads %d)",
                        path, json_integer_value(ver), CLI_CHAT_VERSION);
    } else if (id != model_id) {
        st = lilac_fail(e, LILAC_EFORMAT,
                        "%s: a conversation of another model (identity %016" PRIx64 "; this model is %016" PRIx64 ")", path,
                        id, model_id);
    } else {
        const char *body = nl + 1;
        const size_t n = len - (size_t)(body - data);
        json_error_t je;
        if ((json_int_t)n != json_integer_value(bytes))
            st = lilac_fail(e, LILAC_EFORMAT,
                            "%s: %zu bytes of messages, the header says %" JSON_INTEGER_FORMAT " (truncated or extended)", path,
                            n, json_integer_value(bytes));
        else if (lilac_hash64(body, n, 0) != sum)
            st = lilac_fail(e, LILAC_EFORMAT, "%s: checksum mismatch (header %016" PRIx64 ", contents %016" PRIx64 "): corrupt",
                            path, sum, lilac_hash64(body, n, 0));
        else if (!(*request = json_loadb(body, n, 0, &je)))
            st = lilac_fail(e, LILAC_EFORMAT, "%s: line %d: %s", path, je.line + 1, je.text);
        else if (!json_is_object(*request) || !json_is_array(json_object_get(*request, "messages")))
            st = lilac_fail(e, LILAC_EFORMAT, "%s: no \"messages\" array", path);
    }
    if (st) {
        json_decref(*request);
        *request = NULL;
    }
    json_decref(h);
    free(data);
    return st;
}
