/* fuzz_tokenizer.c — libFuzzer target: any bytes encoded with the tiny
 * fixture's tokenizer, decoded back, and streamed through the decoder. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "text/tokenizer.h"

static lilac_tokenizer *tok;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lilac_error e;
    if (!tok && lilac_tokenizer_load("tests/fixtures/tiny", &tok, &e)) abort(); /* run from the repository root */
    lilac_ids ids = LILAC_IDS_INIT;
    if (lilac_tokenizer_encode(tok, (const char *)data, size, size & 1 ? LILAC_TOK_SPLIT_SPECIAL : 0, &ids, &e) == LILAC_OK) {
        lilac_buf out = LILAC_BUF_INIT;
        lilac_tokenizer_decode(tok, ids.v, ids.len, 0, &out, &e);
        lilac_tok_stream ts;
        lilac_tok_stream_init(&ts, tok, 0);
        for (size_t i = 0; i < ids.len; i++) lilac_tok_stream_push(&ts, ids.v[i], &out, &e);
        lilac_tok_stream_finish(&ts, &out);
        lilac_buf_free(&out);
    }
    lilac_ids_free(&ids);
    return 0;
}
