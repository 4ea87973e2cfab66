/* Size baseline: the runtime and the model in flash, no Kiln. */
#include <stdint.h>

extern const uint8_t kiln_model[];
extern const uint8_t kiln_model_end[];
volatile uint32_t sink;

int main(void) {
    sink = (uint32_t)(kiln_model_end - kiln_model) + kiln_model[sink];
    return 0;
}
