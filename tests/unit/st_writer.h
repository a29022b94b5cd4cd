/* st_writer.h — test helper: read a safetensors file into editable entries and
 * write it back (optionally corrupted), so loader tests can build every kind
 * of bad checkpoint from the tiny fixture. */
#ifndef LILAC_TEST_ST_WRITER_H
#define LILAC_TEST_ST_WRITER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/safetensors.h"
#include "util/buf.h"

typedef struct {
    char name[256];
    char dtype[8];
    int ndim;
    int64_t shape[8];
    const void *data;
    size_t nbytes;
    int drop;            /* leave out of the written file */
    long long off_begin; /* >= 0: write these data_offsets instead of the real ones */
    long long off_end;
} st_entry;

typedef struct {
    st_entry e[4096];
    int n;
    lilac_tensors ts; /* keeps the source mapped */
} st_file;

/* Loads every tensor of path into f (the source stays mapped until st_release). */
static int st_read(st_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    lilac_error err;
    if (lilac_st_add_file(&f->ts, path, &err)) {
        fprintf(stderr, "st_read %s: %s\n", path, err.msg);
        return 0;
    }
    for (int i = 0; i < f->ts.n && f->n < 4096; i++) {
        const lilac_tensor *t = &f->ts.t[i];
        st_entry *x = &f->e[f->n++];
        snprintf(x->name, sizeof x->name, "%s", t->name);
        snprintf(x->dtype, sizeof x->dtype, "%s", lilac_dtype_name(t->dtype));
        x->ndim = t->ndim;
        memcpy(x->shape, t->shape, sizeof x->shape);
        x->data = t->data;
        x->nbytes = t->nbytes;
        x->off_begin = -1;
    }
    return 1;
}

static void st_release(st_file *f) { lilac_st_close(&f->ts); }

static st_entry *st_get(st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->e[i].name, name) == 0) return &f->e[i];
    return NULL;
}

static st_entry *st_add(st_file *f, const char *name, const char *dtype, int ndim, const int64_t *shape, const void *data,
                        size_t nbytes) {
    st_entry *x = &f->e[f->n++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    snprintf(x->dtype, sizeof x->dtype, "%s", dtype);
    x->ndim = ndim;
    memcpy(x->shape, shape, (size_t)ndim * sizeof *shape);
    x->data = data;
    x->nbytes = nbytes;
    x->off_begin = -1;
    return x;
}

/* Writes the entries (header padded to 8 bytes).  data_size_override >= 0
 * truncates/extends the data section; sparse leaves the data unwritten (a hole). */
static int st_write_ex(const st_file *f, const char *path, long long header_len_override, int sparse) {
    lilac_buf h = LILAC_BUF_INIT;
    lilac_buf_puts(&h, "{\"__metadata__\":{\"format\":\"test\"}");
    size_t off = 0;
    for (int i = 0; i < f->n; i++) {
        const st_entry *x = &f->e[i];
        if (x->drop) continue;
        lilac_buf_printf(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", x->name, x->dtype);
        for (int d = 0; d < x->ndim; d++) lilac_buf_printf(&h, "%s%lld", d ? "," : "", (long long)x->shape[d]);
        long long b = x->off_begin >= 0 ? x->off_begin : (long long)off, en = x->off_begin >= 0 ? x->off_end : (long long)(off + x->nbytes);
        lilac_buf_printf(&h, "],\"data_offsets\":[%lld,%lld]}", b, en);
        off += x->nbytes;
    }
    lilac_buf_putc(&h, '}');
    while (h.len % 8) lilac_buf_putc(&h, ' ');
    FILE *fp = fopen(path, "wb");
    if (!fp) return 0;
    uint64_t hl = header_len_override >= 0 ? (uint64_t)header_len_override : h.len;
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(hl >> (8 * i));
    fwrite(le, 1, 8, fp);
    fwrite(h.data, 1, h.len, fp);
    if (sparse) {
        fflush(fp);
        int ok = ftruncate(fileno(fp), (off_t)(8 + h.len + off)) == 0;
        fclose(fp);
        lilac_buf_free(&h);
        return ok;
    }
    for (int i = 0; i < f->n; i++)
        if (!f->e[i].drop) fwrite(f->e[i].data, 1, f->e[i].nbytes, fp);
    fclose(fp);
    lilac_buf_free(&h);
    return 1;
}

static int st_write(const st_file *f, const char *path) { return st_write_ex(f, path, -1, 0); }

#endif
