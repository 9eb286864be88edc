#!/usr/bin/env bash
# demo.sh — `make demo`: bring up a dual-stack 2-cluster x 2-node rig with kovn, show pods on two
# nodes talking to each other and to a host outside the cluster over IPv4 and IPv6, and leave it
# up for kubectl.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$PWD/_output/bin
DIR=${KOVN_RIG_DIR:-$PWD/_output/rig}
RIG="$BIN/kovn-rig"
# step NAME: a heading; each step's wall time is kept for the table the demo ends with.
now() { date +%s.%N; }
STEP_NAMES=() STEP_SECS=() STEP_NAME="" STEP_START=$(now) DEMO_START=$(now)
step_end() {
  [ -n "$STEP_NAME" ] || return 0
  STEP_NAMES+=("$STEP_NAME") STEP_SECS+=("$(awk -v a="$STEP_START" -v b="$(now)" 'BEGIN {printf "%.1f", b-a}')")
}
step() { step_end; STEP_NAME="$*" STEP_START=$(now); printf '\n\033[1m== %s\033[0m\n' "$*"; }
step_table() {
  step_end; STEP_NAME=""
  printf '\n\033[1m== how long each step took\033[0m\n'
  for i in "${!STEP_NAMES[@]}"; do printf '%6ss  %.70s\n' "${STEP_SECS[$i]}" "${STEP_NAMES[$i]}"; done
  awk -v a="$DEMO_START" -v b="$(now)" 'BEGIN {printf "%6.1fs  in all (make demo adds building kovn before this)\n", b-a}'
}
# await WANT LACK TRIES CMD...: runs CMD until its output holds WANT and lacks LACK (extended
# regexps; "" matches anything / nothing), at most TRIES times 0.5 s apart, then prints the
# last output. The demo waits on what it shows, never on a fixed sleep.
await() {
  local want=$1 lack=$2 tries=$3 out=""; shift 3
  for _ in $(seq "$tries"); do
    out=$("$@" 2>&1) || true
    if grep -qE -- "$want" <<<"$out" && { [ -z "$lack" ] || ! grep -qE -- "$lack" <<<"$out"; }; then break; fi
    sleep 0.5
  done
  printf '%s\n' "$out"
}
# testbox_pod NAME NODE [NAMESPACE]: a pod running the lab's test server (HTTP :8080, TCP echo
# :9000) on NODE, in the cluster the current KUBECONFIG names.
testbox_pod() {
  kubectl apply -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: ${3:-default}}
spec:
  nodeName: $2
  terminationGracePeriodSeconds: 1
  containers: [{name: testbox, image: kovn.io/testbox:latest, imagePullPolicy: Never, args: [serve]}]
POD
}

if [ -f "$DIR/state.json" ]; then
  echo "demo: a rig is already up in $DIR — using it (make demo-down removes it)"
else
  step "kovn-rig up: 2 clusters x 2 nodes, a ToR, an underlay and a foreign OVN AZ"
  "$RIG" up --dir "$DIR" --clusters 2 --nodes 2 --foreign-az
fi
"$RIG" status --dir "$DIR"
eval "$("$RIG" env c1 --dir "$DIR")"

step "cluster c1: nodes (Ready once kovn-daemon has plumbed ovn0 and written the CNI config)"
kubectl get nodes -o wide
step "kovn's subnets"
kubectl get subnets

step "two pods, one per node"
for n in 1 2; do testbox_pod demo-$n c1-n$n; done
kubectl wait --for=condition=Ready pod/demo-1 pod/demo-2 --timeout=120s >/dev/null
kubectl get pods -o wide
IP1=$(kubectl get pod demo-1 -o jsonpath='{.status.podIPs[0].ip}')
IP2=$(kubectl get pod demo-2 -o jsonpath='{.status.podIPs[0].ip}')
IP1v6=$(kubectl get pod demo-1 -o jsonpath='{.status.podIPs[1].ip}')
IP2v6=$(kubectl get pod demo-2 -o jsonpath='{.status.podIPs[1].ip}')

step "demo-1 ($IP1, on c1-n1) pings demo-2 ($IP2, on c1-n2) through a geneve tunnel"
kubectl exec demo-1 -- /testbox ping -c 3 "$IP2" || kubectl exec demo-1 -- /testbox ping -c 3 "$IP2"
step "TCP echo from demo-2 to demo-1"
kubectl exec demo-2 -- /testbox tcp "$IP1:9000" "hello from demo-2"
step "demo-2 reaches the external host 172.30.0.100 (it sees the node's address: SNAT on c1-n2)"
kubectl exec demo-2 -- /testbox get http://172.30.0.100:8080/

step "the cluster is dual stack: every pod has an IPv6 address and an IPv6 default route too"
kubectl exec demo-1 -- /testbox ip | grep -E '^eth0|route (0.0.0.0|::)/0'
step "demo-1 ($IP1v6) pings demo-2 ($IP2v6) over IPv6, then TCP echo over IPv6"
kubectl exec demo-1 -- /testbox ping -c 3 "$IP2v6"
kubectl exec demo-2 -- /testbox tcp "[$IP1v6]:9000" "hello over IPv6"
step "IPv6 egress: the external host [fd00:30::100] sees c1-n2's IPv6 address"
kubectl exec demo-2 -- /testbox get "http://[fd00:30::100]:8080/"
step "OVN answers demo-1's router solicitation (managed: addresses come from kovn's IPAM, not SLAAC)"
kubectl exec demo-1 -- /testbox rs
step "a Service without kube-proxy: OVN load balancers answer its ClusterIPs, cluster DNS names it"
kubectl label pod demo-1 demo-2 app=demo --overwrite >/dev/null
kubectl apply -f - >/dev/null <<SVC
apiVersion: v1
kind: Service
metadata: {name: demo}
spec: {selector: {app: demo}, ipFamilyPolicy: PreferDualStack, ports: [{name: http, port: 80, targetPort: 8080}]}
SVC
kubectl get service demo -o wide
for i in $(seq 30); do kubectl exec demo-1 -- /testbox get -n 4 http://demo.default.svc.cluster.local/ >/dev/null 2>&1 && break; sleep 1; done
kubectl exec demo-1 -- /testbox dns demo || true
kubectl exec demo-1 -- /testbox get -n 4 http://demo/
ovn-nbctl --db="$OVN_NB_DB" --columns=name,vips,options find Load_Balancer 'name="Service_default/demo_TCP"'
step "hostPort: demo-hp publishes 8081 on c1-n2's address (kovn-daemon's KOVN-HOSTPORTS chain)"
kubectl apply -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata: {name: demo-hp}
spec:
  nodeName: c1-n2
  terminationGracePeriodSeconds: 1
  containers: [{name: testbox, image: kovn.io/testbox:latest, imagePullPolicy: Never, args: [serve], ports: [{containerPort: 8080, hostPort: 8081}]}]
POD
kubectl wait --for=condition=Ready pod/demo-hp --timeout=60s >/dev/null
for i in $(seq 10); do kubectl exec demo-1 -- /testbox get http://172.30.1.12:8081/ >/dev/null 2>&1 && break; sleep 1; done
kubectl exec demo-1 -- /testbox get http://172.30.1.12:8081/
step "internalTrafficPolicy=Local: each node's clients reach only that node's endpoints (OVN template load balancer)"
kubectl patch service demo -p '{"spec":{"internalTrafficPolicy":"Local"}}' >/dev/null
echo "demo-hp (on c1-n2) asks the Service 6 times; only demo-2, the backend on c1-n2, answers:"
await "^demo-2 " "^demo-1 |error" 20 kubectl exec demo-hp -- /testbox get -n 6 http://demo/ | cut -d' ' -f1 | sort | uniq -c
kubectl patch service demo -p '{"spec":{"internalTrafficPolicy":"Cluster"}}' >/dev/null
kubectl delete pod demo-hp --wait=false >/dev/null
step "kube-proxy's semantics, from kovn-daemon: an externalTrafficPolicy=Local LoadBalancer's healthCheckNodePort (200 where it has endpoints, 503 where not), :10256, its NodePort from pods and nodes"
kubectl label pod demo-1 lbdemo=yes --overwrite >/dev/null
kubectl apply -f - >/dev/null <<SVC
apiVersion: v1
kind: Service
metadata: {name: demo-lb}
spec: {type: LoadBalancer, externalTrafficPolicy: Local, selector: {lbdemo: "yes"}, ports: [{name: http, port: 80, targetPort: 8080}]}
SVC
HC=$(kubectl get service demo-lb -o jsonpath='{.spec.healthCheckNodePort}')
echo "healthCheckNodePort $HC; its only endpoint, demo-1, runs on c1-n1:"
await '"localEndpoints":1' "" 20 kubectl exec demo-2 -- /testbox get -status "http://172.30.1.11:$HC/healthz"
await "status 503" "" 20 kubectl exec demo-2 -- /testbox get -status "http://172.30.1.12:$HC/healthz"
echo "kube-proxy's health port on c1-n2 (current while its Service rules are):"
kubectl exec demo-2 -- /testbox get -status http://172.30.1.12:10256/healthz
NP=$(kubectl get service demo-lb -o jsonpath='{.spec.ports[0].nodePort}')
echo "its NodePort $NP, as kube-proxy serves it: demo-2 on c1-n2 reaches it on c1-n2 too (a node's own pods are internal clients: any endpoint)"
await "demo-1" "" 20 kubectl exec demo-2 -- /testbox get "http://172.30.1.12:$NP/"
echo "c1-n2 itself at c1-n1's NodePort: served by c1-n1's endpoint, which sees c1-n2's own address (172.30.1.12)"
await "demo-1 172.30.1.12" "" 20 ip netns exec "${KOVN_FABRIC_NS%-fab}-c1n2" "$BIN/kovn-testbox" get "http://172.30.1.11:$NP/"
kubectl delete service demo-lb --wait=false >/dev/null
step "a NetworkPolicy: only pods labelled role=client may reach demo-2"
kubectl apply -f - >/dev/null <<NP
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: demo-2-clients}
spec:
  podSelector: {matchLabels: {run: demo-2}}
  ingress: [{from: [{podSelector: {matchLabels: {role: client}}}]}]
NP
kubectl label pod demo-2 run=demo-2 --overwrite >/dev/null
# ACL logging of the namespace's policies: denied packets at alert, allowed ones at notice.
kubectl annotate namespace default --overwrite 'ovn.kovn.io/acl-logging={"deny": "alert", "allow": "notice"}' >/dev/null
await "fail" " ok" 20 kubectl exec demo-1 -- /testbox probe "$IP2:8080" "[$IP2v6]:8080"
kubectl label pod demo-1 role=client --overwrite >/dev/null
echo "demo-1 labelled role=client:"
await " ok" "fail" 20 kubectl exec demo-1 -- /testbox probe "$IP2:8080" "[$IP2v6]:8080"
echo "kubectl kovn acl-log (the lab runs ovn-controller as a process: its log files; on the chart, the containers'):"
PATH="$BIN:$PATH" kubectl kovn acl-log -n default --since 1m \
  --log-file "c1-n1=$DIR/c1/nodes/c1-n1/logs/ovn-controller.log" --log-file "c1-n2=$DIR/c1/nodes/c1-n2/logs/ovn-controller.log" | tail -12
kubectl annotate namespace default ovn.kovn.io/acl-logging- >/dev/null
kubectl delete networkpolicy demo-2-clients >/dev/null

step "a ClusterNetworkPolicy (the cluster admin's Admin tier, judged before any NetworkPolicy): no pod may reach demo-2's TCP 8080"
kubectl apply -f - >/dev/null <<CNP
apiVersion: policy.networking.k8s.io/v1beta1
kind: ClusterNetworkPolicy
metadata: {name: demo-admin}
spec:
  tier: Admin
  priority: 10
  subject: {pods: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: default}}, podSelector: {matchLabels: {run: demo-2}}}}
  ingress:
  - {name: no-8080, action: Deny, from: [{namespaces: {}}], protocols: [{tcp: {destinationPort: {number: 8080}}}]}
CNP
await "$IP2:8080 fail" "" 20 kubectl exec demo-1 -- /testbox probe "$IP2:8080" "$IP2:9000" "[$IP2v6]:8080" "[$IP2v6]:9000"
kubectl get cnp demo-admin -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}'
kubectl delete cnp demo-admin >/dev/null

step "a pod that forges kovn's result annotations with demo-1's address gets no network"
kubectl apply -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata:
  name: forger
  annotations: {ovn.kovn.io/allocated: "true", ovn.kovn.io/ip_address: "$IP1", ovn.kovn.io/cidr: 10.16.0.0/16, ovn.kovn.io/gateway: 10.16.0.1}
spec:
  nodeName: c1-n2
  terminationGracePeriodSeconds: 1
  containers: [{name: testbox, image: kovn.io/testbox:latest, imagePullPolicy: Never, args: [serve]}]
POD
await "Warning" "" 20 kubectl get events --field-selector involvedObject.name=forger -o custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message | grep -v Scheduled || true
kubectl get pod forger -o wide
kubectl delete pod forger --wait=false >/dev/null

step "a tenant (edit in namespace t1 only) asking for the nodes' join network gets NetworkRequestDenied and no network"
kubectl create namespace t1 >/dev/null 2>&1 || true
kubectl -n t1 create serviceaccount tenant >/dev/null 2>&1 || true
kubectl -n t1 create rolebinding tenant-edit --clusterrole=edit --serviceaccount=t1:tenant >/dev/null 2>&1 || true
kubectl --as=system:serviceaccount:t1:tenant apply -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata: {name: on-join, namespace: t1, annotations: {ovn.kovn.io/logical_switch: join}}
spec:
  nodeName: c1-n1
  terminationGracePeriodSeconds: 1
  containers: [{name: testbox, image: kovn.io/testbox:latest, imagePullPolicy: Never, args: [serve]}]
POD
await "NetworkRequestDenied" "" 20 kubectl -n t1 get events --field-selector involvedObject.name=on-join -o custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message
kubectl -n t1 delete pod on-join --wait=false >/dev/null

step "a Subnet ACL (admin's, above every NetworkPolicy): ovn-default drops TCP 8080 from demo-1"
kubectl patch subnet ovn-default --type=merge -p "{\"spec\":{\"acls\":[{\"direction\":\"to-lport\",\"priority\":100,\"action\":\"drop\",\"match\":\"ip4.src == $IP1 && tcp.dst == 8080\"}]}}" >/dev/null
await "$IP2:8080 fail" "" 20 kubectl exec demo-1 -- /testbox probe "$IP2:8080" "$IP2:9000" "[$IP2v6]:8080"
echo "a match OVN would refuse (host bits set) is reported, and the rule above stays:"
kubectl patch subnet ovn-default --type=merge -p '{"spec":{"acls":[{"direction":"to-lport","priority":100,"action":"drop","match":"ip4.src == 10.16.0.1/16"}]}}' >/dev/null
await "=False" "" 20 kubectl get subnet ovn-default -o jsonpath='{range .status.conditions[?(@.type=="Validated")]}{.type}={.status} {.reason}: {.message}{"\n"}{end}'
kubectl exec demo-1 -- /testbox probe "$IP2:8080"
kubectl patch subnet ovn-default --type=json -p '[{"op":"remove","path":"/spec/acls"}]' >/dev/null

step "bandwidth: kubernetes.io/egress-bandwidth=20M on demo-1 becomes an OVN QoS meter on its port"
# mbps FROM TO ADDR: stream TCP for 3 s, print the receiver's rate.
mbps() {
  kubectl exec "$2" -- /testbox tcprecv -p 5201 -i 1s -t 30s | awk '/^total/ {printf "%.1f Mbit/s\n", $2*8/$3/1e6}' &
  kubectl exec "$1" -- /testbox tcpsend -t 3s "$3" >/dev/null
  wait
}
echo -n "demo-1 -> demo-2 without a limit: "; mbps demo-1 demo-2 "$IP2:5201"
kubectl annotate pod demo-1 kubernetes.io/egress-bandwidth=20M --overwrite >/dev/null
sleep 1
echo -n "with egress-bandwidth=20M:        "; mbps demo-1 demo-2 "$IP2:5201"
kubectl annotate pod demo-1 kubernetes.io/egress-bandwidth=fast --overwrite >/dev/null
await "InvalidBandwidth" "" 20 kubectl get events --field-selector involvedObject.name=demo-1,reason=InvalidBandwidth -o custom-columns=REASON:.reason,MESSAGE:.message | tail -1
kubectl annotate pod demo-1 kubernetes.io/egress-bandwidth- >/dev/null
step "the clusters join one network: an InterConnect in each makes it an OVN-IC availability zone"
for c in 1 2; do
  eval "$("$RIG" env c$c --dir "$DIR")"
  kubectl apply -f - >/dev/null <<IC
apiVersion: kovn.io/v1alpha1
kind: InterConnect
metadata: {name: default}
spec:
  azName: az$c
  icNorthbound: ["$KOVN_IC_NB"]
  icSouthbound: ["$KOVN_IC_SB"]
  gatewayNodes: [c$c-n1, c$c-n2]
IC
done
for c in 1 2; do
  eval "$("$RIG" env c$c --dir "$DIR")"
  kubectl wait --for=condition=Ready interconnect/default --timeout=60s >/dev/null
  testbox_pod x-$c c$c-n2
done
eval "$("$RIG" env c2 --dir "$DIR")"
kubectl wait --for=condition=Ready pod/x-2 --timeout=120s >/dev/null
X2=$(kubectl get pod x-2 -o jsonpath='{.status.podIPs[0].ip}')
X2v6=$(kubectl get pod x-2 -o jsonpath='{.status.podIPs[1].ip}')
eval "$("$RIG" env c1 --dir "$DIR")"
kubectl wait --for=condition=Ready pod/x-1 --timeout=120s >/dev/null
kubectl get interconnect -o wide
echo "c1's x-1 pings c2's x-2 ($X2, then $X2v6), through both clusters' gateways; no NAT: x-2 sees x-1's pod address"
kubectl exec x-1 -- /testbox ping -c 3 "$X2" || kubectl exec x-1 -- /testbox ping -c 3 "$X2"
kubectl exec x-1 -- /testbox ping -c 3 "$X2v6" || kubectl exec x-1 -- /testbox ping -c 3 "$X2v6"
kubectl exec x-1 -- /testbox get "http://$X2:8080/"
echo "c1's router: the routes ovn-ic learned from c2 (only its pod subnets: the join subnet, node addresses"
echo "and transit network never cross) beside the default route through the join gateway:"
ovn-nbctl --db="$OVN_NB_DB" lr-route-list ovn-cluster

step "identity: the OVN databases take mutual TLS only, and SB lets a node's certificate write its own chassis only"
N1NS="${KOVN_FABRIC_NS%-fab}-c1n1" N1CERT="$DIR/c1/pki/ovn-sb/c1-n1"
echo "from c1-n1, a client without a certificate at c1's SB (the address ovn-controller uses):"
ip netns exec "$N1NS" ovsdb-client --timeout=5 list-dbs tcp:172.30.1.1:6642 2>&1 | tail -1 || true
echo "c1-n1's own certificate (CN c1-n1) changing chassis c1-n2 (OVN's SB RBAC, role ovn-controller):"
ip netns exec "$N1NS" ovn-sbctl --timeout=5 --db=ssl:172.30.1.1:6642 --private-key="$N1CERT/tls.key" \
  --certificate="$N1CERT/tls.crt" --ca-cert="$N1CERT/ca.crt" set Chassis c1-n2 external_ids:demo=forged 2>&1 | tail -1 || true
echo "c1's AZ reaches the IC databases with its own certificate (CN az1), from a Secret:"
kubectl get interconnect default -o jsonpath='{.status.conditions[?(@.type=="CredentialsReady")].message}{"\n"}'
echo "c2's certificate (CN az2) deleting az1's AZ row in IC-SB: kovn's relay in front of IC-SB refuses it"
N2NS="${KOVN_FABRIC_NS%-fab}-c2n1" AZ2="$DIR/ic/pki/az2"
az2sb() { ip netns exec "$N2NS" ovsdb-client --timeout=5 --private-key="$AZ2/tls.key" --certificate="$AZ2/tls.crt" --ca-cert="$AZ2/ca.crt" "$1" "${KOVN_IC_SB%%,*}" "$2"; }
AZ1ROW=$(az2sb query '["OVN_IC_Southbound",{"op":"select","table":"Availability_Zone","where":[["name","==","az1"]],"columns":["_uuid"]}]' | grep -o '"uuid","[^"]*"' | cut -d'"' -f4 || true)
az2sb transact '["OVN_IC_Southbound",{"op":"delete","table":"Availability_Zone","where":[["_uuid","==",["uuid","'"$AZ1ROW"'"]]]}]' 2>&1 | tail -1 || true

step "rotation: every OVN CA and certificate replaced (trust the next CA, issue from it, retire the old) while x-1 pings x-2 every 100 ms"
kubectl exec x-1 -- /testbox pingstream -c 120 -i 100ms -W 2s "$X2" > "$DIR/rotation-stream.txt" 2>&1 &
STREAM=$!
"$RIG" rotate-pki --dir "$DIR"
wait "$STREAM" || true
grep -E "transmitted|longest" "$DIR/rotation-stream.txt"
echo "c1's kovn-controller's clusterset certificate (CredentialsReady):"
kubectl get interconnect default -o jsonpath='{.status.conditions[?(@.type=="CredentialsReady")].message}{"\n"}'

# export_hello: Service hello (pods labelled mcs=hello) and its ServiceExport, with the
# export's annotations given as YAML flow entries ($1, may be empty)
export_hello() {
kubectl apply -f - >/dev/null <<SVC
apiVersion: v1
kind: Service
metadata: {name: hello}
spec:
  ipFamilyPolicy: PreferDualStack
  selector: {mcs: hello}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceExport
metadata: {name: hello, annotations: {${1:-}}}
SVC
}

step "Multi-Cluster Services: x-2 in c2 exported; c1 imports it (ServiceImport, ClusterSetIP) and names it in clusterset.local"
eval "$("$RIG" env c2 --dir "$DIR")"
kubectl label pod x-2 mcs=hello --overwrite >/dev/null
export_hello
eval "$("$RIG" env c1 --dir "$DIR")"
for i in $(seq 1 40); do
  [ -n "$(kubectl get serviceimport hello -o jsonpath='{.spec.ips[0]}' 2>/dev/null)" ] && break
  sleep 0.5
done
kubectl get serviceimport hello -o wide
CSIP=$(kubectl get serviceimport hello -o jsonpath='{.spec.ips[0]}')
echo "x-1 in c1 -> hello.default.svc.clusterset.local ($CSIP): one OVN load balancer in c1, its backend x-2's pod address in c2"
kubectl exec x-1 -- /testbox dns hello.default.svc.clusterset.local. A
kubectl exec x-1 -- /testbox get "http://$CSIP/" || { sleep 2; kubectl exec x-1 -- /testbox get "http://$CSIP/"; }
kubectl get endpointslices -l multicluster.kubernetes.io/service-name=hello -o wide

step "a cluster cut off: both of c2's gateways lose the fabric; c1's gateways' BFD probes see it, and hello's ClusterSetIP refuses c1's client at once instead of hanging"
eval "$("$RIG" env c1 --dir "$DIR")"
echo "c1-n1 probes the other clusters' gateways (BFD on tunnels of its own, UDP 6082): $(kubectl get node c1-n1 -o jsonpath='{.metadata.annotations.ovn\.kovn\.io/ic_peer_gateways}')"
for n in 1 2; do ip -n "$KOVN_FABRIC_NS" link set "c2n$n" down; done
await "c1-n1: az2.*c1-n2: az2" "" 40 kubectl get nodes c1-n1 c1-n2 -o jsonpath='{range .items[*]}{.metadata.name}: {.metadata.annotations.ovn\.kovn\.io/ic_peers_down}{" "}{end}'
kubectl exec x-1 -- /testbox get "http://$CSIP/" || echo "(refused: c2's endpoints are out of c1's load balancers)"
for n in 1 2; do ip -n "$KOVN_FABRIC_NS" link set "c2n$n" up; done
echo "links back:"
await "x-2" "" 60 kubectl exec x-1 -- /testbox get "http://$CSIP/"

step "locality: hello exported from c1 too (x-1), both exports local-first: x-1 in c1 gets c1's endpoint only; c1's gone -> c2's"
eval "$("$RIG" env c2 --dir "$DIR")"
kubectl annotate serviceexport hello mcs.kovn.io/locality=local-first --overwrite >/dev/null
eval "$("$RIG" env c1 --dir "$DIR")"
kubectl label pod x-1 mcs=hello --overwrite >/dev/null
export_hello "mcs.kovn.io/locality: local-first"
answered_by() { kubectl exec x-1 -- /testbox get -n 10 "http://$CSIP/" 2>/dev/null | awk '{print $1}' | sort | uniq -c | tr '\n' ' '; }
for i in $(seq 1 40); do
  [ "$(answered_by)" = "     10 x-1 " ] && break
  sleep 0.5
done
echo "x-1 -> $CSIP, 10 requests answered by: $(answered_by)"
kubectl label pod x-1 mcs- >/dev/null
for i in $(seq 1 40); do
  [ "$(answered_by)" = "     10 x-2 " ] && break
  sleep 0.25
done
echo "x-1's label removed (c1 has no endpoint): answered by: $(answered_by)"
kubectl delete serviceexport hello >/dev/null
kubectl delete service hello >/dev/null
eval "$("$RIG" env c2 --dir "$DIR")"
kubectl annotate serviceexport hello mcs.kovn.io/locality- >/dev/null

step "NetworkPolicy peers in another cluster: x-1 in c1 admits only c2's pods labelled trusted=yes (c2 publishes namespace default)"
eval "$("$RIG" env c2 --dir "$DIR")"
kubectl label namespace default kovn.io/clusterset-peers=publish --overwrite >/dev/null
kubectl label pod x-2 trusted=yes --overwrite >/dev/null
testbox_pod x-3 c2-n1
kubectl wait --for=condition=Ready pod/x-3 --timeout=120s >/dev/null
X3=$(kubectl get pod x-3 -o jsonpath='{.status.podIPs[0].ip}')
eval "$("$RIG" env c1 --dir "$DIR")"
kubectl label pod x-1 demo=x-1 --overwrite >/dev/null
X1=$(kubectl get pod x-1 -o jsonpath='{.status.podIPs[0].ip}')
kubectl apply -f - >/dev/null <<NP
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: x-1-from-az2-trusted}
spec:
  podSelector: {matchLabels: {demo: x-1}}
  ingress:
  - from:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: default, cluster.clusterset.k8s.io: az2}}
      podSelector: {matchLabels: {trusted: "yes"}}
NP
echo "c1's peer address set for that selector follows c2's published pods (x-2: $X2, $X2v6):"
await "$X2" "" 40 ovn-nbctl --db="$OVN_NB_DB" --bare --columns=addresses find Address_Set 'external_ids:"kovn.io/peer-selector"="namespaces=cluster.clusterset.k8s.io=az2,kubernetes.io/metadata.name=default;pods=trusted=yes"'
eval "$("$RIG" env c2 --dir "$DIR")"
echo "x-2 (trusted) -> x-1 ($X1:8080):"
kubectl exec x-2 -- /testbox get "http://$X1:8080/"
echo "x-3 ($X3, not trusted) -> x-1: refused by c1's ACL (times out)"
kubectl exec x-3 -- /testbox probe -t 2s "$X1:8080" || true
eval "$("$RIG" env c1 --dir "$DIR")"
kubectl delete networkpolicy x-1-from-az2-trusted >/dev/null

step "a foreign OVN AZ: an OpenStack-like OVN deployment kovn does not run peers with c1's default VPC; only agreed prefixes cross"
eval "$("$RIG" env c1 --dir "$DIR")"
if [ -z "${KOVN_FOREIGN_NB:-}" ]; then
  echo "skipped: this rig was brought up without --foreign-az"
else
  echo "its router, written with plain ovn-nbctl: vm-net 10.250.1.0/24 + fd00:250:1::/64 (agreed) and vm-private 10.250.2.0/24 + fd00:250:2::/64 (not agreed)"
  ovn-nbctl --db="$KOVN_FOREIGN_NB" show neutron-router
  PODS=$(kubectl get subnet ovn-default -o jsonpath='{.spec.cidrBlock}' | sed 's/,/", "/')
  kubectl apply -f - >/dev/null <<FAZ
apiVersion: kovn.io/v1alpha1
kind: ForeignAZ
metadata: {name: openstack}
spec:
  az: openstack
  transitSwitch: ts-openstack
  transitAddresses: ["169.254.60.1/24", "fd00:a9fe:3c::1/64"]
  advertiseCIDRs: ["$PODS"]
  acceptCIDRs: ["10.250.1.0/24", "fd00:250:1::/64"]
FAZ
  kubectl wait --for=condition=Ready foreignaz/openstack --timeout=60s >/dev/null
  kubectl get foreignaz openstack
  echo "RoutesAgreed: $(kubectl get foreignaz openstack -o jsonpath='{.status.conditions[?(@.type=="RoutesAgreed")].message}')"
  X1=$(kubectl get pod x-1 -o jsonpath='{.status.podIPs[0].ip}')
  echo "x-1 ($X1) pings vm1 (10.250.1.10) and fetches its page (vm1 sees x-1's own address), then pings it over IPv6 (fd00:250:1::a)"
  kubectl exec x-1 -- /testbox ping -c 3 10.250.1.10 || kubectl exec x-1 -- /testbox ping -c 3 10.250.1.10
  kubectl exec x-1 -- /testbox get http://10.250.1.10:8080/
  kubectl exec x-1 -- /testbox ping -c 3 fd00:250:1::a || kubectl exec x-1 -- /testbox ping -c 3 fd00:250:1::a
  echo "vm1 fetches x-1's page: x-1 sees vm1's own address"
  ip netns exec "$KOVN_FOREIGN_VM1_NS" "$BIN/kovn-testbox" get "http://$X1:8080/"
  echo "vm-private is not agreed: x-1 -> vm2 (10.250.2.10) gets no answer"
  kubectl exec x-1 -- /testbox ping -c 2 -W 1s 10.250.2.10 || true
  echo "the foreign router learned c1's agreed prefix only (ic-learned-route), nothing else of the clusterset:"
  ovn-nbctl --db="$KOVN_FOREIGN_NB" lr-route-list neutron-router
fi

step "BGP: kovn-speaker on every node of c1 peers with the ToR (FRR); a subnet and a pod are announced"
eval "$("$RIG" env c1 --dir "$DIR")"
kubectl create namespace routed --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply -f - >/dev/null <<BGP
apiVersion: kovn.io/v1alpha1
kind: BgpPeer
metadata: {name: tor-v4}
spec: {peerAddress: 172.30.0.254, peerASN: 64500, localASN: 64512, holdTimeSeconds: 9}
---
apiVersion: kovn.io/v1alpha1
kind: BgpPeer
metadata: {name: tor-v6}
spec: {peerAddress: "fd00:30::254", peerASN: 64500, localASN: 64512, holdTimeSeconds: 9}
---
apiVersion: kovn.io/v1alpha1
kind: Subnet
metadata: {name: routed}
spec: {cidrBlock: "10.210.0.0/24,fd00:210::/64", namespaces: [routed], bgpAdvertise: true, bgpPolicy: Local}
BGP
kubectl wait --for=condition=Ready subnet/routed --timeout=60s >/dev/null
testbox_pod r c1-n2 routed
kubectl -n routed wait --for=condition=Ready pod/r --timeout=120s >/dev/null
RIP=$(kubectl -n routed get pod r -o jsonpath='{.status.podIPs[0].ip}')
for i in $(seq 1 40); do
  [ "$(kubectl get bgppeer tor-v4 -o jsonpath='{.status.establishedNodes[*]}' | wc -w)" = 2 ] && break
  sleep 0.5
done
kubectl get bgppeers -o wide
echo "the ToR's routes from the speakers (bgpPolicy Local: r's address from c1-n2, the node hosting it):"
ip netns exec "$KOVN_TOR_NS" vtysh --vty_socket "$KOVN_TOR_VTY" -c "show ip route bgp" -c "show ipv6 route bgp" | grep -E '^B|via'
echo "the outside host 172.31.0.100, behind the ToR and off the fabric, reaches r ($RIP); r sees its own address:"
ip netns exec "$KOVN_OUTSIDE_NS" "$BIN/kovn-testbox" get "http://$RIP:8080/" || { sleep 2; ip netns exec "$KOVN_OUTSIDE_NS" "$BIN/kovn-testbox" get "http://$RIP:8080/"; }

step "a centralized subnet: its egress leaves through the first live gateway node, as OVN's BFD judges it"
kubectl create namespace central --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply -f - >/dev/null <<SUBNET
apiVersion: kovn.io/v1alpha1
kind: Subnet
metadata: {name: central}
spec:
  cidrBlock: "10.200.0.0/24"
  gatewayType: centralized
  gatewayNodes: [c1-n1, c1-n2]
  natOutgoing: true
  namespaces: [central]
SUBNET
kubectl wait --for=condition=Ready subnet/central --timeout=60s >/dev/null
testbox_pod c c1-n2 central
kubectl -n central wait --for=condition=Ready pod/c --timeout=120s >/dev/null
echo "OVN bound the subnet's health port to chassis:"
ovn-sbctl --db="$OVN_SB_DB" --bare --columns=name list Chassis \
  "$(ovn-sbctl --db="$OVN_SB_DB" --bare --columns=chassis find Port_Binding logical_port=cr-kovn-gwh-central)"
echo "so central/c (on c1-n2) reaches the external host from c1-n1's address:"
kubectl -n central exec c -- /testbox get http://172.30.0.100:8080/

step "attachment networks (NPWG): pods with eth0 + net1 (a kovn Subnet, static IP) + net2 (macvlan on the node's eth1, kovn IPAM)"
kubectl create namespace attach --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply -f - >/dev/null <<ATTACH
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: blue, namespace: attach}
spec: {config: '{"cniVersion": "1.0.0", "name": "blue", "type": "kovn"}'}
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: mv, namespace: attach}
spec: {config: '{"cniVersion": "1.0.0", "name": "mv", "type": "macvlan", "master": "eth1", "mode": "bridge", "ipam": {"type": "kovn"}}'}
---
apiVersion: kovn.io/v1alpha1
kind: Subnet
metadata: {name: blue}
spec: {cidrBlock: "10.215.0.0/24,fd00:215::/64", provider: attach/blue}
---
apiVersion: kovn.io/v1alpha1
kind: Subnet
metadata: {name: mv}
spec: {cidrBlock: "10.216.0.0/24,fd00:216::/64", provider: attach/mv}
ATTACH
kubectl wait --for=condition=Ready subnet/blue subnet/mv --timeout=60s >/dev/null
for n in 1 2; do
  ips='"10.215.0.1'$n'", "fd00:215::1'$n'"'
  kubectl apply -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata:
  name: m$n
  namespace: attach
  annotations:
    k8s.v1.cni.cncf.io/networks: '[{"name": "blue", "interface": "net1", "ips": [$ips]}, {"name": "mv", "interface": "net2"}]'
spec:
  nodeName: c1-n$n
  terminationGracePeriodSeconds: 1
  containers: [{name: testbox, image: kovn.io/testbox:latest, imagePullPolicy: Never, args: [serve]}]
POD
done
kubectl -n attach wait --for=condition=Ready pod/m1 pod/m2 --timeout=120s >/dev/null
echo "m1's network-status, written by kovn-daemon:"
kubectl -n attach get pod m1 -o jsonpath='{.metadata.annotations.k8s\.v1\.cni\.cncf\.io/network-status}'; echo
M2NET2=$(kubectl -n attach get pod m2 -o jsonpath='{.metadata.annotations.k8s\.v1\.cni\.cncf\.io/network-status}' | grep -A3 '"net2"' | grep -oE '10\.216\.0\.[0-9]+' | head -1)
echo "m1 -> m2 on net1 (the kovn Subnet blue, static 10.215.0.12) and on net2 (macvlan over the nodes' eth1, $M2NET2):"
kubectl -n attach exec m1 -- /testbox ping -c 3 10.215.0.12 || kubectl -n attach exec m1 -- /testbox ping -c 3 10.215.0.12
kubectl -n attach exec m1 -- /testbox tcp "$M2NET2:9000" "hello over macvlan"
kubectl -n attach exec m1 -- /testbox ip | grep -E '^(eth0|net1|net2)|inet' || true
echo "a MultiNetworkPolicy for blue: m2 admits nothing on net1 (an ingress policy with no rule); eth0 stays open"
kubectl apply -f - >/dev/null <<MNP
apiVersion: k8s.cni.cncf.io/v1beta1
kind: MultiNetworkPolicy
metadata:
  name: m2-closed-on-blue
  namespace: attach
  annotations: {k8s.v1.cni.cncf.io/policy-for: blue}
spec:
  podSelector: {}
  policyTypes: [Ingress]
MNP
M2ETH0=$(kubectl -n attach get pod m2 -o jsonpath='{.status.podIPs[0].ip}')
await "10.215.0.12:9000 fail" "" 40 kubectl -n attach exec m1 -- /testbox probe -t 500ms 10.215.0.12:9000 "$M2ETH0:9000"
kubectl -n attach delete multi-networkpolicies.k8s.cni.cncf.io m2-closed-on-blue >/dev/null
kubectl -n attach delete pod m1 m2 >/dev/null

step "underlay: a ProviderNetwork moves each node's eth1, address and routes, into br-phys; a Subnet on VLAN 100 puts pods on the physical network"
NODE1_NS=${KOVN_FABRIC_NS%-fab}-c1n1
echo "c1-n1's eth1 before (the lab's second NIC, a trunk of VLANs 100 and 200 on its underlay switch):"
ip -n "$NODE1_NS" -br addr show dev eth1
kubectl create namespace underlay --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply -f - >/dev/null <<UNDERLAY
apiVersion: kovn.io/v1alpha1
kind: ProviderNetwork
metadata: {name: phys}
spec: {defaultInterface: eth1}
---
apiVersion: kovn.io/v1alpha1
kind: Vlan
metadata: {name: v100}
spec: {id: 100, provider: phys}
---
apiVersion: kovn.io/v1alpha1
kind: Subnet
metadata: {name: ul100}
spec: {cidrBlock: "172.28.100.0/24,fd00:28:100::/64", gateway: "172.28.100.1,fd00:28:100::1", vlan: v100, namespaces: [underlay]}
UNDERLAY
kubectl wait --for=condition=Ready subnet/ul100 --timeout=60s >/dev/null
for i in $(seq 1 40); do
  [ "$(kubectl get providernetwork phys -o jsonpath='{.status.readyNodes[*]}' | wc -w)" = 2 ] && break
  sleep 0.5
done
kubectl get providernetworks,vlans
echo "c1-n1 after: eth1 is a port of br-phys, which holds its addresses (the routes moved too):"
ip -n "$NODE1_NS" -br addr show dev eth1; ip -n "$NODE1_NS" -br addr show dev br-phys; ip -n "$NODE1_NS" route show dev br-phys
for n in 1 2; do testbox_pod u$n c1-n$n underlay; done
kubectl -n underlay wait --for=condition=Ready pod/u1 pod/u2 --timeout=120s >/dev/null
U2=$(kubectl -n underlay get pod u2 -o jsonpath='{.status.podIPs[0].ip}')
echo "u1 (c1-n1) pings u2 ($U2, c1-n2) over VLAN 100; c1-n1's port on the underlay switch sees tagged frames, no geneve:"
{ ip netns exec "$KOVN_FABRIC_NS" timeout 4 tcpdump -l -nn -e -i v1n1 2>/dev/null | grep -m 4 'ICMP echo'; } &
sleep 1
kubectl -n underlay exec u1 -- /testbox ping -c 2 "$U2"
wait
echo "u1 reaches the host on VLAN 30 (172.28.30.100) through the physical router; it sees u1's own address:"
kubectl -n underlay exec u1 -- /testbox get http://172.28.30.100:8080/
kubectl -n underlay exec u1 -- /testbox get "http://[fd00:28:30::100]:8080/"

step "a floating IP: ul100 becomes an external network of the default VPC; 172.28.100.200 and fd00:28:100::c8 lead to demo-2"
PRT_MAC=$(ip -n "$KOVN_PHYS_ROUTER_NS" -br link show eth0.100 | awk '{print $3}')
kubectl patch subnet ul100 --type=merge -p "{\"spec\":{\"externalGateway\":{\"addresses\":[\"172.28.100.254\",\"fd00:28:100::fe\"],\"nodes\":[\"c1-n1\",\"c1-n2\"],\"gatewayMAC\":\"$PRT_MAC\"}}}" >/dev/null
kubectl apply -f - >/dev/null <<FIP
apiVersion: kovn.io/v1alpha1
kind: FloatingIP
metadata: {name: demo-2}
spec: {subnet: ul100, addresses: [172.28.100.200, "fd00:28:100::c8"], pod: {namespace: default, name: demo-2}}
FIP
kubectl wait --for=condition=Ready floatingip/demo-2 --timeout=60s >/dev/null
kubectl get floatingips
ovn-nbctl --db="$OVN_NB_DB" lr-nat-list ovn-cluster
echo "the host on VLAN 30 reaches demo-2 on its floating addresses (demo-2 sees the host's own address):"
ip netns exec "$KOVN_UNDERLAY_HOST_NS" "$BIN/kovn-testbox" get http://172.28.100.200:8080/
ip netns exec "$KOVN_UNDERLAY_HOST_NS" "$BIN/kovn-testbox" get "http://[fd00:28:100::c8]:8080/"
echo "and sees demo-2's own connections come from them:"
kubectl exec demo-2 -- /testbox get http://172.28.30.100:8080/
kubectl exec demo-2 -- /testbox get "http://[fd00:28:30::100]:8080/"
echo "a second FloatingIP claiming 172.28.100.200 is refused, nothing programmed for it:"
kubectl apply -f - >/dev/null <<FIP
apiVersion: kovn.io/v1alpha1
kind: FloatingIP
metadata: {name: thief}
spec: {subnet: ul100, addresses: [172.28.100.200], pod: {namespace: default, name: demo-1}}
FIP
await "[A-Za-z]+: " "" 20 kubectl get floatingip thief -o jsonpath='{.status.conditions[0].reason}: {.status.conditions[0].message}{"\n"}'
kubectl delete floatingip thief >/dev/null

step "an egress IP: pods of namespaces labelled egress=yes leave through the external network as 172.28.100.210 / fd00:28:100::d2"
kubectl create namespace egress --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl label namespace egress egress=yes --overwrite >/dev/null
testbox_pod e1 c1-n2 egress
kubectl -n egress wait --for=condition=Ready pod/e1 --timeout=120s >/dev/null
kubectl apply -f - >/dev/null <<EIP
apiVersion: kovn.io/v1alpha1
kind: EgressIP
metadata: {name: demo}
spec:
  subnet: ul100
  addresses: [172.28.100.210, "fd00:28:100::d2"]
  namespaceSelector: {matchLabels: {egress: "yes"}}
EIP
kubectl wait --for=condition=Ready egressip/demo --timeout=60s >/dev/null
kubectl get egressips
echo "egress/e1 reaches the host on VLAN 30 as the egress addresses (held by the external gateway's node, moved by OVN if it fails):"
kubectl -n egress exec e1 -- /testbox get http://172.28.30.100:8080/
kubectl -n egress exec e1 -- /testbox get "http://[fd00:28:30::100]:8080/"
echo "demo-1, in a namespace not selected, leaves as its node's address, as before:"
kubectl exec demo-1 -- /testbox get http://172.28.30.100:8080/

step "OVS health in kovn-daemon's metrics: c1-n1's OpenFlow and datapath flows, its tunnels and their BFD state"
# (The chart also runs kovn-ovn-monitor beside OVN central: raft role, leader, term and members
# per database, northd active/standby, each chassis's nb_cfg lag; kubectl kovn status shows them.)
ip netns exec "$NODE1_NS" "$BIN/kovn-testbox" get http://127.0.0.1:9474/metrics |
  grep -E '^kovn_node_(ovs_up|ovn_controller_up|openflow_flows|datapath_flows|tunnels|tunnel_bfd_up)' || true

step "subnets report the protocol, gateway and addresses in use"
kubectl get subnets
step "the OVN view: logical switches, ports and the gateway policies kovn programmed"
ovn-nbctl --db="$OVN_NB_DB" show
ovn-nbctl --db="$OVN_NB_DB" lr-policy-list ovn-cluster

eval "$("$RIG" env c1 --dir "$DIR")"
C1_KUBECONFIG=$KUBECONFIG
eval "$("$RIG" env c2 --dir "$DIR")"
C2_KUBECONFIG=$KUBECONFIG
eval "$("$RIG" env c1 --dir "$DIR")"
step "kubectl kovn status: kovn-controller, every node's network, subnets, interconnect, MCS and BGP on one screen"
# No --wait: the ForeignAZ's RoutesAgreed is False on purpose (vm-private is refused), so the
# status never turns healthy; it is shown as it is, that problem included.
PATH="$BIN:$PATH" kubectl kovn status || true
step "kubectl kovn connectivity-test: pods on both nodes of c1 and c2 check every path, a pass/fail table"
PATH="$BIN:$PATH" kubectl kovn connectivity-test --kubeconfigs "$C1_KUBECONFIG,$C2_KUBECONFIG" \
  --image kovn.io/kovn-probe:latest || true

step_table
cat <<MSG

The rig is up (2 clusters joined by OVN-IC, dual stack).
An IPv6-only or IPv4-only rig: kovn-rig up --ip-family ipv6|ipv4.
Use it from this shell:
  eval "\$($RIG env c1 --dir $DIR)"   # KUBECONFIG, OVN_NB_DB, OVN_SB_DB, OVN_IC_* and PATH with kubectl
  kubectl get pods -o wide
  kubectl exec demo-1 -- /testbox ping -c 3 $IP2
  ovn-nbctl show
Tear it down with:  make demo-down
MSG
