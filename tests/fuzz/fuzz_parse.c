/* fuzz_parse.c — libFuzzer target: any bytes as model output, fed to the
 * reasoning/tool-call parser in pieces whose sizes come from the input. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "text/parse.h"

static void ignore(void *ctx, const lilac_delta *d) {
    (void)ctx;
    (void)d;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    json_t *tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
                               "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, "
                               "\"days\": {\"type\": \"integer\"}, \"opts\": {\"type\": \"object\"}}}}}]",
                               0, NULL);
    lilac_parser *p = NULL;
    lilac_error e;
    unsigned flags = (data[0] & 1 ? LILAC_PARSE_THINK_OPEN : 0) | (data[0] & 2 ? LILAC_PARSE_TOOLS : 0);
    size_t step = 1 + data[1] % 17;
    if (lilac_parser_new(tools, flags, 42, &p, &e) == LILAC_OK) {
        for (size_t i = 2; i < size; i += step)
            if (lilac_parser_feed(p, (const char *)data + i, i + step <= size ? step : size - i, ignore, NULL, &e)) break;
        lilac_parser_finish(p, ignore, NULL, &e);
        lilac_parser_free(p);
    }
    json_decref(tools);
    return 0;
}
