#!/usr/bin/env bash
# demo.sh — `make demo`: bring up a 2-cluster x 2-node rig, show it healthy, leave it up.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$PWD/_output/bin
DIR=${KOVN_RIG_DIR:-$PWD/_output/rig}
RIG="$BIN/kovn-rig"

if [ -f "$DIR/state.json" ]; then
  echo "demo: a rig is already up in $DIR — showing it (make demo-down removes it)"
else
  "$RIG" up --dir "$DIR" --clusters 2 --nodes 2
fi
echo
"$RIG" status --dir "$DIR"
for c in c1 c2; do
  echo; echo "== cluster $c =="
  (
    eval "$("$RIG" env "$c" --dir "$DIR")"
    kubectl get nodes -o wide
    echo "-- OVN chassis registered in $c's southbound DB:"
    ovn-sbctl --db="$OVN_SB_DB" --format=table --columns=name,hostname list Chassis
    echo "-- encapsulations:"
    ovn-sbctl --db="$OVN_SB_DB" --format=table --columns=chassis_name,type,ip list Encap
  )
done
cat <<MSG

The rig is up. Use it from this shell:
  eval "\$($RIG env c1 --dir $DIR)"   # KUBECONFIG, OVN_NB_DB, OVN_SB_DB (and OVN_IC_* with 2 clusters)
  kubectl get nodes
  ovn-nbctl show
Tear it down with:  make demo-down
MSG
