package hostnet

import (
	"errors"
	"testing"

	"github.com/vishvananda/netlink"
)

func TestRetryDumpRepeatsInterruptedDumps(t *testing.T) {
	calls := 0
	got, err := retryDump(func() ([]int, error) {
		calls++
		if calls < 3 {
			return []int{1}, netlink.ErrDumpInterrupted // partial
		}
		return []int{1, 2}, nil
	})
	if err != nil || len(got) != 2 || calls != 3 {
		t.Errorf("got %v, %v after %d calls; want the whole dump after 3", got, err, calls)
	}

	calls = 0
	_, err = retryDump(func() ([]int, error) { calls++; return nil, netlink.ErrDumpInterrupted })
	if !errors.Is(err, netlink.ErrDumpInterrupted) || calls != dumpAttempts {
		t.Errorf("always interrupted: %v after %d calls, want ErrDumpInterrupted after %d", err, calls, dumpAttempts)
	}

	calls = 0
	boom := errors.New("boom")
	if _, err = retryDump(func() ([]int, error) { calls++; return nil, boom }); !errors.Is(err, boom) || calls != 1 {
		t.Errorf("another error: %v after %d calls, want it at once", err, calls)
	}
}
