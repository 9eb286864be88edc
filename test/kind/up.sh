#!/usr/bin/env bash
# test/kind/up.sh [N]: N (1-3, default 2) kind clusters kovn-c1..cN with kovn installed from
# deploy/ and joined by interconnect (c1's control-plane node serves the OVN-IC databases).
# Needs Docker, kind and kubectl on PATH, and the openvswitch kernel module on the host.
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-2}
[[ $n =~ ^[1-3]$ ]] || { echo "usage: test/kind/up.sh [1-3]" >&2; exit 2; }
for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || { echo "up.sh: $tool is needed on PATH" >&2; exit 1; }
done
steps=$((2 + 2 * n)) step=0
progress() { step=$((step + 1)); echo "[$step/$steps] $*" >&2; }
node_ip() { docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$1"; }

progress "building kovn's image and helm (make images helm)"
make images helm >&2
progress "checking the openvswitch kernel module"
grep -qw '^openvswitch' /proc/modules || { echo "up.sh: load it first: sudo modprobe openvswitch" >&2; exit 1; }
for i in $(seq "$n"); do
  progress "kind cluster kovn-c$i"
  kind get clusters 2>/dev/null | grep -qx "kovn-c$i" || kind create cluster --config "test/kind/cluster-c$i.yaml"
  kind load image-archive _output/images/kovn.tar --name "kovn-c$i"
  # Role labels under node-restriction.kubernetes.io/: a node's kubelet cannot set them on itself
  # (NodeRestriction), so kind's config cannot either; an admin sets them.
  kubectl --context "kind-kovn-c$i" label --overwrite node "kovn-c$i-control-plane" node-restriction.kubernetes.io/kovn-ovn-central=true >&2
  kubectl --context "kind-kovn-c$i" label --overwrite node "kovn-c$i-worker" node-restriction.kubernetes.io/kovn-ic-gateway=true >&2
done
ic=$(node_ip kovn-c1-control-plane)
for i in $(seq "$n"); do
  progress "installing kovn on kovn-c$i (waits until every component is ready)"
  _output/bin/helm upgrade --install kovn deploy/ --namespace kube-system --kube-context "kind-kovn-c$i" \
    --values "test/kind/values-c$i.yaml" --set "ovnCentral.addresses={$(node_ip "kovn-c$i-control-plane")}" \
    --set "apiServer.host=$(node_ip "kovn-c$i-control-plane")" \
    --set "interconnect.icNorthbound={tcp:$ic:6645}" --set "interconnect.icSouthbound={tcp:$ic:6646}" \
    --set interconnect.insecurePlainTCP=true \
    --wait --timeout 10m
done
echo "kovn is up on kind: kubectl --context kind-kovn-c1 get pods -n kube-system" >&2
