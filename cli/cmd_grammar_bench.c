/* placeholder replaced below */
#include "commands.h"
int cmd_grammar_bench(int argc, char **argv);
int cmd_grammar_bench(int argc, char **argv) { (void)argc; (void)argv; return 2; }
