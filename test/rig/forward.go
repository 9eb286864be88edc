package rig

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Forward maps a loopback listener on the host to an address inside one of the rig's
// namespaces. The listener lives in the host's netns; each dial is made from inside the rig's
// netns, so the host needs no route, address or bridge to reach the rig.
type Forward struct {
	Listen string `json:"listen"` // 127.0.0.1:PORT on the host
	NetNS  string `json:"netns"`  // rig namespace name
	Target string `json:"target"` // IP:PORT inside that namespace
	// FD, when set, is the listening socket on Listen, inherited: the rig opens it before
	// starting the forwarder, so no other process can take the port in between (a port
	// chosen free and listened on later was, once, an outgoing connection's by then).
	FD int `json:"fd,omitempty"`
}

// forwarderReady is written beside the spec once every listener serves.
func forwarderReady(specFile string) string { return specFile + ".ready" }

// RunForwarder serves every forward in specFile until killed.
func RunForwarder(specFile string) error {
	b, err := os.ReadFile(specFile)
	if err != nil {
		return err
	}
	var fws []Forward
	if err := json.Unmarshal(b, &fws); err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, f := range fws {
		ln, err := forwardListener(f)
		if err != nil {
			return fmt.Errorf("forward %s: %w", f.Listen, err)
		}
		wg.Add(1)
		go func(f Forward, ln net.Listener) {
			defer wg.Done()
			serveForward(f, ln)
		}(f, ln)
	}
	if err := os.WriteFile(forwarderReady(specFile), nil, 0o644); err != nil {
		return err
	}
	wg.Wait()
	return nil
}

// forwardListener is f's inherited listening socket, or a new one on f.Listen.
func forwardListener(f Forward) (net.Listener, error) {
	if f.FD == 0 {
		return net.Listen("tcp", f.Listen)
	}
	file := os.NewFile(uintptr(f.FD), f.Listen)
	defer file.Close() // FileListener holds its own descriptor
	return net.FileListener(file)
}

func serveForward(f Forward, ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Printf("forward %s: %v", f.Listen, err)
			return
		}
		go func() {
			defer c.Close()
			up, err := dialInNetNS("/run/netns/"+f.NetNS, f.Target)
			if err != nil {
				log.Printf("forward %s -> %s/%s: %v", f.Listen, f.NetNS, f.Target, err)
				return
			}
			defer up.Close()
			go func() { _, _ = io.Copy(up, c); closeWrite(up) }()
			_, _ = io.Copy(c, up)
		}()
	}
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// dialInNetNS opens a TCP connection from inside the namespace at nsPath. The socket keeps the
// namespace it was created in, so only the socket() call needs the thread to be switched.
func dialInNetNS(nsPath, target string) (net.Conn, error) {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer orig.Close()
	ns, err := os.Open(nsPath)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer ns.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("setns %s: %w", nsPath, err)
	}
	conn, dialErr := net.DialTimeout("tcp", target, 5*time.Second)
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread is stuck in the wrong netns: keep it locked so Go retires it with the goroutine.
		return conn, dialErr
	}
	runtime.UnlockOSThread()
	return conn, dialErr
}
