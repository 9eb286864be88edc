package ovntest

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
)

// ServeUnixctl answers OVS/OVN unixctl requests (what ovn.Unixctl sends) on a socket of its
// own and returns its path. reply gets "command arg..." and returns the result (a string),
// an error for an error reply, or nil to never answer (a hung daemon, until the test ends).
func ServeUnixctl(t testing.TB, reply func(command string) any) string {
	t.Helper()
	sock := SocketPath(t)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go answerUnixctl(conn, reply, done)
		}
	}()
	return sock
}

func answerUnixctl(conn net.Conn, reply func(string) any, done <-chan struct{}) {
	defer conn.Close()
	var req struct {
		Method string   `json:"method"`
		Params []string `json:"params"`
		ID     int      `json:"id"`
	}
	if json.NewDecoder(conn).Decode(&req) != nil {
		return
	}
	resp := map[string]any{"id": req.ID, "result": nil, "error": nil}
	switch r := reply(strings.TrimSpace(req.Method + " " + strings.Join(req.Params, " "))).(type) {
	case string:
		resp["result"] = r
	case error:
		resp["error"] = r.Error()
	default:
		<-done
		return
	}
	_ = json.NewEncoder(conn).Encode(resp)
}
