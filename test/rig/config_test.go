package rig

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func TestAddressPlanIsDisjoint(t *testing.T) {
	seen := map[string]string{}
	add := func(what, ip string) {
		if other, dup := seen[ip]; dup {
			t.Fatalf("%s and %s share %s", what, other, ip)
		}
		seen[ip] = what
	}
	add("ic", ICDBIP().String())
	add("ext", ExternalHostIP().String())
	for c := 1; c <= 9; c++ {
		add("cp", ControlPlaneIP(c).String())
		for n := 1; n <= 50; n++ {
			ip := NodeIP(c, n)
			if !fabricPrefix.Contains(ip) {
				t.Fatalf("node %d/%d at %s is off the fabric", c, n, ip)
			}
			add(NodeName(c, n), ip.String())
		}
		for d := c + 1; d <= 9; d++ {
			if PodCIDR(c).Overlaps(PodCIDR(d)) || ServiceCIDR(c).Overlaps(ServiceCIDR(d)) || PodCIDR(c).Overlaps(ServiceCIDR(d)) {
				t.Fatalf("clusters %d and %d overlap", c, d)
			}
		}
		if PodCIDR(c).Overlaps(JoinCIDR) || fabricPrefix.Overlaps(PodCIDR(c)) {
			t.Fatalf("cluster %d pod CIDR overlaps join or fabric", c)
		}
	}
	if PodCIDR(1).String() != "10.16.0.0/16" {
		t.Fatalf("cluster 1 pod CIDR %s, want kovn's default 10.16.0.0/16", PodCIDR(1))
	}
}

func TestPrefixAndNames(t *testing.T) {
	a, b := PrefixFor("/a/rig"), PrefixFor("/b/rig")
	if a == b || a != PrefixFor("/a/rig") {
		t.Fatalf("prefixes not stable and distinct: %s %s", a, b)
	}
	cfg := Config{Prefix: a}
	for _, ns := range []string{cfg.FabricNS(), cfg.ICNS(), cfg.ExtNS(), cfg.ControlPlaneNS(9), cfg.NodeNS(9, 50)} {
		if !strings.HasPrefix(ns, a+"-") {
			t.Fatalf("namespace %s lacks the rig prefix", ns)
		}
	}
	if _, err := (Config{Dir: t.TempDir(), Clusters: 10}).Defaults(); err == nil {
		t.Fatal("10 clusters accepted")
	}
}

func TestDockerArchive(t *testing.T) {
	b, err := dockerArchive(imageSpec{Ref: "x.io/y:z", Entrypoint: []string{"/y"}}, []byte("binary"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name], _ = io.ReadAll(tr)
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v %s", err, files["manifest.json"])
	}
	m := manifest[0]
	if m.RepoTags[0] != "x.io/y:z" || files[m.Config] == nil || len(m.Layers) != 1 || files[m.Layers[0]] == nil {
		t.Fatalf("archive does not hold what the manifest names: %+v (files %d)", m, len(files))
	}
	if !strings.Contains(string(files[m.Config]), sha(files[m.Layers[0]])) {
		t.Fatal("config diff_id is not the layer's digest")
	}
	lr := tar.NewReader(bytes.NewReader(files[m.Layers[0]]))
	found := false
	for h, err := lr.Next(); err == nil; h, err = lr.Next() {
		if h.Name == "y" && h.Mode&0o111 != 0 {
			found = true
		}
	}
	if !found {
		t.Fatal("layer lacks the executable entrypoint")
	}
}

func TestCgroupHierarchies(t *testing.T) {
	hs, err := cgroupHierarchies()
	if err != nil {
		t.Fatal(err)
	}
	joined := "," + strings.Join(hs, ",") + ","
	for _, c := range []string{"cpu", "memory", "pids"} {
		if !strings.Contains(joined, ","+c+",") {
			t.Fatalf("hierarchies %v lack %s (kubelet needs it)", hs, c)
		}
	}
}
