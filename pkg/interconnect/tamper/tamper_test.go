package tamper_test

import (
	"testing"
	"time"

	"github.com/kovn/kovn/pkg/interconnect/tamper"
)

func TestTamperLogHold(t *testing.T) {
	var none *tamper.Log
	none.Note(1, "ignored")
	if _, _, ok := none.Latest(time.Now()); ok {
		t.Error("nil log reports")
	}
	l := &tamper.Log{}
	l.Note(0, "nothing put back")
	if _, _, ok := l.Latest(time.Now()); ok {
		t.Error("a note of 0 rows reports")
	}
	l.Note(2, "two rows")
	if _, msg, ok := l.Latest(time.Now()); !ok || msg != "two rows" {
		t.Errorf("latest %q %t", msg, ok)
	}
	if _, _, ok := l.Latest(time.Now().Add(tamper.Hold)); ok {
		t.Error("still reported after Hold")
	}
}
