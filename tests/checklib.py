"""checklib.py -- the check every Python test of tests/ prints and counts:
`check(cond, what)` prints "ok   what" or "FAIL what", keeps the failed
ones in `failures`, and returns cond; `summary()` prints their count and
returns the test's exit status (1 if any failed). Imported from the test's own folder (Python puts a
script's folder first on sys.path)."""

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
    return cond


def summary():
    print("%d check(s) failed" % len(failures))
    return 1 if failures else 0
