#include "semihost.h"

static int semihost(int op, const void *arg) {
    register int r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

/* SYS_OPEN of ":tt" for writing ("w", mode 4) is the host's standard output
   (SYS_WRITE0 would write to QEMU's semihosting console, its stderr). */
static int tt = -1;

void sh_puts(const char *s) {
    uint32_t n = 0;
    while (s[n]) n++;
    if (tt < 0) {
        const uint32_t open_args[3] = {(uint32_t)(uintptr_t)":tt", 4, 3};
        tt = semihost(0x01, open_args);
    }
    const uint32_t write_args[3] = {(uint32_t)tt, (uint32_t)(uintptr_t)s, n};
    semihost(0x05, write_args);
}

void sh_putu(uint64_t v) {
    char buf[24];
    char *p = buf + sizeof buf;
    *--p = 0;
    do {
        *--p = (char)('0' + (unsigned)(v % 10u));
        v /= 10u;
    } while (v != 0);
    sh_puts(p);
}

void sh_puti(int64_t v) {
    if (v < 0) {
        sh_puts("-");
        sh_putu((uint64_t)0 - (uint64_t)v);
    } else {
        sh_putu((uint64_t)v);
    }
}

void sh_exit(int ok) {
    /* SYS_EXIT (0x18) with ADP_Stopped_ApplicationExit, or RunTimeErrorUnknown. */
    semihost(0x18, (const void *)(uintptr_t)(ok ? 0x20026 : 0x20023));
    for (;;) {
    }
}
