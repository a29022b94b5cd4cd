/* test_gguf.c — the GGUF writer read back by the validating reader (header,
 * key/values of every type, tensor infos, alignment, data offsets and
 * bytes), the reader on truncated and corrupted files, fp16 conversion, and
 * `export-gguf` on the tiny fixture: llama.cpp's qwen35moe names, shapes and
 * keys, the value-head reorder against the model, -exp(A_log), and every Q4
 * tensor dequantised bit-identical to the F32 export. */
#include "check.h"

#include <stdint.h>
#include <unistd.h>

#include "model/gguf.h"
#include "model/gguf_export.h"
#include "model/model.h"
#include "model/synth_write.h"
#include "util/file.h"

typedef struct {
    size_t n;
    unsigned char seed;
    int short_by; /* write this many bytes too few */
} pattern;

static lilac_status write_pattern(void *ctx, FILE *f, lilac_error *e) {
    const pattern *p = ctx;
    for (size_t i = 0; i + (size_t)p->short_by < p->n; i++)
        if (fputc((unsigned char)(p->seed + i * 7), f) == EOF) return lilac_fail(e, LILAC_EIO, "pattern");
    return LILAC_OK;
}

static char tmpdir[64];
static char path_in(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", tmpdir, name);
    return 0;
}

static void test_roundtrip(void) {
    lilac_gguf_writer *w = lilac_gguf_writer_new();
    REQUIRE(w, "writer");
    lilac_gguf_kv_str(w, "general.architecture", "qwen35moe");
    lilac_gguf_kv_u32(w, "a.u32", 4000000000u);
    lilac_gguf_kv_i32(w, "a.i32", -7);
    lilac_gguf_kv_f32(w, "a.f32", 1.5f);
    lilac_gguf_kv_bool(w, "a.bool", 1);
    const int32_t iv[4] = {11, 11, 10, 0};
    lilac_gguf_kv_arr_i32(w, "a.arr_i32", iv, 4);
    const uint8_t bv[3] = {1, 0, 1};
    lilac_gguf_kv_arr_bool(w, "a.arr_bool", bv, 3);
    const char *sv[3] = {"x", "", "hello world"};
    lilac_gguf_kv_arr_str(w, "a.arr_str", sv, 3);
    pattern p1 = {4 * 3 * 5, 1, 0}, p2 = {18 * 2 * 4, 2, 0}, p3 = {20 * 1 * 3, 3, 0};
    const int64_t ne1[2] = {3, 5}, ne2[3] = {64, 2, 2}, ne3[1] = {96};
    lilac_gguf_tensor(w, "t.f32", LILAC_GGML_F32, 2, ne1, write_pattern, &p1);
    lilac_gguf_tensor(w, "t.q40", LILAC_GGML_Q4_0, 3, ne2, write_pattern, &p2);
    lilac_gguf_tensor(w, "t.q41", LILAC_GGML_Q4_1, 1, ne3, write_pattern, &p3);
    char path[128];
    path_in(path, sizeof path, "rt.gguf");
    lilac_error e = {0};
    CHECK(lilac_gguf_write(w, path, NULL, NULL, &e) == LILAC_OK, "%s", e.msg);
    lilac_gguf_writer_free(w);
    lilac_mapping m = {0};
    lilac_status st1 = lilac_map_file(path, &m, &e);
    REQUIRE(st1 == LILAC_OK, "%s", e.msg);
    CHECK(memcmp(m.data, "GGUF", 4) == 0 && m.data[4] == 3 && m.data[5] == 0, "magic and version 3");
    lilac_gguf g;
    lilac_status st2 = lilac_gguf_parse(m.data, m.size, path, &g, &e);
    REQUIRE(st2 == LILAC_OK, "%s", e.msg);
    CHECK(g.version == 3 && g.n_kv == 8 && g.n_tensors == 3, "v%u, %d kv, %d tensors", g.version, g.n_kv, g.n_tensors);
    CHECK(strcmp(g.kv[0].key, "general.architecture") == 0, "key order kept");
    const lilac_gguf_kv *kv = lilac_gguf_find_kv(&g, "general.architecture");
    CHECK(kv && kv->type == LILAC_GGUF_STRING && strcmp(kv->str, "qwen35moe") == 0, "string kv");
    kv = lilac_gguf_find_kv(&g, "a.u32");
    CHECK(kv && kv->type == LILAC_GGUF_U32 && kv->u == 4000000000u, "u32 kv");
    kv = lilac_gguf_find_kv(&g, "a.i32");
    CHECK(kv && kv->type == LILAC_GGUF_I32 && (int64_t)kv->u == -7, "i32 kv");
    kv = lilac_gguf_find_kv(&g, "a.f32");
    CHECK(kv && kv->type == LILAC_GGUF_F32 && kv->f == 1.5, "f32 kv");
    kv = lilac_gguf_find_kv(&g, "a.bool");
    CHECK(kv && kv->type == LILAC_GGUF_BOOL && kv->u == 1, "bool kv");
    kv = lilac_gguf_find_kv(&g, "a.arr_i32");
    CHECK(kv && kv->type == LILAC_GGUF_ARRAY && kv->arr_type == LILAC_GGUF_I32 && kv->arr_n == 4 && kv->val[0] == 11 &&
              kv->val[8] == 10,
          "i32 array");
    kv = lilac_gguf_find_kv(&g, "a.arr_bool");
    CHECK(kv && kv->arr_type == LILAC_GGUF_BOOL && kv->arr_n == 3 && kv->val[0] == 1 && kv->val[1] == 0, "bool array");
    kv = lilac_gguf_find_kv(&g, "a.arr_str");
    CHECK(kv && kv->arr_type == LILAC_GGUF_STRING && kv->arr_n == 3 && kv->val[0] == 1 && kv->val[8] == 'x', "string array");
    CHECK(g.alignment == 32 && g.data_offset % 32 == 0, "alignment %zu, data at %zu", g.alignment, g.data_offset);
    const pattern *pats[3] = {&p1, &p2, &p3};
    const int types[3] = {LILAC_GGML_F32, LILAC_GGML_Q4_0, LILAC_GGML_Q4_1};
    for (int i = 0; i < 3; i++) {
        const lilac_gguf_tensor_info *t = &g.t[i];
        CHECK(t->type == types[i] && t->nbytes == pats[i]->n && t->offset % 32 == 0, "%s: type %d, %zu bytes at %llu",
              t->name, t->type, t->nbytes, (unsigned long long)t->offset);
        int same = 1;
        for (size_t k = 0; k < t->nbytes; k++) same &= t->data[k] == (unsigned char)(pats[i]->seed + k * 7);
        CHECK(same, "%s: data bytes", t->name);
    }
    CHECK(g.t[1].ndim == 3 && g.t[1].ne[0] == 64 && g.t[1].ne[1] == 2 && g.t[1].ne[2] == 2, "ne of t.q40");
    CHECK(g.t[0].offset == 0 && g.t[1].offset == 64 && g.t[2].offset == 64 + 160, "offsets %llu %llu %llu",
          (unsigned long long)g.t[0].offset, (unsigned long long)g.t[1].offset, (unsigned long long)g.t[2].offset);
    lilac_gguf_free(&g);

    /* every truncation fails cleanly; every single-byte corruption of the header parses or fails cleanly */
    int trunc_ok = 1;
    for (size_t n = 0; n < m.size; n++) {
        lilac_gguf h;
        lilac_error e2 = {0};
        unsigned char *cut = malloc(n ? n : 1);
        memcpy(cut, m.data, n);
        if (lilac_gguf_parse(cut, n, "cut", &h, &e2) == LILAC_OK) {
            /* only cuts inside the last tensor's padding can still be whole */
            if (n < g.data_offset + 64 + 160 + 60) trunc_ok = 0;
            lilac_gguf_free(&h);
        } else if (!e2.msg[0]) trunc_ok = 0;
        free(cut);
    }
    CHECK(trunc_ok, "every truncation is an error with a message");
    unsigned char *c = malloc(m.size);
    long parsed = 0;
    for (size_t at = 0; at < 400 && at < m.size; at++)
        for (int v = 0; v < 256; v += 51) {
            memcpy(c, m.data, m.size);
            c[at] ^= (unsigned char)(v | 1);
            lilac_gguf h;
            lilac_error e2 = {0};
            if (lilac_gguf_parse(c, m.size, "flip", &h, &e2) == LILAC_OK) parsed++, lilac_gguf_free(&h);
        }
    free(c);
    CHECK(parsed > 0, "some corruptions (values, not structure) still parse: %ld", parsed);
    lilac_unmap_file(&m);
}

static void test_writer_errors(void) {
    char path[128];
    path_in(path, sizeof path, "bad.gguf");
    lilac_error e = {0};
    lilac_gguf_writer *w = lilac_gguf_writer_new();
    lilac_gguf_kv_u32(w, "k", 1);
    lilac_gguf_kv_u32(w, "k", 2);
    CHECK(lilac_gguf_write(w, path, NULL, NULL, &e) != LILAC_OK && strstr(e.msg, "k: key given twice"), "%s", e.msg);
    lilac_gguf_writer_free(w);
    w = lilac_gguf_writer_new();
    pattern p = {18, 0, 0};
    const int64_t ne33[1] = {33};
    lilac_gguf_tensor(w, "odd", LILAC_GGML_Q4_0, 1, ne33, write_pattern, &p);
    CHECK(lilac_gguf_write(w, path, NULL, NULL, &e) != LILAC_OK && strstr(e.msg, "odd: bad type or shape"), "%s", e.msg);
    lilac_gguf_writer_free(w);
    w = lilac_gguf_writer_new();
    pattern ps = {4 * 32, 0, 3};
    const int64_t ne32[1] = {32};
    lilac_gguf_tensor(w, "short", LILAC_GGML_F32, 1, ne32, write_pattern, &ps);
    CHECK(lilac_gguf_write(w, path, NULL, NULL, &e) != LILAC_OK && strstr(e.msg, "tensor short: wrote 125 bytes"), "%s", e.msg);
    CHECK(access(path, F_OK) != 0, "a failed write leaves no file");
    lilac_gguf_writer_free(w);
    lilac_gguf_writer_free(NULL);
}

static void test_f16(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* NaN */
        if (lilac_f32_to_f16(lilac_f16_to_f32((uint16_t)h)) != h) bad++;
    }
    CHECK(bad == 0, "%d halves do not round-trip", bad);
    CHECK(lilac_f16_to_f32(0x3c00) == 1.0f && lilac_f16_to_f32(0xc000) == -2.0f && lilac_f16_to_f32(0x0001) == 5.9604645e-08f,
          "known halves");
    CHECK(lilac_f32_to_f16(1.0f + 1.0f / 4096) == 0x3c00 && lilac_f32_to_f16(1.0f + 3.0f / 4096) == 0x3c01, "nearest");
    CHECK(lilac_f32_to_f16(1.0f + 1.0f / 2048) == 0x3c00 && lilac_f32_to_f16(1.0f + 3.0f / 2048) == 0x3c02, "ties to even");
    CHECK(lilac_f32_to_f16(1e6f) == 0x7c00 && lilac_f32_to_f16(-1e-9f) == 0x8000, "overflow and underflow");
}

/* ---- the export on the tiny fixture ---- */
typedef struct {
    lilac_mapping m;
    lilac_gguf g;
    int ok;
} opened;

static void open_gguf(const char *path, opened *o) {
    lilac_error e = {0};
    memset(o, 0, sizeof *o);
    if (lilac_map_file(path, &o->m, &e) != LILAC_OK) {
        CHECK(0, "%s", e.msg);
        return;
    }
    CHECK(lilac_gguf_parse(o->m.data, o->m.size, path, &o->g, &e) == LILAC_OK, "%s", e.msg);
    o->ok = !e.code;
}
static void close_gguf(opened *o) {
    if (o->ok) lilac_gguf_free(&o->g);
    lilac_unmap_file(&o->m);
}

static float *tensor_f32(const lilac_gguf_tensor_info *t, int64_t *n) {
    int64_t rows = 1;
    for (int i = 1; i < t->ndim; i++) rows *= t->ne[i];
    float *v = malloc((size_t)(rows * t->ne[0]) * sizeof *v);
    for (int64_t r = 0; r < rows; r++) lilac_gguf_row_f32(t, r, v + r * t->ne[0]);
    *n = rows * t->ne[0];
    return v;
}

static long u_of(const lilac_gguf *g, const char *k) {
    const lilac_gguf_kv *kv = lilac_gguf_find_kv(g, k);
    return kv && kv->type == LILAC_GGUF_U32 ? (long)kv->u : -1;
}

/* Q4 export vs F32 export of the same directory: every tensor's values bit-identical. */
static void compare_q4_f32(const opened *q, const opened *f, int want_q4_type, int *n_q4) {
    CHECK(q->g.n_tensors == f->g.n_tensors, "%d vs %d tensors", q->g.n_tensors, f->g.n_tensors);
    *n_q4 = 0;
    for (int i = 0; i < q->g.n_tensors; i++) {
        const lilac_gguf_tensor_info *a = &q->g.t[i], *b = lilac_gguf_find_tensor(&f->g, a->name);
        if (!b) {
            CHECK(0, "%s missing from the F32 export", a->name);
            continue;
        }
        CHECK(b->type == LILAC_GGML_F32, "%s: F32 export has type %d", b->name, b->type);
        CHECK(a->ndim == b->ndim && memcmp(a->ne, b->ne, sizeof a->ne) == 0, "%s: shapes differ", a->name);
        if (a->type != LILAC_GGML_F32) {
            ++*n_q4;
            CHECK(a->type == want_q4_type, "%s: type %d, expected %d", a->name, a->type, want_q4_type);
        }
        int64_t na, nb;
        float *va = tensor_f32(a, &na), *vb = tensor_f32(b, &nb);
        CHECK(na == nb && memcmp(va, vb, (size_t)na * sizeof *va) == 0, "%s: dequantised values differ from the F32 export",
              a->name);
        free(va);
        free(vb);
    }
}

static void test_export_tiny(void) {
    char pq[128], pf[128];
    path_in(pq, sizeof pq, "tiny-q4.gguf");
    path_in(pf, sizeof pf, "tiny-f32.gguf");
    lilac_error e = {0};
    lilac_gguf_export_opts oq = {.f32 = 0}, of = {.f32 = 1};
    lilac_gguf_export_report rq, rf;
    lilac_status st3 = lilac_gguf_export("tests/fixtures/tiny", pq, &oq, &rq, &e);
    REQUIRE(st3 == LILAC_OK, "%s", e.msg);
    lilac_status st4 = lilac_gguf_export("tests/fixtures/tiny", pf, &of, &rf, &e);
    REQUIRE(st4 == LILAC_OK, "%s", e.msg);
    CHECK(rf.file_type == 0 && rf.n_f32 == rf.n_tensors && rf.n_tensors == 149, "F32: %d of %d", rf.n_f32, rf.n_tensors);
    /* the tiny fixture was quantised from real bf16 weights: its biases are not -8 s */
    CHECK(rq.file_type == 3 && rq.n_q4_1 == 88 && rq.n_q4_0 == 0 && rq.q4_1_inexact_groups == 0, "Q4: %d Q4_1, %d Q4_0, %lld inexact",
          rq.n_q4_1, rq.n_q4_0, rq.q4_1_inexact_groups);
    opened q, f;
    open_gguf(pq, &q);
    open_gguf(pf, &f);
    if (!q.ok || !f.ok) goto out;
    int nq = 0;
    compare_q4_f32(&q, &f, LILAC_GGML_Q4_1, &nq);
    CHECK(nq == 88, "%d Q4 tensors", nq);
    const lilac_gguf *g = &f.g;
    const lilac_gguf_kv *arch = lilac_gguf_find_kv(g, "general.architecture");
    CHECK(arch && arch->str && strcmp(arch->str, "qwen35moe") == 0, "architecture");
    CHECK(u_of(g, "qwen35moe.block_count") == 8 && u_of(g, "qwen35moe.embedding_length") == 128 &&
              u_of(g, "qwen35moe.attention.head_count") == 16 && u_of(g, "qwen35moe.attention.head_count_kv") == 2 &&
              u_of(g, "qwen35moe.attention.key_length") == 32 && u_of(g, "qwen35moe.rope.dimension_count") == 8 &&
              u_of(g, "qwen35moe.expert_count") == 16 && u_of(g, "qwen35moe.expert_used_count") == 8 &&
              u_of(g, "qwen35moe.expert_feed_forward_length") == 64 &&
              u_of(g, "qwen35moe.expert_shared_feed_forward_length") == 64 && u_of(g, "qwen35moe.ssm.conv_kernel") == 4 &&
              u_of(g, "qwen35moe.ssm.state_size") == 32 && u_of(g, "qwen35moe.ssm.group_count") == 4 &&
              u_of(g, "qwen35moe.ssm.time_step_rank") == 8 && u_of(g, "qwen35moe.ssm.inner_size") == 256 &&
              u_of(g, "qwen35moe.full_attention_interval") == 4 && u_of(g, "qwen35moe.vocab_size") == 512 &&
              u_of(g, "general.file_type") == 0,
          "hyper-parameters");
    CHECK(u_of(&q.g, "general.file_type") == 3 && u_of(&q.g, "general.quantization_version") == 2, "Q4 file type");
    const lilac_gguf_kv *rl = lilac_gguf_find_kv(g, "qwen35moe.attention.recurrent_layers");
    CHECK(rl && rl->arr_type == LILAC_GGUF_BOOL && rl->arr_n == 8 && rl->val[0] == 1 && rl->val[3] == 0 && rl->val[7] == 0,
          "recurrent layers");
    const lilac_gguf_kv *sec = lilac_gguf_find_kv(g, "qwen35moe.rope.dimension_sections");
    CHECK(sec && sec->arr_n == 4 && sec->val[0] == 2 && sec->val[4] == 1 && sec->val[8] == 1 && sec->val[12] == 0,
          "rope sections from config.json, padded to 4");
    const lilac_gguf_kv *tm = lilac_gguf_find_kv(g, "tokenizer.ggml.model");
    CHECK(tm && tm->str && strcmp(tm->str, "none") == 0, "no tokenizer");

    /* names and ggml shapes (PyTorch's reversed) */
    static const struct {
        const char *name;
        int ndim;
        int64_t ne[3];
    } want[] = {
        {"token_embd.weight", 2, {128, 512}},         {"output.weight", 2, {128, 512}},
        {"output_norm.weight", 1, {128}},             {"blk.0.attn_qkv.weight", 2, {128, 512}},
        {"blk.0.attn_gate.weight", 2, {128, 256}},    {"blk.0.ssm_conv1d.weight", 2, {4, 512}},
        {"blk.0.ssm_dt.bias", 1, {8}},                {"blk.0.ssm_a", 1, {8}},
        {"blk.0.ssm_beta.weight", 2, {128, 8}},       {"blk.0.ssm_alpha.weight", 2, {128, 8}},
        {"blk.0.ssm_norm.weight", 1, {32}},           {"blk.0.ssm_out.weight", 2, {256, 128}},
        {"blk.0.ffn_gate_inp.weight", 2, {128, 16}},  {"blk.0.ffn_gate_exps.weight", 3, {128, 64, 16}},
        {"blk.0.ffn_up_exps.weight", 3, {128, 64, 16}}, {"blk.0.ffn_down_exps.weight", 3, {64, 128, 16}},
        {"blk.0.ffn_gate_inp_shexp.weight", 1, {128}}, {"blk.0.ffn_gate_shexp.weight", 2, {128, 64}},
        {"blk.0.ffn_up_shexp.weight", 2, {128, 64}},  {"blk.0.ffn_down_shexp.weight", 2, {64, 128}},
        {"blk.0.attn_norm.weight", 1, {128}},         {"blk.0.post_attention_norm.weight", 1, {128}},
        {"blk.3.attn_q.weight", 2, {128, 1024}},      {"blk.3.attn_k.weight", 2, {128, 64}},
        {"blk.3.attn_v.weight", 2, {128, 64}},        {"blk.3.attn_output.weight", 2, {512, 128}},
        {"blk.3.attn_q_norm.weight", 1, {32}},        {"blk.3.attn_k_norm.weight", 1, {32}},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const lilac_gguf_tensor_info *t = lilac_gguf_find_tensor(g, want[i].name);
        CHECK(t && t->ndim == want[i].ndim && t->ne[0] == want[i].ne[0] && (t->ndim < 2 || t->ne[1] == want[i].ne[1]) &&
                  (t->ndim < 3 || t->ne[2] == want[i].ne[2]),
              "%s: %s", want[i].name, t ? "wrong shape" : "missing");
    }
    CHECK(!lilac_gguf_find_tensor(g, "blk.3.attn_qkv.weight") && !lilac_gguf_find_tensor(g, "blk.0.attn_q.weight"),
          "layer kinds follow layer_types");
    const lilac_gguf_tensor_info *gi = lilac_gguf_find_tensor(&q.g, "blk.0.ffn_gate_inp.weight"),
                                 *gs = lilac_gguf_find_tensor(&q.g, "blk.0.ffn_gate_inp_shexp.weight");
    CHECK(gi && gs && gi->type == LILAC_GGML_F32 && gs->type == LILAC_GGML_F32, "8-bit router and shared gate are F32");

    /* values against the model: the value-head reorder, -exp(A_log), norms as stored */
    lilac_model m;
    lilac_status st5 = lilac_model_load("tests/fixtures/tiny", &m, &e);
    REQUIRE(st5 == LILAC_OK, "%s", e.msg);
    const lilac_layer *L = &m.layers[0];
    const int Hk = 4, Hv = 8, dv = 32, rr = 2, kd = 2 * 4 * 32;
    int64_t n;
    const lilac_gguf_tensor_info *t;
    float row[512], want_row[512];
    /* attn_qkv: q and k rows as they are, V row (head p, i) = old (head (p % Hk) * r + p / Hk, i) */
    t = lilac_gguf_find_tensor(g, "blk.0.attn_qkv.weight");
    int bad = 0;
    for (int rw = 0; t && rw < 512; rw++) {
        int src = rw;
        if (rw >= kd) {
            const int p = (rw - kd) / dv, i = (rw - kd) % dv;
            src = kd + ((p % Hk) * rr + p / Hk) * dv + i;
        }
        lilac_gguf_row_f32(t, rw, row);
        lilac_matrix_row_f32(&L->in_qkv, 0, src, want_row);
        bad += memcmp(row, want_row, 128 * sizeof *row) != 0;
    }
    CHECK(t && bad == 0, "attn_qkv: %d rows not where the tiled order puts them", bad);
    /* grouped order: value head 1 sits under key head 0, tiled: at position Hk */
    t = lilac_gguf_find_tensor(g, "blk.0.attn_gate.weight");
    lilac_gguf_row_f32(t, 4 * dv, row);
    lilac_matrix_row_f32(&L->in_z, 0, 1 * dv, want_row);
    CHECK(memcmp(row, want_row, 128 * sizeof *row) == 0, "attn_gate: tiled head 4 is grouped head 1");
    t = lilac_gguf_find_tensor(g, "blk.0.ssm_alpha.weight");
    lilac_gguf_row_f32(t, 1, row);
    lilac_matrix_row_f32(&L->in_a, 0, 2, want_row);
    CHECK(memcmp(row, want_row, 128 * sizeof *row) == 0, "ssm_alpha: tiled head 1 is grouped head 2");
    t = lilac_gguf_find_tensor(g, "blk.0.ssm_a");
    float *a = tensor_f32(t, &n);
    bad = 0;
    for (int p = 0; p < Hv; p++) bad += a[p] != -expf(L->A_log[(p % Hk) * rr + p / Hk]) || !(a[p] < 0);
    CHECK(n == Hv && bad == 0, "ssm_a = -exp(A_log), reordered");
    free(a);
    t = lilac_gguf_find_tensor(g, "blk.0.ssm_dt.bias");
    a = tensor_f32(t, &n);
    CHECK(a[5] == L->dt_bias[(5 % Hk) * rr + 5 / Hk] && a[0] == L->dt_bias[0], "dt_bias reordered");
    free(a);
    t = lilac_gguf_find_tensor(g, "blk.0.ssm_conv1d.weight");
    a = tensor_f32(t, &n);
    bad = 0;
    for (int ch = 0; ch < 512; ch++) {
        int src = ch;
        if (ch >= kd) src = kd + (((ch - kd) / dv % Hk) * rr + (ch - kd) / dv / Hk) * dv + (ch - kd) % dv;
        for (int k = 0; k < 4; k++) bad += a[ch * 4 + k] != L->conv_w[src * 4 + k];
    }
    CHECK(bad == 0, "conv1d {K, C}: %d taps misplaced", bad);
    free(a);
    t = lilac_gguf_find_tensor(g, "blk.0.ssm_out.weight");
    lilac_gguf_row_f32(t, 7, row);
    lilac_matrix_row_f32(&L->out_proj, 0, 7, want_row);
    bad = 0;
    for (int p = 0; p < Hv; p++)
        for (int i = 0; i < dv; i++) bad += row[p * dv + i] != want_row[((p % Hk) * rr + p / Hk) * dv + i];
    CHECK(bad == 0, "ssm_out: input columns reordered (%d wrong)", bad);
    t = lilac_gguf_find_tensor(g, "blk.0.ssm_norm.weight");
    a = tensor_f32(t, &n);
    CHECK(memcmp(a, L->lin_norm, 32 * sizeof *a) == 0, "ssm_norm is the plain gated-norm weight");
    free(a);
    t = lilac_gguf_find_tensor(g, "blk.3.attn_q_norm.weight");
    a = tensor_f32(t, &n);
    CHECK(memcmp(a, m.layers[3].q_norm, 32 * sizeof *a) == 0 && a[0] > 0.5f, "q_norm holds (1 + w)");
    free(a);
    t = lilac_gguf_find_tensor(g, "output_norm.weight");
    a = tensor_f32(t, &n);
    CHECK(memcmp(a, m.final_norm, 128 * sizeof *a) == 0, "output_norm as the model holds it");
    free(a);
    lilac_model_free(&m);
out:
    close_gguf(&q);
    close_gguf(&f);
}

static void test_export_gguf_exact(void) {
    char dir[128], pq[128], pf[128];
    path_in(dir, sizeof dir, "exact");
    path_in(pq, sizeof pq, "exact-q4.gguf");
    path_in(pf, sizeof pf, "exact-f32.gguf");
    lilac_error e = {0};
    lilac_status st6 = lilac_synth_write_ex("tests/fixtures/tiny", 0, dir, 3, 1, NULL, NULL, &e);
    REQUIRE(st6 == LILAC_OK, "%s", e.msg);
    lilac_gguf_export_opts oq = {.f32 = 0}, of = {.f32 = 1};
    lilac_gguf_export_report rq, rf;
    lilac_status st7 = lilac_gguf_export(dir, pq, &oq, &rq, &e);
    REQUIRE(st7 == LILAC_OK, "%s", e.msg);
    lilac_status st8 = lilac_gguf_export(dir, pf, &of, &rf, &e);
    REQUIRE(st8 == LILAC_OK, "%s", e.msg);
    CHECK(rq.file_type == 2 && rq.n_q4_0 == 88 && rq.n_q4_1 == 0, "--gguf-exact: %d Q4_0, %d Q4_1", rq.n_q4_0, rq.n_q4_1);
    opened q, f;
    open_gguf(pq, &q);
    open_gguf(pf, &f);
    int nq = 0;
    if (q.ok && f.ok) compare_q4_f32(&q, &f, LILAC_GGML_Q4_0, &nq);
    CHECK(nq == 88, "%d Q4_0 tensors", nq);
    /* 4.5 bits per weight: a group of 64 is 2 x 18 bytes */
    const lilac_gguf_tensor_info *t = q.ok ? lilac_gguf_find_tensor(&q.g, "blk.0.ffn_gate_exps.weight") : NULL;
    CHECK(t && t->nbytes == (size_t)16 * 64 * (128 / 32) * 18, "Q4_0 size");
    close_gguf(&q);
    close_gguf(&f);
}

static void test_export_errors(void) {
    char out[128];
    path_in(out, sizeof out, "x.gguf");
    lilac_error e = {0};
    lilac_gguf_export_opts o = {0};
    lilac_gguf_export_report r;
    CHECK(lilac_gguf_export("tests/fixtures/no-such-dir", out, &o, &r, &e) != LILAC_OK && e.msg[0], "missing dir: %s", e.msg);
    CHECK(lilac_gguf_export("tests/fixtures/tiny", "/nonexistent-dir/x.gguf", &o, &r, &e) != LILAC_OK &&
              strstr(e.msg, "cannot create"),
          "unwritable output: %s", e.msg);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lilac-gguf-XXXXXX");
    if (!mkdtemp(tmpdir)) return fprintf(stderr, "mkdtemp failed\n"), 1;
    RUN(test_roundtrip);
    RUN(test_writer_errors);
    RUN(test_f16);
    RUN(test_export_tiny);
    RUN(test_export_gguf_exact);
    RUN(test_export_errors);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", tmpdir);
    return check_done("gguf");
}
