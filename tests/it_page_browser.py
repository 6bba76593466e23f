#!/usr/bin/env python3
"""it_page_browser.py -- the dashboard (GET /) in a real browser.

Starts attuned on a small tuned CPU database (page_fixture.py) and runs
tests/browser/page_test.mjs: headless Debian chromium driven by
playwright-core (pinned in tests/browser/package-lock.json, installed by
scripts/deps.sh). It checks that every shape shows the winner of
GET /v1/winners (and, with only split checked in the variants filter, of
GET /v1/winners?variants=split), that a job's progress moves on the page and its winners
appear within seconds of it finishing, and that the page logs no console
error. Screenshots go to <build>/screenshots/ (docs/dashboard.png is one).

Skipped (77) only when node or chromium is missing; playwright-core
missing is a failure (scripts/deps.sh installs it).

Environment: ATTUNED_BIN, ATTUNE_BIN (else skip), ATTUNE_SOURCE_DIR,
ATTUNE_BUILD_DIR, CHROMIUM (default /usr/bin/chromium).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import page_fixture as fx  # noqa: E402

SKIP = 77

# Shapes the job tunes while the page watches: new ones (the map grows),
# big enough that the job runs for a few page refreshes. Lengths no pad
# repeats (100 and 200 queries over 250 or 500 keys): on aligned ones the
# tuner stores pads 8-64 from pad=1's rows untimed, and the job ended
# between two looks of the page once (2026-12-05).
JOB_SHAPES = [
    {"b": 1, "hq": 8, "hkv": 2, "sq": 100, "skv": 250, "d": 64, "dtype": "f16", "causal": False},
    {"b": 1, "hq": 8, "hkv": 2, "sq": 200, "skv": 250, "d": 64, "dtype": "f16", "causal": False},
    {"b": 1, "hq": 8, "hkv": 2, "sq": 100, "skv": 500, "d": 64, "dtype": "f16", "causal": False},
]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    src = os.environ.get("ATTUNE_SOURCE_DIR", os.path.dirname(here))
    attuned, attune = os.environ.get("ATTUNED_BIN"), os.environ.get("ATTUNE_BIN")
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    node = shutil.which("node") or shutil.which("nodejs")
    if not attuned or not attune:
        print("skip: ATTUNED_BIN and ATTUNE_BIN are needed (attuned not built?)")
        return SKIP
    if node is None:
        print("skip: node is not installed (scripts/deps.sh installs nodejs)")
        return SKIP
    if not os.access(chromium, os.X_OK):
        print("skip: %s is not installed (scripts/deps.sh installs Debian's chromium)"
              % chromium)
        return SKIP
    browser_dir = os.path.join(src, "tests", "browser")
    if not os.path.isdir(os.path.join(browser_dir, "node_modules", "playwright-core")):
        print("FAIL playwright-core is not installed in %s: run scripts/deps.sh "
              "(npm ci there)" % browser_dir)
        return 1
    build = os.environ.get("ATTUNE_BUILD_DIR", os.getcwd())
    shots = os.path.join(build, "screenshots")
    os.makedirs(shots, exist_ok=True)
    work = tempfile.mkdtemp(prefix="it_page_browser.")
    d = None
    rc = 1
    try:
        db = fx.make_db(attune, src, work)
        d = fx.Daemon(attuned, work, db, budget_ms="30")
        env = dict(os.environ, ATTUNE_URL=d.url, ATTUNE_TOKEN=d.token, ATTUNE_SHOTS=shots,
                   ATTUNE_JOB=json.dumps({"device": "cpu", "shapes": JOB_SHAPES}),
                   CHROMIUM=chromium)
        p = subprocess.run([node, os.path.join(browser_dir, "page_test.mjs")], env=env,
                           cwd=browser_dir, timeout=400)
        rc = p.returncode
        print("screenshots: %s" % shots)
    finally:
        code = d.stop() if d else 0
        if d and code != 0:
            print("FAIL attuned exited with %s on SIGTERM" % code)
            rc = 1
        if rc != 0 and os.path.exists(os.path.join(work, "attuned.log")):
            print(open(os.path.join(work, "attuned.log")).read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    return 1 if rc != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
