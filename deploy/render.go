package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// KubeVersion is the Kubernetes version charts are rendered for when no cluster is asked: the
// rig's.
const KubeVersion = "1.31.4"

// WriteChart writes the embedded chart into dir (created if needed), for helm to read.
func WriteChart(dir string) error {
	return fs.WalkDir(Chart, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := Chart.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
}

// Render runs `helm template` (helm is the binary's path) on the embedded chart with the
// values files (-f, in order) and the --set values, as a release in kube-system, and returns the objects in the order helm
// prints them (helm's install order: identities, roles and bindings before workloads).
func Render(helm string, valuesFiles []string, set ...string) ([]*unstructured.Unstructured, error) {
	dir, err := os.MkdirTemp("", "kovn-chart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := WriteChart(dir); err != nil {
		return nil, err
	}
	args := []string{"template", "kovn", dir, "--namespace", "kube-system", "--kube-version", KubeVersion}
	for _, f := range valuesFiles {
		args = append(args, "--values", f)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(helm, args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm template: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return Decode(out.Bytes())
}

// Decode splits a multi-document YAML stream into objects, skipping empty documents.
func Decode(b []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}
