# make coverage: the native unit and CLI tests on a build instrumented with
# gcov (--coverage, -O1 so the CLI tests keep their pace), then line and
# branch coverage per folder (scripts/coverage.sh). Included by the Makefile.
COV_BUILD := $(BUILD)/coverage
# COV_SMOKE=1 (used by the clean-checkout test, which only needs to know that
# the target builds, runs and reports on a fresh clone) runs one unit test and
# one CLI test instead of both suites again
COV_UNIT_BIN := $(if $(COV_SMOKE),$(COV_BUILD)/tests/test_json,$(UNIT_SRC:tests/unit/%.c=$(COV_BUILD)/tests/%))
COV_CLI_ONLY := $(if $(COV_SMOKE),test_help)

.PHONY: coverage
coverage:
	@$(MAKE) --no-print-directory BUILD=$(COV_BUILD) CFLAGS="-O1 -g --coverage" LDFLAGS="--coverage" all tests
	@find $(COV_BUILD) -name '*.gcda' -delete
	-@tests/run_unit.sh $(COV_BUILD) $(COV_UNIT_BIN)
	-@CLI_ONLY="$(COV_CLI_ONLY)" WISP=$(abspath $(COV_BUILD)/wisp) WISP_ASAN="" TOOLS=$(abspath $(COV_BUILD)/tests/tools) WISP_SHARED=$(SHARED) \
	  WORK=$(abspath $(COV_BUILD)/tests/cli) tests/run_cli.sh
	@echo
	@echo "coverage of the native unit and CLI tests:"
	@scripts/coverage.sh $(COV_BUILD)
