/* safetensors.h — memory-mapped safetensors files, single or sharded.
 *
 * A model directory holds model.safetensors, or model.safetensors.index.json
 * naming the shards (the real 19.4 GB checkpoint).  Every header is validated
 * before any tensor is used: header length within the file, JSON object,
 * known dtypes, shapes whose byte size matches the offsets, offsets inside the
 * data, no two tensors overlapping, no name defined twice.  Tensor data is
 * never copied unless the file misaligns it for its dtype.
 *
 * Each tensor carries a `used` mark so the weight loader can require that
 * every tensor in the files was consumed (or explicitly skipped): a name
 * scheme that drifts fails loudly at load instead of silently dropping weights. */
#ifndef LILAC_MODEL_SAFETENSORS_H
#define LILAC_MODEL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"
#include "util/file.h"

typedef enum {
    LILAC_DT_F32,
    LILAC_DT_F16,
    LILAC_DT_BF16,
    LILAC_DT_F64,
    LILAC_DT_U8,
    LILAC_DT_I8,
    LILAC_DT_U16,
    LILAC_DT_I16,
    LILAC_DT_U32,
    LILAC_DT_I32,
    LILAC_DT_U64,
    LILAC_DT_I64,
    LILAC_DT_BOOL,
    LILAC_DT_COUNT
} lilac_dtype;

#define LILAC_ST_MAX_DIMS 8

typedef struct {
    char *name;
    lilac_dtype dtype;
    int ndim;
    int64_t shape[LILAC_ST_MAX_DIMS];
    const void *data; /* into the mapping (or an aligned copy) */
    size_t nbytes;
    int file;         /* index into lilac_tensors.files */
    int used;         /* set by the consumer */
} lilac_tensor;

typedef struct {
    lilac_tensor *t;
    int n, cap;
    int *slots; /* open-addressing hash of names -> index into t, -1 = empty */
    int nslots;
    lilac_mapping *maps;
    char **files;
    int nfiles;
    void **copies; /* aligned copies of misaligned tensors */
    int ncopies;
} lilac_tensors;

const char *lilac_dtype_name(lilac_dtype d);
size_t lilac_dtype_size(lilac_dtype d);

/* Opens DIR/model.safetensors.index.json if present, else DIR/model.safetensors. */
lilac_status lilac_st_open_dir(const char *dir, lilac_tensors *ts, lilac_error *e);
/* Adds one safetensors file to the table (ts must be zeroed before the first call). */
lilac_status lilac_st_add_file(lilac_tensors *ts, const char *path, lilac_error *e);
/* Parses a header from memory (exposed for tests and fuzzing): `data` is the
 * whole file. */
lilac_status lilac_st_add_buffer(lilac_tensors *ts, const unsigned char *data, size_t size, const char *where,
                                 int file_index, lilac_error *e);
const lilac_tensor *lilac_st_find(const lilac_tensors *ts, const char *name);
lilac_tensor *lilac_st_find_mut(lilac_tensors *ts, const char *name);
void lilac_st_close(lilac_tensors *ts);

#endif
