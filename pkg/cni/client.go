package cni

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

// HTTP paths served on the daemon's socket.
const (
	pathCNI    = "/v1/cni"
	pathStatus = "/v1/status"
	// maxBody bounds requests and responses (a result or a netconf is a few KB).
	maxBody = 1 << 20
)

// Client is the shim's side of the protocol: it sends requests to kovn-daemon over HTTP on
// a unix socket. Every error it returns is a *types.Error ready to print.
type Client struct {
	socketPath string
	http       *http.Client
}

// NewClient returns a client for the daemon listening on socketPath.
func NewClient(socketPath string) *Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socketPath)
		},
		DisableKeepAlives: true,
	}
	return &Client{socketPath: socketPath, http: &http.Client{Transport: transport}}
}

// Do sends req and returns the daemon's result (empty for DEL and CHECK). Bound the time
// with ctx: the daemon keeps working on the request until the connection is gone.
func (c *Client) Do(ctx context.Context, req *Request) (json.RawMessage, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, types.NewError(types.ErrInternal, "encoding request for kovn-daemon: "+err.Error(), "")
	}
	what := fmt.Sprintf("%s for container %s", req.Command, req.ContainerID)
	if req.PodName != "" {
		what += " of pod " + req.PodKey()
	}
	resp, err := c.call(ctx, http.MethodPost, pathCNI, body, what)
	if err != nil {
		return nil, err
	}
	return resp.Result, nil
}

// Status asks whether the daemon is up and ready to serve ADDs (CNI STATUS).
func (c *Client) Status(ctx context.Context) error {
	_, err := c.call(ctx, http.MethodGet, pathStatus, nil, "STATUS")
	return err
}

// call performs one HTTP exchange and decodes the Response; a Response carrying an error
// is returned as that error.
func (c *Client) call(ctx context.Context, method, path string, body []byte, what string) (*Response, error) {
	httpReq, err := http.NewRequestWithContext(ctx, method, "http://kovn-daemon"+path, bytes.NewReader(body))
	if err != nil {
		return nil, types.NewError(types.ErrInternal, "building request for kovn-daemon: "+err.Error(), "")
	}
	httpReq.Header.Set("Content-Type", "application/json")
	start := time.Now()
	httpResp, err := c.http.Do(httpReq)
	if err != nil {
		return nil, c.transportError(ctx, err, what, time.Since(start))
	}
	defer httpResp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(httpResp.Body, maxBody))
	if err != nil {
		return nil, c.transportError(ctx, err, what, time.Since(start))
	}
	var resp Response
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, types.NewError(types.ErrInternal,
			fmt.Sprintf("kovn-daemon on %s answered %s with HTTP %d and an undecodable body: %v",
				c.socketPath, what, httpResp.StatusCode, err), truncate(string(data), 200))
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	if httpResp.StatusCode != http.StatusOK {
		return nil, types.NewError(types.ErrInternal,
			fmt.Sprintf("kovn-daemon on %s answered %s with HTTP %d", c.socketPath, what, httpResp.StatusCode), "")
	}
	return &resp, nil
}

// transportError explains a failed exchange: daemon down, or no answer in time.
func (c *Client) transportError(ctx context.Context, err error, what string, took time.Duration) *types.Error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("kovn-daemon on %s did not answer %s within %s: %v",
				c.socketPath, what, took.Round(time.Millisecond), ctxErr), err.Error())
	}
	return types.NewError(types.ErrTryAgainLater,
		fmt.Sprintf("cannot reach kovn-daemon on %s for %s (is kovn-daemon running on this node?): %v",
			c.socketPath, what, unwrapURLError(err)), "")
}

// unwrapURLError drops net/http's `Post "http://kovn-daemon/v1/cni":` prefix, which
// names a URL that does not exist anywhere.
func unwrapURLError(err error) error {
	if inner := errors.Unwrap(err); inner != nil {
		return inner
	}
	return err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
