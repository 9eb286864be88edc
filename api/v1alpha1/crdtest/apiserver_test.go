package crdtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// This file is a minimal stand-in for controller-runtime's envtest: etcd + kube-apiserver as
// child processes, admin access by a static bearer token. envtest itself needs
// github.com/blang/semver/v4 in go.mod, which this package may not change; once go.mod has it,
// this file can be replaced by envtest.Environment{CRDDirectoryPaths, BinaryAssetsDirectory}.

// k8sVersion must match K8S_VERSION in hack/install-deps.sh, which builds the binaries.
const k8sVersion = "v1.31.4"

// binaries locates kube-apiserver and etcd. A missing binary fails the test: skipping would let
// the CRD rules go untested without anybody noticing.
func binaries(t *testing.T) (apiserver, etcd string) {
	t.Helper()
	cache := os.Getenv("KOVN_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatalf("no home directory to find the kovn cache: %v", err)
		}
		cache = filepath.Join(home, ".cache", "kovn")
	}
	apiserver = filepath.Join(cache, "k8s-"+k8sVersion, "kube-apiserver")
	if _, err := os.Stat(apiserver); err != nil {
		t.Fatalf("kube-apiserver %s not found (%v): run hack/install-deps.sh", apiserver, err)
	}
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		etcd = "/usr/bin/etcd"
		if _, err := os.Stat(etcd); err != nil {
			t.Fatalf("etcd not found in PATH or /usr/bin: run hack/install-deps.sh (Debian package etcd-server)")
		}
	}
	return apiserver, etcd
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startProcess runs a binary with its output in dir/name.log; the process is killed at cleanup
// (registered after dir's own cleanup, so it runs first).
func startProcess(t *testing.T, dir, name, bin string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	return cmd, logPath
}

func logTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// startAPIServer starts etcd and kube-apiserver, installs deploy/crds and returns a client for
// the kovn kinds and the rest config for raw requests.
func startAPIServer(t *testing.T) (client.Client, *rest.Config) {
	t.Helper()
	apiserverBin, etcdBin := binaries(t)
	dir := t.TempDir()

	etcdPort, peerPort, apiPort := freePort(t), freePort(t), freePort(t)
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	startProcess(t, dir, "etcd", etcdBin, "--name=default", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL, "--initial-cluster=default="+peerURL)

	// Service-account key (required flags since 1.20) and an admin token.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	saKey := filepath.Join(dir, "sa.key")
	token := "kovn-crdtest-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(saKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokens, []byte(token+",admin,admin,system:masters\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	host := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	apiserver, apiLog := startProcess(t, dir, "kube-apiserver", apiserverBin,
		"--etcd-servers="+etcdURL, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(apiPort), "--cert-dir="+filepath.Join(dir, "certs"),
		"--token-auth-file="+tokens, "--authorization-mode=RBAC",
		"--service-account-issuer="+host, "--service-account-key-file="+saKey, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.0.0.0/24", "--disable-admission-plugins=ServiceAccount")

	// Wait for /readyz. The serving certificate is self-signed by the apiserver, hence Insecure.
	httpc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(90 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := httpc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if apiserver.ProcessState != nil || time.Now().After(deadline) {
			t.Fatalf("kube-apiserver not ready (last error %v); log tail:\n%s", err, logTail(apiLog))
		}
		time.Sleep(500 * time.Millisecond)
	}

	cfg := &rest.Config{Host: host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	installCRDs(t, cfg)

	scheme := k8sruntime.NewScheme()
	if err := kovnv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// Established CRDs take a moment to be served; list until every kind answers.
	for _, l := range []client.ObjectList{&kovnv1.VpcList{}, &kovnv1.SubnetList{}, &kovnv1.IPList{}, &kovnv1.IPPoolList{}} {
		waitFor(t, fmt.Sprintf("%T served", l), func() error { return c.List(context.Background(), l) })
	}
	return c, cfg
}

// installCRDs creates every CRD of deploy/crds. The apiserver compiles and cost-checks the CEL
// rules here, so a rule that does not work on this Kubernetes version fails the test at once.
func installCRDs(t *testing.T, cfg *rest.Config) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	files, err := filepath.Glob(filepath.Join(filepath.Dir(file), "..", "..", "..", "deploy", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in deploy/crds (%v): run hack/update-codegen.sh", err)
	}
	scheme := k8sruntime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := c.Create(ctx, crd); err != nil {
			// Keep going: one run should show every CRD the apiserver refuses.
			t.Errorf("installing %s: %v", filepath.Base(f), err)
			continue
		}
		waitFor(t, crd.Name+" established", func() error {
			cur := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), cur); err != nil {
				return err
			}
			for _, cond := range cur.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("conditions %+v", cur.Status.Conditions)
		})
	}
	if t.Failed() {
		t.FailNow()
	}
}

func waitFor(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
