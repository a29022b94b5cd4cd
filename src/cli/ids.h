/* ids.h — token id lists on the command line: "1,2,3" or "@FILE" (whitespace-separated). */
#ifndef LILAC_CLI_IDS_H
#define LILAC_CLI_IDS_H

#include <stdint.h>

#include "util/err.h"

/* Parses spec into a malloc'd array (*ids, *n >= 1).  Ids must be integers in
 * [0, vocab_limit) when vocab_limit > 0; a comma list has no empty entries.
 * Errors name `what` (e.g. "--ids"; for @FILE, the file).  The caller frees
 * *ids. */
lilac_status cli_parse_ids(const char *spec, const char *what, int vocab_limit, int32_t **ids, int *n, lilac_error *e);

#endif
