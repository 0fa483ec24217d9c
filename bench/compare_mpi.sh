#!/usr/bin/env bash
# compare_mpi.sh — ptdp's all_reduce beside Open MPI's MPI_Allreduce, in one run.
#
#   bench/compare_mpi.sh [--build DIR] [--rounds R] [--devices N] [--sizes LIST] [--raw FILE]
#   bench/compare_mpi.sh --processes [same flags]
#
# Runs `ptdp bench collectives --ops all_reduce --json` (default algorithm)
# and `mpirun -np N mpi_allreduce` (bench/mpi_allreduce.c, same timing
# method) R times, alternating, and prints the median of each as a Markdown
# table with the ratio of bus bandwidths and ptdp's share of the memory-traffic
# bound, then the targets for the shared-memory all-reduce and whether they
# were met.
# Defaults: --build build, --rounds 3, --devices 2, --sizes 4K,4M,64M.
# --raw FILE keeps every round's JSON lines (one per implementation and size).
#
# --processes: ptdp's devices are MPI processes themselves (the MPI backend):
# `mpirun -np N ptdp bench collectives --backend mpi --json` once per
# all_reduce algorithm — mpi (MPI_Allreduce inside ptdp's communicator),
# default and ring (ptdp's own, bit-identical to threads) — each run timing
# MPI_Allreduce alone beside itself, sample for sample.  Prints the medians
# of each algorithm's busbw, MPI_Allreduce's, their ratio sample by sample
# (a busy host slows both alike), and the target: --algo mpi >= 0.9x
# MPI_Allreduce at 4 MiB and 64 MiB.
#
# Needs MPI at configure time (Debian: apt-get install openmpi-bin libopenmpi-dev,
# then meson setup --reconfigure build -Dmpi_bench=enabled).
set -euo pipefail

build=build
rounds=3
devices=2
sizes=4K,4M,64M
raw=""
processes=0

die() { echo "compare_mpi.sh: $*" >&2; exit 2; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --build)   build=${2:?--build needs a directory}; shift 2 ;;
        --rounds)  rounds=${2:?--rounds needs a number}; shift 2 ;;
        --devices) devices=${2:?--devices needs a number}; shift 2 ;;
        --sizes)   sizes=${2:?--sizes needs a list}; shift 2 ;;
        --raw)     raw=${2:?--raw needs a file}; shift 2 ;;
        --processes) processes=1; shift ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds $rounds: must be a whole number >= 1"
[[ $devices =~ ^[1-9][0-9]*$ ]] || die "--devices $devices: must be a whole number >= 1"

ptdp=$build/cli/ptdp
mpi_bench=$build/bench/mpi_allreduce
[[ -x $ptdp ]] || die "$ptdp not found: build first (./quickstart, or meson compile -C $build)"
[[ $processes -eq 1 || -x $mpi_bench ]] || die "$mpi_bench not found: install Open MPI (Debian: apt-get install openmpi-bin libopenmpi-dev) and run: meson setup --reconfigure $build -Dmpi_bench=enabled && meson compile -C $build"
command -v mpirun >/dev/null || die "mpirun not found (Debian: apt-get install openmpi-bin)"

mpirun_args=(-np "$devices")
if [[ $(id -u) -eq 0 ]]; then
    mpirun_args+=(--allow-run-as-root)   # Open MPI refuses root otherwise
fi

results=$(mktemp)
trap 'rm -f "$results"' EXIT

if [[ $processes -eq 1 ]]; then
    echo "# ptdp on $devices MPI processes vs MPI_Allreduce: sizes $sizes, $rounds rounds" >&2
    for ((r = 1; r <= rounds; r++)); do
        for algo in mpi default ring; do
            echo "# round $r/$rounds: ptdp --backend mpi --algo $algo" >&2
            mpirun "${mpirun_args[@]}" --oversubscribe "$ptdp" bench collectives --backend mpi --algo "$algo" \
                --sizes "$sizes" --ops all_reduce --json | sed "s/^{/{\"run\": \"$algo\", /" >>"$results"
        done
    done
    if [[ -n $raw ]]; then
        cp "$results" "$raw"
    fi
    awk '
    function field(line, key,    m) {
        if (match(line, "\"" key "\": *\"?[^,}\"]*")) {
            m = substr(line, RSTART, RLENGTH)
            sub(/^[^:]*: *"?/, "", m)
            return m
        }
        return ""
    }
    function median(list,    a, n, i, j, t) {
        n = split(list, a, " ")
        for (i = 2; i <= n; i++)
            for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function label(b) {
        if (b % 1048576 == 0) return b / 1048576 " MiB"
        if (b % 1024 == 0) return b / 1024 " KiB"
        return b " B"
    }
    {
        run = field($0, "run"); b = field($0, "bytes") + 0
        if (!(b in seen)) { seen[b] = 1; order[++nsizes] = b }
        who = field($0, "impl") == "mpi_raw" ? "raw" : "ptdp"
        bw[run, who, b] = bw[run, who, b] " " field($0, "busbw_GBps")
        if (who == "raw")
            vs[run, b] = vs[run, b] " " field($0, "ptdp_vs_mpi")
    }
    END {
        printf "| size | MPI_Allreduce busbw | ptdp --algo mpi | of MPI | ptdp default (shm) | of MPI | ptdp ring | of MPI |\n"
        printf "|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        for (k = 1; k <= nsizes; k++) {
            b = order[k]; line = ""
            all = bw["mpi", "raw", b] bw["default", "raw", b] bw["ring", "raw", b]
            for (i = 1; i <= 3; i++) {
                a = i == 1 ? "mpi" : i == 2 ? "default" : "ring"
                p = median(bw[a, "ptdp", b])
                r[a, b] = median(vs[a, b])
                line = line sprintf(" %.2f GB/s | %.2fx |", p, r[a, b])
            }
            printf "| %s | %.2f GB/s |%s\n", label(b), median(all), line
        }
        print ""
        print "Medians over the rounds; busbw = algbw x 2(n-1)/n.  \"of MPI\": ptdp busbw / MPI_Allreduce busbw,"
        print "sample by sample (each MPI_Allreduce sample runs right after ptdp'"'"'s), the median of the samples,"
        print "then of the rounds."
        print ""
        print "Target: ptdp --algo mpi >= 0.9x MPI_Allreduce"
        for (k = 1; k <= nsizes; k++)
            if (order[k] == 4194304 || order[k] == 67108864)
                printf "- %s: %.2fx, %s\n", label(order[k]), r["mpi", order[k]], (r["mpi", order[k]] >= 0.9 ? "met" : "NOT met")
    }' "$results"
    exit 0
fi

echo "# ptdp all_reduce vs MPI_Allreduce: $devices devices/ranks, sizes $sizes, $rounds rounds" >&2
for ((r = 1; r <= rounds; r++)); do
    echo "# round $r/$rounds: ptdp" >&2
    "$ptdp" bench collectives --devices "$devices" --sizes "$sizes" --ops all_reduce --json \
        | sed 's/^{/{"impl": "ptdp", /' >>"$results"
    echo "# round $r/$rounds: Open MPI" >&2
    mpirun "${mpirun_args[@]}" "$mpi_bench" "$sizes" >>"$results"
done

if [[ -n $raw ]]; then
    cp "$results" "$raw"
fi

# Medians per (implementation, size), then the table.  The JSON lines are
# flat objects written by ptdp and mpi_allreduce, so awk can read them.
awk -v devices="$devices" '
function field(line, key,    m) {
    if (match(line, "\"" key "\": *\"?[^,}\"]*")) {
        m = substr(line, RSTART, RLENGTH)
        sub(/^[^:]*: *"?/, "", m)
        return m
    }
    return ""
}
function median(list,    a, n, i, j, t) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++)
        for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function us(t) {
    if (t >= 1000) return sprintf("%.2f ms", t / 1000)
    return sprintf("%.2f us", t)
}
function label(b) {
    if (b % 1073741824 == 0) return b / 1073741824 " GiB"
    if (b % 1048576 == 0) return b / 1048576 " MiB"
    if (b % 1024 == 0) return b / 1024 " KiB"
    return b " B"
}
{
    impl = field($0, "impl"); b = field($0, "bytes") + 0
    if (!(b in seen)) { seen[b] = 1; order[++nsizes] = b }
    key = impl SUBSEP b
    t[key] = t[key] " " field($0, "time_us")
    bw[key] = bw[key] " " field($0, "busbw_GBps")
    if (impl == "ptdp") {
        bound[b] = bound[b] " " field($0, "bound_busbw_GBps")
        paired[b] = paired[b] " " field($0, "paired_fraction_of_bound")
        algo = field($0, "algo")
    }
}
END {
    printf "| size | ptdp %s time | ptdp busbw | MPI time | MPI busbw | ptdp / MPI | memory bound (busbw) | ptdp of bound | of paired bound |\n", algo
    printf "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    for (k = 1; k <= nsizes; k++) {
        b = order[k]; p = "ptdp" SUBSEP b; q = "mpi" SUBSEP b
        pt = median(t[p]); pb = median(bw[p]); mt = median(t[q]); mb = median(bw[q]); bd = median(bound[b])
        ratio[b] = mb > 0 ? pb / mb : 0; frac[b] = bd > 0 ? pb / bd : 0; ptime[b] = pt
        pf[b] = median(paired[b])
        printf "| %s | %s | %.2f GB/s | %s | %.2f GB/s | %.1fx | %.2f GB/s | %.0f%% | %.0f%% |\n", \
            label(b), us(pt), pb, us(mt), mb, ratio[b], bd, 100 * frac[b], 100 * pf[b]
    }
    print ""
    print "Medians of each column over the rounds; busbw = algbw x 2(n-1)/n; the memory bound is"
    print "the busbw reached if the all_reduce moved its memory traffic at the measured STREAM bandwidth"
    print "(best of before and after the run); the paired bound takes it from a STREAM copy run right"
    print "after each sample, and the share is the median of the samples'"'"' shares."
    if (devices != 2) exit 0
    print ""
    print "Targets (2 devices):"
    target("64 MiB: ptdp busbw >= 5x MPI", 67108864 in ratio, ratio[67108864] >= 5, sprintf("%.1fx", ratio[67108864]))
    target("4 MiB:  ptdp busbw >= 3x MPI", 4194304 in ratio, ratio[4194304] >= 3, sprintf("%.1fx", ratio[4194304]))
    target("64 MiB: ptdp >= 80% of the memory bound", 67108864 in frac, frac[67108864] >= 0.8, sprintf("%.0f%%", 100 * frac[67108864]))
    target("64 MiB: ptdp >= 80% of the paired memory bound", 67108864 in pf, pf[67108864] >= 0.8, sprintf("%.0f%%", 100 * pf[67108864]))
    target("4 KiB:  ptdp all_reduce <= 1 us", 4096 in ptime, ptime[4096] <= 1.0, sprintf("%.2f us", ptime[4096]))
}
function target(what, have, ok, value) {
    if (!have) printf "- %s: not measured (size not in --sizes)\n", what
    else printf "- %s: %s, %s\n", what, value, ok ? "met" : "NOT met"
}
' "$results"
