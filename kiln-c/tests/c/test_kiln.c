/*
 * The C API from C: every input of the vectors file (the 46 goldens, the
 * check-order and regression cases, the example model as a directory and as
 * a model file, mutations of the model file), each with the verdict the Rust
 * core gives (kiln_nostd::model::parse_any: code, offset, rule), must get
 * that verdict from kiln_validate, kiln_parse and kiln_parse_ex, and (plain
 * directories) from the incremental validator in 1-, 7- and whole-sized
 * chunks and from kiln_source_verify through a read callback. Then the
 * example model end to end: table, lookups, views, copies, MXFP4
 * dequantization, the 32 samples predicted (32/32 f32, 31/32 MXFP4), model
 * metadata, and API misuse answered with error codes. Every input also gets
 * the Rust verdict with digests (Model::parse_verified) from
 * kiln_model_verify and kiln_source_verify_model (64-byte chunks), and
 * parse_any's with KILN_VERIFY_SKIP_DIGESTS; a model file with digests
 * with one flipped payload byte is DIGEST at its tensor's offset.
 *
 *   test_kiln VECTORS_FILE          (written by kiln-c/api/tests/api.rs; see kiln-c/ci.sh)
 *
 * Built with -std=c99 -Wall -Wextra -pedantic -Werror -fsanitize=address,undefined.
 * Ends with "N passed, M failed"; exit status 0 only when nothing failed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

static unsigned passed, failed;

static void check(int ok, const char *what, const char *name) {
    if (ok) {
        passed++;
    } else {
        failed++;
        fprintf(stderr, "FAIL %s: %s\n", name, what);
    }
}

typedef struct {
    int code;
    uint64_t offset;
    char rule[64];
} verdict;

static int same(const verdict *a, int rc, const kiln_error *e) {
    return rc == e->code && rc == a->code && e->offset == a->offset && strcmp(e->rule, a->rule) == 0;
}

static void explain(const char *name, const char *path, const verdict *want, int rc, const kiln_error *e) {
    fprintf(stderr, "  %s via %s: want %s at %llu (%s), got %s at %llu (%s)\n", name, path, kiln_code_name(want->code),
            (unsigned long long)want->offset, want->rule, kiln_code_name(rc), (unsigned long long)e->offset, e->rule);
}

/* ------------------------------------------------------------------ streaming paths */

static int incremental(const uint8_t *data, size_t len, size_t chunk, kiln_error *e) {
    static uint8_t prefix[64 << 10];
    kiln_incremental v;
    int rc = kiln_incremental_init(&v, prefix, sizeof prefix, NULL);
    if (rc != KILN_OK) return rc;
    for (size_t at = 0; at < len; at += chunk) {
        size_t n = len - at < chunk ? len - at : chunk;
        /* An error here is certain unless the stream ends early; keep
           feeding (only counts bytes) and let finish give the verdict. */
        kiln_incremental_feed(&v, data + at, n, NULL, NULL);
    }
    return kiln_incremental_finish(&v, NULL, e);
}

typedef struct {
    const uint8_t *data;
    size_t len;
} memory;

static int read_memory(void *ctx, uint64_t offset, uint8_t *buf, size_t len) {
    const memory *m = (const memory *)ctx;
    if (offset > m->len || len > m->len - offset) return 42;
    memcpy(buf, m->data + offset, len);
    return 0;
}

static int source_verify(const uint8_t *data, size_t len, kiln_error *e) {
    static uint8_t prefix[64 << 10];
    uint8_t chunk[97];
    memory m = {data, len};
    kiln_source src;
    src.read_at = read_memory;
    src.ctx = &m;
    src.len = len;
    return kiln_source_verify(&src, prefix, sizeof prefix, chunk, sizeof chunk, e);
}

static int source_verify_model(const uint8_t *data, size_t len, size_t prefix_len, uint32_t flags, kiln_verified *out,
                               kiln_error *e) {
    static uint8_t prefix[64 << 10];
    uint8_t chunk[64]; /* smaller than most tensors: each spans chunks */
    memory m = {data, len};
    kiln_source src;
    src.read_at = read_memory;
    src.ctx = &m;
    src.len = len;
    if (prefix_len > sizeof prefix) prefix_len = sizeof prefix;
    return kiln_source_verify_model(&src, prefix, prefix_len, chunk, sizeof chunk, flags, out, e);
}

/* ------------------------------------------------------------------ vectors */

static int unhex(const char *hex, uint8_t **out, size_t *len) {
    size_t n = strcmp(hex, "-") == 0 ? 0 : strlen(hex) / 2;
    uint8_t *b = (uint8_t *)malloc(n ? n : 1);
    if (!b) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) {
            free(b);
            return 0;
        }
        b[i] = (uint8_t)v;
    }
    *out = b;
    *len = n;
    return 1;
}

static uint8_t *example_dir, *example_model, *example_digests;
static size_t example_dir_len, example_model_len, example_digests_len;

static uint8_t *keep(const uint8_t *data, size_t len) {
    uint8_t *copy = (uint8_t *)malloc(len ? len : 1);
    memcpy(copy, data, len);
    return copy;
}

static void run_vector(const char *name, const uint8_t *data, size_t len, const verdict *want, const char *expect,
                       int is_model, const verdict *verified) {
    kiln_error e;
    kiln_dir dir;
    uint32_t scratch[64];
    kiln_options opts;
    int rc;

    rc = kiln_validate(data, len, &e);
    check(same(want, rc, &e), "kiln_validate gives the Rust verdict", name);
    if (!same(want, rc, &e)) explain(name, "kiln_validate", want, rc, &e);
    if (strcmp(expect, "-") != 0) {
        const char *got = rc == KILN_OK ? "accept" : kiln_code_name(rc);
        check(strcmp(got, expect) == 0, "the recorded result", name);
    }
    check(rc == KILN_OK ? e.description[0] == 0 : e.description != NULL, "description", name);

    rc = kiln_parse(data, len, &dir, &e);
    check(same(want, rc, &e), "kiln_parse gives the Rust verdict", name);
    check(rc == KILN_OK || kiln_count(&dir) == 0, "a failed parse leaves an invalid handle", name);
    memset(&opts, 0, sizeof opts);
    opts.scratch = scratch;
    opts.scratch_len = sizeof scratch / sizeof scratch[0];
    opts.hash_seed = 0x9e3779b97f4a7c15ull;
    rc = kiln_parse_ex(data, len, &opts, &dir, &e);
    check(same(want, rc, &e), "kiln_parse_ex (scratch, seed) gives the Rust verdict", name);

    if (!is_model) {
        size_t chunks[3] = {1, 7, len ? len : 1};
        for (int i = 0; i < 3; i++) {
            rc = incremental(data, len, chunks[i], &e);
            check(same(want, rc, &e), "the incremental validator gives the Rust verdict", name);
            if (!same(want, rc, &e)) explain(name, "kiln_incremental", want, rc, &e);
        }
        rc = source_verify(data, len, &e);
        check(same(want, rc, &e), "kiln_source_verify gives the Rust verdict", name);
        if (!same(want, rc, &e)) explain(name, "kiln_source_verify", want, rc, &e);
    }
    rc = kiln_model_verify(data, len, 0, NULL, &e);
    check(same(verified, rc, &e), "kiln_model_verify gives the Rust verdict with digests", name);
    if (!same(verified, rc, &e)) explain(name, "kiln_model_verify", verified, rc, &e);
    rc = kiln_model_verify(data, len, KILN_VERIFY_SKIP_DIGESTS, NULL, &e);
    check(same(want, rc, &e), "kiln_model_verify, skipping digests, gives kiln_validate's", name);
    rc = source_verify_model(data, len, SIZE_MAX, 0, NULL, &e);
    check(same(verified, rc, &e), "kiln_source_verify_model gives the Rust verdict with digests", name);
    if (!same(verified, rc, &e)) explain(name, "kiln_source_verify_model", verified, rc, &e);
    rc = source_verify_model(data, len, SIZE_MAX, KILN_VERIFY_SKIP_DIGESTS, NULL, &e);
    check(same(want, rc, &e), "kiln_source_verify_model, skipping digests, gives kiln_validate's", name);
    if (strcmp(name, "example/model-file-digests-aligned") == 0 && !example_digests) {
        example_digests = keep(data, len);
        example_digests_len = len;
    }
    if (strcmp(name, "example/digits-mlp.kiln") == 0 && !example_dir) {
        example_dir = (uint8_t *)malloc(len);
        memcpy(example_dir, data, len);
        example_dir_len = len;
    }
    if (strcmp(name, "example/model-file") == 0 && !example_model) {
        example_model = (uint8_t *)malloc(len);
        memcpy(example_model, data, len);
        example_model_len = len;
    }
}

static unsigned run_vectors(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        exit(2);
    }
    size_t cap = 1 << 20;
    char *line = (char *)malloc(cap);
    unsigned n = 0;
    while (fgets(line, (int)cap, f)) {
        char *fields[10];
        char *p = line;
        int k = 0;
        line[strcspn(line, "\n")] = 0;
        for (; k < 10 && p; k++) {
            fields[k] = p;
            p = strchr(p, '\t');
            if (p) *p++ = 0;
        }
        if (k != 10) {
            check(0, "a vectors line has 10 fields", fields[0]);
            continue;
        }
        verdict verified;
        verified.code = atoi(fields[7]);
        verified.offset = strtoull(fields[8], NULL, 10);
        snprintf(verified.rule, sizeof verified.rule, "%s", strcmp(fields[9], "-") == 0 ? "" : fields[9]);
        verdict want;
        want.code = atoi(fields[2]);
        want.offset = strtoull(fields[3], NULL, 10);
        snprintf(want.rule, sizeof want.rule, "%s", strcmp(fields[4], "-") == 0 ? "" : fields[4]);
        uint8_t *data;
        size_t len;
        if (!unhex(fields[1], &data, &len)) {
            check(0, "hex", fields[0]);
            continue;
        }
        run_vector(fields[0], data, len, &want, fields[5], atoi(fields[6]), &verified);
        free(data);
        n++;
    }
    free(line);
    fclose(f);
    return n;
}

/* ------------------------------------------------------------------ the example model */

static const float *f32_values(const kiln_dir *dir, const char *name, float *buf, size_t cap, size_t *n) {
    size_t index;
    if (kiln_find(dir, name, &index) != KILN_OK) return NULL;
    const float *v = kiln_tensor_view_f32(dir, index, n);
    if (v) return v;
    return kiln_tensor_copy_f32(dir, index, buf, cap, n) == KILN_OK ? buf : NULL;
}

static unsigned predict(const kiln_dir *dir, const float *w1) {
    static float b[4][4096];
    size_t n1, n2, n3, n4, nx, ny;
    const float *b1 = f32_values(dir, "fc1.bias", b[0], 4096, &n1);
    const float *w2 = f32_values(dir, "fc2.weight", b[1], 4096, &n2);
    const float *b2 = f32_values(dir, "fc2.bias", b[2], 4096, &n3);
    const float *x = f32_values(dir, "samples.x", b[3], 4096, &nx);
    uint8_t y[64];
    size_t yi;
    (void)n4;
    if (!b1 || !w2 || !b2 || !x || kiln_find(dir, "samples.y", &yi) != KILN_OK ||
        kiln_tensor_copy_u8(dir, yi, y, sizeof y, &ny) != KILN_OK)
        return 0;
    size_t hidden = n1, classes = n3, in = nx / ny;
    unsigned correct = 0;
    for (size_t s = 0; s < ny; s++) {
        float h[64], best = 0;
        size_t arg = 0;
        for (size_t j = 0; j < hidden; j++) {
            float acc = b1[j];
            for (size_t i = 0; i < in; i++) acc += w1[j * in + i] * x[s * in + i];
            h[j] = acc > 0 ? acc : 0;
        }
        for (size_t k = 0; k < classes; k++) {
            float acc = b2[k];
            for (size_t j = 0; j < hidden; j++) acc += w2[k * hidden + j] * h[j];
            if (k == 0 || acc > best) {
                best = acc;
                arg = k;
            }
        }
        correct += arg == y[s];
    }
    return correct;
}

static void example_end_to_end(void) {
    const char *name = "example";
    kiln_dir dir;
    kiln_error e;
    kiln_dir_info info;
    static float w1[2048], w1q[2048];
    size_t n = 0, index;

    if (!example_dir || !example_model) {
        check(0, "the vectors hold the example model and model file", name);
        return;
    }
    /* A 64-byte aligned copy: f32 payloads can be viewed in place. */
    uint8_t *block = (uint8_t *)malloc(example_dir_len + 64);
    uint8_t *aligned = block + (64 - (uintptr_t)block % 64) % 64;
    memcpy(aligned, example_dir, example_dir_len);
    check(kiln_parse(aligned, example_dir_len, &dir, &e) == KILN_OK, "parse", name);
    check(kiln_dir_get_info(&dir, &info) == KILN_OK && info.tensor_count == 8 && !info.is_model && info.has_payload &&
              !info.hashed_index,
          "info", name);
    check(kiln_find(&dir, "fc1.weight", &index) == KILN_OK && index == 0, "find", name);
    check(kiln_find_n(&dir, "fc1.weightXYZ", 10, &index) == KILN_OK && index == 0, "find_n", name);
    check(kiln_tensor_view_f32(&dir, 0, &n) != NULL && n == 2048, "an aligned f32 view", name);
    check(kiln_tensor_copy_f32(&dir, 0, w1, 2048, &n) == KILN_OK && n == 2048, "copy f32", name);
    check(memcmp(w1, kiln_tensor_view_f32(&dir, 0, NULL), sizeof w1) == 0, "view and copy agree", name);
    check(kiln_tensor_copy_f32(&dir, 0, w1, 10, &n) == KILN_ERR_BUFFER_TOO_SMALL && n == 2048, "too small", name);
    check(kiln_tensor_copy_i32(&dir, 0, (int32_t *)w1q, 2048, &n) == KILN_ERR_ELEMENT_TYPE, "element type", name);
    unsigned f32_correct = predict(&dir, w1);
    check(f32_correct == 32, "f32 predicts 32/32", name);

    kiln_tensor q;
    check(kiln_find(&dir, "fc1.weight.mxfp4", &index) == KILN_OK && kiln_tensor_at(&dir, index, &q) == KILN_OK, "mxfp4",
          name);
    check(q.dtype == KILN_DTYPE_E2M1 && strcmp(q.dtype_name, "e2m1") == 0 && q.quant.scheme == 1 &&
              q.quant.axis == 1 && q.quant.group_size == 32 && q.quant.scale_index == 5 &&
              q.quant.outer_index == KILN_NO_INDEX && q.rank == 2 && q.shape[0] == 32 && q.shape[1] == 64 &&
              q.shape[2] == 0 && q.data == aligned + q.offset,
          "mxfp4 tensor info", name);
    check(kiln_tensor_dequantize_f32(&dir, index, w1q, 2048, &n) == KILN_OK && n == 2048, "dequantize", name);
    float worst = 0;
    for (size_t i = 0; i < 2048; i++) {
        float d = w1[i] - w1q[i];
        if (d < 0) d = -d;
        if (d > worst) worst = d;
    }
    check(worst > 0.24783f && worst < 0.24785f, "largest |w - dequant(w)| is 0.24784 (spec/examples/README.md)", name);
    check(predict(&dir, w1q) == 31, "MXFP4 predicts 31/32", name);

    /* A misaligned copy: views refuse, copies work. */
    uint8_t *moved = (uint8_t *)malloc(example_dir_len + 1);
    memcpy(moved + 1, example_dir, example_dir_len);
    kiln_dir dir2;
    check(kiln_parse(moved + 1, example_dir_len, &dir2, NULL) == KILN_OK, "misaligned parse", name);
    check(kiln_tensor_view_f32(&dir2, 0, &n) == NULL && n == 0, "no view of a misaligned payload", name);
    check(kiln_tensor_copy_f32(&dir2, 0, w1q, 2048, &n) == KILN_OK && memcmp(w1q, w1, sizeof w1) == 0,
          "misaligned copy", name);
    free(moved);

    /* The model file: metadata, the padding key hidden. */
    kiln_dir m;
    kiln_str v, k;
    check(kiln_parse(example_model, example_model_len, &m, &e) == KILN_OK, "model parse", name);
    check(kiln_dir_get_info(&m, &info) == KILN_OK && info.is_model && info.metadata_count == 3 &&
              info.block_offset > 16 && info.tensor_count == 8,
          "model info", name);
    check(kiln_metadata_get(&m, "author", &v) == KILN_OK && v.len == 4 && memcmp(v.ptr, "kiln", 4) == 0, "metadata",
          name);
    check(kiln_metadata_get(&m, "kiln.convert.pad", &v) == KILN_ERR_NOT_FOUND, "the padding key is hidden", name);
    check(kiln_metadata_at(&m, 2, &k, &v) == KILN_OK && k.len == 4 && memcmp(k.ptr, "task", 4) == 0, "entry 2", name);
    check(kiln_metadata_count(&dir) == 0, "a plain directory has no metadata", name);
    check(kiln_find(&m, "samples.y", &index) == KILN_OK && index == 7, "model lookup", name);

    /* Misuse: error codes, never a crash. */
    kiln_dir zero;
    memset(&zero, 0, sizeof zero);
    check(kiln_validate(NULL, 5, &e) == KILN_ERR_NULL && e.rule[0] == 0, "NULL data", name);
    check(kiln_validate(NULL, 0, &e) == KILN_EOF && strcmp(e.rule, "HeaderTruncated") == 0, "empty input", name);
    check(kiln_validate(aligned, SIZE_MAX, NULL) == KILN_ERR_ARGUMENT, "length overflow", name);
    check(kiln_count(&zero) == 0 && kiln_count(NULL) == 0, "zeroed handle", name);
    check(kiln_tensor_at(&zero, 0, &q) == KILN_ERR_HANDLE, "zeroed handle", name);
    check(kiln_tensor_at(&dir, 8, &q) == KILN_ERR_NOT_FOUND, "index past the end", name);
    check(kiln_find(&dir, NULL, &index) == KILN_ERR_NULL, "NULL name", name);
    check(kiln_tensor_copy_f32(&dir, 0, (float *)((char *)w1q + 1), 100, &n) == KILN_ERR_ARGUMENT, "misaligned out",
          name);
    check(kiln_parse(aligned, example_dir_len, NULL, NULL) == KILN_ERR_NULL, "NULL handle", name);
    kiln_source none;
    memset(&none, 0, sizeof none);
    check(kiln_source_verify(&none, NULL, 0, NULL, 0, &e) == KILN_ERR_NULL, "NULL callback", name);
    check(strcmp(kiln_code_name(KILN_OK), "OK") == 0 && strcmp(kiln_code_name(KILN_SCHEMA), "SCHEMA") == 0 &&
              strcmp(kiln_code_name(12345), "UNKNOWN") == 0,
          "code names", name);
    check(strcmp(kiln_dtype_name(KILN_DTYPE_F32), "f32") == 0 && strcmp(kiln_dtype_name(4096), "opaque") == 0 &&
              kiln_dtype_name(20) == NULL,
          "dtype names", name);
    check(kiln_scratch_len(8) >= 8, "scratch length", name);
    free(block);
}

/* ------------------------------------------------------------------ digests */

/* A model file with digests (the example, payloads 4 KiB aligned): checked
   from memory and through the callback with a 64-byte chunk; one flipped
   payload byte that every structural rule accepts is DIGEST at the first
   payload byte of its tensor; skipping the hashing accepts it. */
static void digests_end_to_end(void) {
    const char *name = "digests";
    kiln_error e;
    kiln_verified out;
    kiln_dir dir;
    kiln_tensor t;
    size_t index;

    if (!example_digests || !example_dir || !example_model) {
        check(0, "the vectors hold the example model file with digests", name);
        return;
    }
    const uint8_t *file = example_digests;
    size_t len = example_digests_len;
    check(kiln_model_verify(file, len, 0, &out, &e) == KILN_OK && out.record == KILN_RECORD_DIGESTS &&
              out.digests_checked && out.tensor_count == 8,
          "a model file with digests verifies in memory, its 8 digests checked", name);
    check(source_verify_model(file, len, SIZE_MAX, 0, &out, &e) == KILN_OK && out.record == KILN_RECORD_DIGESTS &&
              out.digests_checked && out.block_len > 0,
          "and through the callback, 64-byte chunks", name);

    /* The largest tensor, fc1.weight (8 KiB of f32): it spans 128 chunks. */
    check(kiln_parse(file, len, &dir, &e) == KILN_OK && kiln_find(&dir, "fc1.weight", &index) == KILN_OK &&
              kiln_tensor_at(&dir, index, &t) == KILN_OK && t.byte_length > 256,
          "fc1.weight found", name);
    uint8_t *bad = keep(file, len);
    bad[t.offset + t.byte_length / 2 + 3] ^= 0x10;
    check(kiln_validate(bad, len, &e) == KILN_OK, "the flipped file passes every structural rule", name);
    int rc = kiln_model_verify(bad, len, 0, &out, &e);
    check(rc == KILN_DIGEST && e.code == KILN_DIGEST && e.offset == t.offset && strcmp(e.rule, "PayloadDigest") == 0 &&
              out.record == KILN_RECORD_NONE,
          "kiln_model_verify: DIGEST at fc1.weight's first payload byte", name);
    printf("flipped payload byte %llu: %s at %llu (%s), fc1.weight starts at %llu\n",
           (unsigned long long)(t.offset + t.byte_length / 2 + 3), kiln_code_name(rc), (unsigned long long)e.offset,
           e.rule, (unsigned long long)t.offset);
    rc = source_verify_model(bad, len, SIZE_MAX, 0, NULL, &e);
    check(rc == KILN_DIGEST && e.offset == t.offset && strcmp(e.rule, "PayloadDigest") == 0,
          "kiln_source_verify_model (64-byte chunks): DIGEST at the same offset", name);
    check(kiln_model_verify(bad, len, KILN_VERIFY_SKIP_DIGESTS, &out, &e) == KILN_OK && !out.digests_checked,
          "skipping the hashing accepts the flipped file (memory)", name);
    check(source_verify_model(bad, len, SIZE_MAX, KILN_VERIFY_SKIP_DIGESTS, &out, &e) == KILN_OK &&
              !out.digests_checked,
          "skipping the hashing accepts the flipped file (callback)", name);
    free(bad);

    /* Without digests: a plain model record and a plain directory validate as before. */
    check(kiln_model_verify(example_model, example_model_len, 0, &out, &e) == KILN_OK &&
              out.record == KILN_RECORD_PLAIN && !out.digests_checked,
          "a model file without digests validates", name);
    check(source_verify_model(example_model, example_model_len, SIZE_MAX, 0, &out, &e) == KILN_OK &&
              out.record == KILN_RECORD_PLAIN && !out.digests_checked,
          "a model file without digests validates through the callback", name);
    check(kiln_model_verify(example_dir, example_dir_len, 0, &out, &e) == KILN_OK && out.record == KILN_RECORD_NONE &&
              out.block_offset == 0,
          "a plain directory validates", name);
    check(source_verify_model(example_dir, example_dir_len, SIZE_MAX, 0, &out, &e) == KILN_OK &&
              out.record == KILN_RECORD_NONE,
          "a plain directory validates through the callback", name);

    /* The prefix buffer: too short says how much; that much is enough. */
    rc = source_verify_model(file, len, 100, 0, NULL, &e);
    size_t needed = (size_t)e.needed;
    check(rc == KILN_ERR_BUFFER_TOO_SMALL && needed > 100, "a 100-byte prefix is too small", name);
    check(source_verify_model(file, len, needed, 0, NULL, &e) == KILN_OK, "the size it asks for is enough", name);
    check(source_verify_model(file, len, needed - 1, 0, NULL, &e) == KILN_ERR_BUFFER_TOO_SMALL,
          "and one byte less is not", name);
    printf("kiln_source_verify_model: %zu-byte prefix buffer, 64-byte chunk (file %zu bytes)\n", needed, len);

    check(kiln_model_verify(file, len, 2, NULL, &e) == KILN_ERR_ARGUMENT, "an unknown flag", name);
    check(kiln_source_verify_model(NULL, NULL, 0, NULL, 0, 0, NULL, &e) == KILN_ERR_NULL, "a NULL source", name);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s VECTORS_FILE\n", argv[0]);
        return 2;
    }
    unsigned n = run_vectors(argv[1]);
    printf("%u inputs: kiln_validate, kiln_parse, kiln_parse_ex (and, for directories, the incremental "
           "validator and kiln_source_verify) against the Rust verdicts\n",
           n);
    check(n > 2300, "the vectors file holds every case", "vectors");
    example_end_to_end();
    digests_end_to_end();
    free(example_digests);
    free(example_dir);
    free(example_model);
    printf("%u passed, %u failed\n", passed, failed);
    return failed ? 1 : 0;
}
