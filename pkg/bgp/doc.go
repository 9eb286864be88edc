// Package bgp is kovn-speaker: Desired computes the routes a node announces from Kubernetes
// state (a pure function), PeersFor the sessions it holds, and a Speaker (GoBGP v3 embedded,
// gobgp.go) is made to match both on every event: level-triggered, withdrawn on delete and on
// shutdown, and with each route's next hop left to its session, so it is never stale.
package bgp
