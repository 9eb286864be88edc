package annotation

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// ACLLogging, on a namespace, turns on logging of its NetworkPolicies' ACLs (the form
// ovn-kubernetes uses): `{"deny": "alert", "allow": "notice"}` logs every packet a policy of
// the namespace drops at the deny severity and every connection a policy rule admits at the
// allow severity; a missing key (or "") leaves that verdict unlogged.
const ACLLogging = Prefix + "acl-logging"

// ACLLogSeverities are the severities OVN accepts, most severe first.
var ACLLogSeverities = []string{"alert", "warning", "notice", "info", "debug"}

// ParseACLLogging reads an ACLLogging value into the deny and allow severities ("": off). An
// empty value is logging off; an unknown key or severity is an error naming it.
func ParseACLLogging(value string) (deny, allow string, err error) {
	if strings.TrimSpace(value) == "" {
		return "", "", nil
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(value), &v); err != nil {
		return "", "", fmt.Errorf(`%s must be JSON like {"deny": "alert", "allow": "notice"}: %v`, ACLLogging, err)
	}
	for k, sev := range v {
		if k != "deny" && k != "allow" {
			return "", "", fmt.Errorf("%s: unknown key %q (deny and allow are known)", ACLLogging, k)
		}
		if sev != "" && !slices.Contains(ACLLogSeverities, sev) {
			return "", "", fmt.Errorf("%s: %s severity %q is none of %s", ACLLogging, k, sev, strings.Join(ACLLogSeverities, ", "))
		}
	}
	return v["deny"], v["allow"], nil
}
