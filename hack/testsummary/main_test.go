package main

import (
	"fmt"
	"strings"
	"testing"
)

const sample = `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"run","Package":"p","Test":"TestA/sub"}
{"Action":"output","Package":"p","Test":"TestA/sub","Output":"=== RUN   TestA/sub\n"}
{"Action":"output","Package":"p","Test":"TestA/sub","Output":"    a_test.go:10: first note\n"}
{"Action":"output","Package":"p","Test":"TestA/sub","Output":"    a_test.go:20: pings: 300 sent, 1 lost\n"}
{"Action":"output","Package":"p","Test":"TestA/sub","Output":"        continuation\n"}
{"Action":"run","Package":"p","Test":"TestA/ok"}
{"Action":"output","Package":"p","Test":"TestA/ok","Output":"    a_test.go:30: fine\n"}
{"Action":"pass","Package":"p","Test":"TestA/ok"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    rig_test.go:56: diagnostics of c1-n1:\n"}
{"Action":"output","Package":"p","Test":"TestA/sub","Output":"    --- FAIL: TestA/sub (1.00s)\n"}
{"Action":"fail","Package":"p","Test":"TestA/sub"}
{"Action":"fail","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:5: rig up: boom\n"}
{"Action":"fail","Package":"p","Test":"TestB"}
not json: build failed
{"Action":"fail","Package":"p"}
`

func TestSummaryNamesFailingLeavesWithTheirLastMessages(t *testing.T) {
	var out strings.Builder
	failed := passThrough(strings.NewReader(sample), &out, nil)
	if !strings.Contains(out.String(), "pings: 300 sent, 1 lost\n        continuation\n") || !strings.Contains(out.String(), "not json: build failed") {
		t.Fatalf("output not passed through:\n%s", out.String())
	}
	var names []string
	for _, f := range failed {
		names = append(names, f.name)
	}
	if strings.Join(names, ",") != "TestA/sub,TestB" {
		t.Fatalf("failing tests %v, want TestA/sub and TestB (TestA failed only through its subtest)", names)
	}
	s := summary(failed)
	for _, want := range []string{"--- TestA/sub\n", "a_test.go:20: pings: 300 sent, 1 lost\n        continuation\n", "--- TestB\n    b_test.go:5: rig up: boom"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "--- FAIL") || strings.Contains(s, "fine") {
		t.Errorf("summary holds a status line or a passing test's message:\n%s", s)
	}
}

func TestSummaryCutsLongMessages(t *testing.T) {
	lines := []string{"    a_test.go:1: long"}
	for i := 0; i < 40; i++ {
		lines = append(lines, "        line")
	}
	s := summary([]failure{{"TestX", lines}})
	if got := strings.Count(s, "        line"); got != linesPerMessage-1 || !strings.Contains(s, "… 29 more lines") {
		t.Fatalf("cut to %d lines:\n%s", got, s)
	}
}

func TestTimeTableListsTopLevelTestsSlowestFirst(t *testing.T) {
	in := `{"Action":"pass","Package":"p","Test":"TestFast/sub","Elapsed":0.5}
{"Action":"pass","Package":"p","Test":"TestFast","Elapsed":1.5}
{"Action":"fail","Package":"p","Test":"TestSlow","Elapsed":30}
{"Action":"pass","Package":"p","Elapsed":32}
`
	var times []timing
	passThrough(strings.NewReader(in), &strings.Builder{}, &times)
	got := timeTable(times)
	slow, fast := strings.Index(got, "TestSlow"), strings.Index(got, "TestFast")
	if slow < 0 || fast < 0 || slow > fast || strings.Contains(got, "TestFast/sub") {
		t.Fatalf("want TestSlow then TestFast, no subtests:\n%s", got)
	}
	for _, want := range []string{"2 tests, 32 s summed", "fail     30.0 s  95.2%", "pass      1.5 s   4.8%"} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

// A test that failed at its cleanup, then printed its rig's diagnostics: the summary shows the
// failure, not the diagnostics (CI's tail once showed only those).
func TestSummaryLeavesOutRigReports(t *testing.T) {
	lines := []string{
		"    observe_test.go:40: subtest note",
		"    rig_test.go:121: ovs-vswitchd failed an assertion (the rig restarted it): c1-n2: boom",
		"    rig_test.go:110: rig logs saved in ../../_output/e2e-logs/TestObserve",
	}
	for n := 1; n <= 3; n++ {
		lines = append(lines, fmt.Sprintf("    rig_test.go:73: diagnostics of c1-n%d:", n), "        $ ip -n x -br addr", "        lo UNKNOWN")
	}
	s := summary([]failure{{"TestObserve", lines}})
	if !strings.Contains(s, "failed an assertion") || !strings.Contains(s, "subtest note") || strings.Contains(s, "diagnostics of") || strings.Contains(s, "ip -n") || strings.Contains(s, "logs saved") {
		t.Fatalf("summary:\n%s", s)
	}
}
