# Shared by the scripts that build a separate virtual environment (scripts/setup_user_env.sh,
# scripts/peer/setup_chemprop_env.sh, scripts/peer/setup_hf_env.sh); sourced, not run.
#
#   make_venv TAG VENV_DIR PYTHON_BIN   create VENV_DIR (or reuse it); sets PY
#   quiet_pip ARGS...                   pip install -q into it

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
