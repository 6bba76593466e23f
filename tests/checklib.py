"""checklib.py -- the check every Python test of tests/ prints and counts:
`check(cond, what)` prints "ok   what" or "FAIL what", keeps the failed
ones in `failures`, and returns cond; `summary()` prints their count and
returns the test's exit status (1 if any failed); `captured(fn, args)`
runs a tool's main(args) with its output caught, and `cells(text, first)`
reads a row of the Markdown table it printed. Imported from the test's
own folder (Python puts a script's folder first on sys.path)."""
import contextlib
import io

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
    return cond


def summary():
    print("%d check(s) failed" % len(failures))
    return 1 if failures else 0


def captured(fn, args):
    """fn(args) with stdout and stderr caught: (its return, out, err)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = fn(args)
    return rc, out.getvalue(), err.getvalue()


def cells(text, first):
    """The cells of the first Markdown table row in text whose first cell
    starts with `first`, or None."""
    for line in text.splitlines():
        row = [c.strip() for c in line.strip().strip("|").split("|")]
        if row and row[0].startswith(first):
            return row
    return None
