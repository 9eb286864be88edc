package cleanup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/kovn/kovn/pkg/cni"
	"github.com/kovn/kovn/pkg/hostnet"
	"github.com/kovn/kovn/pkg/node/bootstrap"
	"github.com/kovn/kovn/pkg/node/mirror"
	"github.com/kovn/kovn/pkg/ovn"
)

// CNIBinary is the plugin kovn-daemon's install-cni init container copies into the CNI bin dir.
const CNIBinary = "kovn-cni"

// Options says where the node keeps kovn's state (kovn-daemon cleanup-node's flags
// default to kovn-daemon's places); an empty dir is not looked at.
type Options struct {
	OVSDB      string // the node's Open_vSwitch database, e.g. unix:/var/run/openvswitch/db.sock
	CNIConfDir string // holds bootstrap.CNIConfigFile
	CNIBinDir  string // holds CNIBinary
	RunDir     string // kovn-daemon's cni.sock (and kovn-speaker's marker)
	// Bridge is the integration bridge the pods' ports are on (default br-int).
	Bridge string
	// Out receives one line per item as it is handled, for the pod's log; nil discards them.
	Out io.Writer
	// ConnectTimeout bounds the wait for the Open_vSwitch database (default 1 min): the
	// cleanup pod's ovsdb-server may still be starting.
	ConnectTimeout time.Duration

	// linkGrace is how long ovs-vswitchd gets to remove the kernel devices of deleted
	// internal ports before they are deleted directly (default 10 s; tests shorten it).
	linkGrace time.Duration
}

// Report is what a cleanup did, one line per item.
type Report struct {
	Removed []string // found and removed
	Left    []string // found (or not looked at) and left on purpose, with the reason
	Failed  []string // found and not removed, with the error
}

// cleanup is one run: the options and the report it builds.
type cleanup struct {
	opts Options
	rep  Report
	errs []error
	// links are kernel devices kovn's OVS ports left to go: internal ports of the deleted
	// bridges (ovs-vswitchd removes them) and pod veths (nobody does).
	links []cleanupLink
	// firewall is the node's packet filter, through which kovn-daemon wrote its chains.
	firewall *hostnet.Firewall
}

// cleanupLink is a kernel device to remove, and why it is kovn's.
type cleanupLink struct {
	name, what string
	internal   bool // an OVS internal port: ovs-vswitchd deletes it with its bridge
}

// Node removes every piece of node state kovn-daemon creates, for `helm uninstall`, and
// reports each; the error names every item that could not be removed. It runs in a pod of its
// own on every node once kovn-daemon and ovn-controller are gone (ovn-controller would make
// br-int again), with ovsdb-server and ovs-vswitchd running, so that deleting a bridge in the
// database also removes its kernel devices.
//
// Every item is attempted even when another fails: a node half cleaned is worse than one with
// a single leftover that the log names. Running it again finds nothing left and succeeds, so a
// failed hook can be retried as it is.
func Node(ctx context.Context, opts Options) (Report, error) {
	if opts.Bridge == "" {
		opts.Bridge = cni.DefaultBridge
	}
	if opts.ConnectTimeout == 0 {
		opts.ConnectTimeout = time.Minute
	}
	if opts.linkGrace == 0 {
		opts.linkGrace = 10 * time.Second
	}
	c := &cleanup{opts: opts, firewall: hostnet.NewFirewall()}
	if linkExists(bootstrap.Ovn0) { // whether or not the database still lists it
		c.links = append(c.links, cleanupLink{name: bootstrap.Ovn0, what: "the node's join port", internal: true})
	}
	if linkExists(mirror.Port) {
		c.links = append(c.links, cleanupLink{name: mirror.Port, what: "the node's traffic mirror port", internal: true})
	}
	// The CNI config first: without it the runtime starts no more pods on kovn meanwhile.
	c.removeFile(opts.CNIConfDir, bootstrap.CNIConfigFile, "CNI config")
	c.removeFile(opts.CNIConfDir, bootstrap.CNIConfigFile+".tmp", "CNI config being written")
	c.removeFile(opts.CNIBinDir, CNIBinary, "CNI plugin")
	c.removeFile(opts.CNIBinDir, CNIBinary+".new", "CNI plugin being installed")
	for _, fam := range firewallFamilies {
		c.removeChains(ctx, fam)
	}
	c.removeAddrSets() // after the chains: a set a rule still matches cannot go
	c.removeRoutes()
	c.cleanOVS(ctx)
	c.removeLinks(ctx)
	c.emptyRunDir()
	return c.rep, errors.Join(c.errs...)
}

func (c *cleanup) removed(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	c.rep.Removed = append(c.rep.Removed, line)
	c.print("removed " + line)
}

func (c *cleanup) left(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	c.rep.Left = append(c.rep.Left, line)
	c.print("left " + line)
}

func (c *cleanup) failed(item string, err error) {
	line := fmt.Sprintf("%s: %v", item, err)
	c.rep.Failed = append(c.rep.Failed, line)
	c.errs = append(c.errs, fmt.Errorf("%s: %w", item, err))
	c.print("FAILED " + line)
}

func (c *cleanup) print(line string) {
	if c.opts.Out != nil {
		fmt.Fprintln(c.opts.Out, line)
	}
}

// removeFile removes dir/name if it is there.
func (c *cleanup) removeFile(dir, name, what string) {
	if dir == "" {
		return
	}
	path := filepath.Join(dir, name)
	err := os.Remove(path)
	switch {
	case err == nil:
		c.removed("%s %s", what, path)
	case !errors.Is(err, fs.ErrNotExist):
		c.failed(fmt.Sprintf("%s %s", what, path), err)
	}
}

// emptyRunDir removes what is in the run dir, last: kovn-daemon's socket, and kovn-speaker's
// marker that shares the dir. The dir itself stays: in the cleanup pod it is a mount point,
// and on the host it lives in /run, which a reboot empties anyway.
func (c *cleanup) emptyRunDir() {
	if c.opts.RunDir == "" {
		return
	}
	entries, err := os.ReadDir(c.opts.RunDir)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		c.failed("run dir "+c.opts.RunDir, err)
		return
	}
	for _, e := range entries {
		path := filepath.Join(c.opts.RunDir, e.Name())
		if err := os.RemoveAll(path); err != nil {
			c.failed("run dir entry "+path, err)
			continue
		}
		c.removed("run dir entry %s", path)
	}
}

// cleanOVS removes kovn's part of the Open_vSwitch database: provider bridges (their NICs
// given back first) and their ovn-bridge-mappings entries, br-int with every pod port, and
// the external_ids only kovn-daemon writes.
func (c *cleanup) cleanOVS(ctx context.Context) {
	connectCtx, cancel := context.WithTimeout(ctx, c.opts.ConnectTimeout)
	defer cancel()
	ovs, err := ovn.ConnectOVS(connectCtx, ovn.Config{Endpoints: []string{c.opts.OVSDB}})
	if err != nil {
		c.failed("Open_vSwitch database "+c.opts.OVSDB+" (provider bridges, br-int, external_ids not cleaned)", err)
		return
	}
	defer ovs.Close()
	c.removeMappings(ctx, ovs)
	c.removeProviderBridges(ctx, ovs)
	c.removeIntegrationBridge(ctx, ovs)
	c.removePeerProbes(ctx, ovs)
	c.removeExternalIDs(ctx, ovs)
}
