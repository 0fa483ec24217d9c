/*
 * blank.h — the marked blanks of a tutorial exercise.
 *
 * An exercise is the lesson's code with holes in it.  Each hole is a line
 *
 *     PTDP_BLANK(2, "choose send_chunk and recv_chunk for step s");
 *
 * that you replace with your own code.  Until you do, reaching that line
 * makes the surrounding function return PTDP_EUSER and records, for the
 * lesson's check to print,
 *
 *     lesson 01: blank 2 (choose send_chunk and recv_chunk for step s) is still
 *     empty — see tutorials/01-collectives/exercise.c:57
 *
 * On a device thread started by the check (tutorial_launch) the blank also
 * fails its device with ptdp_fail, so every other device's pending send,
 * recv or collective returns PTDP_EABORTED instead of waiting for a partner
 * that will never come: an unfinished exercise ends in milliseconds, never
 * in a hang or a crash.  The same line works in host code (no device).
 *
 * PTDP_BLANK is a statement that returns an int: use it in functions that
 * return an int status, as every ptdp function does.  The lesson number is
 * read from the file's directory, tutorials/NN-name/.
 *
 * Until a blank is filled, the parameters and variables its answer will use
 * are unused, and some are read only after it; so this header switches the
 * "unused" and "maybe uninitialized" warnings off for the rest of the file
 * that includes it.  Only exercise files include it: solution.c, the same
 * code with the blanks filled, compiles with every warning on.
 */
#ifndef PTDP_TUTORIAL_BLANK_H
#define PTDP_TUTORIAL_BLANK_H

#include "ptdp/error.h"

/* Record that blank n ("what to write here") was reached at file:line,
 * fail the calling device if it is one, and return PTDP_EUSER. */
int tutorial_blank(int n, const char *hint, const char *file, int line);

#define PTDP_BLANK(n, hint) return tutorial_blank((n), (hint), __FILE__, __LINE__)

/* (tutorial.c, which implements tutorial_blank, keeps every warning.) */
#if defined(TUTORIAL_BLANK_KEEP_WARNINGS)
#elif defined(__clang__)
#pragma clang diagnostic ignored "-Wunused-parameter"
#pragma clang diagnostic ignored "-Wunused-variable"
#pragma clang diagnostic ignored "-Wunused-function"
#pragma clang diagnostic ignored "-Wuninitialized"
#pragma clang diagnostic ignored "-Wsometimes-uninitialized"
#if __has_warning("-Wunused-but-set-variable")
#pragma clang diagnostic ignored "-Wunused-but-set-variable"
#endif
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-variable"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#endif
