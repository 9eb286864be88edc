package ovn

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// RaftStatus is one ovsdb-server's view of a clustered database: what `cluster/status DB`
// prints on its control socket, parsed. Servers are named by their short server ID (the
// first four hex digits OVSDB prints), whatever nickname the text used for them.
type RaftStatus struct {
	Name      string // the database, e.g. OVN_Northbound
	ClusterID string // short cluster ID
	ServerID  string // this member's short server ID
	Status    string // "cluster member", "joining cluster", "disconnected from the cluster (...)", ...
	Role      string // leader, follower or candidate
	Term      int64
	Leader    string // the leader's short server ID; "" when this member knows none
	// LogEntries, Uncommitted and Unapplied count the entries of this member's raft log.
	LogEntries, Uncommitted, Unapplied int64
	// Servers are the cluster's configured members, this one included.
	Servers []string
	// Connected are the members this one has an established outgoing connection to, itself
	// included: a stopped or partitioned member drops out of its peers' lists within a few
	// election timeouts.
	Connected []string
}

// ClusterStatus reads database db's raft status from an ovsdb-server control socket.
func ClusterStatus(ctx context.Context, socket, db string) (RaftStatus, error) {
	out, err := Unixctl(ctx, socket, "cluster/status", db)
	if err != nil {
		return RaftStatus{}, err
	}
	return ParseClusterStatus(out)
}

// serverLine is a "Servers:" entry: "    NICK (SID at ADDRESS) [(self)] ...".
var serverLine = regexp.MustCompile(`^\s+(\S+) \(([0-9a-f]{4}) at [^)]*\)(.*)$`)

// ParseClusterStatus parses the text of `cluster/status`. OVSDB names peers in "Leader:" and
// "Connections:" by a nickname (the short server ID, or a name derived from a unix address);
// the "Servers:" list maps nicknames to server IDs.
func ParseClusterStatus(text string) (RaftStatus, error) {
	var s RaftStatus
	nicks := map[string]string{}
	var leader, connections string
	inServers := false
	for _, line := range strings.Split(text, "\n") {
		if inServers {
			if m := serverLine.FindStringSubmatch(line); m != nil {
				nicks[m[1]] = m[2]
				s.Servers = append(s.Servers, m[2])
				if strings.Contains(m[3], "(self)") {
					s.ServerID = m[2]
				}
				continue
			}
			inServers = false
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		var err error
		switch key {
		case "Name":
			s.Name = value
		case "Cluster ID":
			s.ClusterID, _, _ = strings.Cut(value, " ")
		case "Server ID":
			s.ServerID, _, _ = strings.Cut(value, " ")
		case "Status":
			s.Status = value
		case "Role":
			s.Role = value
		case "Term":
			s.Term, err = strconv.ParseInt(value, 10, 64)
		case "Leader":
			leader = value
		case "Log":
			s.LogEntries, err = logEntries(value)
		case "Entries not yet committed":
			s.Uncommitted, err = strconv.ParseInt(value, 10, 64)
		case "Entries not yet applied":
			s.Unapplied, err = strconv.ParseInt(value, 10, 64)
		case "Connections":
			connections = value
		case "Servers":
			inServers = true
		}
		if err != nil {
			return RaftStatus{}, fmt.Errorf("cluster/status %s: %q: %w", key, value, err)
		}
	}
	if s.Name == "" || s.Role == "" || len(s.Servers) == 0 {
		return RaftStatus{}, fmt.Errorf("cluster/status: not a raft status: %q", firstLine(text))
	}
	s.Leader = resolveNick(nicks, leader, s.ServerID)
	s.Connected = connectedServers(nicks, connections, s.ServerID)
	return s, nil
}

// logEntries counts the entries of "[FIRST, END]": the log holds indexes FIRST..END-1.
func logEntries(v string) (int64, error) {
	first, end, ok := strings.Cut(strings.Trim(v, "[]"), ",")
	if !ok {
		return 0, fmt.Errorf("want [FIRST, END]")
	}
	a, err := strconv.ParseInt(strings.TrimSpace(first), 10, 64)
	if err != nil {
		return 0, err
	}
	b, err := strconv.ParseInt(strings.TrimSpace(end), 10, 64)
	if err != nil {
		return 0, err
	}
	return max(b-a, 0), nil
}

// resolveNick maps "Leader:"'s value ("self", "unknown" or a nickname) to a server ID.
func resolveNick(nicks map[string]string, nick, self string) string {
	switch nick {
	case "self":
		return self
	case "", "unknown":
		return ""
	}
	if sid, ok := nicks[nick]; ok {
		return sid
	}
	return nick
}

// connectedServers reads "Connections:": "->X" is an established outgoing connection to X,
// "(->X)" one being retried, "<-X" an incoming one. A member counts as connected when this
// one reaches it: incoming connections from a stopped member linger until they time out.
func connectedServers(nicks map[string]string, connections, self string) []string {
	out := []string{self}
	for _, f := range strings.Fields(connections) {
		nick, ok := strings.CutPrefix(f, "->")
		if !ok {
			continue
		}
		sid := resolveNick(nicks, nick, self)
		if sid != "" && sid != self {
			out = append(out, sid)
		}
	}
	return out
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// DaemonStatus reads an OVN daemon's HA status from its control socket: ovn-northd and
// ovn-ic answer `status` with "Status: active", "Status: standby" or "Status: paused".
func DaemonStatus(ctx context.Context, socket string) (string, error) {
	out, err := Unixctl(ctx, socket, "status")
	if err != nil {
		return "", err
	}
	v, ok := strings.CutPrefix(strings.TrimSpace(out), "Status:")
	if !ok {
		return "", fmt.Errorf("status: unexpected reply %q", out)
	}
	return strings.TrimSpace(v), nil
}
