/* test_loader.c — config.json, safetensors and weight-layout loading:
 * both fixture layouts load into the same model, the real 35B inventory
 * validates, sharded checkpoints load, and every kind of bad input gives a
 * clear error (never a crash). */
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>

#include "check.h"
#include "model/model.h"
#include "st_writer.h"
#include "util/file.h"

#define TINY "tests/fixtures/tiny"
#define TINY_HF "tests/fixtures/tiny/hf"

static char tmpdir[256];

static void copy_file(const char *src, const char *dst) {
    char *data;
    size_t n;
    lilac_error e;
    if (lilac_read_file(src, 1u << 30, &data, &n, &e)) {
        fprintf(stderr, "copy %s: %s\n", src, e.msg);
        return;
    }
    FILE *f = fopen(dst, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
    free(data);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* A fresh directory holding the tiny MLX config.json; returns its path. */
static const char *fresh_dir(const char *tag) {
    static char dir[512];
    static int counter;
    snprintf(dir, sizeof dir, "%s/%s-%d", tmpdir, tag, counter++);
    mkdir(dir, 0755);
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", dir);
    copy_file(TINY "/config.json", p);
    return dir;
}

/* Loads dir and expects failure with a message containing `needle`. */
static void expect_load_error(const char *dir, const char *needle, const char *what) {
    lilac_model m;
    lilac_error e = {0};
    lilac_status st = lilac_model_load(dir, &m, &e);
    CHECK(st != LILAC_OK, "%s: loaded, expected an error mentioning '%s'", what, needle);
    if (st == LILAC_OK) {
        lilac_model_free(&m);
        return;
    }
    CHECK(strstr(e.msg, needle) != NULL, "%s: error '%s' does not mention '%s'", what, e.msg, needle);
    CHECK(strchr(e.msg, '\n') == NULL, "%s: error is not one line: %s", what, e.msg);
}

static void expect_load_ok(const char *dir, const char *what) {
    lilac_model m;
    lilac_error e = {0};
    lilac_status st = lilac_model_load(dir, &m, &e);
    CHECK(st == LILAC_OK, "%s: %s", what, e.msg);
    if (st == LILAC_OK) lilac_model_free(&m);
}

/* Writes dir/model.safetensors from the tiny MLX file after `mutate`. */
static st_file *tiny_entries(void) {
    st_file *f = calloc(1, sizeof *f);
    if (!st_read(f, TINY "/model.safetensors")) {
        free(f);
        return NULL;
    }
    return f;
}

static void write_model(st_file *f, const char *dir) {
    char p[600];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    st_write(f, p);
}

/* ---------------------------------------------------------------------- */

static void test_config_tiny(void) {
    lilac_config c;
    lilac_error e = {0};
    CHECK(lilac_config_load(TINY, &c, &e) == LILAC_OK, "%s", e.msg);
    CHECK(c.hidden == 128 && c.n_layers == 8 && c.vocab_size == 512, "dims %d %d %d", c.hidden, c.n_layers, c.vocab_size);
    CHECK(c.is_attn[3] && c.is_attn[7] && !c.is_attn[0] && c.n_attn_layers == 2, "layer pattern");
    CHECK(c.head_dim == 32 && c.rotary_dim == 8 && c.rope_theta == 1e7, "rope %d %g", c.rotary_dim, c.rope_theta);
    CHECK(c.conv_dim == 2 * 4 * 32 + 8 * 32, "conv_dim %d", c.conv_dim);
    CHECK(c.quantized && c.q_bits == 4 && c.q_group_size == 64, "quant");
    int bits = 0, group = 0;
    CHECK(lilac_config_quant_for(&c, "language_model.model.layers.5.mlp.gate", &bits, &group) && bits == 8, "router 8-bit");
    CHECK(lilac_config_quant_for(&c, "language_model.model.layers.5.mlp.switch_mlp.up_proj", &bits, &group) && bits == 4,
          "experts 4-bit");
    /* eos: top-level 481 and text_config 479 */
    int has479 = 0, has481 = 0;
    for (int i = 0; i < c.n_eos; i++) has479 |= c.eos[i] == 479, has481 |= c.eos[i] == 481;
    CHECK(has479 && has481, "eos ids");
    lilac_config_free(&c);
    CHECK(lilac_config_load(TINY_HF, &c, &e) == LILAC_OK && !c.quantized, "HF config: %s", e.msg);
    lilac_config_free(&c);
}

/* A flat config (decoder keys at the top level, as text-only saves write
 * it) loads to the same values as the nested one. */
static void test_config_flat(void) {
    const char *flat =
        "{\"model_type\": \"qwen3_5_moe_text\", \"vocab_size\": 512, \"hidden_size\": 128, \"num_hidden_layers\": 8,"
        " \"full_attention_interval\": 4, \"num_attention_heads\": 16, \"num_key_value_heads\": 2, \"head_dim\": 32,"
        " \"linear_conv_kernel_dim\": 4, \"linear_key_head_dim\": 32, \"linear_value_head_dim\": 32,"
        " \"linear_num_key_heads\": 4, \"linear_num_value_heads\": 8, \"moe_intermediate_size\": 64,"
        " \"shared_expert_intermediate_size\": 64, \"num_experts\": 16, \"num_experts_per_tok\": 8,"
        " \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000000.0, \"partial_rotary_factor\": 0.25, \"eos_token_id\": 479}";
    lilac_config a, b;
    lilac_error e = {0};
    CHECK(lilac_config_parse(flat, strlen(flat), "flat.json", &a, &e) == LILAC_OK, "%s", e.msg);
    CHECK(lilac_config_load(TINY, &b, &e) == LILAC_OK, "%s", e.msg);
    CHECK(a.hidden == b.hidden && a.n_layers == b.n_layers && a.rotary_dim == b.rotary_dim && a.rope_theta == b.rope_theta &&
              a.conv_dim == b.conv_dim && a.n_attn_layers == b.n_attn_layers && !memcmp(a.is_attn, b.is_attn, sizeof a.is_attn),
          "flat and nested configs differ");
    CHECK(!a.quantized && a.n_eos == 1 && a.eos[0] == 479, "flat: no quantization, eos 479");
    lilac_config_free(&a);
    lilac_config_free(&b);
}

static void test_config_real(void) {
    lilac_config c;
    lilac_error e = {0};
    CHECK(lilac_config_load("tests/fixtures/qwen36-config", &c, &e) == LILAC_OK, "%s", e.msg);
    CHECK(c.vocab_size == 248320 && c.hidden == 2048 && c.n_layers == 40, "dims");
    CHECK(c.n_attn_layers == 10 && c.n_lin_layers == 30, "layer counts %d %d", c.n_attn_layers, c.n_lin_layers);
    for (int i = 0; i < 40; i++) CHECK(c.is_attn[i] == ((i + 1) % 4 == 0), "layer %d type", i);
    CHECK(c.n_heads == 16 && c.n_kv_heads == 2 && c.head_dim == 256 && c.rotary_dim == 64, "attention");
    CHECK(c.lin_k_heads == 16 && c.lin_v_heads == 32 && c.lin_k_dim == 128 && c.conv_dim == 8192, "deltanet");
    CHECK(c.n_experts == 256 && c.n_experts_per_tok == 8 && c.moe_inter == 512 && c.shared_inter == 512, "moe");
    CHECK(c.max_pos == 262144 && c.rope_theta == 1e7, "positions");
    lilac_config_free(&c);
}

/* Each bad config.json gets its own case. */
static void test_config_errors(void) {
    static const struct {
        const char *from, *to, *needle;
    } cases[] = {
        {"\"hidden_size\": 128", "\"hidden_size\": 0", "hidden_size"},
        {"\"hidden_size\": 128", "\"hidden_size\": \"128\"", "hidden_size"},
        {"\"head_dim\": 32,", "", "head_dim: missing"},
        {"\"num_experts_per_tok\": 8", "\"num_experts_per_tok\": 17", "num_experts_per_tok"},
        {"\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3", "num_key_value_heads"},
        {"\"rms_norm_eps\": 1e-06", "\"rms_norm_eps\": -1", "rms_norm_eps"},
        {"\"rope_type\": \"default\"", "\"rope_type\": \"yarn\"", "rope_type"},
        {"\"partial_rotary_factor\": 0.25", "\"partial_rotary_factor\": 0.3", "rotary"},
        {"\"linear_attention\",\n      \"linear_attention\",\n      \"full_attention\",\n      \"linear_attention\"",
         "\"linear_attention\",\n      \"full_attention\",\n      \"linear_attention\"", "layer_types"},
        {"\"model_type\": \"qwen3_5_moe_text\"", "\"model_type\": \"llama\"", "model_type"},
        {"\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", "hidden_act"},
        {"\"bits\": 4,\n    \"mode\"", "\"bits\": 3,\n    \"mode\"", "3-bit quantization is not supported"},
        {"\"mode\": \"affine\"", "\"mode\": \"mxfp4\"", "affine"},
        {"\"group_size\": 64,\n    \"bits\": 4", "\"group_size\": 48,\n    \"bits\": 4", "group_size 48"},
        {"\"eos_token_id\": 481", "\"eos_token_id\": 99999", "eos_token_id"},
        {"\"vocab_size\": 512", "\"vocab_size\": 512,", "invalid JSON"},
    };
    char *text;
    size_t len;
    lilac_error e = {0};
    if (lilac_read_file(TINY "/config.json", 1 << 20, &text, &len, &e)) {
        CHECK(0, "%s", e.msg);
        return;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *at = strstr(text, cases[i].from);
        CHECK(at != NULL, "case %zu: fixture text '%s' not found", i, cases[i].from);
        if (!at) continue;
        lilac_buf b = LILAC_BUF_INIT;
        lilac_buf_append(&b, text, (size_t)(at - text));
        lilac_buf_puts(&b, cases[i].to);
        lilac_buf_puts(&b, at + strlen(cases[i].from));
        lilac_config c;
        lilac_status st = lilac_config_parse(b.data, b.len, "config.json", &c, &e);
        CHECK(st != LILAC_OK, "case %zu (%s) was accepted", i, cases[i].needle);
        if (st == LILAC_OK) lilac_config_free(&c);
        else CHECK(strstr(e.msg, cases[i].needle) != NULL, "case %zu: '%s' lacks '%s'", i, e.msg, cases[i].needle);
        lilac_buf_free(&b);
    }
    free(text);
    lilac_config c;
    CHECK(lilac_config_parse("[]", 2, "x.json", &c, &e) != LILAC_OK && strstr(e.msg, "object"), "%s", e.msg);
    CHECK(lilac_config_parse("", 0, "x.json", &c, &e) != LILAC_OK && strstr(e.msg, "invalid JSON"), "%s", e.msg);
}

static void test_missing_files(void) {
    expect_load_error("/nonexistent/lilac/model", "cannot open", "missing directory");
    const char *dir = fresh_dir("nost");
    expect_load_error(dir, "no model.safetensors", "no safetensors");
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", dir);
    remove(p);
    copy_file(TINY "/model.safetensors", (snprintf(p, sizeof p, "%s/model.safetensors", dir), p));
    expect_load_error(dir, "config.json", "no config.json");
}

static void test_layouts_agree(void) {
    lilac_model a, b;
    lilac_error e = {0};
    CHECK(lilac_model_load(TINY, &a, &e) == LILAC_OK, "MLX: %s", e.msg);
    CHECK(lilac_model_load(TINY_HF, &b, &e) == LILAC_OK, "HF: %s", e.msg);
    CHECK(a.layout == LILAC_LAYOUT_MLX && b.layout == LILAC_LAYOUT_HF, "layouts detected");
    const lilac_config *c = &a.cfg;
    float *ra = malloc(4096 * sizeof(float)), *rb = malloc(4096 * sizeof(float));
    int mism = 0, checked = 0;
#define SAME_MAT(field)                                                                                   \
    for (int ee = 0; ee < la->field.n_mat; ee++)                                                          \
        for (int r = 0; r < la->field.rows; r++) {                                                        \
            lilac_matrix_row_f32(&la->field, ee, r, ra);                                                  \
            lilac_matrix_row_f32(&lb->field, ee, r, rb);                                                  \
            checked++;                                                                                    \
            if (memcmp(ra, rb, (size_t)la->field.cols * sizeof(float))) {                                 \
                if (!mism++) CHECK(0, "layer %d " #field " matrix %d row %d differs between layouts", l, ee, r); \
            }                                                                                             \
        }
#define SAME_VEC(field, n) CHECK(memcmp(la->field, lb->field, (size_t)(n) * sizeof(float)) == 0, "layer %d " #field " differs", l)
    for (int l = 0; l < c->n_layers; l++) {
        const lilac_layer *la = &a.layers[l], *lb = &b.layers[l];
        SAME_VEC(input_norm, c->hidden);
        SAME_VEC(post_norm, c->hidden);
        if (la->is_attn) {
            SAME_MAT(q_proj) SAME_MAT(k_proj) SAME_MAT(v_proj) SAME_MAT(o_proj)
            SAME_VEC(q_norm, c->head_dim);
            SAME_VEC(k_norm, c->head_dim);
        } else {
            SAME_MAT(in_qkv) SAME_MAT(in_z) SAME_MAT(in_a) SAME_MAT(in_b) SAME_MAT(out_proj)
            SAME_VEC(conv_w, c->conv_dim * c->conv_kernel);
            SAME_VEC(A_log, c->lin_v_heads);
            SAME_VEC(dt_bias, c->lin_v_heads);
            SAME_VEC(lin_norm, c->lin_v_dim);
        }
        SAME_MAT(router) SAME_MAT(exp_gate) SAME_MAT(exp_up) SAME_MAT(exp_down)
        SAME_MAT(sh_gate) SAME_MAT(sh_up) SAME_MAT(sh_down) SAME_MAT(sh_gate_proj)
    }
    {
        const lilac_model *la = &a, *lb = &b;
        int l = -1;
        SAME_MAT(embed) SAME_MAT(lm_head)
        CHECK(memcmp(a.final_norm, b.final_norm, (size_t)c->hidden * sizeof(float)) == 0, "final norm differs");
    }
#undef SAME_MAT
#undef SAME_VEC
    CHECK(checked > 1000 && mism == 0, "%d of %d rows differ", mism, checked);
    CHECK(a.layers[0].router.type == LILAC_MAT_Q8 && a.layers[0].exp_up.type == LILAC_MAT_Q4, "MLX types");
    CHECK(b.layers[0].router.type == LILAC_MAT_BF16, "HF types");
    free(ra);
    free(rb);
    lilac_model_free(&a);
    lilac_model_free(&b);
}

/* Every bad safetensors file gets its own case, built from the tiny fixture. */
static void test_safetensors_errors(void) {
    st_file *f = tiny_entries();
    CHECK(f != NULL, "read fixture");
    if (!f) return;
    const char *dir;
    char p[600];
    const char *norm = "language_model.model.layers.0.input_layernorm.weight";

    dir = fresh_dir("trunc");
    write_model(f, dir);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    { struct stat sb; stat(p, &sb); CHECK(truncate(p, sb.st_size / 2) == 0, "truncate"); }
    expect_load_error(dir, "past the end of the data", "truncated file");

    dir = fresh_dir("short");
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    write_text(p, "abc");
    expect_load_error(dir, "too short", "3-byte file");

    dir = fresh_dir("hlen");
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    st_write_ex(f, p, 1ll << 40, 0);
    expect_load_error(dir, "header length", "header length beyond the file");

    dir = fresh_dir("hlen2");
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    st_write_ex(f, p, 12, 0);
    expect_load_error(dir, "not valid JSON", "header cut mid-JSON");

    dir = fresh_dir("badjson");
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    {
        FILE *fp = fopen(p, "wb");
        const char h[] = "{\"a\": [1, 2,, }  ";
        unsigned char le[8] = {(unsigned char)(sizeof h - 1)};
        fwrite(le, 1, 8, fp);
        fwrite(h, 1, sizeof h - 1, fp);
        fclose(fp);
    }
    expect_load_error(dir, "not valid JSON", "bad header JSON");

    dir = fresh_dir("notobj");
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    {
        FILE *fp = fopen(p, "wb");
        const char h[] = "[1, 2, 3]       ";
        unsigned char le[8] = {(unsigned char)(sizeof h - 1)};
        fwrite(le, 1, 8, fp);
        fwrite(h, 1, sizeof h - 1, fp);
        fclose(fp);
    }
    expect_load_error(dir, "not a JSON object", "header is a list");

    st_entry *x = st_get(f, norm);
    dir = fresh_dir("offsets");
    x->off_begin = 0, x->off_end = (long long)1 << 40;
    write_model(f, dir);
    expect_load_error(dir, "past the end", "offsets outside the data");

    dir = fresh_dir("sizemismatch");
    x->off_begin = 0, x->off_end = 10;
    write_model(f, dir);
    expect_load_error(dir, "bytes of data", "offsets not matching the shape");

    dir = fresh_dir("overlap");
    x->off_begin = 0, x->off_end = (long long)x->nbytes; /* lands on the first tensor's bytes */
    write_model(f, dir);
    expect_load_error(dir, "overlap", "overlapping tensors");
    x->off_begin = -1;

    dir = fresh_dir("dtype");
    snprintf(x->dtype, sizeof x->dtype, "F16");
    write_model(f, dir);
    expect_load_error(dir, "dtype F16", "wrong dtype");
    snprintf(x->dtype, sizeof x->dtype, "Q7");
    dir = fresh_dir("dtype2");
    write_model(f, dir);
    expect_load_error(dir, "unknown dtype", "unknown dtype");
    snprintf(x->dtype, sizeof x->dtype, "BF16");

    dir = fresh_dir("shape");
    x->ndim = 2, x->shape[0] = 64, x->shape[1] = 2;
    write_model(f, dir);
    expect_load_error(dir, "shape [64, 2], expected [128]", "wrong shape");
    x->ndim = 1, x->shape[0] = 128;

    dir = fresh_dir("negshape");
    x->shape[0] = -128;
    write_model(f, dir);
    expect_load_error(dir, "non-negative", "negative shape");
    x->shape[0] = 128;

    dir = fresh_dir("missing");
    x->drop = 1;
    write_model(f, dir);
    expect_load_error(dir, "missing tensor language_model.model.layers.0.input_layernorm.weight", "missing tensor");
    x->drop = 0;

    /* a quantised tensor whose packing disagrees with the config's bits */
    st_entry *r = st_get(f, "language_model.model.layers.2.mlp.gate.weight");
    dir = fresh_dir("bits");
    r->shape[1] = 16, r->nbytes /= 2;
    write_model(f, dir);
    expect_load_error(dir, "not 8-bit codes", "packing vs config bits");
    r->shape[1] = 32, r->nbytes *= 2;

    st_entry *sc = st_get(f, "language_model.model.layers.2.mlp.gate.scales");
    dir = fresh_dir("noscales");
    sc->drop = 1;
    write_model(f, dir);
    expect_load_error(dir, "needs both .scales and .biases", "scales without biases");
    sc->drop = 0;

    static const float extra[4] = {1, 2, 3, 4};
    int64_t four[1] = {4};
    dir = fresh_dir("unexpected");
    st_add(f, "language_model.model.layers.0.mlp.mystery.weight", "F32", 1, four, extra, sizeof extra);
    write_model(f, dir);
    expect_load_error(dir, "unexpected tensor language_model.model.layers.0.mlp.mystery.weight", "unused tensor");
    f->n--;

    dir = fresh_dir("vision");
    st_add(f, "vision_tower.blocks.0.norm1.weight", "F32", 1, four, extra, sizeof extra);
    write_model(f, dir);
    expect_load_ok(dir, "vision_tower tensors are skipped");
    f->n--;

    /* A_log stored as BF16 by some converters */
    dir = fresh_dir("alog");
    {
        st_entry *a = st_get(f, "language_model.model.layers.0.linear_attn.A_log");
        uint16_t bf[64];
        const float *src = a->data;
        int n = (int)a->shape[0];
        for (int i = 0; i < n && i < 64; i++) {
            uint32_t u;
            memcpy(&u, &src[i], 4);
            bf[i] = (uint16_t)(u >> 16);
        }
        const void *old = a->data;
        size_t oldn = a->nbytes;
        a->data = bf, a->nbytes = (size_t)n * 2;
        snprintf(a->dtype, sizeof a->dtype, "BF16");
        write_model(f, dir);
        expect_load_ok(dir, "BF16 A_log");
        a->data = old, a->nbytes = oldn;
        snprintf(a->dtype, sizeof a->dtype, "F32");
    }
    st_release(f);
    free(f);
}

/* The tiny model split over two shards with an index loads like the single file. */
static void test_sharded(void) {
    st_file *f = tiny_entries(), *g = tiny_entries();
    if (!f || !g) {
        CHECK(0, "fixture");
        return;
    }
    const char *dir = fresh_dir("sharded");
    char p[600];
    lilac_buf idx = LILAC_BUF_INIT;
    lilac_buf_puts(&idx, "{\"metadata\": {\"total_size\": 1}, \"weight_map\": {");
    for (int i = 0; i < f->n; i++) {
        int second = i % 2;
        f->e[i].drop = second;
        g->e[i].drop = !second;
        lilac_buf_printf(&idx, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"", i ? ", " : "", f->e[i].name, second + 1);
    }
    lilac_buf_puts(&idx, "}}");
    snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", dir);
    st_write(f, p);
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
    st_write(g, p);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    write_text(p, idx.data);
    lilac_model m;
    lilac_error e = {0};
    CHECK(lilac_model_load(dir, &m, &e) == LILAC_OK, "sharded: %s", e.msg);
    if (!e.msg[0]) {
        CHECK(m.tensors.nfiles == 2, "two shards mapped, got %d", m.tensors.nfiles);
        lilac_model_free(&m);
    }
    /* an index naming a shard that does not exist */
    write_text(p, "{\"weight_map\": {\"language_model.model.norm.weight\": \"model-00009-of-00009.safetensors\"}}");
    expect_load_error(dir, "model-00009-of-00009.safetensors: cannot open", "missing shard");
    /* an index whose file does not hold the tensor */
    {
        char idx1[512];
        snprintf(idx1, sizeof idx1, "{\"weight_map\": {\"%s\": \"model-00001-of-00002.safetensors\"}}", f->e[1].name);
        write_text(p, idx1); /* e[1] went to the second shard */
    }
    expect_load_error(dir, "does not hold it", "index pointing at the wrong shard");
    write_text(p, "{\"weight_map\": {\"x\": \"../etc/passwd\"}}");
    expect_load_error(dir, "file name in the model directory", "index escaping the directory");
    write_text(p, "{\"weight_map\": 3}");
    expect_load_error(dir, "weight_map", "malformed index");
    lilac_buf_free(&idx);
    st_release(f);
    st_release(g);
    free(f);
    free(g);
}

/* The full 35B MLX inventory (spec §11 shapes), as a sparse file: the real
 * config and every real tensor shape validate without 19 GB of disk. */
static void add_q(st_file *f, const char *name, int stacked, int64_t E, int64_t rows, int64_t cols, int bits) {
    static const char zero[1] = {0};
    char n[256];
    int64_t s[3];
    int nd = 0;
    if (stacked) s[nd++] = E;
    s[nd] = rows, s[nd + 1] = cols * bits / 32;
    size_t cnt = (size_t)(stacked ? E : 1) * (size_t)rows;
    snprintf(n, sizeof n, "%s.weight", name);
    st_add(f, n, "U32", nd + 2, s, zero, cnt * (size_t)(cols * bits / 32) * 4);
    s[nd + 1] = cols / 64;
    snprintf(n, sizeof n, "%s.scales", name);
    st_add(f, n, "BF16", nd + 2, s, zero, cnt * (size_t)(cols / 64) * 2);
    snprintf(n, sizeof n, "%s.biases", name);
    st_add(f, n, "BF16", nd + 2, s, zero, cnt * (size_t)(cols / 64) * 2);
}

static void add_v(st_file *f, const char *name, const char *dt, int nd, int64_t a, int64_t b, int64_t c) {
    static const char zero[1] = {0};
    int64_t s[3] = {a, b, c};
    size_t n = (size_t)a * (size_t)(nd > 1 ? b : 1) * (size_t)(nd > 2 ? c : 1) * (strcmp(dt, "F32") ? 2 : 4);
    st_add(f, name, dt, nd, s, zero, n);
}

static void test_real_shapes(void) {
    st_file *f = calloc(1, sizeof *f);
    char n[256];
    const char *P = "language_model.model.";
    add_q(f, "language_model.model.embed_tokens", 0, 1, 248320, 2048, 4);
    add_q(f, "language_model.lm_head", 0, 1, 248320, 2048, 4);
    add_v(f, "language_model.model.norm.weight", "BF16", 1, 2048, 0, 0);
    for (int i = 0; i < 40; i++) {
#define L(s) (snprintf(n, sizeof n, "%slayers.%d.%s", P, i, s), n)
        add_v(f, L("input_layernorm.weight"), "BF16", 1, 2048, 0, 0);
        add_v(f, L("post_attention_layernorm.weight"), "BF16", 1, 2048, 0, 0);
        if ((i + 1) % 4 == 0) {
            add_q(f, L("self_attn.q_proj"), 0, 1, 8192, 2048, 4);
            add_q(f, L("self_attn.k_proj"), 0, 1, 512, 2048, 4);
            add_q(f, L("self_attn.v_proj"), 0, 1, 512, 2048, 4);
            add_q(f, L("self_attn.o_proj"), 0, 1, 2048, 4096, 4);
            add_v(f, L("self_attn.q_norm.weight"), "BF16", 1, 256, 0, 0);
            add_v(f, L("self_attn.k_norm.weight"), "BF16", 1, 256, 0, 0);
        } else {
            add_q(f, L("linear_attn.in_proj_qkv"), 0, 1, 8192, 2048, 4);
            add_q(f, L("linear_attn.in_proj_z"), 0, 1, 4096, 2048, 4);
            add_q(f, L("linear_attn.in_proj_a"), 0, 1, 32, 2048, 4);
            add_q(f, L("linear_attn.in_proj_b"), 0, 1, 32, 2048, 4);
            add_q(f, L("linear_attn.out_proj"), 0, 1, 2048, 4096, 4);
            add_v(f, L("linear_attn.conv1d.weight"), "BF16", 3, 8192, 4, 1);
            add_v(f, L("linear_attn.A_log"), "F32", 1, 32, 0, 0);
            add_v(f, L("linear_attn.dt_bias"), "BF16", 1, 32, 0, 0);
            add_v(f, L("linear_attn.norm.weight"), "BF16", 1, 128, 0, 0);
        }
        add_q(f, L("mlp.gate"), 0, 1, 256, 2048, 8);
        add_q(f, L("mlp.shared_expert_gate"), 0, 1, 1, 2048, 8);
        add_q(f, L("mlp.shared_expert.gate_proj"), 0, 1, 512, 2048, 4);
        add_q(f, L("mlp.shared_expert.up_proj"), 0, 1, 512, 2048, 4);
        add_q(f, L("mlp.shared_expert.down_proj"), 0, 1, 2048, 512, 4);
        add_q(f, L("mlp.switch_mlp.gate_proj"), 1, 256, 512, 2048, 4);
        add_q(f, L("mlp.switch_mlp.up_proj"), 1, 256, 512, 2048, 4);
        add_q(f, L("mlp.switch_mlp.down_proj"), 1, 256, 2048, 512, 4);
#undef L
    }
    add_v(f, "vision_tower.blocks.0.attn.qkv.weight", "BF16", 2, 3456, 1152, 0);
    const char *dir = fresh_dir("real");
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", dir);
    copy_file("tests/fixtures/qwen36-config/config.json", p);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK(st_write_ex(f, p, -1, 1), "sparse write");
    lilac_model m;
    lilac_error e = {0};
    lilac_status st = lilac_model_load(dir, &m, &e);
    CHECK(st == LILAC_OK, "real inventory: %s", e.msg);
    if (st == LILAC_OK) {
        /* 4.5 bits per weight: the text decoder is about 19.4 GB */
        CHECK(m.weight_bytes > 19000000000ull && m.weight_bytes < 20000000000ull, "weight bytes %zu", m.weight_bytes);
        CHECK(m.layers[3].is_attn && m.layers[0].exp_gate.n_mat == 256 && m.layers[0].router.type == LILAC_MAT_Q8, "views");
        lilac_model_free(&m);
    }
    /* one real tensor with a wrong shape is named */
    st_entry *x = st_get(f, "language_model.model.layers.39.mlp.switch_mlp.down_proj.scales");
    x->shape[2] = 16, x->nbytes *= 2;
    CHECK(st_write_ex(f, p, -1, 1), "sparse write");
    expect_load_error(dir, "layers.39.mlp.switch_mlp.down_proj.scales has shape [256, 2048, 16], expected [256, 2048, 8]",
                      "real shape mismatch");
    remove(p);
    free(f);
}

/* Loading must not modify the files (they are mapped private and read-only). */
static void test_files_unmodified(void) {
    char *before, *after;
    size_t n1, n2;
    lilac_error e;
    if (lilac_read_file(TINY "/model.safetensors", 1u << 30, &before, &n1, &e)) {
        CHECK(0, "%s", e.msg);
        return;
    }
    expect_load_ok(TINY, "tiny MLX");
    if (lilac_read_file(TINY "/model.safetensors", 1u << 30, &after, &n2, &e)) {
        CHECK(0, "%s", e.msg);
        free(before);
        return;
    }
    CHECK(n1 == n2 && memcmp(before, after, n1) == 0, "model file changed by loading");
    free(before);
    free(after);
}

static void rm_rf(const char *path) {
    DIR *d = opendir(path);
    if (!d) {
        remove(path);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", path, de->d_name);
        rm_rf(p);
    }
    closedir(d);
    rmdir(path);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lilac-loader-XXXXXX");
    if (!mkdtemp(tmpdir)) return fprintf(stderr, "mkdtemp failed\n"), 1;
    RUN(test_config_tiny);
    RUN(test_config_flat);
    RUN(test_config_real);
    RUN(test_config_errors);
    RUN(test_missing_files);
    RUN(test_layouts_agree);
    RUN(test_safetensors_errors);
    RUN(test_sharded);
    RUN(test_real_shapes);
    RUN(test_files_unmodified);
    rm_rf(tmpdir);
    return check_done("loader");
}
