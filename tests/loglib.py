"""loglib.py -- read attuned's log lines back (daemon/log.h's format).

A line is `<time> key=value ...`; a value is bare (printable ASCII, no
quote, backslash or space) or quoted by daemon/log.c's log_quote: printable
ASCII inside double quotes, with only the escapes \\" \\\\ \\n \\r \\t \\xHH.
parse_lines() takes the lines (text decoded as latin-1, one char per byte,
or as UTF-8: the lines are ASCII either way) and gives the events as dicts
of unquoted values, and the lines that are not of that form.
"""
import re

LINE = re.compile(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z((?: [A-Za-z_][A-Za-z0-9_]*='
                  r'(?:"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\nrt]|\\x[0-9a-f]{2})*"'
                  r'|[\x21\x23-\x5b\x5d-\x7e]*))+)\n$')
FIELD = re.compile(r' ([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|[^ ]*)')


def unquote(v):
    """The text of a value: bare as is, quoted with its escapes undone."""
    if not v.startswith('"'):
        return v
    out, i, s = [], 0, v[1:-1]
    while i < len(s):
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = s[i + 1]
        if e == "x":
            out.append(chr(int(s[i + 2:i + 4], 16)))
            i += 4
        else:
            out.append({"n": "\n", "r": "\r", "t": "\t"}.get(e, e))
            i += 2
    return "".join(out)


def parse_lines(lines):
    """(events, bad): each line of the form as a dict of its unquoted values
    (the time under "time"), and the lines that are not."""
    events, bad = [], []
    for line in lines:
        m = LINE.match(line)
        if not m:
            bad.append(line)
            continue
        e = {k: unquote(v) for k, v in FIELD.findall(m.group(1))}
        e["time"] = line[:24]
        events.append(e)
    return events, bad
