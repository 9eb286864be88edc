#!/usr/bin/env bash
# install-deps.sh — idempotent installer for everything kovn's rig and tests need.
#
#   hack/install-deps.sh          apt packages + Kubernetes binaries + Kubernetes' e2e suite
#   hack/install-deps.sh --check  only report what is missing (exit 1 if anything is)
#
# Debian packages come from apt; Kubernetes binaries are built from k8s.io/kubernetes at the
# pinned version through the Go module proxy (never downloaded prebuilt) and cached in
# $KOVN_CACHE/k8s-$K8S_VERSION (default ~/.cache/kovn), outside the clone, so a fresh clone
# reuses them. Rebuilt only when the pin changes.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.31.4}
KOVN_CACHE=${KOVN_CACHE:-$HOME/.cache/kovn}
K8S_DIR="$KOVN_CACHE/k8s-$K8S_VERSION"
K8S_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
# Kubernetes' own e2e suite (the sig-network suites, hack/k8s-e2e) and what runs it: the ginkgo
# CLI and the binaries of the upstream test images kovn writes locally (make images).
E2E_DIR="$K8S_DIR/e2e"
E2E_BINS=(e2e.test ginkgo agnhost regression-issue-74839)
E2E_FILES=(localhost.crt localhost.key) # agnhost porter's TLS pair, as upstream's image holds it
E2E_SRC="$(cd "$(dirname "$0")" && pwd)/k8s-e2e"
# The ClusterNetworkPolicy conformance suite of sigs.k8s.io/network-policy-api (hack/cnp-conformance,
# its own module: it needs newer Kubernetes libraries than kovn's), built beside e2e.test.
CNP_SRC="$(cd "$(dirname "$0")" && pwd)/cnp-conformance"
CNP_BIN="$E2E_DIR/cnp-conformance.test"

# command -> Debian package that ships it
declare -A APT_CMDS=(
  [ovsdb-server]=openvswitch-switch [ovs-vswitchd]=openvswitch-switch [ovs-vsctl]=openvswitch-common
  [ovn-northd]=ovn-central [ovn-controller]=ovn-host [ovn-nbctl]=ovn-common [ovn-ic]=ovn-ic
  [etcd]=etcd-server [containerd]=containerd [ctr]=containerd [runc]=runc
  [ip]=iproute2 [ethtool]=ethtool [iperf3]=iperf3 [tcpdump]=tcpdump [ping]=iputils-ping
  [openssl]=openssl [vtysh]=frr [nsenter]=util-linux [iptables]=iptables [iptables-restore]=iptables
  [ip6tables]=iptables [ip6tables-restore]=iptables [shellcheck]=shellcheck
)
# packages that ship no command we probe but are needed (schemas, plugins), and the tools the
# upstream e2e images carry (hack/images -upstream-e2e copies them from this host's packages)
APT_EXTRA=(ovn-ic-db containernetworking-plugins netcat-openbsd bind9-dnsutils iperf busybox-static wget procps)

log() { echo "install-deps: $*" >&2; }

missing_pkgs() {
  local pkgs=()
  for c in "${!APT_CMDS[@]}"; do
    command -v "$c" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin command -v "$c" >/dev/null 2>&1 || pkgs+=("${APT_CMDS[$c]}")
  done
  for p in "${APT_EXTRA[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || pkgs+=("$p")
  done
  [ ${#pkgs[@]} -eq 0 ] || printf '%s\n' "${pkgs[@]}" | sort -u
}

k8s_missing() {
  for b in "${K8S_BINS[@]}"; do [ -x "$K8S_DIR/$b" ] || { echo "$b"; }; done
}

install_apt() {
  local pkgs; pkgs=$(missing_pkgs)
  [ -z "$pkgs" ] && { log "apt packages: all present"; return; }
  log "installing apt packages: $(echo $pkgs)"
  export DEBIAN_FRONTEND=noninteractive
  # The rig runs its own OVS/OVN/etcd/containerd/FRR per namespace: keep the packages' services
  # from starting on the host (they would bind host ports and touch host networking).
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get update -q >&2 || { log "FAILED: apt-get update"; exit 1; }
  # shellcheck disable=SC2086
  apt-get install -y -q --no-install-recommends $pkgs >&2 || { log "FAILED: apt-get install $(echo $pkgs)"; exit 1; }
  pkgs=$(missing_pkgs)
  [ -z "$pkgs" ] || { log "FAILED: still missing after apt-get install: $(echo $pkgs)"; exit 1; }
}

# The build module lives in the cache dir: it is a throwaway go.mod that pins k8s.io/kubernetes and
# replaces every staging module with the matching v0 release (the main module's go.mod cannot do that).
build_k8s() {
  [ -z "$(k8s_missing)" ] && { log "kubernetes $K8S_VERSION: cached in $K8S_DIR"; return; }
  command -v go >/dev/null || { log "FAILED: go toolchain not found (needed to build kubernetes)"; exit 1; }
  local src="$KOVN_CACHE/k8s-build-$K8S_VERSION" v0="v0.${K8S_VERSION#v1.}"
  mkdir -p "$src" "$K8S_DIR"
  log "building kubernetes $K8S_VERSION from the Go module proxy into $K8S_DIR (several minutes)"
  local staging=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
    cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api
    cri-client csi-translation-lib dynamic-resource-allocation endpointslice kms kube-aggregator
    kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics mount-utils
    pod-security-admission sample-apiserver sample-cli-plugin sample-controller)
  {
    echo "module kovn.local/k8sbuild"; echo; echo "go 1.22.0"; echo
    echo "require k8s.io/kubernetes $K8S_VERSION"; echo
    for m in "${staging[@]}"; do echo "replace k8s.io/$m => k8s.io/$m $v0"; done
  } > "$src/go.mod"
  printf 'package main\n\nimport _ "k8s.io/kubernetes/cmd/kubelet/app"\n\nfunc main() {}\n' > "$src/main.go"
  local minor; minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  local ld="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  (cd "$src" && GOFLAGS=-mod=mod go mod tidy >&2 && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ld" -o "$K8S_DIR/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl >&2) \
    || { log "FAILED: building kubernetes $K8S_VERSION (go build in $src)"; exit 1; }
  local m; m=$(k8s_missing)
  [ -z "$m" ] || { log "FAILED: kubernetes binaries missing after build: $(echo $m)"; exit 1; }
}

# The e2e suite is rebuilt when hack/k8s-e2e changes (its sources and go.sum are the stamp).
e2e_stamp() { cat "$E2E_SRC"/go.mod "$E2E_SRC"/go.sum "$E2E_SRC"/*.go | sha256sum | cut -c1-16; }
e2e_missing() {
  [ "$(cat "$E2E_DIR/.stamp" 2>/dev/null)" = "$(e2e_stamp)" ] || { echo "e2e-suite(stale)"; return; }
  for b in "${E2E_BINS[@]}"; do [ -x "$E2E_DIR/$b" ] || echo "$b"; done
  for f in "${E2E_FILES[@]}"; do [ -f "$E2E_DIR/$f" ] || echo "$f"; done
}

build_e2e() {
  [ -z "$(e2e_missing)" ] && { log "kubernetes e2e suite: cached in $E2E_DIR"; return; }
  log "building kubernetes' e2e suite (hack/k8s-e2e) into $E2E_DIR (several minutes)"
  mkdir -p "$E2E_DIR"
  local minor ld="-s -w" p; minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  (cd "$E2E_SRC" && CGO_ENABLED=0 go test -c -trimpath -ldflags "$ld" -o "$E2E_DIR/e2e.test" . >&2 &&
    CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$E2E_DIR/" github.com/onsi/ginkgo/v2/ginkgo \
      k8s.io/kubernetes/test/images/agnhost k8s.io/kubernetes/test/images/regression-issue-74839 >&2) \
    || { log "FAILED: building kubernetes' e2e suite (go build in $E2E_SRC)"; exit 1; }
  local k8s; k8s=$(cd "$E2E_SRC" && go list -m -f '{{.Dir}}' k8s.io/kubernetes) || { log "FAILED: k8s.io/kubernetes not in the module cache"; exit 1; }
  install -m 0644 "$k8s/test/images/agnhost/porter/localhost.crt" "$k8s/test/images/agnhost/porter/localhost.key" "$E2E_DIR/"
  e2e_stamp > "$E2E_DIR/.stamp"
  local m; m=$(e2e_missing)
  [ -z "$m" ] || { log "FAILED: e2e binaries missing after build: $(echo $m)"; exit 1; }
}

cnp_stamp() { cat "$CNP_SRC"/go.mod "$CNP_SRC"/go.sum "$CNP_SRC"/*.go | sha256sum | cut -c1-16; }
cnp_missing() {
  [ -x "$CNP_BIN" ] && [ "$(cat "$CNP_BIN.stamp" 2>/dev/null)" = "$(cnp_stamp)" ] || echo "cnp-conformance.test"
}

build_cnp() {
  [ -z "$(cnp_missing)" ] && { log "ClusterNetworkPolicy conformance suite: cached in $CNP_BIN"; return; }
  log "building the ClusterNetworkPolicy conformance suite (hack/cnp-conformance) into $CNP_BIN"
  mkdir -p "$E2E_DIR"
  (cd "$CNP_SRC" && CGO_ENABLED=0 go test -c -trimpath -ldflags "-s -w" -o "$CNP_BIN" . >&2) \
    || { log "FAILED: building the ClusterNetworkPolicy conformance suite (go test -c in $CNP_SRC)"; exit 1; }
  cnp_stamp > "$CNP_BIN.stamp"
}

if [ "${1:-}" = "--check" ]; then
  rc=0
  p=$(missing_pkgs); [ -z "$p" ] || { log "missing apt packages: $(echo $p) (run hack/install-deps.sh)"; rc=1; }
  m=$(k8s_missing); [ -z "$m" ] || { log "missing kubernetes binaries in $K8S_DIR: $(echo $m) (run hack/install-deps.sh)"; rc=1; }
  m=$(e2e_missing); [ -z "$m" ] || { log "missing kubernetes e2e suite in $E2E_DIR: $(echo $m) (run hack/install-deps.sh)"; rc=1; }
  m=$(cnp_missing); [ -z "$m" ] || { log "missing $m in $E2E_DIR (run hack/install-deps.sh)"; rc=1; }
  exit $rc
fi
install_apt
build_k8s
build_e2e
build_cnp
log "ok: apt packages present, kubernetes $K8S_VERSION and its e2e suite in $K8S_DIR"
