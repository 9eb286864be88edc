package report

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/PID/stat: 100 on every Linux ABI
// Go supports here (the stdlib has no sysconf).
const clockTicks = 100

// ProcSample is a process's CPU time so far and its peak resident set.
type ProcSample struct {
	CPUSeconds float64 // utime + stime
	PeakRSSKiB int64   // VmHWM
}

// ReadProc samples pid from /proc.
func ReadProc(pid int) (ProcSample, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcSample{}, err
	}
	cpu, err := parseStatCPU(string(stat))
	if err != nil {
		return ProcSample{}, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcSample{}, err
	}
	return ProcSample{CPUSeconds: cpu, PeakRSSKiB: parseStatusKiB(string(status), "VmHWM:")}, nil
}

// parseStatCPU returns utime+stime in seconds; fields are counted after the ")" that ends
// the command name, which may itself hold spaces.
func parseStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 { // state is f[0]; utime and stime are stat fields 14 and 15
		return 0, fmt.Errorf("short stat %q", stat)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("stat times %q %q", f[11], f[12])
	}
	return float64(ut+st) / clockTicks, nil
}

func parseStatusKiB(status, key string) int64 {
	for _, l := range strings.Split(status, "\n") {
		if strings.HasPrefix(l, key) {
			f := strings.Fields(l[len(key):])
			if len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v
			}
		}
	}
	return 0
}

// Usage is what a process used over a scenario.
func Usage(before, after ProcSample) string {
	return fmt.Sprintf("CPU %.1f s, peak RSS %.0f MiB", after.CPUSeconds-before.CPUSeconds, float64(after.PeakRSSKiB)/1024)
}
