package rig

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Pod images are built here from static Go binaries as docker-archive tarballs and imported into
// every node's containerd: nothing is pulled from a registry.
const (
	PauseImage   = "registry.k8s.io/pause:3.10"
	TestboxImage = "kovn.io/testbox:latest"
	// ProbeImage holds kovn-probe at /kovn-probe, as kovn's own image does: the image of
	// `kubectl kovn connectivity-test --image` in the lab.
	ProbeImage = "kovn.io/kovn-probe:latest"
)

// imageSpec says which binary becomes which image and how it is started.
type imageSpec struct {
	Ref        string
	Binary     string // file name in KovnBinDir
	Entrypoint []string
	Cmd        []string
}

var podImages = []imageSpec{
	{Ref: PauseImage, Binary: "kovn-pause", Entrypoint: []string{"/pause"}},
	{Ref: TestboxImage, Binary: "kovn-testbox", Entrypoint: []string{"/testbox"}, Cmd: []string{"sleep"}},
	{Ref: CoreDNSImage, Binary: "kovn-coredns", Entrypoint: []string{"/coredns"}},
	{Ref: ProbeImage, Binary: "kovn-probe", Entrypoint: []string{"/kovn-probe"}},
}

// buildImages writes one docker-archive per image into dir and returns their paths.
func buildImages(binDir, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []string
	for _, im := range podImages {
		bin, err := os.ReadFile(filepath.Join(binDir, im.Binary))
		if err != nil {
			return nil, fmt.Errorf("image %s: %w (build it with `make build`)", im.Ref, err)
		}
		archive, err := dockerArchive(im, bin)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, im.Binary+".tar")
		if err := os.WriteFile(path, archive, 0o644); err != nil {
			return nil, err
		}
		out = append(out, path)
	}
	return out, nil
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// dockerArchive builds a one-layer image: the binary at the entrypoint path plus /tmp.
func dockerArchive(im imageSpec, bin []byte) ([]byte, error) {
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	epoch := time.Unix(0, 0)
	for _, h := range []*tar.Header{
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: epoch},
		{Name: im.Entrypoint[0][1:], Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin)), ModTime: epoch},
	} {
		if err := lw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := lw.Write(bin); err != nil {
				return nil, err
			}
		}
	}
	if err := lw.Close(); err != nil {
		return nil, err
	}
	layerID := sha(layer.Bytes())
	config, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux", "created": epoch.Format(time.RFC3339),
		"config": map[string]any{"Entrypoint": im.Entrypoint, "Cmd": im.Cmd,
			"Env": []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerID}},
	})
	configName := sha(config) + ".json"
	manifest, _ := json.Marshal([]map[string]any{{
		"Config": configName, "RepoTags": []string{im.Ref}, "Layers": []string{layerID + "/layer.tar"},
	}})
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		data []byte
	}{{layerID + "/layer.tar", layer.Bytes()}, {configName, config}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	return out.Bytes(), tw.Close()
}
