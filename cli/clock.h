/* The two clocks the CLI measures with: wall time for speeds, CPU time for
 * what a run really cost on a busy machine. Apart from the session so that
 * a measuring program (bench/) can link the bandwidth tests without it. */
#ifndef WISP_CLI_CLOCK_H
#define WISP_CLI_CLOCK_H

/* Seconds on a monotonic clock. */
double cli_now(void);
/* CPU seconds this process has used (all threads). */
double cli_cpu_seconds(void);

#endif
