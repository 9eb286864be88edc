// Package tamper is the record of repairs kovn made to this cluster's own rows in the
// clusterset's databases after someone else changed them: OVN-IC's databases (and kovn's
// OVN_ClusterSet beside them) let any AZ's certificate write any row, so kovn watches what it
// owns, puts it back, and says so. The join record's guard (package interconnect) and the
// MCS export writer (package mcs) note their repairs here; the InterConnect's Degraded
// condition shows the latest for Hold.
package tamper

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Hold is how long Degraded stays True after the last repair.
const Hold = 10 * time.Minute

// Restored counts the rows put back, whichever database they were in.
var Restored = prometheus.NewCounter(prometheus.CounterOpts{Name: "kovn_ic_records_restored_total",
	Help: "Rows of this cluster in the clusterset's databases (its join record, its MCS exports) that another AZ changed and kovn put back"})

// Log keeps the latest repair. The zero value is ready; nil ignores notes.
type Log struct {
	// OnNote, if set, is called after each note (to reconcile what shows it).
	OnNote func()

	mu  sync.Mutex
	at  time.Time
	msg string
}

// Note records that rows (count of them) were put back; what says which and where.
func (l *Log) Note(count int, what string) {
	if l == nil || count == 0 {
		return
	}
	Restored.Add(float64(count))
	l.mu.Lock()
	l.at, l.msg = time.Now(), what
	l.mu.Unlock()
	if l.OnNote != nil {
		l.OnNote()
	}
}

// Latest is the last repair, if one happened within Hold of now.
func (l *Log) Latest(now time.Time) (at time.Time, what string, ok bool) {
	if l == nil {
		return time.Time{}, "", false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.at.IsZero() || now.Sub(l.at) >= Hold {
		return time.Time{}, "", false
	}
	return l.at, l.msg, true
}
