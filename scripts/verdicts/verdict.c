/* The C front end of the cross-front-end verdict test (scripts/verdicts/verdicts.py): for each
 * argument NAME=PATH, one JSON line per call on the file's bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kiln.h"

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long n;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
        *len = (size_t)n;
    }
    fclose(f);
    return buf;
}

static void line(const char *file, const char *call, int rc, const kiln_error *e, int flag) {
    printf("{\"file\":\"%s\",\"call\":\"%s\",\"by_path\":false,\"ok\":%s", file, call,
           rc == KILN_OK ? "true" : "false");
    if (rc != KILN_OK)
        printf(",\"code\":\"%s\",\"rule\":\"%s\",\"offset\":%llu", kiln_code_name(rc), e->rule,
               (unsigned long long)e->offset);
    if (flag >= 0) printf(",\"digests_checked\":%s", flag ? "true" : "false");
    printf("}\n");
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        size_t len = 0;
        char *eq = strchr(argv[i], '=');
        const char *name = argv[i];
        unsigned char *data;
        if (!eq) { fprintf(stderr, "expected NAME=PATH: %s\n", argv[i]); return 2; }
        *eq = '\0';
        data = slurp(eq + 1, &len);
        kiln_error err;
        kiln_verified v;
        int rc;
        if (!data) { fprintf(stderr, "cannot read %s\n", eq + 1); return 2; }
        rc = kiln_validate(data, len, &err);
        line(name, "kiln_validate", rc, &err, -1);
        rc = kiln_model_verify(data, len, 0, &v, &err);
        line(name, "kiln_model_verify", rc, &err, rc == KILN_OK ? v.digests_checked : -1);
        free(data);
    }
    return 0;
}
