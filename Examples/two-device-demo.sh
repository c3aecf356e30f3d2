#!/usr/bin/env bash
# Two devices, one server folder, two agents: watch an edit travel.
#   Examples/two-device-demo.sh            (builds notesync first if needed)
# Everything lives in a temp folder that is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${NOTESYNC_BIN:-}"
if [ -z "$bin" ]; then
    swift build --product notesync >/dev/null
    bin="$(swift build --show-bin-path)/notesync"
fi
demo="$(mktemp -d /tmp/notesync-demo.XXXXXX)"
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$demo"' EXIT

"$bin" init --notes "$demo/laptop" --server "$demo/server" --device-name laptop --create-server >/dev/null
"$bin" init --notes "$demo/desktop" --server "$demo/server" --device-name desktop >/dev/null
"$bin" watch --notes "$demo/laptop" --log-level warning &
"$bin" watch --notes "$demo/desktop" --log-level warning &
sleep 1

wait_for() {  # wait_for FILE TEXT
    for _ in $(seq 1 100); do
        if [ -f "$1" ] && grep -qF "$2" "$1"; then return 0; fi
        sleep 0.05
    done
    echo "  (not there yet: $1)"; return 1
}

echo "1. laptop writes groceries.md"
printf 'milk\neggs\n' > "$demo/laptop/groceries.md"
wait_for "$demo/desktop/groceries.md" eggs && echo "   desktop has it:" && sed 's/^/     /' "$demo/desktop/groceries.md"

echo "2. desktop adds a line at the end, laptop edits the first line"
printf 'milk\neggs\nbread\n' > "$demo/desktop/groceries.md"
wait_for "$demo/laptop/groceries.md" bread
printf 'oat milk\neggs\nbread\n' > "$demo/laptop/groceries.md"
wait_for "$demo/desktop/groceries.md" "oat milk" && echo "   both edits everywhere:" && sed 's/^/     /' "$demo/desktop/groceries.md"

echo "3. desktop deletes it; it goes to laptop's trash, not oblivion"
rm "$demo/desktop/groceries.md"
for _ in $(seq 1 100); do [ -f "$demo/laptop/groceries.md" ] || break; sleep 0.05; done
find "$demo/laptop/.notesync/trash" -type f | sed "s|$demo/||; s/^/     /"

echo "4. status of the laptop:"
"$bin" status --notes "$demo/laptop" | sed 's/^/     /'
