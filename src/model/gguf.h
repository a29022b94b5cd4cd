/* gguf.h — GGUF files (llama.cpp's model format, version 3): a streaming
 * writer (gguf_write.c) and a validating reader (gguf_read.c).
 *
 * Layout: "GGUF", u32 version, u64 tensor count, u64 key/value count; the
 * key/values (u64-length strings, a u32 type, the value; arrays: element
 * type, u64 count, elements); the tensor infos (name, u32 n_dims, u64 ne[]
 * innermost first, u32 ggml type, u64 offset from the data start); padding
 * to general.alignment (32 by default); the data, each tensor at an offset
 * that is a multiple of the alignment.  Everything is little-endian. */
#ifndef LILAC_MODEL_GGUF_H
#define LILAC_MODEL_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/err.h"

enum {
    LILAC_GGUF_U8 = 0, LILAC_GGUF_I8 = 1, LILAC_GGUF_U16 = 2, LILAC_GGUF_I16 = 3, LILAC_GGUF_U32 = 4, LILAC_GGUF_I32 = 5,
    LILAC_GGUF_F32 = 6, LILAC_GGUF_BOOL = 7, LILAC_GGUF_STRING = 8, LILAC_GGUF_ARRAY = 9, LILAC_GGUF_U64 = 10,
    LILAC_GGUF_I64 = 11, LILAC_GGUF_F64 = 12,
};

/* ggml tensor types this code knows (their ids in ggml.h) */
enum { LILAC_GGML_F32 = 0, LILAC_GGML_F16 = 1, LILAC_GGML_Q4_0 = 2, LILAC_GGML_Q4_1 = 3, LILAC_GGML_BF16 = 30 };

#define LILAC_GGUF_MAX_DIMS 4
#define LILAC_GGUF_ALIGNMENT 32

/* Elements per block and bytes per block of a ggml type; 0 when unknown. */
int lilac_ggml_block(int type, size_t *block_bytes);
/* Bytes of a tensor of type with ne[0..ndim); 0 when ne[0] is not a whole
 * number of blocks, the type is unknown or the size overflows. */
size_t lilac_ggml_nbytes(int type, int ndim, const int64_t *ne);

/* ---- writer ---- */
typedef struct lilac_gguf_writer lilac_gguf_writer;
/* Writes one tensor's bytes (exactly its size) to f. */
typedef lilac_status (*lilac_gguf_data_fn)(void *ctx, FILE *f, lilac_error *e);

lilac_gguf_writer *lilac_gguf_writer_new(void);
void lilac_gguf_writer_free(lilac_gguf_writer *w);
/* Key/values, in the order added; a key given twice is an error (reported by
 * lilac_gguf_write). */
void lilac_gguf_kv_u32(lilac_gguf_writer *w, const char *key, uint32_t v);
void lilac_gguf_kv_i32(lilac_gguf_writer *w, const char *key, int32_t v);
void lilac_gguf_kv_f32(lilac_gguf_writer *w, const char *key, float v);
void lilac_gguf_kv_bool(lilac_gguf_writer *w, const char *key, int v);
void lilac_gguf_kv_str(lilac_gguf_writer *w, const char *key, const char *v);
void lilac_gguf_kv_arr_i32(lilac_gguf_writer *w, const char *key, const int32_t *v, size_t n);
void lilac_gguf_kv_arr_bool(lilac_gguf_writer *w, const char *key, const uint8_t *v, size_t n);
void lilac_gguf_kv_arr_str(lilac_gguf_writer *w, const char *key, const char *const *v, size_t n);
/* A tensor: ne[0] is the innermost (contiguous) dimension; fn(ctx) writes its
 * data when the file is written. */
void lilac_gguf_tensor(lilac_gguf_writer *w, const char *name, int type, int ndim, const int64_t *ne,
                       lilac_gguf_data_fn fn, void *ctx);
/* Sets (or replaces) the data callback of the i-th tensor added. */
void lilac_gguf_tensor_data(lilac_gguf_writer *w, int i, lilac_gguf_data_fn fn, void *ctx);
/* Writes the file (to path.tmp, renamed on success); progress may be NULL. */
lilac_status lilac_gguf_write(lilac_gguf_writer *w, const char *path,
                              void (*progress)(void *ctx, const char *stage, uint64_t done, uint64_t total),
                              void *progress_ctx, lilac_error *e);

/* ---- reader ---- */
typedef struct {
    const char *key; /* NUL-terminated copy */
    uint32_t type;   /* LILAC_GGUF_* */
    uint32_t arr_type;
    uint64_t arr_n;
    const unsigned char *val; /* the value's bytes in the file (for arrays: the first element) */
    uint64_t u;      /* integer and bool values (sign-extended for signed types) */
    double f;        /* float values */
    char *str;       /* string values, NUL-terminated copy */
} lilac_gguf_kv;

typedef struct {
    char *name;
    int ndim;
    int64_t ne[LILAC_GGUF_MAX_DIMS];
    int type;
    uint64_t offset;          /* from the data start */
    size_t nbytes;
    const unsigned char *data;
} lilac_gguf_tensor_info;

typedef struct {
    uint32_t version;
    size_t alignment;
    size_t data_offset; /* file offset of the data section */
    lilac_gguf_kv *kv;
    int n_kv;
    lilac_gguf_tensor_info *t;
    int n_tensors;
} lilac_gguf;

/* Parses and validates a whole file held in memory (data must outlive g):
 * bounds of every length and count, known types, no nested arrays, unique
 * keys and tensor names, offsets aligned, inside the data and not
 * overlapping. `where` names the input in errors. */
lilac_status lilac_gguf_parse(const unsigned char *data, size_t size, const char *where, lilac_gguf *g, lilac_error *e);
void lilac_gguf_free(lilac_gguf *g);
const lilac_gguf_kv *lilac_gguf_find_kv(const lilac_gguf *g, const char *key);
const lilac_gguf_tensor_info *lilac_gguf_find_tensor(const lilac_gguf *g, const char *name);
/* Dequantises row r (ne[0] values) of an F32, F16, BF16, Q4_0 or Q4_1
 * tensor, as ggml does; returns 0, or -1 for another type or r out of range. */
int lilac_gguf_row_f32(const lilac_gguf_tensor_info *t, int64_t r, float *out);

/* IEEE half <-> float; to_f16 rounds to nearest even. */
float lilac_f16_to_f32(uint16_t h);
uint16_t lilac_f32_to_f16(float f);

#endif
