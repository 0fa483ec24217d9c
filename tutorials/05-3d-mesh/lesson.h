/*
 * lesson.h — lesson 05: the function you write in exercise.c, which the
 * check calls.
 */
#ifndef LESSON_05_H
#define LESSON_05_H

#include "ptdp/device.h"
#include "ptdp/mesh.h"

/* On every device of a world of dp * tp * pp (a collective over
 * dev->world): fill *m with the grid's sizes, this device's coordinates and
 * its three groups — the devices it shares a TP group, a DP group and a
 * pipeline with — exactly as ptdp_mesh_init does (mesh.h).  Returns 0 or
 * a PTDP_E… code. */
int lesson_mesh_create(ptdp_device *dev, int dp, int tp, int pp, ptdp_mesh *m);

#endif
