package ovn_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

func TestAwaitVswitchd(t *testing.T) {
	c, endpoint := ovntest.ServeOVS(t, "br-int", nil)
	ctx := context.Background()

	// Nobody applies configurations: an error naming the configuration, after the timeout.
	start := time.Now()
	err := ovn.AwaitVswitchd(ctx, c, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "configuration 1") {
		t.Fatalf("AwaitVswitchd without vswitchd = %v, want an error naming configuration 1", err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("gave up after %s, before the timeout", took)
	}

	// A vswitchd stand-in that copies next_cfg to cur_cfg: AwaitVswitchd returns with
	// cur_cfg at the bumped value.
	vs := ovntest.ConnectOVS(t, endpoint)
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			roots, _ := ovn.Find(ctx, vs, func(r *vswitch.OpenvSwitch) bool { return r.CurCfg != r.NextCfg })
			for _, r := range roots {
				r.CurCfg = r.NextCfg
				if ops, err := vs.Where(r).Update(r, &r.CurCfg); err == nil {
					_, _ = vs.Transact(ctx, ops...)
				}
			}
		}
	}()
	if err := ovn.AwaitVswitchd(ctx, c, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	roots, err := ovn.Find(ctx, c, func(*vswitch.OpenvSwitch) bool { return true })
	if err != nil || len(roots) != 1 || roots[0].NextCfg != 2 || roots[0].CurCfg < 2 {
		t.Fatalf("after AwaitVswitchd: %+v %v, want next_cfg 2 applied", roots, err)
	}
}
