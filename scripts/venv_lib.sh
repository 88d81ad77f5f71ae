# Shared by the scripts that build a separate virtual environment (scripts/setup_user_env.sh,
# scripts/peer/setup_chemprop_env.sh, scripts/peer/setup_hf_env.sh); sourced, not run.
#
#   make_venv TAG VENV_DIR PYTHON_BIN   create VENV_DIR (or reuse it); sets PY
#   quiet_pip ARGS...                   pip install -q into it
#   print_versions TAG PACKAGE...       print the installed versions

make_venv() {
    local tag="$1" dir="$2" python_bin="$3"
    if [ ! -x "$dir/bin/python" ]; then
        echo "[$tag] creating venv $dir with $python_bin"
        "$python_bin" -m venv "$dir"
    else
        echo "[$tag] reusing venv $dir"
    fi
    PY="$dir/bin/python"
}

# The machine-wide pip config lists local index folders that may lack a package;
# pip warns once per such package. Drop only those lines.
quiet_pip() {
    "$PY" -m pip install --disable-pip-version-check -q "$@" \
        2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}

# print_versions TAG PACKAGE...: the venv's Python and each package's installed version
print_versions() {
    local tag="$1"
    shift
    "$PY" - "$tag" "$@" <<'PYEOF'
import sys, importlib.metadata as md
tag, names = sys.argv[1], sys.argv[2:]
print(f"[{tag}] versions:")
print(f"  {'python':<15} {sys.version.split()[0]}")
for name in names:
    try:
        print(f"  {name:<15} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"  {name:<15} (absent)")
PYEOF
}
