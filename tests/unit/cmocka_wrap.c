/*
 * cmocka_wrap: one cmocka test per process, without touching any test's
 * main(). Every unit test binary is linked with
 * -Wl,--wrap=_cmocka_run_group_tests (CMakeLists.txt), so each
 * cmocka_run_group_tests() of its main() lands here first:
 *
 *   AL_UNIT_LIST=1    print the names of the group's tests, one a line,
 *                     and run nothing (tests/unit/discover.cmake reads
 *                     them after the build to register one ctest entry
 *                     per test);
 *   AL_UNIT_TEST=NAME run only the test called NAME (cmocka 1.1's
 *                     cmocka_set_test_filter, an exact name: the names
 *                     hold no wildcard). A group without it runs nothing
 *                     (not even its group set-up) and passes;
 *   neither           the whole group, as before.
 *
 * It holds no test and no helper for tests (testutil.c has those).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

int __real__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *tests,
                                   size_t num_tests, CMFixtureFunction group_setup,
                                   CMFixtureFunction group_teardown);
int __wrap__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *tests,
                                   size_t num_tests, CMFixtureFunction group_setup,
                                   CMFixtureFunction group_teardown);

int __wrap__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *tests,
                                   size_t num_tests, CMFixtureFunction group_setup,
                                   CMFixtureFunction group_teardown)
{
    const char *list = getenv("AL_UNIT_LIST");
    if (list && *list) {
        for (size_t i = 0; i < num_tests; i++)
            if (tests[i].name && printf("%s\n", tests[i].name) < 0)
                return 1;
        return fflush(stdout) != 0;
    }
    const char *only = getenv("AL_UNIT_TEST");
    if (only && *only) {
        size_t i = 0;
        while (i < num_tests && (!tests[i].name || strcmp(tests[i].name, only) != 0))
            i++;
        if (i == num_tests)
            return 0; /* not in this group */
        cmocka_set_test_filter(only);
    }
    return __real__cmocka_run_group_tests(group_name, tests, num_tests, group_setup,
                                          group_teardown);
}
