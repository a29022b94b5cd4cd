/* fuzz_chat_store.c — libFuzzer target: any bytes as DIR/chat.json, the
 * conversation `lilac chat --cache-dir` resumes (src/cli/chat_store.c).  A
 * load must fail with one message or give an object with a "messages"
 * array.  With LILAC_CHAT_SEED=DIR, initialisation writes a valid
 * DIR/chat.json first (tests/fuzz/run.sh seeds the corpus with it: the checksum
 * gate is otherwise out of the fuzzer's reach). */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/chat_store.h"

#define MODEL 0x0123456789abcdefULL

static char dir[64], path[128];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    snprintf(dir, sizeof dir, "/tmp/fuzz_chat_store.XXXXXX");
    if (!mkdtemp(dir)) exit(1);
    snprintf(path, sizeof path, "%s/%s", dir, CLI_CHAT_FILE);
    const char *seed = getenv("LILAC_CHAT_SEED");
    if (seed) {
        json_t *r = json_loads("{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", \"content\": "
                               "\"hi\"}, {\"role\": \"assistant\", \"content\": \"a\", \"reasoning_content\": \"r\"}], "
                               "\"chat_template_kwargs\": {\"enable_thinking\": true}}",
                               0, NULL);
        lilac_error e = {0};
        if (!r || cli_chat_store_save(seed, MODEL, r, &e)) exit(1);
        json_decref(r);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    json_t *r = NULL;
    int absent = 0;
    lilac_error e = {0};
    lilac_status st = cli_chat_store_load(dir, MODEL, &r, &absent, &e);
    if (st == LILAC_OK && (!json_is_object(r) || !json_is_array(json_object_get(r, "messages")))) abort();
    if (st != LILAC_OK && (r || !e.msg[0] || absent)) abort();
    json_decref(r);
    return 0;
}
