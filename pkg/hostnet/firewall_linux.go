package hostnet

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/coreos/go-iptables/iptables"
)

// The firewall is iptables: checks, listings and the clean-up through go-iptables, chain
// contents through iptables-restore (ReplaceChains); both run with --wait, so a kovn rule
// change waits for the xtables lock another agent (kube-proxy, a CNI plugin, an admin) holds
// instead of failing or racing it. Every chain kovn owns is written here, its clean-up included.

// Firewall is the node's packet filter, one handle per IP family.
type Firewall struct {
	paths    map[bool]string // iptables binary by is4; "" finds iptables / ip6tables on PATH
	families map[bool]*familyState
}

// familyState is what one family's handles share: a lock serialising kovn's own chain
// replacements, and the family's go-iptables handle.
type familyState struct {
	mu    sync.Mutex
	iptMu sync.Mutex         // guards ipt alone
	ipt   *iptables.IPTables // the family's handle once created (see Family)
}

// FirewallOption configures a Firewall.
type FirewallOption func(*Firewall)

// IptablesPaths picks the binaries for IPv4 and IPv6 ("" keeps iptables / ip6tables from
// PATH), e.g. iptables-legacy on a node whose other agents use the legacy backend.
func IptablesPaths(v4, v6 string) FirewallOption {
	return func(f *Firewall) { f.paths[true], f.paths[false] = v4, v6 }
}

// NewFirewall returns a Firewall; nothing runs until a family is used.
func NewFirewall(opts ...FirewallOption) *Firewall {
	f := &Firewall{paths: map[bool]string{}, families: map[bool]*familyState{
		true:  {},
		false: {},
	}}
	for _, o := range opts {
		o(f)
	}
	return f
}

// FirewallFamily is one IP family's packet filter. Its methods act in the calling thread's
// network namespace (iptables is run from it).
type FirewallFamily struct {
	name string // "IPv4" / "IPv6", for errors
	tool string // the family's iptables binary; <tool>-restore replaces kovn's chains
	ipt  *iptables.IPTables
	st   *familyState
}

// Tool is the iptables binary of one family, as configured ("iptables" / "ip6tables").
func (f *Firewall) Tool(is4 bool) string {
	if p := f.paths[is4]; p != "" {
		return p
	}
	return map[bool]string{true: "iptables", false: "ip6tables"}[is4]
}

// Family returns the handle of one family. Creating one runs the tool (`iptables --version`,
// to learn its flags); a handle is kept once that succeeded, so a sync runs only the rule
// commands. Until then every call tries again, as a node may gain the tool; without it the
// error is exec's, naming the tool.
func (f *Firewall) Family(is4 bool) (*FirewallFamily, error) {
	st := f.families[is4]
	st.iptMu.Lock()
	ipt := st.ipt
	st.iptMu.Unlock()
	proto, name := iptables.ProtocolIPv4, "IPv4"
	if !is4 {
		proto, name = iptables.ProtocolIPv6, "IPv6"
	}
	if ipt == nil {
		var err error
		if p := f.paths[is4]; p != "" {
			ipt, err = iptables.New(iptables.IPFamily(proto), iptables.Path(p))
		} else {
			ipt, err = iptables.New(iptables.IPFamily(proto))
		}
		if err != nil {
			return nil, err
		}
		st.iptMu.Lock()
		st.ipt = ipt
		st.iptMu.Unlock()
	}
	return &FirewallFamily{name: name, tool: f.Tool(is4), ipt: ipt, st: st}, nil
}

// Name is "IPv4" or "IPv6".
func (ff *FirewallFamily) Name() string { return ff.name }

// EnsureChain creates chain in table unless it exists.
func (ff *FirewallFamily) EnsureChain(table, chain string) error {
	err := ff.ipt.NewChain(table, chain)
	if err == nil {
		return nil
	}
	if exists, cerr := ff.ipt.ChainExists(table, chain); cerr == nil && exists {
		return nil
	}
	return fmt.Errorf("creating %s chain %s in %s: %w", ff.name, chain, table, err)
}

// EnsureJump makes from jump to chain, inserting the jump first in from when it is missing
// (so nothing earlier in a built-in chain decides before kovn does); an existing jump stays
// where it is.
func (ff *FirewallFamily) EnsureJump(table, from, chain string) error {
	ok, err := ff.ipt.Exists(table, from, "-j", chain)
	if err == nil && !ok {
		err = ff.ipt.Insert(table, from, 1, "-j", chain)
	}
	if err != nil {
		return fmt.Errorf("%s jump from %s to %s in %s: %w", ff.name, from, chain, table, err)
	}
	return nil
}

// Chains lists the chains of table (built-in ones included).
func (ff *FirewallFamily) Chains(table string) ([]string, error) {
	return ff.ipt.ListChains(table)
}

// Rules lists chain's rules as iptables -S writes them ("-A CHAIN ...").
func (ff *FirewallFamily) Rules(table, chain string) ([]string, error) {
	lines, err := ff.ipt.List(table, chain)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, "-A ") {
			out = append(out, l)
		}
	}
	return out, nil
}

// DeleteRule deletes the first rule of chain matching rulespec.
func (ff *FirewallFamily) DeleteRule(table, chain string, rulespec ...string) error {
	return ff.ipt.Delete(table, chain, rulespec...)
}

// FlushChain deletes every rule of chain.
func (ff *FirewallFamily) FlushChain(table, chain string) error {
	return ff.ipt.ClearChain(table, chain)
}

// DeleteChain deletes chain, which must be empty and jumped to from nowhere.
func (ff *FirewallFamily) DeleteChain(table, chain string) error {
	return ff.ipt.DeleteChain(table, chain)
}

// IsNotExist reports whether err says a chain, rule or table does not exist.
func IsNotExist(err error) bool {
	var e *iptables.Error
	return errors.As(err, &e) && e.IsNotExist()
}
