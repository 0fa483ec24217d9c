/*
 * lesson.h — lesson 04: the functions you write in exercise.c, which the
 * check calls.
 *
 * Each one fills an empty schedule (made by ptdp_schedule_alloc for
 * s->pp stages and s->micro_batches micro-batches) with every stage's list
 * of actions, using ptdp_schedule_push (schedule.h).  They are generators,
 * exactly like ptdp_schedule_gpipe and ptdp_schedule_1f1b, except that they
 * return a status, so that an unfinished one can say so.
 */
#ifndef LESSON_04_H
#define LESSON_04_H

#include "ptdp/schedule.h"

/* GPipe: every stage runs all m forwards, then all m backwards, then the
 * optimizer step.  Returns 0 or a PTDP_E… code. */
int lesson_gpipe(ptdp_schedule *s);

/* 1F1B: a warm-up of forwards, then one forward and one backward at a time,
 * then the backwards still owed, then the optimizer step; sends and
 * receives ordered so that blocking rendezvous send/recv cannot deadlock.
 * Returns 0 or a PTDP_E… code. */
int lesson_1f1b(ptdp_schedule *s);

#endif
