package cni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/go-logr/logr"
)

// Handler does the work behind the daemon's socket. Errors may wrap the sentinel errors of
// this package (or be *types.Error) to choose the CNI error code.
type Handler interface {
	Add(ctx context.Context, req *Request) (*current.Result, error)
	Del(ctx context.Context, req *Request) error
	Check(ctx context.Context, req *Request) error
}

// StatusReporter is optionally implemented by a Handler to answer CNI STATUS: nil means
// ready for ADDs. Without it, a daemon that answers is ready.
type StatusReporter interface {
	Status(ctx context.Context) error
}

// Server is the daemon's side of the protocol.
type Server struct {
	socketPath string
	handler    Handler
	// Log receives one line per request; the zero value discards.
	Log logr.Logger
	// ShutdownTimeout bounds how long Serve waits for requests in flight once its context
	// is done (default 10s); the rest are cut off, which makes their shims fail.
	ShutdownTimeout time.Duration
	// Observe, when set, is told of every ADD, DEL and CHECK answered: how long it took and the
	// error it got (nil on success). kovn-daemon turns it into metrics.
	Observe func(ctx context.Context, req *Request, took time.Duration, cniErr *types.Error)
}

// NewServer returns a server for h on the unix socket socketPath.
func NewServer(socketPath string, h Handler) *Server {
	return &Server{socketPath: socketPath, handler: h, ShutdownTimeout: 10 * time.Second}
}

// Serve listens on the socket (replacing a stale one left by a dead daemon, refusing to
// replace a live one) with mode 0600 and serves until ctx is done, then shuts down and
// removes the socket. It returns nil after a shutdown triggered by ctx.
func (s *Server) Serve(ctx context.Context) error {
	l, ino, err := listenUnix(s.socketPath)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc(pathCNI, s.serveCNI)
	mux.HandleFunc(pathStatus, s.serveStatus)
	srv := &http.Server{
		Handler:           mux,
		ConnContext:       withPeerPID,
		ReadHeaderTimeout: 10 * time.Second,
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(l) }()
	s.log().Info("CNI server listening", "socket", s.socketPath)

	select {
	case err = <-serveErr:
		err = fmt.Errorf("CNI server on %s: %w", s.socketPath, err)
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.shutdownTimeout())
		if shutErr := srv.Shutdown(shutdownCtx); shutErr != nil {
			_ = srv.Close()
		}
		cancel()
	}
	removeSocketIfOurs(s.socketPath, ino)
	return err
}

func (s *Server) shutdownTimeout() time.Duration {
	if s.ShutdownTimeout <= 0 {
		return 10 * time.Second
	}
	return s.ShutdownTimeout
}

func (s *Server) log() logr.Logger {
	if s.Log.GetSink() == nil {
		return logr.Discard()
	}
	return s.Log
}

// listenUnix binds socketPath with mode 0600 from the first moment: it binds a temporary
// name, restricts it and renames it into place, so no client ever sees a wider mode. It
// returns the listener and the socket's inode (to remove only our own socket later).
func listenUnix(socketPath string) (*net.UnixListener, uint64, error) {
	if err := os.MkdirAll(filepath.Dir(socketPath), 0o755); err != nil {
		return nil, 0, fmt.Errorf("creating directory for CNI socket: %w", err)
	}
	if err := removeStaleSocket(socketPath); err != nil {
		return nil, 0, err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", socketPath, os.Getpid())
	_ = os.Remove(tmp)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, 0, fmt.Errorf("listening on %s: %w", socketPath, err)
	}
	l.SetUnlinkOnClose(false) // the socket is renamed; Serve removes it by its final name
	if err := os.Chmod(tmp, 0o600); err != nil {
		l.Close()
		_ = os.Remove(tmp)
		return nil, 0, fmt.Errorf("restricting CNI socket %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, socketPath); err != nil {
		l.Close()
		_ = os.Remove(tmp)
		return nil, 0, fmt.Errorf("moving CNI socket into place at %s: %w", socketPath, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(socketPath, &st); err != nil {
		l.Close()
		return nil, 0, fmt.Errorf("CNI socket %s vanished: %w", socketPath, err)
	}
	return l, st.Ino, nil
}

// removeStaleSocket removes a socket nobody listens on. A live socket (another daemon) and
// anything that is not a socket are left alone and reported.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking CNI socket path: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("CNI socket path %s exists and is not a socket (%s); refusing to remove it", path, fi.Mode())
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("another process is already serving on CNI socket %s", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing stale CNI socket %s: %w", path, err)
	}
	return nil
}

// removeSocketIfOurs removes path unless another server has replaced it meanwhile.
func removeSocketIfOurs(path string, ino uint64) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err == nil && st.Ino == ino {
		_ = os.Remove(path)
	}
}

// serveCNI decodes a Request, runs the handler and writes a Response.
func (s *Server) serveCNI(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeResponse(w, http.StatusMethodNotAllowed, &Response{Error: types.NewError(types.ErrInternal, "use POST", "")})
		return
	}
	req := &Request{}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err == nil {
		err = json.Unmarshal(data, req)
	}
	if err != nil {
		writeResponse(w, http.StatusBadRequest, &Response{Error: types.NewError(types.ErrDecodingFailure, "decoding CNI request: "+err.Error(), "")})
		return
	}
	start := time.Now()
	resp := s.dispatch(r.Context(), req)
	if s.Observe != nil {
		s.Observe(r.Context(), req, time.Since(start), resp.Error)
	}
	log := s.log().WithValues("command", req.Command, "container", req.ContainerID, "pod", req.PodKey(), "took", time.Since(start).Round(time.Millisecond))
	if resp.Error != nil {
		log.Error(resp.Error, "CNI request failed", "code", resp.Error.Code)
	} else {
		log.Info("CNI request done")
	}
	writeResponse(w, http.StatusOK, resp)
}

// dispatch validates req and calls the handler, turning errors and panics into a Response.
func (s *Server) dispatch(ctx context.Context, req *Request) (resp *Response) {
	defer func() {
		if p := recover(); p != nil {
			resp = &Response{Error: types.NewError(types.ErrInternal, fmt.Sprintf("kovn-daemon panicked handling %s: %v", req.Command, p), "")}
		}
	}()
	if err := req.Validate(); err != nil {
		return &Response{Error: AsCNIError(err)}
	}
	switch req.Command {
	case CmdAdd:
		result, err := s.handler.Add(ctx, req)
		if err != nil {
			return &Response{Error: AsCNIError(err)}
		}
		return resultResponse(result)
	case CmdDel:
		return &Response{Error: AsCNIError(s.handler.Del(ctx, req))}
	default: // CmdCheck; Validate rejects anything else
		return &Response{Error: AsCNIError(s.handler.Check(ctx, req))}
	}
}

// resultResponse encodes an ADD result.
func resultResponse(result *current.Result) *Response {
	if result == nil {
		return &Response{Error: types.NewError(types.ErrInternal, "handler returned no result for ADD", "")}
	}
	if result.CNIVersion == "" {
		result.CNIVersion = ResultVersion
	}
	data, err := json.Marshal(result)
	if err != nil {
		return &Response{Error: types.NewError(types.ErrInternal, "encoding CNI result: "+err.Error(), "")}
	}
	return &Response{Result: data}
}

// serveStatus answers CNI STATUS.
func (s *Server) serveStatus(w http.ResponseWriter, r *http.Request) {
	resp := &Response{}
	if sr, ok := s.handler.(StatusReporter); ok {
		resp.Error = AsCNIError(sr.Status(r.Context()))
	}
	writeResponse(w, http.StatusOK, resp)
}

func writeResponse(w http.ResponseWriter, status int, resp *Response) {
	data, err := json.Marshal(resp)
	if err != nil {
		status = http.StatusInternalServerError
		data = []byte(`{"error":{"code":999,"msg":"encoding response failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}
