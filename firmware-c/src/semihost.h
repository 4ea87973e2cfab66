/* ARM semihosting (QEMU -semihosting-config enable=on,target=native):
   text to the host's standard output, and the exit status. */
#ifndef SEMIHOST_H
#define SEMIHOST_H
#include <stdint.h>

void sh_puts(const char *s);           /* to the host's stdout */
void sh_putu(uint64_t v);              /* an unsigned decimal */
void sh_puti(int64_t v);               /* a signed decimal */
void sh_exit(int ok) __attribute__((noreturn)); /* QEMU exits 0 when ok, 1 otherwise */

#endif
