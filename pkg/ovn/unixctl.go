package ovn

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"time"
)

// Unixctl calls command on an OVS or OVN daemon's control socket (what ovs-appctl -t does):
// one JSON-RPC request on a fresh connection, the daemon's text reply returned. Some state has
// no database column, only a control command (ovs-vswitchd's tunnel neighbour cache is one).
func Unixctl(ctx context.Context, socket, command string, args ...string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return "", fmt.Errorf("unixctl %s: %w", command, err)
	}
	defer conn.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(5 * time.Second)
	}
	_ = conn.SetDeadline(deadline)
	if args == nil {
		args = []string{}
	}
	req := struct {
		Method string   `json:"method"`
		Params []string `json:"params"`
		ID     int      `json:"id"`
	}{command, args, 0}
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return "", fmt.Errorf("unixctl %s: %w", command, err)
	}
	var resp struct {
		Result *string `json:"result"`
		Error  any     `json:"error"`
	}
	if err := json.NewDecoder(conn).Decode(&resp); err != nil {
		return "", fmt.Errorf("unixctl %s: reading the reply: %w", command, err)
	}
	if resp.Error != nil {
		return "", &UnixctlError{Command: command, Reply: fmt.Sprint(resp.Error)}
	}
	if resp.Result == nil {
		return "", nil
	}
	return *resp.Result, nil
}

// UnixctlError is a daemon's error reply: it answered, and refused the command (unknown to it,
// or bad arguments). Transport failures are other errors.
type UnixctlError struct {
	Command, Reply string
}

func (e *UnixctlError) Error() string { return fmt.Sprintf("unixctl %s: %s", e.Command, e.Reply) }
