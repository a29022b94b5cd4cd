/* file.h — reading whole files and mapping large ones. */
#ifndef LILAC_UTIL_FILE_H
#define LILAC_UTIL_FILE_H

#include <stddef.h>
#include "util/err.h"

/* Reads the whole file into a NUL-terminated malloc'd buffer (the NUL is not
 * counted in *len).  Fails with LILAC_EFORMAT if the file is larger than
 * max_bytes.  The caller frees *out. */
lilac_status lilac_read_file(const char *path, size_t max_bytes, char **out, size_t *len,
                             lilac_error *e);

/* A read-only private mapping of a whole file. */
typedef struct {
    const unsigned char *data;
    size_t size;
} lilac_mapping;

lilac_status lilac_map_file(const char *path, lilac_mapping *m, lilac_error *e);
void lilac_unmap_file(lilac_mapping *m);

/* Joins dir and name into out (dir may be "" ); fails if it does not fit. */
lilac_status lilac_path_join(char *out, size_t cap, const char *dir, const char *name,
                             lilac_error *e);

int lilac_file_exists(const char *path);

#endif
