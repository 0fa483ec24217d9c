/*
 * test_mesh.c — the rank layout of a dp x tp x pp mesh and its groups.
 *
 *   world rank = tp_rank + tp * (dp_rank + dp * pp_rank)     (tp fastest, then dp, then pp)
 *
 *   dp=2 tp=2 pp=2:      stage 0            stage 1
 *                     dp0: [0 1]         dp0: [4 5]      TP groups {0,1} {2,3} {4,5} {6,7}
 *                     dp1: [2 3]         dp1: [6 7]      DP groups {0,2} {1,3} {4,6} {5,7}
 *                                                        PP groups {0,4} {1,5} {2,6} {3,7}
 *
 * Checked two ways: the pure functions (world rank <-> coordinates), and
 * the groups that ptdp_mesh_init really builds by splitting the world —
 * each device lists the world ranks of its TP, DP and PP group members.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/mesh.h"
#include "ptdp/launch.h"
#include "ptdp/comm.h"

static const harness_tcase mesh_tests = { .name = "mesh", .timeout_s = 60 };

TEST(mesh_tests, test_coordinates_round_trip)
{
    static const int shapes[][3] = { { 2, 2, 2 }, { 3, 2, 1 }, { 1, 4, 2 }, { 2, 1, 4 }, { 4, 2, 8 }, { 1, 1, 1 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int dp = shapes[s][0], tp = shapes[s][1], pp = shapes[s][2];
        for (int r = 0; r < dp * tp * pp; r++) {
            int d, t, p;
            ptdp_mesh_coords(dp, tp, pp, r, &d, &t, &p);
            ck_assert(d >= 0 && d < dp && t >= 0 && t < tp && p >= 0 && p < pp);
            ck_assert_int_eq(ptdp_mesh_world_rank(dp, tp, pp, d, t, p), r);
            /* tp fastest: the next rank is the next TP rank while there is one */
            if (t + 1 < tp)
                ck_assert_int_eq(ptdp_mesh_world_rank(dp, tp, pp, d, t + 1, p), r + 1);
        }
    }
    /* the picture above */
    int d, t, p;
    ptdp_mesh_coords(2, 2, 2, 6, &d, &t, &p);
    ck_assert(d == 1 && t == 0 && p == 1);
    ptdp_mesh_coords(3, 2, 1, 5, &d, &t, &p);
    ck_assert(d == 2 && t == 1 && p == 0);
    ck_assert_int_eq(ptdp_mesh_world_rank(2, 1, 4, 1, 0, 3), 7);
}
END_TEST

/* ------------------------------------------------ the groups, for real */

enum { MAXW = 16 };

typedef struct {
    int dp, tp, pp;
    /* members[kind][world rank][i]: world rank of member i of that device's
     * group (kind 0 tp, 1 dp, 2 pp); sizes[kind][world rank]; its rank in it */
    int members[3][MAXW][MAXW];
    int sizes[3][MAXW];
    int my_rank[3][MAXW];
    char names[3][MAXW][16];
} groups_arg;

static int groups_device(ptdp_device *dev, void *arg)
{
    groups_arg *a = arg;
    ptdp_mesh m;
    int rc = ptdp_mesh_init(dev, a->dp, a->tp, a->pp, &m);
    if (rc != 0)
        return rc;
    ptdp_comm *g[3] = { m.tp_comm, m.dp_comm, m.pp_comm };
    for (int k = 0; k < 3; k++) {
        a->sizes[k][dev->rank] = ptdp_comm_size(g[k]);
        a->my_rank[k][dev->rank] = ptdp_comm_rank(g[k]);
        snprintf(a->names[k][dev->rank], sizeof a->names[k][dev->rank], "%s", ptdp_comm_name(g[k]));
        for (int i = 0; i < ptdp_comm_size(g[k]); i++)
            a->members[k][dev->rank][i] = ptdp_comm_world_rank(g[k], i);
    }
    ptdp_mesh_free(&m);
    return PTDP_OK;
}

static void build(groups_arg *a, int dp, int tp, int pp)
{
    memset(a, 0, sizeof *a);
    a->dp = dp;
    a->tp = tp;
    a->pp = pp;
    ck_assert_int_le(dp * tp * pp, MAXW);
    harness_launch_ok(dp * tp * pp, groups_device, a, NULL, NULL);
}

static void expect_group(const groups_arg *a, int kind, int rank, const int *want, int n)
{
    static const char *const names[3] = { "tp", "dp", "pp" };
    ck_assert_int_eq(a->sizes[kind][rank], n);
    ck_assert_str_eq(a->names[kind][rank], names[kind]);
    for (int i = 0; i < n; i++)
        ck_assert_msg(a->members[kind][rank][i] == want[i], "rank %d, %s group member %d: world rank %d, want %d",
                      rank, names[kind], i, a->members[kind][rank][i], want[i]);
}

TEST(mesh_tests, test_groups_of_2x2x2)
{
    groups_arg a;
    build(&a, 2, 2, 2);
    static const int tp[8][2] = { { 0, 1 }, { 0, 1 }, { 2, 3 }, { 2, 3 }, { 4, 5 }, { 4, 5 }, { 6, 7 }, { 6, 7 } };
    static const int dp[8][2] = { { 0, 2 }, { 1, 3 }, { 0, 2 }, { 1, 3 }, { 4, 6 }, { 5, 7 }, { 4, 6 }, { 5, 7 } };
    static const int pp[8][2] = { { 0, 4 }, { 1, 5 }, { 2, 6 }, { 3, 7 }, { 0, 4 }, { 1, 5 }, { 2, 6 }, { 3, 7 } };
    for (int r = 0; r < 8; r++) {
        expect_group(&a, 0, r, tp[r], 2);
        expect_group(&a, 1, r, dp[r], 2);
        expect_group(&a, 2, r, pp[r], 2);
    }
}
END_TEST

TEST(mesh_tests, test_groups_of_3x2x2_and_1x4x2)
{
    groups_arg a;
    /* dp 3, tp 2, pp 2: 12 devices; rank 7 = 1 + 2 (0 + 3 x 1) is (dp 0, tp 1, pp 1) */
    build(&a, 3, 2, 2);
    static const int tp7[] = { 6, 7 }, dp7[] = { 7, 9, 11 }, pp7[] = { 1, 7 };
    expect_group(&a, 0, 7, tp7, 2);
    expect_group(&a, 1, 7, dp7, 3);
    expect_group(&a, 2, 7, pp7, 2);
    ck_assert_int_eq(a.my_rank[1][7], 0);
    ck_assert_int_eq(a.my_rank[2][7], 1);
    static const int dp4[] = { 6, 8, 10 }, tp4[] = { 4, 5 };
    expect_group(&a, 1, 10, dp4, 3);
    expect_group(&a, 0, 4, tp4, 2);

    /* dp 1, tp 4, pp 2: the DP groups are single devices */
    build(&a, 1, 4, 2);
    static const int tp5[] = { 4, 5, 6, 7 }, dp5[] = { 5 }, pp5[] = { 1, 5 };
    expect_group(&a, 0, 5, tp5, 4);
    expect_group(&a, 1, 5, dp5, 1);
    expect_group(&a, 2, 5, pp5, 2);
}
END_TEST

TEST(mesh_tests, test_every_group_follows_the_rule)
{
    /* For every shape: the member i of a device's TP group has the device's
     * (dp, pp) and tp rank i; likewise for DP and PP. */
    static const int shapes[][3] = { { 2, 1, 4 }, { 4, 2, 1 }, { 2, 4, 2 }, { 1, 1, 8 }, { 5, 3, 1 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        groups_arg a;
        build(&a, shapes[s][0], shapes[s][1], shapes[s][2]);
        for (int r = 0; r < a.dp * a.tp * a.pp; r++) {
            int d, t, p;
            ptdp_mesh_coords(a.dp, a.tp, a.pp, r, &d, &t, &p);
            int n[3] = { a.tp, a.dp, a.pp };
            for (int k = 0; k < 3; k++) {
                ck_assert_int_eq(a.sizes[k][r], n[k]);
                ck_assert_int_eq(a.my_rank[k][r], k == 0 ? t : k == 1 ? d : p);
                for (int i = 0; i < n[k]; i++) {
                    int want = k == 0 ? ptdp_mesh_world_rank(a.dp, a.tp, a.pp, d, i, p)
                             : k == 1 ? ptdp_mesh_world_rank(a.dp, a.tp, a.pp, i, t, p)
                                      : ptdp_mesh_world_rank(a.dp, a.tp, a.pp, d, t, i);
                    ck_assert_int_eq(a.members[k][r][i], want);
                }
            }
        }
    }
}
END_TEST

/* ------------------------------------------------ groups by name */

/* dp 2 x tp 1 x pp 3: the embedding group joins stage 0 and stage 2 of each
 * pipeline, ordered by stage ({0, 4}, {1, 5}); stage 1 is in none.  The
 * named axes are the mesh's own communicators, and asking twice builds once. */
typedef struct {
    int emb_size[MAXW], emb_rank[MAXW], emb_other[MAXW];
    bool axes_same[MAXW];
    bool split_once[MAXW];
} emb_arg;

static int emb_device(ptdp_device *dev, void *arg)
{
    emb_arg *a = arg;
    ptdp_mesh m;
    int rc = ptdp_mesh_init(dev, 2, 1, 3, &m);
    if (rc != 0)
        return rc;
    a->axes_same[dev->rank] = ptdp_mesh_group(&m, PTDP_GROUP_DP) == m.dp_comm &&
                              ptdp_mesh_group(&m, PTDP_GROUP_TP) == m.tp_comm &&
                              ptdp_mesh_group(&m, PTDP_GROUP_PP) == m.pp_comm &&
                              ptdp_mesh_group(&m, PTDP_GROUP_CP) == m.cp_comm &&
                              ptdp_mesh_group(&m, PTDP_GROUP_EMB) == NULL;   /* not built yet */
    double t0 = dev->clock.now, t1 = t0;
    if ((rc = ptdp_mesh_add_group(dev, &m, PTDP_GROUP_EMB)) == 0) {
        t1 = dev->clock.now;   /* a split: its latency is charged */
        rc = ptdp_mesh_add_group(dev, &m, PTDP_GROUP_EMB);   /* kept: no second split */
    }
    a->split_once[dev->rank] = t1 > t0 && dev->clock.now == t1;
    ptdp_comm *e = ptdp_mesh_group(&m, PTDP_GROUP_EMB);
    a->emb_size[dev->rank] = e ? ptdp_comm_size(e) : 0;
    a->emb_rank[dev->rank] = e ? ptdp_comm_rank(e) : -1;
    a->emb_other[dev->rank] = e ? ptdp_comm_world_rank(e, 1 - ptdp_comm_rank(e)) : -1;
    ptdp_mesh_free(&m);
    return rc;
}

TEST(mesh_tests, test_embedding_group_joins_the_first_and_last_stage)
{
    emb_arg a;
    memset(&a, 0, sizeof a);
    harness_launch_ok(6, emb_device, &a, NULL, NULL);
    static const int size[6] = { 2, 2, 0, 0, 2, 2 }, rank[6] = { 0, 0, -1, -1, 1, 1 };
    static const int other[6] = { 4, 5, -1, -1, 0, 1 };
    for (int r = 0; r < 6; r++) {
        ck_assert_msg(a.axes_same[r], "rank %d: the named axes are not the mesh's communicators", r);
        ck_assert_msg(a.split_once[r], "rank %d: asking for the group twice should split the world once", r);
        ck_assert_int_eq(a.emb_size[r], size[r]);
        ck_assert_int_eq(a.emb_rank[r], rank[r]);
        ck_assert_int_eq(a.emb_other[r], other[r]);
    }
}
END_TEST

/* dp 2 x cp 2 x tp 2 with ep 2: the DP group of a TP rank is its four
 * (dp, cp) devices in the order j = cp + 2 dp; EP groups are consecutive
 * js ({j0 j1}, {j2 j3}), expert-DP groups the js of one EP rank ({j0 j2},
 * {j1 j3}), each within its TP rank.  With ep 1 neither is built. */
typedef struct {
    int ep[MAXW][2], edp[MAXW][2];
    bool none_at_ep1[MAXW];
} ep_arg;

static int ep_device(ptdp_device *dev, void *arg)
{
    ep_arg *a = arg;
    ptdp_mesh m;
    int rc = ptdp_mesh_init_cp(dev, 2, 2, 2, 1, &m);
    if (rc == 0 && (rc = ptdp_mesh_add_group(dev, &m, PTDP_GROUP_EP)) == 0)   /* ep 1 after init */
        a->none_at_ep1[dev->rank] = ptdp_mesh_group(&m, PTDP_GROUP_EP) == NULL;
    ptdp_mesh_free(&m);
    if (rc == 0 && (rc = ptdp_mesh_init_cp(dev, 2, 2, 2, 1, &m)) == 0) {
        m.ep = 2;
        if ((rc = ptdp_mesh_add_group(dev, &m, PTDP_GROUP_EP)) == 0 &&
            (rc = ptdp_mesh_add_group(dev, &m, PTDP_GROUP_EDP)) == 0)
            for (int i = 0; i < 2; i++) {
                a->ep[dev->rank][i] = ptdp_comm_world_rank(ptdp_mesh_group(&m, PTDP_GROUP_EP), i);
                a->edp[dev->rank][i] = ptdp_comm_world_rank(ptdp_mesh_group(&m, PTDP_GROUP_EDP), i);
            }
        ptdp_mesh_free(&m);
    }
    return rc;
}

TEST(mesh_tests, test_expert_groups_split_the_dp_group)
{
    ep_arg a;
    memset(&a, 0, sizeof a);
    harness_launch_ok(8, ep_device, &a, NULL, NULL);
    /* world rank = tp + 2 (cp + 2 dp): tp rank 0 holds 0 2 4 6 as j = 0 1 2 3 */
    static const int ep[8][2] = { { 0, 2 }, { 1, 3 }, { 0, 2 }, { 1, 3 }, { 4, 6 }, { 5, 7 }, { 4, 6 }, { 5, 7 } };
    static const int edp[8][2] = { { 0, 4 }, { 1, 5 }, { 2, 6 }, { 3, 7 }, { 0, 4 }, { 1, 5 }, { 2, 6 }, { 3, 7 } };
    for (int r = 0; r < 8; r++) {
        ck_assert_msg(a.none_at_ep1[r], "rank %d: an EP group was built at ep 1", r);
        for (int i = 0; i < 2; i++) {
            ck_assert_msg(a.ep[r][i] == ep[r][i], "rank %d: EP member %d is %d, want %d", r, i, a.ep[r][i], ep[r][i]);
            ck_assert_msg(a.edp[r][i] == edp[r][i], "rank %d: expert-DP member %d is %d, want %d", r, i, a.edp[r][i],
                          edp[r][i]);
        }
    }
}
END_TEST

/* HSDP: dp 4 x tp 2 with shard groups of 2.  Within a TP rank the DP
 * ranks d = 0 1 2 3 (world 2d + tp) fall into shard groups {d0 d1},
 * {d2 d3} and replica groups {d0 d2}, {d1 d3}, as mesh.h pictures. */
typedef struct { int shard[MAXW][2], replica[MAXW][2]; } hsdp_arg;

static int hsdp_device(ptdp_device *dev, void *arg)
{
    hsdp_arg *a = arg;
    ptdp_mesh m;
    int rc = ptdp_mesh_init(dev, 4, 2, 1, &m);
    if (rc == 0) {
        m.shard = 2;
        if ((rc = ptdp_mesh_add_group(dev, &m, PTDP_GROUP_SHARD)) == 0 &&
            (rc = ptdp_mesh_add_group(dev, &m, PTDP_GROUP_REPLICA)) == 0)
            for (int i = 0; i < 2; i++) {
                a->shard[dev->rank][i] = ptdp_comm_world_rank(ptdp_mesh_group(&m, PTDP_GROUP_SHARD), i);
                a->replica[dev->rank][i] = ptdp_comm_world_rank(ptdp_mesh_group(&m, PTDP_GROUP_REPLICA), i);
            }
        ptdp_mesh_free(&m);
    }
    return rc;
}

TEST(mesh_tests, test_hsdp_groups_split_the_dp_group)
{
    hsdp_arg a;
    memset(&a, 0, sizeof a);
    harness_launch_ok(8, hsdp_device, &a, NULL, NULL);
    /* world rank = tp + 2 dp: tp rank 0 holds 0 2 4 6 as d = 0 1 2 3 */
    static const int shard[8][2] = { { 0, 2 }, { 1, 3 }, { 0, 2 }, { 1, 3 }, { 4, 6 }, { 5, 7 }, { 4, 6 }, { 5, 7 } };
    static const int replica[8][2] = { { 0, 4 }, { 1, 5 }, { 2, 6 }, { 3, 7 }, { 0, 4 }, { 1, 5 }, { 2, 6 }, { 3, 7 } };
    for (int r = 0; r < 8; r++)
        for (int i = 0; i < 2; i++) {
            ck_assert_msg(a.shard[r][i] == shard[r][i], "rank %d: shard member %d is %d, want %d", r, i,
                          a.shard[r][i], shard[r][i]);
            ck_assert_msg(a.replica[r][i] == replica[r][i], "rank %d: replica member %d is %d, want %d", r, i,
                          a.replica[r][i], replica[r][i]);
        }
}
END_TEST

static int wrong_world_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_mesh m;
    return ptdp_mesh_init(dev, 2, 2, 1, &m);   /* needs 4, the world has 3 */
}

TEST(mesh_tests, test_wrong_world_size_is_an_error)
{
    ptdp_launch_result r;
    ck_assert_int_eq(harness_launch(3, wrong_world_device, NULL, NULL, &r), PTDP_EINVAL);
    ASSERT_HAS(r.message, "needs 4 devices, the world has 3");
    ptdp_launch_result_free(&r);
}
END_TEST

int main(void)
{
    return harness_main("mesh");
}
