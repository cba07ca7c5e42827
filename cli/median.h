/* The median of repeated measurements: what the bench programs report, since
 * on a shared machine single runs land well above or below the others. */
#ifndef WISP_CLI_MEDIAN_H
#define WISP_CLI_MEDIAN_H

/* The median of v[0..n), n >= 1; sorts v in place (copy first to keep the
 * runs' order). */
double cli_median_sorting(double *v, int n);

#endif
