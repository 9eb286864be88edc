package topology

// ACL logging: ACLs with a LogSeverity log through an NB meter, so a flood of denied packets
// costs each node at most the meter's rate of log lines. A namespace's NetworkPolicies log
// through that namespace's own meter (NamespaceLogMeter): one namespace's flood uses up its own
// budget, never another's. The admin's Subnet ACLs log through ACLLogMeter.

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

// NamespaceLogMeter names the meter namespace ns's policies log through.
func NamespaceLogMeter(ns string) string {
	s, replaced := ovnIdent(ns)
	if replaced {
		s += "_" + shortHash(ns)
	}
	return ACLLogMeter + "_ns_" + s
}

// NamespaceLogMeterOwner owns namespace ns's meter shard (ForNamespaceLogMeter).
func NamespaceLogMeterOwner(ns string) string { return "namespace/" + ns }

// ForNamespaceLogMeter is the shard of namespace ns's ACL log meter, ratePPS lines per second
// per node with a second's burst: the admin's cap (--acl-log-rate), the same for every
// namespace, not the tenant's to choose.
func ForNamespaceLogMeter(ns string, ratePPS int) Shard {
	return Shard{OwnerType: OwnerACLLogging, Owner: NamespaceLogMeterOwner(ns),
		Meters: []Meter{{Name: NamespaceLogMeter(ns), RatePPS: ratePPS, BurstPackets: ratePPS}}}
}

// ForACLLogMeter is the shard of the ACL log meter: ratePPS lines per second per node, with a
// burst of the same (a second's worth).
func ForACLLogMeter(ratePPS int) Shard {
	return Shard{OwnerType: OwnerACLLogging, Owner: ACLLogMeter,
		Meters: []Meter{{Name: ACLLogMeter, RatePPS: ratePPS, BurstPackets: ratePPS}}}
}
