package rig

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// State is what a running rig records in <Dir>/state.json: enough for `status`, `env` and `down`
// to work from another process, and for `down` to clean up after a rig whose processes died.
type State struct {
	Config     Config            `json:"config"`
	StartedAt  time.Time         `json:"startedAt"`
	UpSeconds  float64           `json:"upSeconds,omitempty"`
	UpPhases   string            `json:"upPhases,omitempty"` // each start-up phase's time
	Namespaces []string          `json:"namespaces"`
	Cgroups    []string          `json:"cgroups"`  // kubelet cgroupRoots, removed from every hierarchy on down
	Procs      []Proc            `json:"procs"`    // long-running processes started directly by the rig
	Forwards   map[string]string `json:"forwards"` // "c1/apiserver" -> "127.0.0.1:PORT"
	Clusters   []ClusterInfo     `json:"clusters"`
}

// Proc is one process the rig started, stopped by pid on Down.
type Proc struct {
	Name string `json:"name"`
	Pid  int    `json:"pid"`
	Log  string `json:"log"`
	// PidsFile is set for supervisors: it lists the processes the supervisor started.
	PidsFile string `json:"pidsFile,omitempty"`
}

// ClusterInfo is what a user needs to reach one cluster from the host.
type ClusterInfo struct {
	Name       string   `json:"name"`
	Kubeconfig string   `json:"kubeconfig"` // points at the host forwarder
	NBAddr     string   `json:"nbAddr"`     // unix:SOCKET (the chart: tcp:127.0.0.1:PORT, forwarded)
	SBAddr     string   `json:"sbAddr"`
	Nodes      []string `json:"nodes"`
	FakeNodes  int      `json:"fakeNodes,omitempty"` // FakeNodeName(c, 1..FakeNodes)
}

func statePath(dir string) string { return filepath.Join(dir, "state.json") }

// LoadState reads the state of the rig in dir.
func LoadState(dir string) (*State, error) {
	b, err := os.ReadFile(statePath(dir))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no rig in %s (state.json not found)", dir)
		}
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("corrupt rig state %s: %w", statePath(dir), err)
	}
	return &s, nil
}

// Save writes the state atomically so a crash never leaves a half-written file behind.
func (s *State) Save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(s.Config.Dir) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, statePath(s.Config.Dir))
}

// Alive reports whether pid is a live (non-zombie) process.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// state is the field after the parenthesised command name
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// AllProcs returns the rig's processes plus every process its supervisors report.
func (s *State) AllProcs() []Proc {
	var all []Proc
	for _, p := range s.Procs {
		all = append(all, p)
		if p.PidsFile != "" {
			for _, c := range readPids(p.PidsFile) {
				c.Name = p.Name + "/" + c.Name
				all = append(all, c)
			}
		}
	}
	return all
}

func readPids(file string) []Proc {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var ps []Proc
	_ = json.Unmarshal(b, &ps)
	return ps
}

func writePids(file string, ps []Proc) error {
	b, _ := json.MarshalIndent(ps, "", "  ")
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}
