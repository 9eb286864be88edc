package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"
)

// getStream sends one HTTP GET every interval, each on a new connection, until the stop file
// appears (or count requests were sent), and reports how many failed and who answered:
//
//	1500 requests, 0 failed
//	answered by web-7c9d-abcde 812, web-7c9d-fghij 688
//	failed seq 41-43: <the first error>
//
// With -v, then a line per request in the order sent: "at <unix ms it was sent> <host>", or
// "at <ms> failed <refused|timeout|error>", so a test can tell when the answers moved to
// another host or stopped, and how (the pod shares the host's clock).
// A request is a failure if it errors or is not answered 200 within the timeout. Requests run
// on their own goroutines, so a slow answer does not delay the next request.
func getStream(args []string) error {
	fs := flag.NewFlagSet("getstream", flag.ExitOnError)
	count := fs.Int("c", 3000, "requests to send at most")
	interval := fs.Duration("i", 20*time.Millisecond, "interval between requests")
	timeout := fs.Duration("t", 2*time.Second, "how long one request may take")
	stopFile := fs.String("stop-file", "", "stop sending once this file exists")
	verbose := fs.Bool("v", false, "print each request's send time and who answered it")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return fmt.Errorf("getstream: want one URL")
	}
	cl := &http.Client{Timeout: *timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	type result struct {
		seq  int
		at   time.Time
		host string
		err  error
	}
	results := make(chan result, *count)
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	sent := 0
	for seq := 1; seq <= *count; seq++ {
		if *stopFile != "" {
			if _, err := os.Stat(*stopFile); err == nil {
				break
			}
		}
		sent = seq
		go func(seq int, at time.Time) {
			resp, err := cl.Get(fs.Arg(0))
			if err != nil {
				results <- result{seq: seq, at: at, err: err}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				results <- result{seq: seq, at: at, err: fmt.Errorf("status %d", resp.StatusCode)}
				return
			}
			host, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
			results <- result{seq: seq, at: at, host: host}
		}(seq, time.Now())
		<-tick.C
	}
	byHost := map[string]int{}
	failed := map[int]error{}
	all := make([]result, sent)
	for i := 0; i < sent; i++ {
		r := <-results
		all[r.seq-1] = r
		if r.err != nil {
			failed[r.seq] = r.err
		} else {
			byHost[r.host]++
		}
	}
	fmt.Printf("%d requests, %d failed\n", sent, len(failed))
	var hosts []string
	for h, n := range byHost {
		hosts = append(hosts, fmt.Sprintf("%s %d", h, n))
	}
	sort.Strings(hosts)
	fmt.Printf("answered by %s\n", strings.Join(hosts, ", "))
	var seqs []int
	for s := range failed {
		seqs = append(seqs, s)
	}
	sort.Ints(seqs)
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		fmt.Printf("failed seq %d-%d: %v\n", seqs[i], seqs[j], failed[seqs[i]])
		i = j + 1
	}
	for _, r := range all {
		if !*verbose {
			break
		}
		who := r.host
		if r.err != nil {
			who = "failed " + failureKind(r.err)
		}
		fmt.Printf("at %d %s\n", r.at.UnixMilli(), who)
	}
	return nil
}

// failureKind names how a request failed: refused (a reset or ICMP unreachable: nothing
// serves the address), timeout (no answer within -t), or error.
func failureKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH):
		return "refused"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "error"
}
