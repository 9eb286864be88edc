// Package cni is the node side of kovn's pod plumbing.
//
// It has three parts:
//
//   - the protocol between the kovn-cni shim (exec'd by the container runtime) and
//     kovn-daemon: a JSON Request/Response over HTTP on a unix socket, with a Client for the
//     shim and a Server for the daemon (protocol.go, args.go, errors.go, client.go,
//     server.go, peercred_linux.go);
//   - PodHandler, the daemon's generic Handler: it asks an injected Networks for what the
//     controller decided for the pod (PodNetwork, podnetwork.go), creates the veth pair into
//     the pod's netns, attaches the node end to br-int through a PortAttacher, waits until
//     OVN has installed the port and answers with a CNI result (handler_linux.go,
//     veth_linux.go, check_linux.go, netns_linux.go, ethtool_linux.go, result.go, locks.go);
//   - OVSAttacher, the PortAttacher backed by the node's Open_vSwitch database through
//     libovsdb (ovs.go).
//
// The root-only tests (netns_test.go, handler_test.go) plumb into throwaway network
// namespaces referenced only by file descriptors, so nothing outside them is touched.
package cni
