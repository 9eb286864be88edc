// Command images builds kovn's container image offline (`make images`): kovn's binaries plus the
// OVS and OVN userspace, iptables and iproute2 from the host's Debian packages with every shared
// library they load, as one docker-archive tarball with its platform set (containerd's import
// filters by platform). Nothing is pulled: the files come from this machine, and the same
// files give the same digest (entries sorted, root-owned, dated at the epoch). With
// -upstream-e2e it writes the images Kubernetes' e2e suite runs instead (upstream.go).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Packages is what the kovn image carries besides kovn's binaries: OVS and OVN (the ovs-ovn and
// OVN central pods run from it too), the tools kovn-daemon runs (iptables), and a shell with
// coreutils and iproute2 for the chart's start-up scripts and an operator's kubectl exec, tcpdump for
// kubectl kovn tcpdump.
var Packages = []string{"openvswitch-common", "openvswitch-switch", "ovn-common", "ovn-host", "ovn-central", "ovn-ic", "ovn-ic-db",
	"iptables", "iproute2", "ethtool", "dash", "coreutils", "tcpdump"}

// Alternatives are commands Debian links through /etc/alternatives (update-alternatives makes
// them, dpkg -L does not list them); added as the links they are on this host.
var Alternatives = []string{"/usr/sbin/iptables", "/usr/sbin/iptables-save", "/usr/sbin/iptables-restore",
	"/usr/sbin/ip6tables", "/usr/sbin/ip6tables-save", "/usr/sbin/ip6tables-restore", "/usr/sbin/ovs-vswitchd"}

// Binaries are kovn's own, placed at the image root.
var Binaries = []string{"kovn-controller", "kovn-daemon", "kovn-cni", "kovn-speaker", "kovn-probe", "kovn-ovsdb", "kovn-pinger", "kovn-ovn-monitor"}

// CNIPlugins are the delegate plugins of attachment networks (`make images` builds them static
// into <bin-dir>/cni-plugins), placed in CNIPluginDir: kovn-daemon runs them from there, so
// the node's own /opt/cni/bin is neither needed nor touched.
var CNIPlugins = []string{"macvlan", "ipvlan", "bridge", "host-device", "static"}

// CNIPluginDir is where the image holds CNIPlugins (the chart's kovn-daemon --cni-bin-dir).
const CNIPluginDir = "/opt/kovn/cni"

func main() {
	bin := flag.String("bin-dir", "_output/bin", "where `make build` put kovn's binaries")
	out := flag.String("out", "_output/images", "directory for the docker-archive tarballs")
	ref := flag.String("ref", "kovn.io/kovn:dev", "the image's name")
	upstream := flag.String("upstream-e2e", "", "instead, write the images of Kubernetes' e2e suite (upstream.go) from the agnhost and "+
		"regression-issue-74839 binaries in this `dir` (hack/install-deps.sh builds them) and bin-dir's kovn-coredns")
	flag.Parse()
	var err error
	if *upstream != "" {
		err = runUpstream(*upstream, filepath.Join(*bin, "kovn-coredns"), *out)
	} else {
		err = run(*bin, *out, *ref)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(binDir, outDir, ref string) error {
	start := time.Now()
	step := func(format string, a ...any) {
		fmt.Printf("[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}
	fs := newRootfs()
	step("collecting the files of %d Debian packages: %s", len(Packages), strings.Join(Packages, " "))
	if err := fs.addPackages(Packages); err != nil {
		return err
	}
	for _, a := range Alternatives {
		if err := fs.addHostPath(a); err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
	}
	for _, b := range Binaries {
		p := filepath.Join(binDir, b)
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s: %w (run `make build` first)", p, err)
		}
		fs.addFile("/"+b, p, 0o755)
	}
	for _, b := range CNIPlugins {
		p := filepath.Join(binDir, "cni-plugins", b)
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s: %w (`make images` builds the CNI plugins first)", p, err)
		}
		fs.addFile(CNIPluginDir+"/"+b, p, 0o755)
	}
	step("resolving the shared libraries of %d files", len(fs.files))
	if err := fs.addSharedLibraries(); err != nil {
		return err
	}
	// Users for tools that look themselves up (tcpdump drops privileges to a named user: kubectl
	// kovn tcpdump runs it with -Z root).
	fs.addText("/etc/passwd", []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644)
	fs.addText("/etc/group", []byte("root:x:0:\n"), 0o644)
	for _, d := range []string{"/tmp", "/var/run/openvswitch", "/var/run/ovn", "/var/log/openvswitch", "/var/log/ovn", "/etc/openvswitch", "/etc/ovn"} {
		fs.dirs[d] = true
	}
	step("writing the layer (%d files, %d symlinks)", len(fs.files), len(fs.links))
	img, err := Image(fs)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(outDir, "kovn.tar")
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		return err
	}
	digest, _ := img.Digest()
	fi, _ := os.Stat(path)
	step("%s %s -> %s (%.1f MB)", ref, digest, path, float64(fi.Size())/1e6)
	return nil
}

// withLayer is img with fs's files as one more layer.
func withLayer(img v1.Image, fs *rootfs) (v1.Image, error) {
	var buf bytes.Buffer
	if err := fs.writeTar(&buf); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil })
	if err != nil {
		return nil, err
	}
	return mutate.AppendLayers(img, layer)
}

// Image is the one-layer image of fs: linux/amd64, no entrypoint (each workload names its
// binary), created at the epoch.
func Image(fs *rootfs) (v1.Image, error) {
	img, err := withLayer(empty.Image, fs)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cfg.History = nil
	cfg.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	return mutate.ConfigFile(img, cfg)
}
