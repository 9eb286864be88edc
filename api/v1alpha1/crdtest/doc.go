// Package crdtest loads the generated CRDs (deploy/crds) into a real kube-apiserver + etcd
// (see apiserver_test.go) and checks that the OpenAPI and CEL rules behave as intended on
// the Kubernetes version the rig runs. Unit tests cannot do this: the rules are only compiled,
// cost-checked and evaluated by the apiserver, and CEL library availability depends on its version.
package crdtest
