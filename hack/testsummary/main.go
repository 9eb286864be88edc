// Command testsummary passes `go test -json` output through as the plain -v text, then prints
// a table of each top-level test's wall time (slowest first: where CI's minutes go) and, when
// tests failed, ends with a short summary: each failing test's last messages. CI keeps only
// the tail of a run's output, and a failed e2e test's rig diagnostics (printed at its cleanup)
// would otherwise push the failure message itself out of it.
//
//	go test -json ./test/e2e/... | go run ./hack/testsummary
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// event is the part of a test2json event used here.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64 // seconds, on pass/fail/skip
}

// Summary limits: messages per failing test and lines per message.
const (
	messagesPerTest = 3
	linesPerMessage = 12
)

func main() {
	var times []timing
	failed := passThrough(os.Stdin, os.Stdout, &times)
	fmt.Print(timeTable(times))
	if len(failed) > 0 {
		fmt.Print(summary(failed))
	}
}

// timing is one top-level test's result and wall time.
type timing struct {
	name    string
	result  string
	seconds float64
}

// timeTable lists the tests slowest first with their share of the sum (the run's length only
// when tests run one after another; make e2e runs some three at a time).
func timeTable(times []timing) string {
	if len(times) == 0 {
		return ""
	}
	sorted := append([]timing(nil), times...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].seconds > sorted[j].seconds })
	var sum float64
	for _, t := range sorted {
		sum += t.seconds
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n=== WALL TIME (%d tests, %.0f s summed; concurrent tests overlap)\n", len(sorted), sum)
	for _, t := range sorted {
		share := 0.0
		if sum > 0 {
			share = 100 * t.seconds / sum
		}
		fmt.Fprintf(&b, "%-44s %-4s %8.1f s %5.1f%%\n", t.name, t.result, t.seconds, share)
	}
	return b.String()
}

// failure is one failing test and its output lines.
type failure struct {
	name  string
	lines []string
}

// passThrough copies the events' output to w and returns the failing tests whose failure is
// not only that of a failing subtest, in the order they ended.
func passThrough(r io.Reader, w io.Writer, times *[]timing) []failure {
	output := map[string][]string{}
	failedChild := map[string]bool{}
	var failed []failure
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Action == "" {
			fmt.Fprintln(w, sc.Text()) // build errors and other plain text
			continue
		}
		fmt.Fprint(w, ev.Output)
		key := ev.Package + " " + ev.Test
		switch {
		case ev.Action == "output" && ev.Test != "":
			output[key] = append(output[key], strings.TrimRight(ev.Output, "\n"))
		case ev.Action == "fail" && ev.Test != "":
			if i := strings.LastIndex(ev.Test, "/"); i > 0 {
				failedChild[ev.Package+" "+ev.Test[:i]] = true
			}
			if !failedChild[key] {
				failed = append(failed, failure{ev.Test, output[key]})
			}
		}
		if ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip" {
			delete(output, key)
			if times != nil && ev.Test != "" && !strings.Contains(ev.Test, "/") {
				*times = append(*times, timing{ev.Test, ev.Action, ev.Elapsed})
			}
		}
	}
	return failed
}

// messageStart matches the first line of a t.Log/t.Error message: "    file.go:123: text".
var messageStart = regexp.MustCompile(`^\s+\S+\.go:\d+: `)

// rigReport matches the first line of what a failed test's rig prints at its cleanup (node
// diagnostics, where the logs went): long, in the full output, and never the failure itself,
// which it would push out of the summary's last messages.
var rigReport = regexp.MustCompile(`^\s+\S+\.go:\d+: (diagnostics of |rig logs saved in )`)

// summary names each failing test with its last messages (rig reports left out), each cut to a
// few lines.
func summary(failed []failure) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n=== FAILURES (%d): each failing test's last %d messages\n", len(failed), messagesPerTest)
	for _, f := range failed {
		fmt.Fprintf(&b, "--- %s\n", f.name)
		var msgs [][]string
		report := false // in a rig report: it and its continuation lines are left out
		for _, l := range f.lines {
			switch {
			case messageStart.MatchString(l):
				if report = rigReport.MatchString(l); !report {
					msgs = append(msgs, []string{l})
				}
			case report:
			case len(msgs) > 0 && !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(strings.TrimSpace(l), "--- "):
				msgs[len(msgs)-1] = append(msgs[len(msgs)-1], l)
			}
		}
		if len(msgs) > messagesPerTest {
			msgs = msgs[len(msgs)-messagesPerTest:]
		}
		for _, m := range msgs {
			if len(m) > linesPerMessage {
				m = append(m[:linesPerMessage:linesPerMessage], fmt.Sprintf("        … %d more lines", len(m)-linesPerMessage))
			}
			b.WriteString(strings.Join(m, "\n") + "\n")
		}
	}
	return b.String()
}
