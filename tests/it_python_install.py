#!/usr/bin/env python3
"""it_python_install.py -- the Python client installs from the tree with
pip, offline, in a fresh venv, and leaves the tree as it was.

With pip's index switched off (PIP_NO_INDEX, an unreachable proxy), in a
venv made by Debian's python3 (python3-venv): `pip install client/python`
(build isolation on, pip's default), `--no-build-isolation`, `-e` and `pip
wheel`. Each install imports attune_client and attune from the venv (or
the tree, editable) at the version of pyproject.toml, which is CMake's
project version (the .debs' version); uninstall removes them; the wheel
holds the two modules' files and its dist-info, nothing else; and no file
under client/python was added, removed or changed (setuptools left build/
and *.egg-info there). Skipped (77) without the venv module.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

SKIP = 77
fails = 0
src = os.environ.get("ATTUNE_SOURCE_DIR") or os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))
pkg = os.path.join(src, "client", "python")


def check(ok, what):
    global fails
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        fails += 1


def snapshot(top):
    """{path: (size, mtime_ns)} of every file and directory under top."""
    out = {}
    for d, dirs, files in os.walk(top):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            out[os.path.relpath(p, top)] = (st.st_size if not os.path.isdir(p) else 0,
                                            st.st_mtime_ns if not os.path.isdir(p) else 0)
    return out


def main():
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    tmp = tempfile.mkdtemp(prefix="attune-it-pyinstall-")
    try:
        venv = os.path.join(tmp, "venv")
        r = subprocess.run([py, "-m", "venv", venv], capture_output=True, text=True)
        if r.returncode != 0:
            print("skip: %s -m venv: %s" % (py, (r.stderr or r.stdout).strip()[-200:]))
            return SKIP
        return run(venv, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(venv, tmp):
    with open(os.path.join(src, "CMakeLists.txt")) as f:
        cmake_ver = re.search(r"project\(attune VERSION ([0-9.]+)", f.read()).group(1)
    with open(os.path.join(pkg, "pyproject.toml")) as f:
        py_ver = re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)
    check(py_ver == cmake_ver, "pyproject.toml's version %s is CMake's project version %s"
          % (py_ver, cmake_ver))
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull,
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_CACHE_DIR="1",
               http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9",
               PYTHONDONTWRITEBYTECODE="")
    env.pop("PYTHONPATH", None)
    env.pop("PIP_FIND_LINKS", None)
    vpy = os.path.join(venv, "bin", "python")
    before = snapshot(pkg)

    def pip(*args):
        return subprocess.run([vpy, "-m", "pip"] + list(args), capture_output=True, text=True,
                              env=env, cwd=tmp)

    probe = ("import attune_client, attune, importlib.metadata as m; "
             "print(attune_client.__file__); print(attune.__file__); "
             "print(m.version('attune-client'))")

    def imported():
        # no bytecode: an editable install imports from the tree, and what
        # Python caches there on import is not the build's doing
        r = subprocess.run([vpy, "-c", probe], capture_output=True, text=True, cwd=tmp,
                           env=dict(env, PYTHONDONTWRITEBYTECODE="1"))
        return r.stdout.split() if r.returncode == 0 else None

    for how, args, where in (("pip install client/python", [], venv),
                             ("pip install --no-build-isolation client/python",
                              ["--no-build-isolation"], venv),
                             ("pip install -e client/python (editable)", ["-e"], pkg)):
        r = pip("install", *args, pkg)
        check(r.returncode == 0, "offline: %s%s" % (how, "" if r.returncode == 0 else
                                                     ": " + (r.stderr or r.stdout)[-600:]))
        got = imported()
        ok = (got is not None and len(got) == 3 and got[0].startswith(where + os.sep)
              and got[1].startswith(where + os.sep) and got[2] == py_ver)
        check(ok, "  imports attune_client and attune from %s, version %s: %s"
              % (os.path.relpath(where, tmp) if where != pkg else "the tree", py_ver, got))
        r = pip("uninstall", "-y", "attune-client")
        check(r.returncode == 0 and imported() is None, "  pip uninstall removes them")

    wheels = os.path.join(tmp, "wheels")
    r = pip("wheel", "--no-deps", "-w", wheels, pkg)
    names = os.listdir(wheels) if os.path.isdir(wheels) else []
    check(r.returncode == 0 and names == ["attune_client-%s-py3-none-any.whl" % py_ver],
          "pip wheel: %s" % (names or (r.stderr or r.stdout)[-400:]))
    if names:
        with zipfile.ZipFile(os.path.join(wheels, names[0])) as z:
            files = sorted(z.namelist())
        di = "attune_client-%s.dist-info/" % py_ver
        want = sorted(["attune_client.py", "attune/__init__.py", "attune/hf.py", "attune/lib.py",
                       "attune/torch.py", di + "METADATA", di + "WHEEL", di + "RECORD"])
        check(files == want, "the wheel holds the two modules and its dist-info only: %s"
              % [f for f in files if f not in want] if files != want else
              "the wheel holds the two modules and its dist-info only (%d files)" % len(files))

    after = snapshot(pkg)
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(p for p in set(before) & set(after) if before[p] != after[p])
    check(not added and not removed and not changed,
          "nothing under client/python added, removed or changed (added %s, removed %s, "
          "changed %s)" % (added[:5], removed[:5], changed[:5]))
    print("%d failed" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
