/* Minimal Cortex-M startup: vector table, .data copy, .bss zero, main(). */
#include <stdint.h>
#include <string.h>

#include "semihost.h"

extern uint32_t _sidata[], _sdata[], _edata[], _sbss[], _ebss[], _estack[];
int main(void);

void Reset_Handler(void) {
    memcpy(_sdata, _sidata, (size_t)((char *)_edata - (char *)_sdata));
    memset(_sbss, 0, (size_t)((char *)_ebss - (char *)_sbss));
    sh_exit(main() == 0);
}

static void Fault_Handler(void) {
    sh_puts("fault\n");
    sh_exit(0);
}

typedef union {
    void (*handler)(void);
    void *stack;
} vector;
__attribute__((section(".isr_vector"), used)) static const vector vectors[16] = {
    {.stack = _estack},         {.handler = Reset_Handler}, {.handler = Fault_Handler}, {.handler = Fault_Handler},
    {.handler = Fault_Handler}, {.handler = Fault_Handler}, {.handler = Fault_Handler}, {0},
    {0},                        {0},                        {0},                        {.handler = Fault_Handler},
    {.handler = Fault_Handler}, {0},                        {.handler = Fault_Handler}, {.handler = Fault_Handler},
};
