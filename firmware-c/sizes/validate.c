/* kiln_validate only (the rule texts come with kiln_error). */
#include <stdint.h>

#include "kiln.h"

extern const uint8_t kiln_model[];
extern const uint8_t kiln_model_end[];
volatile uint32_t sink;

int main(void) {
    kiln_error e;
    int rc = kiln_validate(kiln_model, (size_t)(kiln_model_end - kiln_model) - sink, &e);
    sink = (uint32_t)rc + (uint32_t)e.offset + (uint32_t)(uintptr_t)e.rule;
    return rc;
}
