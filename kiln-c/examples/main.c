/* Runs the README example (readme.c) on a file: exit status 0 when the
   file is accepted, else its error code. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int check_model(const uint8_t *data, size_t len);

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    FILE *f = fopen(argv[1], "rb");
    if (!f) return 2;
    static uint8_t buf[1 << 20];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return check_model(buf, len);
}
