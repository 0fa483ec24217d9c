/*
 * check_rope.h — lesson 08's check of blank 6 (check_rope.c): the llama's
 * rotary positions under context parallelism.
 */
#ifndef LESSON_08_CHECK_ROPE_H
#define LESSON_08_CHECK_ROPE_H

#include <stdbool.h>

/* Runs N = 1 .. 4, prints its verdict; true when blank 6 is right. */
bool check_rope(void);

#endif
