"""checklib.py -- the check every Python test of tests/ prints and counts:
`check(cond, what)` prints "ok   what" or "FAIL what", keeps the failed
ones in `failures` (the test's exit status comes from its length), and
returns cond. Imported from the test's own folder (Python puts a
script's folder first on sys.path)."""

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
    return cond
