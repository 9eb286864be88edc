package cni

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/go-logr/logr"
	"github.com/vishvananda/netns"

	"github.com/kovn/kovn/pkg/hostnet"
	"github.com/kovn/kovn/pkg/netattach"
)

// ExtIDInterface names the pod interface an OVS interface plumbs (eth0, net1): a pod with
// attachments has several ports.
const ExtIDInterface = "kovn.io/interface"

// AttachmentHostIfName is the node-side veth of attachment ifName of a container: derived
// from both, so DEL finds it without the pod, and distinct from eth0's (HostIfName).
func AttachmentHostIfName(containerID, ifName string) string {
	sum := sha256.Sum256([]byte(containerID + "/" + ifName))
	return hex.EncodeToString(sum[:])[:12] + "_a"
}

// attachmentRecord is what DEL needs to undo one attachment when the pod and its definition
// may be gone: kept in the daemon's state directory, written before the attachment is made.
type attachmentRecord struct {
	IfName  string          `json:"ifName"`
	Network string          `json:"network"`
	HostIf  string          `json:"hostIf,omitempty"` // a kovn port's node-side veth
	Plugin  string          `json:"plugin,omitempty"` // a delegate
	Config  json.RawMessage `json:"config,omitempty"`
	// Added: the delegate's ADD succeeded. Undoing one whose ADD failed is best effort (a
	// plugin cleans up after its own failure; its DEL may fail for the same reason).
	Added bool `json:"added,omitempty"`
}

// addAttachments plumbs pn's attachments in order, after eth0. A failure at attachment k
// removes 1..k-1 (and the caller removes eth0): the pod gets every interface or none.
func (h *PodHandler) addAttachments(ctx context.Context, req *Request, pn *PodNetwork, eth0 *vethSpec, podNS netns.NsHandle, log logr.Logger) ([]netattach.NetworkStatus, error) {
	var recs []attachmentRecord
	var statuses []netattach.NetworkStatus
	for _, a := range pn.Attachments {
		rec, conf, err := recordFor(req, a)
		if err == nil {
			recs = append(recs, rec)
			err = h.saveRecords(req.ContainerID, recs) // before the attachment exists: a DEL after a crash finds it
		}
		var st netattach.NetworkStatus
		if err == nil {
			st, err = h.addAttachment(ctx, req, a, rec, conf, eth0, podNS, log)
		}
		if err == nil && a.Port == nil {
			recs[len(recs)-1].Added = true
			err = h.saveRecords(req.ContainerID, recs)
		}
		if err != nil {
			if rbErr := h.removeAttachments(context.WithoutCancel(ctx), req); rbErr != nil {
				log.Error(rbErr, "rolling back attachments of a failed ADD")
			}
			return nil, fmt.Errorf("network %s (%s): %w", a.Network, a.IfName, err)
		}
		statuses = append(statuses, st)
	}
	return statuses, nil
}

// recordFor is a's record and, for a delegate, the configuration it is called with.
func recordFor(req *Request, a Attachment) (attachmentRecord, []byte, error) {
	rec := attachmentRecord{IfName: a.IfName, Network: a.Network}
	if a.Port != nil {
		rec.HostIf = AttachmentHostIfName(req.ContainerID, a.IfName)
		return rec, nil, nil
	}
	conf, err := delegateConf(a)
	rec.Plugin, rec.Config = a.Plugin, conf
	return rec, conf, err
}

// delegateConf is a's configuration with its requested MAC as runtimeConfig.mac.
func delegateConf(a Attachment) ([]byte, error) {
	if len(a.MAC) == 0 {
		return a.Config, nil
	}
	var conf map[string]any
	if err := json.Unmarshal(a.Config, &conf); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	rc, _ := conf["runtimeConfig"].(map[string]any)
	if rc == nil {
		rc = map[string]any{}
	}
	rc["mac"] = a.MAC.String()
	conf["runtimeConfig"] = rc
	return json.Marshal(conf)
}

// addAttachment plumbs one attachment and says what network-status lists for it.
func (h *PodHandler) addAttachment(ctx context.Context, req *Request, a Attachment, rec attachmentRecord, conf []byte,
	eth0 *vethSpec, podNS netns.NsHandle, log logr.Logger) (netattach.NetworkStatus, error) {
	st := netattach.NetworkStatus{Name: a.Network, Interface: a.IfName}
	if a.Port == nil {
		res, err := h.delegate(ctx, "ADD", req, rec, conf)
		if err != nil {
			return st, err
		}
		st.MAC, st.IPs = resultIface(res, a.IfName)
		return st, nil
	}
	spec := &vethSpec{hostIf: rec.HostIf, podIf: a.IfName, mtu: eth0.mtu, mac: a.Port.MAC, ips: a.Port.IPs, routes: a.Port.podRoutes()}
	if err := h.Ports.Detach(ctx, spec.hostIf); err != nil {
		return st, err
	}
	err := h.inHostNS(func() error { _, err := createHostVeth(spec, podNS); return err })
	if err == nil {
		err = hostnet.InNetNS(podNS, func() error { _, err := configurePodIf(spec); return err })
	}
	if err == nil {
		ids := portExternalIDs(req, a.Port)
		ids[ExtIDInterface] = a.IfName
		err = h.Ports.Attach(ctx, spec.hostIf, a.Port.PortName, ids)
	}
	if err == nil {
		err = h.Ports.WaitInstalled(ctx, spec.hostIf)
	}
	if err != nil {
		return st, err
	}
	if err := hostnet.AnnounceIn(log, podNS, spec.podIf, spec.mac, spec.ips); err != nil {
		log.Error(err, "announcing an attachment's addresses", "iface", a.IfName)
	}
	st.MAC, st.IPs = a.Port.MAC.String(), statusIPs(a.Port.IPs)
	for _, gw := range a.Port.Gateways {
		st.Gateway = append(st.Gateway, gw.String())
	}
	return st, nil
}

// resultIface is the pod interface's MAC and addresses in a delegate's result.
func resultIface(res *current.Result, ifName string) (mac string, ips []string) {
	idx := -1
	for i, iface := range res.Interfaces {
		if iface.Name == ifName && iface.Sandbox != "" {
			idx, mac = i, iface.Mac
		}
	}
	for _, ip := range res.IPs {
		if ip.Interface == nil || *ip.Interface == idx || idx < 0 {
			ips = append(ips, ip.Address.IP.String())
		}
	}
	return mac, ips
}

// delegate calls a delegate plugin from the CNI bin directory: cmd ADD or DEL.
func (h *PodHandler) delegate(ctx context.Context, cmd string, req *Request, rec attachmentRecord, conf []byte) (*current.Result, error) {
	path, err := invoke.FindInPath(rec.Plugin, []string{h.CNIBinDir})
	if err != nil {
		return nil, fmt.Errorf("%w: delegate plugin %s: %v", ErrInvalidConfig, rec.Plugin, err)
	}
	args := &invoke.Args{Command: cmd, ContainerID: req.ContainerID, IfName: rec.IfName, Path: h.CNIBinDir}
	if req.Netns != "" {
		args.NetNS = podNetnsPath(ctx, req.Netns)
	}
	// Started from the node's namespace (a test's throwaway one): the plugin finds its master
	// interface there and moves what it makes into the pod.
	if cmd == "DEL" {
		return nil, h.inHostNS(func() error { return invoke.ExecPluginWithoutResult(ctx, path, conf, args, nil) })
	}
	var res types.Result
	err = h.inHostNS(func() (err error) {
		res, err = invoke.ExecPluginWithResult(ctx, path, conf, args, nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delegate %s: %w", rec.Plugin, err)
	}
	out, err := current.NewResultFromResult(res)
	if err != nil {
		return nil, fmt.Errorf("delegate %s: result: %w", rec.Plugin, err)
	}
	return out, nil
}

// removeAttachments undoes every recorded attachment of req's container, the last made
// first, and forgets the record once all are gone (a failure keeps it for the next DEL).
func (h *PodHandler) removeAttachments(ctx context.Context, req *Request) error {
	recs, err := h.loadRecords(req.ContainerID)
	if err != nil || len(recs) == 0 {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, rollbackTimeout)
	defer cancel()
	var errs []error
	for i := len(recs) - 1; i >= 0; i-- {
		rec := recs[i]
		if rec.HostIf != "" {
			errs = append(errs, h.Ports.Detach(ctx, rec.HostIf), h.inHostNS(func() error { return deleteVeth(rec.HostIf) }))
			continue
		}
		if _, err := h.delegate(ctx, "DEL", req, rec, rec.Config); err != nil {
			err = fmt.Errorf("network %s (%s): delegate %s DEL: %w", rec.Network, rec.IfName, rec.Plugin, err)
			if !rec.Added || !h.netnsExists(ctx, req) {
				// Nothing of it can be left: its ADD failed, or its interface went with the
				// pod's network namespace. A DEL that cannot succeed must not keep the pod.
				h.log().Info("ignoring a delegate's failed DEL", "error", err.Error(), "added", rec.Added)
				continue
			}
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := os.Remove(h.recordPath(req.ContainerID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// netnsExists says whether req's pod network namespace is still there.
func (h *PodHandler) netnsExists(ctx context.Context, req *Request) bool {
	if req.Netns == "" {
		return false
	}
	_, err := os.Stat(podNetnsPath(ctx, req.Netns))
	return err == nil
}

// recordPath is the file holding a container's attachment records.
func (h *PodHandler) recordPath(containerID string) string {
	sum := sha256.Sum256([]byte(containerID)) // a container ID is the runtime's: never a path
	return filepath.Join(h.StateDir, "attachments", hex.EncodeToString(sum[:16])+".json")
}

func (h *PodHandler) saveRecords(containerID string, recs []attachmentRecord) error {
	if h.StateDir == "" {
		return fmt.Errorf("%w: kovn-daemon has no state directory for attachments", ErrInvalidConfig)
	}
	p := h.recordPath(containerID)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(recs)
	if err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

func (h *PodHandler) loadRecords(containerID string) ([]attachmentRecord, error) {
	if h.StateDir == "" {
		return nil, nil
	}
	b, err := os.ReadFile(h.recordPath(containerID))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var recs []attachmentRecord
	if err := json.Unmarshal(b, &recs); err != nil {
		return nil, fmt.Errorf("attachment records of container %s: %w", containerID, err)
	}
	return recs, nil
}
