package rig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/kovn/kovn/pkg/pki"
)

// RotationStep is one step of replacing every CA of the rig's OVN PKI and every certificate it
// issued, the way an operator rotates a CA without a gap: no party ever meets a certificate it
// does not trust yet, and at the end the old CA opens nothing.
type RotationStep int

const (
	// TrustNextCA makes each CA's successor and has every party trust both.
	TrustNextCA RotationStep = iota + 1
	// IssueFromNextCA reissues every certificate (new keys) from the successors.
	IssueFromNextCA
	// RetireOldCA has every party trust the successor alone, and makes every database drop its
	// sessions, so each client connects again with what it holds now.
	RetireOldCA
)

func (s RotationStep) String() string {
	return map[RotationStep]string{TrustNextCA: "trust next CA", IssueFromNextCA: "issue from next CA", RetireOldCA: "retire old CA"}[s]
}

// nextCADir holds a CA's successor until it replaces it.
func nextCADir(dir string) string { return filepath.Join(dir, "next") }

// RotateOVNPKI does step for every CA of the process rig and tells each party what a service
// manager or kovn's chart would: the servers, ovn-controller (its Open_vSwitch SSL row) and
// kovn-controller (its InterConnect Secret) read changed files on their own; ovn-ic reads its
// files only at start and is restarted, as the chart's container script restarts it.
func (s *State) RotateOVNPKI(ctx context.Context, step RotationStep) error {
	c := s.Config
	if c.InsecurePlainTCP || c.Chart() {
		return errors.New("rotation is for the process rig on TLS")
	}
	for _, p := range c.ovnPKIPlan() {
		if err := rotateCA(p, step); err != nil {
			return fmt.Errorf("%s, %s: %w", p.cn, step, err)
		}
	}
	if !c.Interconnected() {
		return s.reconnectAll(step)
	}
	if step != TrustNextCA && c.ForeignAZ {
		if err := s.restartIfRunning(ctx, foreignSup, "ovn-ic"); err != nil {
			return err
		}
	}
	for cl := 1; cl <= c.Clusters; cl++ {
		if c.Kovn {
			kc, err := s.Kube(ClusterName(cl))
			if err != nil {
				return err
			}
			if err := applyClustersetSecret(ctx, kc, c.AZTLS(cl)); err != nil {
				return fmt.Errorf("%s's clusterset Secret: %w", ClusterName(cl), err)
			}
		}
		if step == TrustNextCA {
			continue // ovn-ic meets the next CA's certificates only after the next step
		}
		if err := s.restartIfRunning(ctx, ClusterName(cl), "ovn-ic"); err != nil {
			return err
		}
	}
	return s.reconnectAll(step)
}

// restartIfRunning stops daemon name of supervisor sup by its pid and has it started again;
// one held down (a test's StopDaemon) stays down.
func (s *State) restartIfRunning(ctx context.Context, sup, name string) error {
	if _, err := s.DaemonPid(sup, name); err != nil {
		return nil
	}
	if err := s.StopDaemon(sup, name); err != nil {
		return err
	}
	_, err := s.StartDaemon(ctx, sup, name)
	return err
}

// rotateCA does step for one CA and the identities it issued.
func rotateCA(p caPlan, step RotationStep) error {
	cur, err := loadOrMakeCA(p.dir, p.cn)
	if err != nil {
		return err
	}
	next, err := loadOrMakeCA(nextCADir(p.dir), p.cn+" (next)")
	if err != nil {
		return err
	}
	both := append(append([]byte(nil), cur.CertPEM...), next.CertPEM...)
	for name, req := range p.ids {
		id := OVSDBTLS{Dir: filepath.Join(p.dir, name)}
		switch step {
		case TrustNextCA:
			err = writeFileAtomic(id.CA(), both, 0o600)
		case IssueFromNextCA:
			err = writeIdentity(next, id, req, both)
		case RetireOldCA:
			err = writeFileAtomic(id.CA(), next.CertPEM, 0o600)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if step != RetireOldCA {
		return nil
	}
	return promoteNextCA(p.dir, next)
}

// promoteNextCA makes the successor the CA of dir.
func promoteNextCA(dir string, next *pki.CA) error {
	key, err := next.KeyPEM()
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, "ca.key"), key, 0o600); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, "ca.crt"), next.CertPEM, 0o644); err != nil {
		return err
	}
	return os.RemoveAll(nextCADir(dir))
}

// reconnectAll makes every OVN database server of the rig drop its client sessions after
// RetireOldCA (ovsdb-server/reconnect): until then an open session keeps the identities it
// was opened with.
func (s *State) reconnectAll(step RotationStep) error {
	if step != RetireOldCA {
		return nil
	}
	c := s.Config
	var ctls []string
	for cl := 1; cl <= c.Clusters; cl++ {
		for _, db := range []string{"nb", "sb"} {
			ctls = append(ctls, filepath.Join(c.runDir(), ClusterName(cl), db+".ctl"))
		}
	}
	for m := 0; c.Interconnected() && m < c.ICDBMembers(); m++ {
		ctls = append(ctls, c.ICDBCtl(ICDBMemberName("icnb", m)), c.ICDBCtl(ICDBMemberName("icsb", m)))
	}
	for _, ctl := range ctls {
		if out, err := exec.Command("ovs-appctl", "-t", ctl, "ovsdb-server/reconnect").CombinedOutput(); err != nil {
			return fmt.Errorf("%s ovsdb-server/reconnect: %v %s", ctl, err, out)
		}
	}
	return nil
}
