/*
 * check_dualpipe.h — lesson 09's check of blank 6 (check_dualpipe.c):
 * DualPipe's two copies of each stage, summed over the mirror pair.
 */
#ifndef LESSON_09_CHECK_DUALPIPE_H
#define LESSON_09_CHECK_DUALPIPE_H

#include <stdbool.h>

/* Runs lesson_dualpipe_sum on 2, 4 and 6 devices, prints a verdict; true
 * when right. */
bool check_dualpipe(void);

#endif
