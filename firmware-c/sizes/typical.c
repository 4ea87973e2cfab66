/* What a firmware typically does: validate, look a tensor up by name, get its f32 values. */
#include <stdint.h>

#include "kiln.h"

extern const uint8_t kiln_model[];
extern const uint8_t kiln_model_end[];
volatile uint32_t sink;
static float weights[2048];

int main(void) {
    kiln_error e;
    kiln_dir dir;
    size_t index, n = 0;
    int rc = kiln_parse(kiln_model, (size_t)(kiln_model_end - kiln_model) - sink, &dir, &e);
    if (rc != KILN_OK) return rc;
    if (kiln_find(&dir, "fc1.weight", &index) != KILN_OK) return 1;
    const float *w = kiln_tensor_view_f32(&dir, index, &n);
    if (w == NULL) {
        rc = kiln_tensor_copy_f32(&dir, index, weights, sizeof weights / sizeof weights[0], &n);
        w = weights;
    }
    sink = (uint32_t)n + (uint32_t)rc + (uint32_t)(uintptr_t)w;
    return rc;
}
