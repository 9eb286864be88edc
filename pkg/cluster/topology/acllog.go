package topology

// ACL logging: ACLs with a LogSeverity log through one NB meter, so a flood of denied packets
// costs each node at most the meter's rate of log lines.

// OwnerACLLogging owns the ACL log meter; its one owner is ACLLogMeter.
const OwnerACLLogging = "ACLLogging"

// ACLLogMeter is the NB meter every logged ACL names. Not fair: one budget per node for all
// ACLs, so many policies logging at once cannot multiply it.
const ACLLogMeter = "kovn_acl_log"

// ACLLogging is what a namespace's policies log: the severity of the lines for denied packets
// and for allowed connections ("": not logged).
type ACLLogging struct {
	Deny, Allow string
}

// ForACLLogMeter is the shard of the ACL log meter: ratePPS lines per second per node, with a
// burst of the same (a second's worth).
func ForACLLogMeter(ratePPS int) Shard {
	return Shard{OwnerType: OwnerACLLogging, Owner: ACLLogMeter,
		Meters: []Meter{{Name: ACLLogMeter, RatePPS: ratePPS, BurstPackets: ratePPS}}}
}
