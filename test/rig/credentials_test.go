package rig

import (
	"testing"
	"time"
)

func TestRenewAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		desc    string
		expires time.Time
		want    time.Duration
	}{
		{"24h token: renewed after 19.2h", now.Add(24 * time.Hour), 1152 * time.Minute},
		{"10m token: renewed after 8m", now.Add(10 * time.Minute), 8 * time.Minute},
		{"expiring within a minute: floor", now.Add(30 * time.Second), time.Minute},
		{"already expired: floor", now.Add(-time.Hour), time.Minute},
		{"no expiry reported: floor", time.Time{}, time.Minute},
	} {
		if got := renewAfter(now, tc.expires); got != tc.want {
			t.Errorf("%s: renewAfter = %v, want %v", tc.desc, got, tc.want)
		}
	}
}
