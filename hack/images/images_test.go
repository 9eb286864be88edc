package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The same files give the same image digest, whatever order they were added in, and the
// image names its platform.
func TestImageReproducible(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"a": "first", "b": "second"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := func(order []string) string {
		fs := newRootfs()
		for _, n := range order {
			fs.addFile("/opt/"+n, filepath.Join(dir, n), 0o644)
		}
		img, err := Image(fs)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		cfg, _ := img.ConfigFile()
		if cfg.Architecture != "amd64" || cfg.OS != "linux" {
			t.Fatalf("platform %s/%s", cfg.OS, cfg.Architecture)
		}
		return d.String()
	}
	one, two := build([]string{"a", "b"}), build([]string{"b", "a"})
	if one != two {
		t.Fatalf("digests differ: %s %s", one, two)
	}
	if err := os.WriteFile(filepath.Join(dir, "b"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if three := build([]string{"a", "b"}); three == one {
		t.Fatal("a changed file left the digest as it was")
	}
}

// The packaged OVS and OVN tools run from the layer alone: every shared library they load came
// with them (checked by running them chrooted into the unpacked layer; tests run as root).
func TestPackagedToolsRunFromTheLayer(t *testing.T) {
	fs := newRootfs()
	if err := fs.addPackages([]string{"openvswitch-common", "openvswitch-switch", "ovn-common", "iptables", "dash"}); err != nil {
		t.Fatal(err) // the packages are installed by hack/install-deps.sh before `make test`
	}
	for _, a := range Alternatives {
		if err := fs.addHostPath(a); err != nil {
			t.Fatal(err)
		}
	}
	if err := fs.addSharedLibraries(); err != nil {
		t.Fatal(err)
	}
	var layer bytes.Buffer
	if err := fs.writeTar(&layer); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	unpack(t, &layer, root)
	for _, argv := range [][]string{{"/usr/bin/ovs-vsctl", "--version"}, {"/usr/bin/ovn-nbctl", "--version"},
		{"/usr/sbin/iptables", "--version"}, {"/bin/sh", "-c", "echo shell"}} {
		out, err := exec.Command("chroot", append([]string{root}, argv...)...).CombinedOutput()
		if err != nil {
			t.Errorf("%v in the layer: %v\n%s", argv, err, out)
		}
	}
}

func unpack(t *testing.T, r io.Reader, root string) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, os.FileMode(h.Mode))
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Two builds of the packaged part of the image from this machine give one digest.
func TestPackagedLayerReproducible(t *testing.T) {
	digest := func() string {
		fs := newRootfs()
		if err := fs.addPackages([]string{"openvswitch-common", "ovn-common", "dash"}); err != nil {
			t.Fatal(err)
		}
		if err := fs.addSharedLibraries(); err != nil {
			t.Fatal(err)
		}
		img, err := Image(fs)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	if a, b := digest(), digest(); a != b {
		t.Fatalf("two builds: %s and %s", a, b)
	}
}

// The conformance suite's porter stand-in leaves out SCTP ports only when the kernel has no
// SCTP, keeps serving the others, and stays up when nothing else is left to serve.
func TestPorterWithoutSCTP(t *testing.T) {
	protocols, err := os.ReadFile("/proc/net/protocols")
	if err != nil {
		t.Fatal(err)
	}
	hasSCTP := bytes.Contains(protocols, []byte("\nSCTP "))
	script := strings.NewReplacer(`exec /usr/local/bin/agnhost "$@"`, "exec env", "exec sleep infinity", "{ echo staying-up; exit 0; }").Replace(porterWithoutSCTP)
	run := func(env ...string) string {
		cmd := exec.Command("bash", "-c", script, "agnhost", "porter")
		cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return string(out)
	}
	out := run("SERVE_PORT_80=foo", "SERVE_SCTP_PORT_9003=bar")
	if !strings.Contains(out, "SERVE_PORT_80=foo") || strings.Contains(out, "SERVE_SCTP_PORT_9003") == !hasSCTP {
		t.Errorf("kernel SCTP %t; porter's environment:\n%s", hasSCTP, out)
	}
	if out := run("SERVE_SCTP_PORT_9003=bar"); !hasSCTP && !strings.Contains(out, "staying-up") {
		t.Errorf("SCTP ports alone: %s", out)
	}
}
