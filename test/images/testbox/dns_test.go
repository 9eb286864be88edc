package main

import (
	"encoding/binary"
	"io"
	"net"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

func reply(t *testing.T, name string, rcode dnsmessage.RCode, answers int) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{Response: true, RCode: rcode})
	q := dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}
	_ = b.StartQuestions()
	_ = b.Question(q)
	_ = b.StartAnswers()
	for i := 0; i < answers; i++ {
		_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: q.Class, TTL: 5}, dnsmessage.AResource{A: [4]byte{10, 96, 0, byte(i)}})
	}
	msg, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// A TCP stream carries length-prefixed messages that reads may split anywhere: the sniffer
// must see each message once, whole.
func TestSniffStream(t *testing.T) {
	var stream []byte
	for _, m := range [][]byte{reply(t, "web.dns.svc.cluster.local.", dnsmessage.RCodeSuccess, 2), reply(t, "nope.cluster.local.", dnsmessage.RCodeNameError, 0)} {
		stream = binary.BigEndian.AppendUint16(stream, uint16(len(m)))
		stream = append(stream, m...)
	}
	a, b := net.Pipe()
	go func() {
		for i := 0; i < len(stream); i += 7 { // odd-sized writes split the length prefix too
			_, _ = a.Write(stream[i:min(i+7, len(stream))])
		}
		a.Close()
	}()
	sn := &sniffer{}
	c := &sniffStreamConn{Conn: b, s: sn}
	if _, err := io.ReadAll(c); err != nil {
		t.Fatal(err)
	}
	got := sn.lines()
	want := []string{"reply web.dns.svc.cluster.local. A Success answers=2", "reply nope.cluster.local. A NameError answers=0"}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("sniffed %q, want %q", got, want)
	}
}
