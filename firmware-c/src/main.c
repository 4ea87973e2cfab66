/*
 * Kiln v2 from C on a Cortex-M3 (LM3S6965 under QEMU), through kiln.h and
 * libkiln.a only: validate the bundled example model in flash, look its
 * tensors up by name, view the f32 weights in place and predict the 32
 * stored samples (32/32), dequantize the MXFP4 first layer and predict again
 * (31/32), reject corrupted RAM copies with the expected code, offset and
 * rule, stream the model through the incremental validator in 256-byte
 * packets, and verify and read it through a read callback (as from SPI
 * flash). Output by semihosting; the exit status is 0 only when every check
 * matched its expectation. No heap: every buffer is static or on the stack.
 */
#include <stdint.h>
#include <string.h>

#include "kiln.h"
#include "semihost.h"

extern const uint8_t kiln_model[];
extern const uint8_t kiln_model_end[];

/* What spec/examples/README.md records for the 32 stored samples. */
#define EXPECT_F32_CORRECT 32
#define EXPECT_MXFP4_CORRECT 31
#define EXPECT_AGREE 31

#define MAX_IN 64
#define MAX_HIDDEN 64
#define MAX_CLASSES 16
#define MAX_SAMPLES 64
#define MODEL_MAX (24 * 1024)

/* RAM copies for the corruption tests (+64: room for a trailing byte). */
static uint8_t ram[MODEL_MAX + 64] __attribute__((aligned(64)));
/* fc1 of the MXFP4 tensor, dequantized. */
static float fc1_q[MAX_HIDDEN * MAX_IN];
/* The incremental validator's directory prefix and the ranged reader's buffers. */
static uint8_t prefix[4096];
static uint8_t chunk[256];
static uint32_t scratch[64];

static unsigned failed;

static void check(int ok, const char *what) {
    if (!ok) {
        failed++;
        sh_puts("  CHECK FAILED: ");
        sh_puts(what);
        sh_puts("\n");
    }
}

static void put_error(const kiln_error *e) {
    sh_puts(kiln_code_name(e->code));
    sh_puts(" at byte ");
    sh_putu(e->offset);
    sh_puts(" (");
    sh_puts(e->rule);
    sh_puts("): ");
    sh_puts(e->description);
}

/* ------------------------------------------------------------------ the model */

typedef struct {
    const float *w1, *b1, *w2, *b2, *x;
    const uint8_t *labels;
    size_t n_in, n_hidden, n_out, n;
} net;

static int tensor(const kiln_dir *dir, const char *name, kiln_tensor *t) {
    size_t index;
    if (kiln_find(dir, name, &index) != KILN_OK || kiln_tensor_at(dir, index, t) != KILN_OK) {
        sh_puts("  tensor missing: ");
        sh_puts(name);
        sh_puts("\n");
        return 0;
    }
    return 1;
}

/* An f32 tensor viewed in place (the model is 64-byte aligned in flash). */
static const float *f32_in_place(const kiln_dir *dir, const kiln_tensor *t) {
    size_t n = 0;
    const float *p = kiln_tensor_view_f32(dir, t->index, &n);
    check(p != NULL && n == t->element_count, "an f32 tensor is viewed in place");
    return p;
}

static int load(const kiln_dir *dir, net *m) {
    kiln_tensor w1, b1, w2, b2, x, y;
    if (!tensor(dir, "fc1.weight", &w1) || !tensor(dir, "fc1.bias", &b1) || !tensor(dir, "fc2.weight", &w2) ||
        !tensor(dir, "fc2.bias", &b2) || !tensor(dir, "samples.x", &x) || !tensor(dir, "samples.y", &y)) {
        return 0;
    }
    if (w1.rank != 2 || w2.rank != 2 || x.rank != 2 || y.rank != 1 || y.dtype != KILN_DTYPE_U8) {
        sh_puts("  unexpected ranks or dtypes\n");
        return 0;
    }
    m->n_hidden = (size_t)w1.shape[0];
    m->n_in = (size_t)w1.shape[1];
    m->n_out = (size_t)w2.shape[0];
    m->n = (size_t)x.shape[0];
    if (w2.shape[1] != m->n_hidden || x.shape[1] != m->n_in || b1.shape[0] != m->n_hidden ||
        b2.shape[0] != m->n_out || y.shape[0] != m->n || m->n_in > MAX_IN || m->n_hidden > MAX_HIDDEN ||
        m->n_out > MAX_CLASSES || m->n > MAX_SAMPLES) {
        sh_puts("  shapes do not chain or exceed the buffers\n");
        return 0;
    }
    m->w1 = f32_in_place(dir, &w1);
    m->b1 = f32_in_place(dir, &b1);
    m->w2 = f32_in_place(dir, &w2);
    m->b2 = f32_in_place(dir, &b2);
    m->x = f32_in_place(dir, &x);
    m->labels = kiln_tensor_view_u8(dir, y.index, NULL);
    return m->w1 && m->b1 && m->w2 && m->b2 && m->x && m->labels;
}

/* logits = w2 @ relu(w1 @ x + b1) + b2; returns the argmax. */
static size_t classify(const net *m, const float *w1, const float *x) {
    float hidden[MAX_HIDDEN], best_v = 0;
    size_t best = 0;
    for (size_t h = 0; h < m->n_hidden; h++) {
        float s = m->b1[h];
        for (size_t i = 0; i < m->n_in; i++) s += w1[h * m->n_in + i] * x[i];
        hidden[h] = s > 0 ? s : 0;
    }
    for (size_t k = 0; k < m->n_out; k++) {
        float s = m->b2[k];
        for (size_t h = 0; h < m->n_hidden; h++) s += m->w2[k * m->n_hidden + h] * hidden[h];
        if (k == 0 || s > best_v) {
            best_v = s;
            best = k;
        }
    }
    return best;
}

static size_t evaluate(const net *m, const float *w1, uint8_t *preds) {
    size_t correct = 0;
    for (size_t s = 0; s < m->n; s++) {
        preds[s] = (uint8_t)classify(m, w1, m->x + s * m->n_in);
        correct += preds[s] == m->labels[s];
    }
    return correct;
}

/* ------------------------------------------------------------------ corruption */

typedef struct {
    const char *what;
    size_t at;      /* byte to change (SIZE_MAX: length change only) */
    uint8_t value;
    size_t len;     /* buffer length */
    int code;
    uint64_t offset;
    const char *rule;
} corruption;

static void corruption_test(const uint8_t *model, size_t len, const corruption *c) {
    kiln_error e;
    memcpy(ram, model, len);
    memset(ram + len, 0, sizeof ram - len);
    if (c->at != SIZE_MAX) ram[c->at] = c->value;
    int rc = kiln_validate(ram, c->len, &e);
    sh_puts("  ");
    sh_puts(c->what);
    sh_puts(": ");
    if (rc == KILN_OK) {
        sh_puts("ACCEPTED");
    } else {
        put_error(&e);
    }
    int ok = rc == c->code && e.offset == c->offset && strcmp(e.rule, c->rule) == 0;
    sh_puts(ok ? ", as expected\n" : ", NOT as expected\n");
    check(ok, c->what);
}

/* ------------------------------------------------------------------ streaming and ranged reading */

/* Feeds `data` in 256-byte packets, as they would arrive over the air;
   returns the verdict with *e filled. A packet after which the block is
   certainly rejected ends the transfer: its error is the verdict (the
   handle needs no cleanup). */
static int stream(const uint8_t *data, size_t len, kiln_error *e, size_t *tensors_seen) {
    kiln_incremental v;
    int progress, rc = kiln_incremental_init(&v, prefix, sizeof prefix, NULL);
    if (rc != KILN_OK) return rc;
    for (size_t at = 0; at < len; at += 256) {
        size_t n = len - at < 256 ? len - at : 256;
        rc = kiln_incremental_feed(&v, data + at, n, &progress, e);
        if (rc != KILN_OK) return rc;
        if (progress == KILN_PROGRESS_DIRECTORY) {
            kiln_dir table;
            if (kiln_incremental_directory(&v, &table) == KILN_OK) *tensors_seen = kiln_count(&table);
        }
    }
    return kiln_incremental_finish(&v, NULL, e);
}

/* The read callback: here the model in flash, as if behind SPI. */
typedef struct {
    const uint8_t *base;
    uint64_t len;
    unsigned reads;
    uint64_t bytes;
} flash_ctx;

static int flash_read(void *ctx, uint64_t offset, uint8_t *buf, size_t len) {
    flash_ctx *f = (flash_ctx *)ctx;
    if (offset > f->len || len > f->len - offset) return 5;
    memcpy(buf, f->base + offset, len);
    f->reads++;
    f->bytes += len;
    return 0;
}

/* ------------------------------------------------------------------ main */

int main(void) {
    const uint8_t *model = kiln_model;
    size_t len = (size_t)(kiln_model_end - kiln_model);
    kiln_error e;
    kiln_dir dir;

    sh_puts("kiln C firmware demo (LM3S6965, Cortex-M3, libkiln.a through kiln.h)\n");
    sh_puts("digits-mlp.kiln: ");
    sh_putu(len);
    sh_puts(" bytes in flash\n");
    if (len + 1 > sizeof ram) {
        sh_puts("model larger than the RAM buffer\n");
        return 1;
    }

    /* 1. validate, then parse with a name index in scratch */
    int rc = kiln_validate(model, len, &e);
    sh_puts("kiln_validate: ");
    sh_puts(kiln_code_name(rc));
    sh_puts("\n");
    check(rc == KILN_OK, "the model is valid");
    kiln_options opts;
    memset(&opts, 0, sizeof opts);
    opts.scratch = scratch;
    opts.scratch_len = sizeof scratch / sizeof scratch[0];
    rc = kiln_parse_ex(model, len, &opts, &dir, &e);
    if (rc != KILN_OK) {
        sh_puts("model REJECTED: ");
        put_error(&e);
        sh_puts("\n");
        return 1;
    }
    kiln_dir_info info;
    kiln_dir_get_info(&dir, &info);
    sh_puts("valid: ");
    sh_putu(info.tensor_count);
    sh_puts(" tensors, block ");
    sh_putu(info.block_len);
    sh_puts(" bytes, payload at +");
    sh_putu(info.payload_offset);
    sh_puts(info.hashed_index ? ", name index hashed (scratch)\n" : ", name index: linear scan\n");
    check(info.hashed_index, "the scratch holds a hashed name index");
    for (size_t i = 0; i < info.tensor_count; i++) {
        kiln_tensor t;
        kiln_tensor_at(&dir, i, &t);
        char name[64];
        size_t n = t.name.len < sizeof name - 1 ? t.name.len : sizeof name - 1;
        memcpy(name, t.name.ptr, n);
        name[n] = 0;
        sh_puts("  [");
        sh_putu(i);
        sh_puts("] ");
        sh_puts(name);
        sh_puts(" ");
        sh_puts(t.dtype_name);
        sh_puts(" [");
        for (uint32_t k = 0; k < t.rank; k++) {
            if (k) sh_puts(", ");
            sh_putu(t.shape[k]);
        }
        sh_puts("], ");
        sh_putu(t.byte_length);
        sh_puts(" bytes at +");
        sh_putu(t.offset);
        if (t.quant.scheme) {
            sh_puts(", quant scheme ");
            sh_putu(t.quant.scheme);
            sh_puts(" axis ");
            sh_putu(t.quant.axis);
            sh_puts(" group ");
            sh_putu(t.quant.group_size);
            sh_puts(" scales [");
            sh_putu(t.quant.scale_index);
            sh_puts("]");
        }
        size_t found = SIZE_MAX;
        check(kiln_find_n(&dir, t.name.ptr, t.name.len, &found) == KILN_OK && found == i,
              "every tensor is found by name");
        sh_puts("\n");
    }
    check(kiln_find(&dir, "no-such-tensor", NULL) == KILN_ERR_NOT_FOUND, "an absent name is not found");

    /* 2. f32 model, every tensor viewed in place in flash */
    net m;
    if (!load(&dir, &m)) return 1;
    uint8_t preds_f32[MAX_SAMPLES], preds_q[MAX_SAMPLES];
    size_t correct = evaluate(&m, m.w1, preds_f32);
    sh_puts("run 1: f32 weights in place: ");
    sh_putu(correct);
    sh_puts("/");
    sh_putu(m.n);
    sh_puts(" correct\n");
    check(correct == EXPECT_F32_CORRECT && m.n == EXPECT_F32_CORRECT, "f32 accuracy is 32/32");

    /* 3. the MXFP4 first layer, dequantized by kiln_tensor_dequantize_f32 */
    kiln_tensor q;
    size_t count = 0;
    if (tensor(&dir, "fc1.weight.mxfp4", &q)) {
        check(q.dtype == KILN_DTYPE_E2M1 && q.quant.scheme != 0 && q.shape[0] == m.n_hidden && q.shape[1] == m.n_in,
              "fc1.weight.mxfp4 is e2m1 with scales, shaped like fc1.weight");
        rc = kiln_tensor_dequantize_f32(&dir, q.index, fc1_q, sizeof fc1_q / sizeof fc1_q[0], &count);
        check(rc == KILN_OK && count == m.n_hidden * m.n_in, "MXFP4 dequantization");
        size_t correct_q = evaluate(&m, fc1_q, preds_q), agree = 0;
        for (size_t s = 0; s < m.n; s++) agree += preds_q[s] == preds_f32[s];
        sh_puts("run 2: fc1 from fc1.weight.mxfp4 (dequantized): ");
        sh_putu(correct_q);
        sh_puts("/");
        sh_putu(m.n);
        sh_puts(" correct, agrees with f32 on ");
        sh_putu(agree);
        sh_puts("/");
        sh_putu(m.n);
        sh_puts("\n");
        check(correct_q == EXPECT_MXFP4_CORRECT, "MXFP4 accuracy is 31/32");
        check(agree == EXPECT_AGREE, "f32 and MXFP4 agree on 31/32");
    }

    /* 4. corrupted copies: offsets from the tensor table */
    kiln_tensor first, t;
    kiln_tensor_at(&dir, 0, &first);
    size_t heap = 64 + 128 * info.tensor_count;
    size_t first_name = (size_t)(first.name.ptr - (const char *)model);
    size_t gap = SIZE_MAX, quant_desc = SIZE_MAX;
    uint32_t group = 0;
    for (size_t i = 0; i < info.tensor_count; i++) {
        kiln_tensor_at(&dir, i, &t);
        if (i > 0 && gap == SIZE_MAX) {
            kiln_tensor prev;
            kiln_tensor_at(&dir, i - 1, &prev);
            if (t.offset > prev.offset + prev.byte_length) gap = (size_t)(prev.offset + prev.byte_length);
        }
        if (t.quant.scheme && quant_desc == SIZE_MAX) {
            quant_desc = 64 + 128 * i;
            group = t.quant.group_size;
        }
    }
    check(first_name == heap, "the first name starts the heap");
    const corruption cases[] = {
        {"magic byte", 0, 'X', len, KILN_FRAME, 0, "DirectoryMagic"},
        {"version byte", 4, 3, len, KILN_FRAME, 4, "DirectoryVersion"},
        {"descriptor 0, reserved byte 3", 64 + 3, 1, len, KILN_FRAME, 64 + 3, "DescriptorReserved"},
        {"descriptor 0, dtype code -> 20", 64, 20, len, KILN_TYPE, 64, "UnknownDtype"},
        {"first name byte -> 0xFF", first_name, 0xFF, len, KILN_UTF8, first_name, "NameUtf8"},
        {"MXFP4 group_size halved", quant_desc + 20, (uint8_t)(group / 2), len, KILN_TYPE, quant_desc + 24,
         "ScaleCount"},
        {"last byte cut off", SIZE_MAX, 0, len - 1, KILN_EOF, len - 1, "BlockTruncated"},
        {"one trailing byte", SIZE_MAX, 0, len + 1, KILN_TRAILING, len, "TrailingBytes"},
        {"first payload gap byte -> 0x5A", gap, 0x5A, len, KILN_TYPE, gap, "NonzeroGap"},
    };
    sh_puts("corruption tests (RAM copies):\n");
    check(quant_desc != SIZE_MAX && gap != SIZE_MAX && group >= 2 && group < 256, "the model has a gap and MXFP4");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) corruption_test(model, len, &cases[i]);

    /* 5. over the air: 256-byte packets through the incremental validator */
    size_t seen = 0;
    rc = stream(model, len, &e, &seen);
    sh_puts("incremental, 256-byte packets: ");
    sh_puts(kiln_code_name(rc));
    sh_puts(", table of ");
    sh_putu(seen);
    sh_puts(" tensors before the payload\n");
    check(rc == KILN_OK && seen == info.tensor_count, "the streamed model is accepted");
    memcpy(ram, model, len);
    ram[gap] = 0x5A;
    rc = stream(ram, len, &e, &seen);
    sh_puts("incremental, gap byte corrupted: ");
    put_error(&e);
    sh_puts("\n");
    check(rc == KILN_TYPE && e.offset == gap && strcmp(e.rule, "NonzeroGap") == 0,
          "the streamed corrupted copy gets kiln_validate's verdict");

    /* 6. ranged reading through a callback */
    flash_ctx f = {model, len, 0, 0};
    kiln_source src = {flash_read, &f, len};
    rc = kiln_source_verify(&src, prefix, sizeof prefix, chunk, sizeof chunk, &e);
    sh_puts("kiln_source_verify: ");
    sh_puts(kiln_code_name(rc));
    sh_puts(", ");
    sh_putu(f.bytes);
    sh_puts(" of ");
    sh_putu(len);
    sh_puts(" bytes read in ");
    sh_putu(f.reads);
    sh_puts(" reads\n");
    check(rc == KILN_OK && f.bytes < len, "verified by reading only what a rule reads");
    kiln_dir opened;
    kiln_tensor y;
    uint8_t labels[MAX_SAMPLES];
    size_t got = 0;
    rc = kiln_source_open(&src, prefix, sizeof prefix, &opened, &e);
    if (rc == KILN_OK && tensor(&opened, "samples.y", &y)) {
        rc = kiln_source_read_tensor(&src, &opened, y.index, labels, sizeof labels, &got, &e);
    }
    check(rc == KILN_OK && got == m.n && memcmp(labels, m.labels, got) == 0,
          "samples.y read through the callback equals the in-place view");

    if (failed) {
        sh_putu(failed);
        sh_puts(" check(s) failed\n");
    }
    sh_puts(failed ? "result: FAIL\n" : "result: PASS\n");
    return failed ? 1 : 0;
}
