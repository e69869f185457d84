#!/usr/bin/env bash
# Run pytest (default: the AWM sandbox tests) as an unprivileged user, from root: bwrap then takes
# the user-namespace path instead of privileged bwrap + setpriv. CI runs as root, so .ci/run calls
# this for the second way. Nothing changes outside a private mount namespace of its own: folders on
# the way to the interpreter, the venv or the checkout that others may not enter (/root, 0700) are
# covered there by a tmpfs holding only those paths.
#   bash scripts/test_unprivileged.sh [pytest args...]     (PYTHON=... for another venv's python)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
    echo "run as root: it drops to uid 65534 itself" >&2
    exit 2
fi
python=${PYTHON:-.venv/bin/python}
needed=("$(dirname "$(readlink -f "$python")")" "$(readlink -f "$(dirname "$python")/..")" "$(pwd -P)")
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(tests/test_awm_sandbox.py)
export TTG_UNPRIV_PYTHON=$python
exec unshare --mount --propagation private bash -s "${needed[@]}" -- "${args[@]}" <<'EOF'
set -euo pipefail
needed=()
while [ "$1" != -- ]; do needed+=("$1"); shift; done
shift
stash=$(mktemp -d /tmp/ttg-unpriv-XXXXXX)
# Each folder others cannot enter, with the children of it the paths need.
declare -A covered=()
for path in "${needed[@]}"; do
    dir=/
    IFS=/ read -ra parts <<< "${path#/}"
    for part in "${parts[@]}"; do
        if [ "$dir" != / ] && [ "$(( $(stat -c %a "$dir") % 10 & 1 ))" = 0 ]; then
            covered[$dir]+="$part "
            break
        fi
        dir=${dir%/}/$part
    done
done
for dir in "${!covered[@]}"; do
    children=$(tr ' ' '\n' <<< "${covered[$dir]}" | sort -u)
    for child in $children; do
        mkdir -p "$stash$dir/$child"
        mount --bind "$dir/$child" "$stash$dir/$child"
    done
    mount -t tmpfs -o mode=0755,size=1m tmpfs "$dir"
    for child in $children; do
        mkdir "$dir/$child"
        mount --move "$stash$dir/$child" "$dir/$child"
    done
done
home=$(mktemp -d /tmp/ttg-unpriv-home-XXXXXX)
chown 65534:65534 "$home"
exec setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
    env HOME="$home" PYTHONDONTWRITEBYTECODE=1 ${PYTHONPATH:+PYTHONPATH="$PYTHONPATH"} "$TTG_UNPRIV_PYTHON" -m pytest -q -p no:cacheprovider "$@"
EOF
