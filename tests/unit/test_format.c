/* core's freestanding formatter behaves like printf for what messages use. */
#include <string.h>

#include "check.h"
#include "status.h"

static void same(const char *got, const char *want) { CHECK(strcmp(got, want) == 0, "got '%s' want '%s'", got, want); }

int main(void) {
    char b[128];
    wisp_format(b, sizeof b, "%s=%d %u %x %lld %llu %zu %c %%", "k", -42, 42u, 255u, -9000000000LL, 18000000000ULL,
                (size_t)7, 'z');
    same(b, "k=-42 42 ff -9000000000 18000000000 7 z %");
    wisp_format(b, sizeof b, "[%.*s] [%.3s]", 3, "abcdef", "xy");
    same(b, "[abc] [xy]");
    wisp_format(b, sizeof b, "%g %g %g %g %g %g", 0.0, 1.5, -2e-7, 123456789.0, 1e300, 0.1);
    same(b, "0 1.5 -2e-07 1.23457e+08 1e+300 0.1");
    wisp_format(b, sizeof b, "%f %.2f %g", 3.14159, 2.5, 1.0 / 0.0);
    same(b, "3.141590 2.50 inf");
    wisp_format(b, sizeof b, "0x%02x 0x%02x %04u %02zx", 10u, 0x1abu, 7u, (size_t)255);
    same(b, "0x0a 0x1ab 0007 ff");
    wisp_format(b, sizeof b, "%d", (int)(-2147483647 - 1));
    same(b, "-2147483648");
    size_t n = wisp_format(b, 5, "%s", "truncated text");
    CHECK(n == 4 && strcmp(b, "trun") == 0, "truncation");
    wisp_error err;
    CHECK(wisp_fail(&err, WISP_ERR_SHAPE, "tensor %s", "x") == WISP_ERR_SHAPE && err.status == WISP_ERR_SHAPE, "fail");
    wisp_error_prefix(&err, "file %d", 3);
    same(err.message, "file 3: tensor x");
    CHECK(wisp_fail(NULL, WISP_ERR_ARG, "no error struct") == WISP_ERR_ARG, "NULL err");
    return check_report("test_format");
}
