#!/usr/bin/env bash
# expect_unfinished.sh CHECK [ARG…] — run a lesson's check (with ARGs)
# built against its untouched exercise.c and prove that it fails helpfully: exit status 1,
# a message naming the blank that "is still empty", and quickly (a blank
# stops every device at once; it must not wait for the watchdog).
set -u
check=$1
shift
start=$SECONDS
out=$("$check" "$@" 2>&1)
rc=$?
took=$((SECONDS - start))
printf '%s\n' "$out"
if [ "$rc" -ne 1 ]; then
    echo "expect_unfinished: the check exited with status $rc; an unfinished exercise must exit 1"
    exit 1
fi
if ! grep -q "is still empty" <<<"$out"; then
    echo "expect_unfinished: the check failed without saying which blank is still empty"
    exit 1
fi
if [ "$took" -gt 3 ]; then
    echo "expect_unfinished: the check took ${took} s; a blank must stop the devices at once"
    exit 1
fi
echo "expect_unfinished: ok — the untouched exercise fails at once and names its first blank"
