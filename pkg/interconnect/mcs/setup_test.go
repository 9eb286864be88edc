package mcs

import (
	"bytes"
	"testing"

	mcscrd "sigs.k8s.io/mcs-api/config/crd"

	"github.com/kovn/kovn/deploy/crds"
)

// The chart installs mcs-api's CRDs from deploy/crds (kovn-controller only waits for them):
// they must be the module's own, as CRDs() reads them (`make generate` copies them).
func TestChartCarriesModuleCRDs(t *testing.T) {
	for file, want := range map[string][]byte{
		"multicluster.x-k8s.io_serviceexports.yaml": mcscrd.ServiceExportCRD,
		"multicluster.x-k8s.io_serviceimports.yaml": mcscrd.ServiceImportCRD,
	} {
		got, err := crds.FS.ReadFile(file)
		if err != nil {
			t.Fatalf("deploy/crds: %v (run make generate)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("deploy/crds/%s differs from sigs.k8s.io/mcs-api's: run make generate", file)
		}
	}
}
