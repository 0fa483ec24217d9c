/*
 * check_hsdp.h — lesson 10's check of blank 8 (check_hsdp.c): HSDP's
 * gradient sum, reduce-scatter in the shard group then all-reduce across
 * the replica group.
 */
#ifndef LESSON_10_CHECK_HSDP_H
#define LESSON_10_CHECK_HSDP_H

#include <stdbool.h>

/* Runs the (dp, N) cases, prints a verdict each; true when all pass. */
bool check_hsdp(void);

#endif
