"""attune_build.py -- the PEP 517 build backend of client/python (in tree,
standard library only).

    pip install client/python          # offline, in any venv: nothing to download
    pip install -e client/python       # editable (PEP 660): a .pth to this directory
    pip wheel client/python -w DIR     # the wheel alone

What it builds is pure Python: the modules and packages that pyproject.toml
names under [tool.attune-build], copied as they are into a py3-none-any
wheel with its dist-info (METADATA from [project], WHEEL, RECORD), or into
an sdist. It needs nothing but the standard library, so pip's isolated
build environment has nothing to fetch ("requires = []"), and it writes
only into the directories pip hands it: the source tree is left as it was
(setuptools wrote build/ and *.egg-info there). Python >= 3.8 (Ubuntu
22.04's 3.10 has no tomllib: pyproject.toml is read with the small parser
below, which takes the forms that file uses and refuses others).
"""
import base64
import hashlib
import io
import os
import re
import sys
import tarfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)  # client/python

# pip imports this module from the source tree, and Python caches its
# bytecode beside it before running it: the one file a build would leave
# in the tree. Remove it (and the directory when it is then empty).
try:
    os.remove(__cached__)  # noqa: F821 -- set by the import system
    os.rmdir(os.path.dirname(__cached__))  # noqa: F821
except (NameError, TypeError, OSError):
    pass
sys.dont_write_bytecode = True


# ---- pyproject.toml: the subset it uses (tables; key = "string", [strings],
# { text = "string" }, true/false)

_STR = r'"((?:[^"\\]|\\.)*)"'


def _unescape(s):
    return re.sub(r'\\(["\\])', r"\1", s)


def _value(raw, where):
    raw = raw.strip()
    m = re.fullmatch(_STR, raw)
    if m:
        return _unescape(m.group(1))
    if raw.startswith("[") and raw.endswith("]"):
        items = re.findall(_STR, raw[1:-1])
        if re.sub(_STR, "", raw[1:-1]).replace(",", "").strip():
            raise ValueError("%s: only strings in arrays: %s" % (where, raw))
        return [_unescape(i) for i in items]
    m = re.fullmatch(r"\{\s*(\w+)\s*=\s*" + _STR + r"\s*\}", raw)
    if m:
        return {m.group(1): _unescape(m.group(2))}
    if raw in ("true", "false"):
        return raw == "true"
    raise ValueError("%s: value this backend does not read: %s" % (where, raw))


def read_pyproject(path=None):
    """{table name: {key: value}} of pyproject.toml."""
    path = path or os.path.join(ROOT, "pyproject.toml")
    tables, cur = {}, None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            m = re.fullmatch(r"\[([A-Za-z0-9_.-]+)\]", line)
            if m:
                cur = tables.setdefault(m.group(1), {})
                continue
            m = re.fullmatch(r"([A-Za-z0-9_-]+)\s*=\s*(.+?)(\s+#.*)?", line)
            if not m or cur is None:
                raise ValueError("pyproject.toml:%d: not read by this backend: %s" % (n, line))
            cur[m.group(1)] = _value(m.group(2), "pyproject.toml:%d" % n)
    return tables


def _config():
    t = read_pyproject()
    p, b = t.get("project", {}), t.get("tool.attune-build", {})
    for k in ("name", "version"):
        if not p.get(k):
            raise ValueError("pyproject.toml: [project] %s is required" % k)
    return p, b.get("modules", []), b.get("packages", [])


def _dist_name(name):
    return re.sub(r"[-_.]+", "_", name).lower()


def _files():
    """(path in the wheel, path on disk) of every file shipped: the modules
    and the packages' .py files (no bytecode, no other files)."""
    _, modules, packages = _config()
    out = []
    for m in modules:
        out.append((m + ".py", os.path.join(ROOT, m + ".py")))
    for pkg in packages:
        top = os.path.join(ROOT, *pkg.split("."))
        if not os.path.isfile(os.path.join(top, "__init__.py")):
            raise ValueError("package %s has no __init__.py" % pkg)
        for d, dirs, names in os.walk(top):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__"
                             and os.path.isfile(os.path.join(d, x, "__init__.py")))
            for name in sorted(names):
                if name.endswith(".py"):
                    full = os.path.join(d, name)
                    out.append((os.path.relpath(full, ROOT).replace(os.sep, "/"), full))
    for arc, full in out:
        if not os.path.isfile(full):
            raise ValueError("%s: no such file" % full)
    return out


def _metadata():
    p, _, _ = _config()
    lines = ["Metadata-Version: 2.1", "Name: %s" % p["name"], "Version: %s" % p["version"]]
    if p.get("description"):
        lines.append("Summary: %s" % p["description"])
    if p.get("requires-python"):
        lines.append("Requires-Python: %s" % p["requires-python"])
    lic = p.get("license")
    if isinstance(lic, dict) and lic.get("text"):
        lines.append("License: %s" % lic["text"])
    body = ""
    if p.get("readme"):
        with open(os.path.join(ROOT, p["readme"]), encoding="utf-8") as f:
            body = f.read()
        lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + body


def _distinfo(p):
    return "%s-%s.dist-info" % (_dist_name(p["name"]), p["version"])


def _epoch():
    # reproducible: SOURCE_DATE_EPOCH if set, else a fixed date (zip needs >= 1980)
    t = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    return time.gmtime(max(t, 315532800))[:6]


def _write_wheel(wheel_directory, entries):
    """entries: [(path in the wheel, bytes)]; adds WHEEL, METADATA and RECORD."""
    p, _, _ = _config()
    di = _distinfo(p)
    entries = list(entries) + [
        (di + "/METADATA", _metadata().encode("utf-8")),
        (di + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: attune_build\n"
                        b"Root-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    record = []
    for arc, data in entries:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        record.append("%s,sha256=%s,%d" % (arc, digest.decode(), len(data)))
    record.append(di + "/RECORD,,")
    entries.append((di + "/RECORD", ("\n".join(record) + "\n").encode()))
    name = "%s-%s-py3-none-any.whl" % (_dist_name(p["name"]), p["version"])
    path = os.path.join(wheel_directory, name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in entries:
            zi = zipfile.ZipInfo(arc, date_time=_epoch())
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return name


def _read(full):
    with open(full, "rb") as f:
        return f.read()


# ---- PEP 517 / 660 hooks

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    p, _, _ = _config()
    di = os.path.join(metadata_directory, _distinfo(p))
    os.makedirs(di, exist_ok=True)
    with open(os.path.join(di, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return _distinfo(p)


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(arc, _read(full)) for arc, full in _files()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # a .pth naming this directory: the modules are imported from the tree
    p, _, _ = _config()
    pth = ("%s\n" % ROOT).encode("utf-8")
    return _write_wheel(wheel_directory, [("_%s_editable.pth" % _dist_name(p["name"]), pth)])


def build_sdist(sdist_directory, config_settings=None):
    p, _, _ = _config()
    base = "%s-%s" % (_dist_name(p["name"]), p["version"])
    files = [("pyproject.toml", os.path.join(ROOT, "pyproject.toml")),
             ("_packaging/attune_build.py", os.path.join(HERE, "attune_build.py"))]
    if p.get("readme"):
        files.append((p["readme"], os.path.join(ROOT, p["readme"])))
    files += _files()
    path = os.path.join(sdist_directory, base + ".tar.gz")
    mtime = time.mktime(_epoch() + (0, 0, -1))
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as t:
        pkginfo = _metadata().encode("utf-8")
        for arc, data in [("PKG-INFO", pkginfo)] + [(a, _read(f)) for a, f in files]:
            ti = tarfile.TarInfo("%s/%s" % (base, arc))
            ti.size, ti.mode, ti.mtime = len(data), 0o644, mtime
            t.addfile(ti, io.BytesIO(data))
    return base + ".tar.gz"
