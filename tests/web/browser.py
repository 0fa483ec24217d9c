"""browser.py — what the web tests (explorer.py, pages.py) share: finding
headless Chromium, and skipping when it is absent.

A test without Chromium is skipped (exit 77, meson's "skipped") with a
message — unless PTDP_WEB_REQUIRED=1 (.ci/run), where a skip is a failure,
so CI cannot pass by not running the browser.
"""
import os
import shutil
import sys


def skip(why):
    if os.environ.get("PTDP_WEB_REQUIRED") == "1":
        print(f"FAIL: the browser test cannot run ({why}) and PTDP_WEB_REQUIRED=1")
        sys.exit(1)
    print(f"SKIP: {why}")
    sys.exit(77)


def find_chromium():
    """$CHROMIUM, or the first of Debian's and others' names on PATH; None."""
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None
