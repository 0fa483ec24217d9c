/*
 * commands.h — the list of `ptdp` commands.
 *
 * A command is a function  int ptdp_cmd_NAME(int argc, char **argv)  that
 * gets its own arguments (argv[0] is the command's name, e.g. "bench") and
 * returns the process exit code: 0 done, 1 the run failed, 2 a usage error
 * (args.h).  Every command answers --help.
 *
 * The list below is an "X-macro": each line names a command once, and
 * main.c expands the list twice, into the function declarations and into the
 * dispatch table.  So adding a command is one line here (plus its file in
 * cli/meson.build):
 *
 *     X(schedule, "print and draw pipeline schedules (GPipe, 1F1B)")
 *
 * declares int ptdp_cmd_schedule(int argc, char **argv) and makes
 * `ptdp schedule …` call it.  The order is the order of `ptdp --help`.
 */
#ifndef PTDP_CLI_COMMANDS_H
#define PTDP_CLI_COMMANDS_H

#define PTDP_COMMANDS(X)                                                          \
    X(train,    "train a model (--model NAME) on dp x tp x pp devices (--check: against one device)") \
    X(sample,   "generate text from a language model's checkpoint: ptdp sample --load FILE --prompt TEXT") \
    X(schedule, "print and draw pipeline schedules (GPipe, 1F1B)")             \
    X(plan,     "choose the layout of a model on a GPU cluster: memory, step time, best first") \
    X(fp8,      "FP8 formats and recipes: ptdp fp8 quantize IN.st OUT.st --recipe R --format e4m3") \
    X(figures,  "draw the course's figures (SVG) from real runs: ptdp figures --out DIR") \
    X(demo,     "the classroom demo: 1 device vs dp 2 x tp 2 x pp 2, side by side") \
    X(bench,    "benchmarks: collectives (vs memory bandwidth), memory, a training step, ZeRO") \
    X(selftest, "check every collective against a sequential reference")        \
    X(version,  "print the version and how this binary was built")              \
    X(help,     "show the commands, or one command's flags: ptdp help bench")

/* int ptdp_cmd_bench(int argc, char **argv); … one per line above */
#define PTDP_DECLARE_COMMAND(name, summary) int ptdp_cmd_##name(int argc, char **argv);
PTDP_COMMANDS(PTDP_DECLARE_COMMAND)
#undef PTDP_DECLARE_COMMAND

#endif
