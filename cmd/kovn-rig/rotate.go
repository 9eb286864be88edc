package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/kovn/kovn/test/rig"
)

// rotatePKI replaces every CA of the lab's OVN PKI and every certificate it issued, in the
// three steps of rig.RotateOVNPKI, printing how long each took.
func rotatePKI(args []string) error {
	fs := flag.NewFlagSet("rotate-pki", flag.ExitOnError)
	dir := dirFlag(fs)
	_ = fs.Parse(args)
	st, err := rig.LoadState(*dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, step := range []rig.RotationStep{rig.TrustNextCA, rig.IssueFromNextCA, rig.RetireOldCA} {
		start := time.Now()
		if err := st.RotateOVNPKI(ctx, step); err != nil {
			return err
		}
		fmt.Printf("%s: %.1fs\n", step, time.Since(start).Seconds())
	}
	return nil
}
