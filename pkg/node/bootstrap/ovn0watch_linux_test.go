package bootstrap

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// WatchOvn0 fires when ovn0 loses an address, disappears, or comes back as a new device (what
// an ovs-vswitchd restart does), and not for other links. Runs in a throwaway netns (root).
func TestWatchOvn0(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New()
	if err != nil {
		t.Fatalf("new netns (tests run as root): %v", err)
	}
	defer func() { _ = netns.Set(orig); ns.Close() }()
	h := netlinkHere{} // this thread is in the throwaway netns
	addLink := func(name string) netlink.Link {
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil { // no dummy module here
			t.Fatal(err)
		}
		l, err := h.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	ovn0, other := addLink(Ovn0), addLink("eth9")
	addr, _ := netlink.ParseAddr("100.64.0.2/16")
	for _, l := range []netlink.Link{ovn0, other} {
		if err := h.AddrAdd(l, addr); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan event.GenericEvent, 1)
	go func() {
		// The watcher subscribes in the netns of the thread it starts on.
		runtime.LockOSThread()
		_ = netns.Set(ns)
		_ = WatchOvn0(ctx, events)
	}()
	time.Sleep(200 * time.Millisecond) // subscribed
	expect := func(what string, want bool) {
		t.Helper()
		select {
		case <-events:
			if !want {
				t.Errorf("%s: unexpected event", what)
			}
		case <-time.After(500 * time.Millisecond):
			if want {
				t.Errorf("%s: no event", what)
			}
		}
	}
	if err := h.AddrDel(other, addr); err != nil {
		t.Fatal(err)
	}
	expect("another link lost its address", false)
	if err := h.AddrDel(ovn0, addr); err != nil {
		t.Fatal(err)
	}
	expect("ovn0 lost its address", true)
	if err := h.LinkDel(ovn0); err != nil {
		t.Fatal(err)
	}
	expect("ovn0 deleted", true)
	addLink(Ovn0)
	expect("ovn0 created again", true)
}

// netlinkHere calls netlink in the calling thread's network namespace.
type netlinkHere struct{}

func (netlinkHere) LinkAdd(l netlink.Link) error                  { return netlink.LinkAdd(l) }
func (netlinkHere) LinkByName(n string) (netlink.Link, error)     { return netlink.LinkByName(n) }
func (netlinkHere) LinkSetUp(l netlink.Link) error                { return netlink.LinkSetUp(l) }
func (netlinkHere) LinkDel(l netlink.Link) error                  { return netlink.LinkDel(l) }
func (netlinkHere) AddrAdd(l netlink.Link, a *netlink.Addr) error { return netlink.AddrAdd(l, a) }
func (netlinkHere) AddrDel(l netlink.Link, a *netlink.Addr) error { return netlink.AddrDel(l, a) }
