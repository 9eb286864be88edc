package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Kubernetes' e2e suite runs its pods from registry.k8s.io images, which the lab cannot pull.
// These are written locally under the same names instead, as kovn's own test images are: the
// Go binaries come from the k8s.io/kubernetes module (hack/install-deps.sh builds them beside
// e2e.test), the tools the specs exec come from this host's Debian packages. The versions are
// those test/utils/image/manifest.go names at the pinned Kubernetes version.
const (
	upstreamRegistry   = "registry.k8s.io/e2e-test-images/"
	AgnhostRef         = upstreamRegistry + "agnhost:2.52"
	JessieDnsutilsRef  = upstreamRegistry + "jessie-dnsutils:1.7"
	NginxRef           = upstreamRegistry + "nginx:1.14-4"
	BusyBoxRef         = upstreamRegistry + "busybox:1.36.1-1"
	RegressionIssueRef = upstreamRegistry + "regression-issue-74839:1.2"
	// AgnhostCNPRef is the agnhost the ClusterNetworkPolicy conformance suite of
	// sigs.k8s.io/network-policy-api names (hack/cnp-conformance): the same binary, with
	// porterWithoutSCTP in front of it.
	AgnhostCNPRef = upstreamRegistry + "agnhost:2.45"
)

// porterWithoutSCTP is /agnhost in the AgnhostCNPRef image. Every pod of the conformance
// suite runs `agnhost porter` with SCTP ports, and upstream's porter exits when it cannot
// listen on one; on a host whose kernel has no SCTP (this lab's, which may not load modules)
// no pod of the suite would get ready, and the tests that probe only TCP and UDP could not
// run either. Here porter leaves out its SCTP ports when the kernel has no SCTP (it says so
// in the container's log) and keeps serving the rest; every SCTP probe still fails, as it
// must. Everything else runs agnhost as it is.
const porterWithoutSCTP = `#!/bin/bash
if [ "${1:-}" = porter ] && ! grep -q '^SCTP ' /proc/net/protocols; then
  for v in $(compgen -e); do
    case $v in SERVE_SCTP_PORT_*) echo "porter: this kernel has no SCTP; not serving SCTP port ${v#SERVE_SCTP_PORT_}" >&2; unset "$v" ;; esac
  done
  compgen -e | grep -q '^SERVE_' || exec sleep infinity
fi
exec /usr/local/bin/agnhost "$@"
`

// AgnhostPackages are the tools upstream's agnhost image installs (bind-tools, curl,
// netcat-openbsd, iproute2, iperf, bash) as Debian names them, and what its Alpine base's busybox
// gives the specs' scripts (sh, seq, awk, getent, hostname, grep, sed, cat, wget, ping, ps).
// Debian's busybox-static is no stand-in there: its wget crashes (SIGSEGV) on any URL.
var AgnhostPackages = []string{"bash", "dash", "coreutils", "curl", "wget", "netcat-openbsd", "bind9-dnsutils", "iproute2", "iperf",
	"iputils-ping", "mawk", "grep", "sed", "hostname", "procps", "libc-bin"}

// agnhostAlternatives are the Debian alternatives the scripts call by their generic names.
var agnhostAlternatives = []string{"/usr/bin/awk", "/usr/bin/nc"}

// upstreamImage is one image of the suite: its rootfs (shared between tags) and how it starts.
type upstreamImage struct {
	ref        string
	fs         *rootfs
	over       *rootfs // a layer on top of fs's, for this tag alone
	entrypoint []string
	cmd        []string
}

// runUpstream writes the suite's images into outDir/upstream-e2e.tar (one archive, several tags;
// layers shared). binDir holds agnhost and regression-issue-74839; coredns is kovn's lab CoreDNS.
func runUpstream(binDir, coreDNS, outDir string) error {
	agnhost, err := agnhostRootfs(binDir, coreDNS)
	if err != nil {
		return err
	}
	busybox, err := busyboxRootfs()
	if err != nil {
		return err
	}
	regression := newRootfs()
	regression.addFile("/regression-issue-74839", filepath.Join(binDir, "regression-issue-74839"), 0o755)
	cnpLayer := newRootfs()
	cnpLayer.addText("/agnhost", []byte(porterWithoutSCTP), 0o755)
	images := []upstreamImage{
		{ref: AgnhostRef, fs: agnhost, entrypoint: []string{"/agnhost"}, cmd: []string{"pause"}}, // as upstream's Dockerfile
		{ref: AgnhostCNPRef, fs: agnhost, over: cnpLayer, entrypoint: []string{"/agnhost"}, cmd: []string{"pause"}},
		// The DNS specs run their jessie querier as `sh -c <dig script>`: agnhost's tools serve.
		{ref: JessieDnsutilsRef, fs: agnhost, cmd: []string{"/bin/sh"}},
		// The EndpointSlice specs only need a container that runs and listens: agnhost's web server on 80.
		{ref: NginxRef, fs: agnhost, entrypoint: []string{"/agnhost", "test-webserver", "--port", "80"}},
		{ref: BusyBoxRef, fs: busybox, cmd: []string{"sh"}},
		{ref: RegressionIssueRef, fs: regression, entrypoint: []string{"/regression-issue-74839"}},
	}
	refs := map[name.Reference]v1.Image{}
	built := map[*rootfs]v1.Image{}
	for _, im := range images {
		base, ok := built[im.fs]
		if !ok {
			if base, err = Image(im.fs); err != nil {
				return err
			}
			built[im.fs] = base
		}
		img := base
		if im.over != nil {
			if img, err = withLayer(base, im.over); err != nil {
				return err
			}
		}
		img, err = withCommand(img, im.entrypoint, im.cmd)
		if err != nil {
			return err
		}
		tag, err := name.NewTag(im.ref)
		if err != nil {
			return err
		}
		refs[tag] = img
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(outDir, "upstream-e2e.tar")
	if err := tarball.MultiRefWriteToFile(path, refs); err != nil {
		return err
	}
	fi, _ := os.Stat(path)
	fmt.Printf("%d upstream e2e images -> %s (%.1f MB)\n", len(refs), path, float64(fi.Size())/1e6)
	return nil
}

func withCommand(img v1.Image, entrypoint, cmd []string) (v1.Image, error) {
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Config.Entrypoint, cfg.Config.Cmd = entrypoint, cmd
	return mutate.ConfigFile(img, cfg)
}

// agnhostRootfs is upstream's agnhost image: /agnhost (and the agnhost-2 link its entrypoint
// specs use), /coredns, porter's TLS pair, /uploads and the Debian tools of AgnhostPackages.
func agnhostRootfs(binDir, coreDNS string) (*rootfs, error) {
	fs := newRootfs()
	if err := fs.addPackages(AgnhostPackages); err != nil {
		return nil, err
	}
	for _, a := range agnhostAlternatives {
		if err := fs.addHostPath(a); err != nil {
			return nil, fmt.Errorf("%s: %w", a, err)
		}
	}
	// The binary lives in /usr/local/bin with /agnhost a link to it, so the AgnhostCNPRef
	// image can put its porterWithoutSCTP at /agnhost without a second copy of the binary.
	fs.links["/agnhost"] = "usr/local/bin/agnhost"
	for img, host := range map[string]string{"/usr/local/bin/agnhost": filepath.Join(binDir, "agnhost"), "/coredns": coreDNS,
		"/localhost.crt": filepath.Join(binDir, "localhost.crt"), "/localhost.key": filepath.Join(binDir, "localhost.key")} {
		if _, err := os.Stat(host); err != nil {
			return nil, fmt.Errorf("%s: %w (hack/install-deps.sh and make build write it)", host, err)
		}
		fs.addFile(img, host, 0o755)
	}
	fs.links["/agnhost-2"] = "agnhost"
	fs.dirs["/uploads"], fs.dirs["/tmp"] = true, true
	if err := fs.addSharedLibraries(); err != nil {
		return nil, err
	}
	// The user and group upstream's Dockerfile adds (the specs of supplemental groups read them).
	fs.addText("/etc/passwd", []byte("root:x:0:0:root:/root:/bin/sh\nuser-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n"), 0o644)
	fs.addText("/etc/group", []byte("root:x:0:\nuser-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n"), 0o644)
	return fs, nil
}

// busyboxRootfs is the static busybox of Debian's busybox-static with a link per applet, as
// upstream's busybox image has them in /bin.
func busyboxRootfs() (*rootfs, error) {
	fs := newRootfs()
	if err := addBusybox(fs, "/bin"); err != nil {
		return nil, err
	}
	fs.dirs["/tmp"] = true
	fs.addText("/etc/passwd", []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644)
	fs.addText("/etc/group", []byte("root:x:0:\n"), 0o644)
	return fs, nil
}

// hostBusybox is Debian busybox-static's binary.
const hostBusybox = "/bin/busybox"

// addBusybox puts busybox in dir with a link for each of its applets that no file or link of fs
// already provides in /usr/bin, /usr/sbin, /bin or /sbin.
func addBusybox(fs *rootfs, dir string) error {
	out, err := exec.Command(hostBusybox, "--list").Output()
	if err != nil {
		return fmt.Errorf("%s --list: %v (hack/install-deps.sh installs busybox-static)", hostBusybox, err)
	}
	fs.addFile(dir+"/busybox", hostBusybox, 0o755)
	for _, applet := range strings.Fields(string(out)) {
		provided := false
		for _, d := range []string{"/usr/bin/", "/usr/sbin/", "/bin/", "/sbin/"} {
			_, file := fs.files[d+applet]
			_, link := fs.links[d+applet]
			provided = provided || file || link
		}
		if !provided && applet != "busybox" {
			fs.links[dir+"/"+applet] = "busybox"
		}
	}
	return nil
}
