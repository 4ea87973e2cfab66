#include <stdio.h>
#include "kiln.h"

int check_model(const uint8_t *data, size_t len) {
    kiln_error err;
    kiln_dir dir;                       /* plain memory: no allocation, nothing to free */
    if (kiln_parse(data, len, &dir, &err) != KILN_OK) {   /* every rule `kiln validate` checks but the digests */
        printf("%s at byte %llu: %s\n", kiln_code_name(err.code),
               (unsigned long long)err.offset, err.description);
        return err.code;
    }
    size_t i, n;
    float w[2048];
    if (kiln_find(&dir, "fc1.weight", &i) == KILN_OK &&
        kiln_tensor_copy_f32(&dir, i, w, 2048, &n) == KILN_OK)   /* host-order values */
        printf("fc1.weight: %zu floats, first %f\n", n, w[0]);
    return KILN_OK;
}
