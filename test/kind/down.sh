#!/usr/bin/env bash
# test/kind/down.sh: deletes the kind clusters test/kind/up.sh made (kovn-c1..kovn-c3).
set -euo pipefail
command -v kind >/dev/null || { echo "down.sh: kind is needed on PATH" >&2; exit 1; }
for i in 1 2 3; do
  if kind get clusters 2>/dev/null | grep -qx "kovn-c$i"; then
    echo "deleting kind cluster kovn-c$i" >&2
    kind delete cluster --name "kovn-c$i"
  fi
done
