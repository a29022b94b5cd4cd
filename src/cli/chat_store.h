/* chat_store.h — the conversation `lilac chat --cache-dir DIR` keeps beside
 * its prefix-cache snapshots, so that `--resume` can continue it (and reuse
 * the snapshots instead of prefilling the conversation again).
 *
 * DIR/chat.json is two parts: one header line,
 *     {"lilac_chat": 1, "model": "<16 hex>", "bytes": N, "xxh64": "<16 hex>"}
 * then N bytes: the conversation as a chat-completions request (what
 * /save writes: {"messages": [...], "chat_template_kwargs": {...}}).
 * "model" is the engine's model identity (the snapshots' one), "xxh64" the
 * XXH64 (seed 0) of the N bytes.  A file that is not that — another format
 * version, another model, truncated, extended, corrupt, not a request — is
 * refused with one line saying why; the caller ignores it. */
#ifndef LILAC_CLI_CHAT_STORE_H
#define LILAC_CLI_CHAT_STORE_H

#include <jansson.h>
#include <stdint.h>

#include "util/err.h"

#define CLI_CHAT_FILE "chat.json"
#define CLI_CHAT_VERSION 1

/* Writes request to DIR/chat.json (a temporary file, synced, renamed over it). */
lilac_status cli_chat_store_save(const char *dir, uint64_t model_id, const json_t *request, lilac_error *e);
/* Reads DIR/chat.json into *request (an object with a "messages" array; the
 * caller checks the messages).  *absent is set when there is no such file
 * (LILAC_EIO then); any other failure is LILAC_EFORMAT or LILAC_EIO with a
 * line naming the file. */
lilac_status cli_chat_store_load(const char *dir, uint64_t model_id, json_t **request, int *absent, lilac_error *e);

#endif
