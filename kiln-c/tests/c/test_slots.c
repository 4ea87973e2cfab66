/*
 * The slots' C API (kiln_slots_*) over a RAM NOR flash driven through the
 * callbacks: provisioning and the trusted keys, a download, the trial
 * boot, a reboot before confirm (back to the confirmed slot), the retry
 * and confirm, the release counter (an older or equal release refused),
 * API misuse answered with error codes; then the power cut at every flash
 * operation of an update (the cut write programs half its bytes, the cut
 * erase erases half its range), each followed by a reboot that must boot
 * the old or the new image whole, never below the counter, and a retry
 * that must end on the new release.
 *
 *   test_slots                      (see kiln-c/ci.sh)
 *
 * Built with -std=c99 -Wall -Wextra -pedantic -Werror -fsanitize=address,undefined.
 * Ends with "N passed, M failed"; exit status 0 only when nothing failed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

static unsigned passed, failed;

static void check(int ok, const char *what) {
    if (ok) {
        passed++;
    } else {
        failed++;
        fprintf(stderr, "FAIL %s\n", what);
    }
}

/* ------------------------------------------------------------ the flash */

#define SECTOR 1024u
#define CAPACITY (4u * SECTOR + 2u * 12u * SECTOR)

typedef struct {
    uint8_t mem[CAPACITY];
    long ops;     /* erases and writes so far */
    long cut_at;  /* the operation the power is cut in, or -1 */
    int off;      /* the power is off */
    long refused; /* writes that would set a 0 bit to 1 */
} ram_flash;

/* Counts an operation; nonzero when the power goes off in it. */
static int tick(ram_flash *f) {
    long now = f->ops++;
    return now == f->cut_at;
}

static int flash_read(void *ctx, uint32_t offset, uint8_t *buf, size_t len) {
    ram_flash *f = ctx;
    if (f->off) return 1;
    if ((size_t)offset + len > CAPACITY) return 2;
    memcpy(buf, f->mem + offset, len);
    return 0;
}

static int flash_write(void *ctx, uint32_t offset, const uint8_t *buf, size_t len) {
    ram_flash *f = ctx;
    size_t i, n = len;
    if (f->off) return 1;
    if ((size_t)offset + len > CAPACITY || offset % 64 != 0 || len % 64 != 0) return 2;
    for (i = 0; i < len; i++) {
        if ((uint8_t)(~f->mem[offset + i] & buf[i]) != 0) {
            f->refused++;
            return 3;
        }
    }
    if (tick(f)) {
        f->off = 1;
        n = len / 2;
    }
    for (i = 0; i < n; i++) f->mem[offset + i] &= buf[i];
    return f->off ? 1 : 0;
}

static int flash_erase(void *ctx, uint32_t from, uint32_t to) {
    ram_flash *f = ctx;
    if (f->off) return 1;
    if (to > CAPACITY || from > to || from % SECTOR != 0 || to % SECTOR != 0) return 2;
    if (tick(f)) {
        f->off = 1;
        memset(f->mem + from, 0xFF, (to - from) / 2);
        return 1;
    }
    memset(f->mem + from, 0xFF, to - from);
    return 0;
}

static ram_flash ram, snapshot;
static kiln_flash flash = {flash_read, flash_write, flash_erase, &ram, CAPACITY, SECTOR};
static const kiln_slots_layout layout = {0, 2 * SECTOR, 4 * SECTOR, 16 * SECTOR, 12 * SECTOR};

/* ------------------------------------------------------------ images */

#define OLD_LEN 3000u
#define NEW_LEN 5000u
#define NEWER_LEN 4321u
static uint8_t old_img[OLD_LEN], new_img[NEW_LEN], newer_img[NEWER_LEN], slot_full[12u * SECTOR];

static void fill(uint8_t *p, size_t n, unsigned seed) {
    size_t i;
    for (i = 0; i < n; i++) p[i] = (uint8_t)((i * 131u + seed * 7u) ^ (i >> 5));
}

/* Downloads `img` (packets of 256 bytes, then one of 100: a partial write unit) and finishes at `version`. */
static int update(const uint8_t *img, size_t len, uint64_t version, kiln_error *err) {
    kiln_download dl;
    size_t at = 0;
    int rc = kiln_slots_begin(&flash, &layout, &dl, err);
    while (rc == KILN_OK && at < len) {
        size_t n = len - at < 256 ? len - at : 256;
        if (at == 512) n = 100;
        rc = kiln_slots_write(&flash, &layout, &dl, img + at, n, err);
        at += n;
    }
    if (rc != KILN_OK) return rc;
    return kiln_slots_finish(&flash, &layout, &dl, version, NULL, err);
}

/* Boots and checks the image (the old, the new or the newer one, whole). */
static int boot_checked(kiln_boot *b, const char *what) {
    kiln_slot_state st;
    const uint8_t *img = ram.mem;
    int ok;
    if (kiln_slots_boot(&flash, &layout, b, NULL) != KILN_OK || kiln_slots_state(&flash, &layout, &st, NULL) != KILN_OK) {
        check(0, what);
        return 0;
    }
    img += b->offset;
    ok = (b->version == 1 && b->len == OLD_LEN && memcmp(img, old_img, OLD_LEN) == 0) ||
         (b->version == 2 && b->len == NEW_LEN && memcmp(img, new_img, NEW_LEN) == 0) ||
         (b->version == 3 && b->len == NEWER_LEN && memcmp(img, newer_img, NEWER_LEN) == 0);
    ok = ok && b->version >= st.counter && (!b->trial || b->version > st.counter);
    check(ok, what);
    return ok;
}

int main(void) {
    static const uint8_t keys[2][32] = {{1, 2, 3}, {9, 9, 9, 9}};
    uint8_t head[KILN_SIGNED_KEY_AT + 32], key[32];
    kiln_slot_state st;
    kiln_boot b;
    kiln_error err;
    kiln_download dl;
    long ops, k, refused = 0;
    unsigned cut_fail = 0;

    fill(old_img, OLD_LEN, 1);
    fill(new_img, NEW_LEN, 2);
    fill(newer_img, NEWER_LEN, 3);
    memset(ram.mem, 0xFF, CAPACITY);
    ram.cut_at = -1;

    /* Provisioning: the factory image in slot A, the keys, the first state. */
    check(kiln_slots_state(&flash, &layout, &st, &err) == KILN_ERR_NOT_PROVISIONED, "no state before provisioning");
    memcpy(ram.mem + layout.slot_a, old_img, OLD_LEN);
    check(kiln_slots_write_keys(&flash, &layout, keys, 2, &err) == KILN_OK, "write_keys");
    check(kiln_slots_provision(&flash, &layout, OLD_LEN, 1, &st, &err) == KILN_OK, "provision");
    check(st.counter == 1 && st.floor == 1 && st.active == 0 && st.trial == KILN_TRIAL_IDLE, "provisioned state");
    check(kiln_slots_provision(&flash, &layout, OLD_LEN, 0, &st, &err) == KILN_ERR_PROVISIONED, "provision once");
    check(strcmp(err.rule, "") == 0 && strlen(err.description) > 0, "API errors are described");

    /* The trusted key a file names. */
    memset(head, 0, sizeof head);
    memcpy(head + KILN_SIGNED_KEY_AT, keys[1], 32);
    check(kiln_slots_key_for_file(&flash, &layout, head, sizeof head, &key, &err) == KILN_OK && memcmp(key, keys[1], 32) == 0,
          "the second listed key");
    head[KILN_SIGNED_KEY_AT] ^= 1;
    check(kiln_slots_key_for_file(&flash, &layout, head, sizeof head, &key, &err) == KILN_ERR_NOT_FOUND, "an unlisted key");
    check(kiln_slots_key_for_file(&flash, &layout, head, 40, &key, &err) == KILN_ERR_NOT_FOUND, "a head too short");

    /* An update, its trial, a reboot before confirm: back to slot A. */
    check(boot_checked(&b, "boot") && b.slot == 0 && !b.trial, "boots the factory image");
    check(kiln_slots_confirm(&flash, &layout, &st, &err) == KILN_ERR_NO_TRIAL, "nothing to confirm");
    check(update(new_img, NEW_LEN, 2, &err) == KILN_OK, "update to release 2");
    check(kiln_slots_state(&flash, &layout, &st, &err) == KILN_OK && st.trial == KILN_TRIAL_PENDING && st.len[1] == NEW_LEN,
          "pending");
    check(boot_checked(&b, "trial boot") && b.slot == 1 && b.trial && b.version == 2, "the trial boots slot B");
    check(kiln_slots_begin(&flash, &layout, &dl, &err) == KILN_ERR_TRIAL_RUNNING, "no download during a trial");
    check(boot_checked(&b, "reboot") && b.slot == 0 && !b.trial && b.version == 1, "a reboot before confirm returns");
    check(kiln_slots_state(&flash, &layout, &st, &err) == KILN_OK && st.counter == 1, "the counter stays");

    /* The retry, confirmed: the counter is 2; releases 2 and 1 are refused. */
    check(update(new_img, NEW_LEN, 2, &err) == KILN_OK, "retry");
    check(boot_checked(&b, "retry boot") && b.trial, "the retry's trial");
    check(kiln_slots_confirm(&flash, &layout, &st, &err) == KILN_OK && st.counter == 2 && st.floor == 2 && st.active == 1,
          "confirm");
    check(boot_checked(&b, "confirmed boot") && b.slot == 1 && !b.trial, "boots the confirmed release 2");
    check(update(new_img, NEW_LEN, 2, &err) == KILN_ERR_NOT_NEWER, "the same release is refused");
    check(update(old_img, OLD_LEN, 1, &err) == KILN_ERR_NOT_NEWER, "an older release is refused");
    check(boot_checked(&b, "after the refusals") && b.version == 2, "still release 2");

    /* Misuse. */
    check(kiln_slots_state(NULL, &layout, &st, &err) == KILN_ERR_NULL, "NULL flash");
    memset(&dl, 0, sizeof dl);
    check(kiln_slots_write(&flash, &layout, &dl, new_img, 4, &err) == KILN_ERR_HANDLE, "a download not begun");
    {
        kiln_slots_layout bad = layout;
        bad.slot_b = layout.slot_a + SECTOR;
        check(kiln_slots_state(&flash, &bad, &st, &err) == KILN_ERR_ARGUMENT, "overlapping slots");
    }
    check(kiln_slots_begin(&flash, &layout, &dl, &err) == KILN_OK &&
              kiln_slots_write(&flash, &layout, &dl, slot_full, sizeof slot_full, &err) == KILN_OK &&
              kiln_slots_write(&flash, &layout, &dl, slot_full, 64, &err) == KILN_ERR_TOO_LARGE,
          "past the slot's end");
    ram.cut_at = 0;
    ram.ops = 0;
    check(kiln_slots_state(&flash, &layout, &st, &err) == KILN_OK && kiln_slots_begin(&flash, &layout, &dl, &err) == KILN_OK &&
              kiln_slots_write(&flash, &layout, &dl, new_img, 64, &err) == KILN_ERR_FLASH && err.read_status == 1,
          "a failed flash call is KILN_ERR_FLASH with its status");
    ram.off = 0;
    ram.cut_at = -1;
    check(boot_checked(&b, "after the misuse") && b.version == 2, "release 2 after the misuse");

    /* The power cut in every operation of an update to release 3. */
    snapshot = ram;
    ram.ops = 0;
    check(update(newer_img, NEWER_LEN, 3, &err) == KILN_OK && boot_checked(&b, "clean update") && b.trial &&
              kiln_slots_confirm(&flash, &layout, &st, &err) == KILN_OK,
          "the clean update to release 3");
    ops = ram.ops;
    for (k = 0; k < ops; k++) {
        refused += ram.refused;
        ram = snapshot;
        ram.ops = 0;
        ram.cut_at = k;
        if (update(newer_img, NEWER_LEN, 3, NULL) == KILN_OK && kiln_slots_boot(&flash, &layout, &b, NULL) == KILN_OK && b.trial)
            kiln_slots_confirm(&flash, &layout, NULL, NULL);
        ram.off = 0;
        ram.cut_at = -1;
        if (!boot_checked(&b, "reboot after the cut")) {
            cut_fail++;
            continue;
        }
        if (b.trial) {
            kiln_slots_confirm(&flash, &layout, NULL, NULL);
        } else if (b.version != 3) {
            if (update(newer_img, NEWER_LEN, 3, NULL) != KILN_OK || !boot_checked(&b, "retry after the cut") || !b.trial ||
                kiln_slots_confirm(&flash, &layout, NULL, NULL) != KILN_OK)
                cut_fail++;
        }
        if (!boot_checked(&b, "after the retry") || b.version != 3 || b.trial) cut_fail++;
        if (kiln_slots_state(&flash, &layout, &st, NULL) != KILN_OK || st.counter != 3) cut_fail++;
    }
    refused += ram.refused;
    check(cut_fail == 0 && refused == 0, "every cut recovers, and no write sets a 0 bit to 1");
    printf("power cut in each of %ld flash operations of an update: %u violations\n", ops, cut_fail);

    printf("%u passed, %u failed\n", passed, failed);
    return failed ? 1 : 0;
}
