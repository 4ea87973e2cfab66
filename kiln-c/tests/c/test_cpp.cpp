// kiln.h from C++: the header compiles as C++ (extern "C", no C-only
// constructs) with -Wall -Wextra -pedantic -Werror, and links and runs.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kiln.h"

int main() {
    std::vector<std::uint8_t> empty(64, 0);
    std::memcpy(empty.data(), "KLNT\x02\x02", 6);  // the empty directory: magic, version 2, little-endian flag
    kiln_error err;
    kiln_dir dir;
    int rc = kiln_validate(empty.data(), empty.size(), &err);
    int parsed = kiln_parse(empty.data(), empty.size(), &dir, &err);
    empty[0] = 'X';
    int bad = kiln_validate(empty.data(), empty.size(), &err);
    bool ok = rc == KILN_OK && parsed == KILN_OK && kiln_count(&dir) == 0 && bad == KILN_FRAME && err.offset == 0 &&
              std::strcmp(err.rule, "DirectoryMagic") == 0 && std::strcmp(kiln_code_name(bad), "FRAME") == 0;
    std::printf("C++: %s at byte %llu (%s): %s\n", kiln_code_name(bad), static_cast<unsigned long long>(err.offset),
                err.rule, err.description);
    return ok ? 0 : 1;
}
