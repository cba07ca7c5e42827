#include "random_seed.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

uint64_t cli_random_seed(void) {
    uint64_t s = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&s, sizeof s, 1, f) != 1) s = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    if (f) fclose(f);
    return s;
}
