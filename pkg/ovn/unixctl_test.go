package ovn

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUnixctl talks to a real ovsdb-server's control socket: a command's text reply comes
// back, and a command the daemon does not know is an error naming it.
func TestUnixctl(t *testing.T) {
	dir := t.TempDir()
	db, ctl := filepath.Join(dir, "conf.db"), filepath.Join(dir, "ovsdb-server.ctl")
	if out, err := exec.Command("ovsdb-tool", "create", db, "/usr/share/openvswitch/vswitch.ovsschema").CombinedOutput(); err != nil {
		t.Fatalf("ovsdb-tool create (make deps installs openvswitch-common): %v %s", err, out)
	}
	srv := exec.Command("ovsdb-server", db, "--unixctl="+ctl, "--remote=punix:"+filepath.Join(dir, "db.sock"),
		"--pidfile="+filepath.Join(dir, "ovsdb-server.pid"), "--log-file="+filepath.Join(dir, "ovsdb-server.log"))
	if err := srv.Start(); err != nil {
		t.Fatalf("ovsdb-server: %v", err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	for i := 0; ; i++ {
		if _, err := os.Stat(ctl); err == nil {
			break
		}
		if i == 100 {
			t.Fatal("ovsdb-server made no control socket in 10 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := Unixctl(ctx, ctl, "version")
	if err != nil || !strings.Contains(out, "ovsdb-server") {
		t.Fatalf("version: %q, %v", out, err)
	}
	out, err = Unixctl(ctx, ctl, "ovsdb-server/list-dbs")
	if err != nil || !strings.Contains(out, "Open_vSwitch\n") {
		t.Fatalf("ovsdb-server/list-dbs: %q, %v", out, err)
	}
	if _, err := Unixctl(ctx, ctl, "no/such-command", "x"); err == nil || !strings.Contains(err.Error(), "no/such-command") {
		t.Fatalf("unknown command: want an error naming it, got %v", err)
	}
}
