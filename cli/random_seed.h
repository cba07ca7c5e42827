/* A sampling seed for runs that were not given one. */
#ifndef WISP_CLI_RANDOM_SEED_H
#define WISP_CLI_RANDOM_SEED_H

#include <stdint.h>

/* From /dev/urandom, else the time and the process id. */
uint64_t cli_random_seed(void);

#endif
