/* fuzz_config.c — libFuzzer target: any bytes as config.json. */
#include <stddef.h>
#include <stdint.h>

#include "model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lilac_config c;
    lilac_error e;
    if (lilac_config_parse((const char *)data, size, "fuzz", &c, &e) == LILAC_OK) lilac_config_free(&c);
    return 0;
}
