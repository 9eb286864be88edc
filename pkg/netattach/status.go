package netattach

import (
	"encoding/json"
	"fmt"
)

// NetworkStatus is one interface of a pod as the network-status annotation lists it.
type NetworkStatus struct {
	// Name is the network: the default network's name, or the NetworkAttachmentDefinition's
	// "namespace/name".
	Name      string   `json:"name"`
	Interface string   `json:"interface,omitempty"`
	IPs       []string `json:"ips,omitempty"`
	MAC       string   `json:"mac,omitempty"`
	// Default marks the pod's default network (eth0).
	Default bool     `json:"default,omitempty"`
	Gateway []string `json:"gateway,omitempty"`
}

// FormatStatus renders network-status: the default network first, then the attachments in
// the order the pod asked for them.
func FormatStatus(statuses []NetworkStatus) (string, error) {
	b, err := json.MarshalIndent(statuses, "", "    ")
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// ParseStatus reads a network-status annotation.
func ParseStatus(value string) ([]NetworkStatus, error) {
	var out []NetworkStatus
	if err := json.Unmarshal([]byte(value), &out); err != nil {
		return nil, fmt.Errorf("%s: %v", NetworkStatusAnnotation, err)
	}
	return out, nil
}
