package cni

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/go-logr/logr"
	"github.com/vishvananda/netns"

	"github.com/kovn/kovn/pkg/hostnet"
	"github.com/kovn/kovn/pkg/netattach"
)

// rollbackTimeout bounds the clean-up after a failed ADD; it runs even when the request's
// context is done (the usual reason for failing).
const rollbackTimeout = 15 * time.Second

// PodHandler is kovn-daemon's Handler: it plumbs pods as the controller decided.
type PodHandler struct {
	// Networks says what the controller decided for a pod.
	Networks Networks
	// Ports attaches node-side veths to the integration bridge.
	Ports PortAttacher
	// HostNetNS is the network namespace of the node-side veth ends; empty means the
	// daemon's own, which is what a daemon on the node wants. Tests use a throwaway one.
	HostNetNS string
	// Log receives progress; the zero value discards.
	Log logr.Logger
	// CNIBinDir holds the delegate plugins of attachments (macvlan, ipvlan, static, ...).
	CNIBinDir string
	// StateDir keeps what DEL needs to remove a container's attachments; attachments are
	// refused without it.
	StateDir string
	// Status, when set, publishes the network-status of a pod with attachments.
	Status NetworkStatusWriter

	locks keyedMutex
}

var _ Handler = (*PodHandler)(nil)

// NetworkStatusWriter publishes what a pod's interfaces got (k8s.v1.cni.cncf.io/network-status).
type NetworkStatusWriter interface {
	SetNetworkStatus(ctx context.Context, namespace, name, uid string, statuses []netattach.NetworkStatus) error
}

// DefaultNetworkName is the network-status name of eth0's network.
const DefaultNetworkName = "kovn"

// NewPodHandler returns a handler plumbing pods from networks into ports.
func NewPodHandler(networks Networks, ports PortAttacher) *PodHandler {
	return &PodHandler{Networks: networks, Ports: ports}
}

// Add waits for the pod's network, creates the veth pair, attaches the node end to OVS,
// waits until OVN has installed the port and announces the pod's addresses. Whatever it
// created is removed again if a later step fails.
func (h *PodHandler) Add(ctx context.Context, req *Request) (*current.Result, error) {
	defer h.locks.lock(req.ContainerID)()
	log := h.log().WithValues("pod", req.PodKey(), "container", req.ContainerID)
	pn, spec, err := h.podSpec(ctx, req)
	if err != nil {
		return nil, err
	}
	podNS, err := h.openPodNetNS(ctx, req.Netns)
	if err != nil {
		return nil, err
	}
	defer podNS.Close()
	// An OVS port left by an earlier attempt for this sandbox must be gone from vswitchd
	// before its veth is recreated under the same name (see OVSAttacher.Detach).
	if err := h.Ports.Detach(ctx, spec.hostIf); err != nil {
		return nil, err
	}
	if err := h.removeAttachments(ctx, req); err != nil { // an earlier attempt's
		return nil, err
	}

	var hostMAC, podMAC []byte
	err = h.inHostNS(func() (err error) {
		hostMAC, err = createHostVeth(spec, podNS)
		return err
	})
	if err != nil {
		return nil, err
	}
	err = hostnet.InNetNS(podNS, func() (err error) {
		podMAC, err = configurePodIf(spec)
		return err
	})
	if err == nil {
		err = h.Ports.Attach(ctx, spec.hostIf, pn.PortName, portExternalIDs(req, pn))
	}
	if err == nil {
		log.V(1).Info("waiting for OVN to install the port", "port", pn.PortName, "iface", spec.hostIf)
		err = h.Ports.WaitInstalled(ctx, spec.hostIf)
	}
	if err != nil {
		if rbErr := h.rollback(ctx, spec.hostIf); rbErr != nil {
			log.Error(rbErr, "rolling back a failed ADD")
		}
		return nil, fmt.Errorf("ADD of pod %s: %w", req.PodKey(), err)
	}
	// Only now: until OVN has installed the port, the announcement would be dropped.
	if err := hostnet.AnnounceIn(log, podNS, spec.podIf, podMAC, spec.ips); err != nil {
		log.Error(err, "announcing the pod's addresses; neighbours re-learn its MAC by themselves, seconds later")
	}
	if len(pn.Attachments) > 0 {
		statuses, err := h.addAttachments(ctx, req, pn, spec, podNS, log)
		if err != nil {
			if rbErr := h.rollback(ctx, spec.hostIf); rbErr != nil {
				log.Error(rbErr, "rolling back a failed ADD")
			}
			return nil, fmt.Errorf("ADD of pod %s: %w", req.PodKey(), err)
		}
		h.publishStatus(ctx, req, pn, spec, podMAC, statuses, log)
	}
	log.V(1).Info("pod plumbed", "iface", spec.hostIf, "ips", pn.IPs, "attachments", len(pn.Attachments))
	return buildResult(req, pn, spec, hostMAC, podMAC), nil
}

// publishStatus writes network-status: eth0 first, then the attachments in order. The pod's
// interfaces work without it, so a failure is logged, not returned.
func (h *PodHandler) publishStatus(ctx context.Context, req *Request, pn *PodNetwork, spec *vethSpec, podMAC []byte,
	attachments []netattach.NetworkStatus, log logr.Logger) {
	if h.Status == nil {
		return
	}
	eth0 := netattach.NetworkStatus{Name: DefaultNetworkName, Interface: spec.podIf, IPs: statusIPs(pn.IPs),
		MAC: net.HardwareAddr(podMAC).String(), Default: true}
	for _, gw := range pn.Gateways {
		eth0.Gateway = append(eth0.Gateway, gw.String())
	}
	if err := h.Status.SetNetworkStatus(ctx, req.PodNamespace, req.PodName, req.PodUID, append([]netattach.NetworkStatus{eth0}, attachments...)); err != nil {
		log.Error(err, "writing the pod's network-status")
	}
}

// Del removes the OVS port and the veth pair of req's container. It needs neither the
// netns (the runtime's later DELs have none) nor the pod, and succeeds when there is
// nothing left to remove.
func (h *PodHandler) Del(ctx context.Context, req *Request) error {
	defer h.locks.lock(req.ContainerID)()
	hostIf := HostIfName(req.ContainerID)
	var errs []error
	if err := h.removeAttachments(ctx, req); err != nil {
		errs = append(errs, err)
	}
	if err := h.Ports.Detach(ctx, hostIf); err != nil {
		errs = append(errs, err)
	}
	if err := h.inHostNS(func() error { return deleteVeth(hostIf) }); err != nil {
		errs = append(errs, err)
	}
	if req.Netns != "" && req.IfName != "" {
		// Normally gone with its host end; a pod interface left by an older naming scheme
		// or a half-done ADD goes here. A netns that is already gone is fine.
		path := podNetnsPath(ctx, req.Netns)
		if err := hostnet.WithNetNS(path, func() error { return deleteVeth(req.IfName) }); err != nil && !errors.Is(err, ErrInvalidNetNS) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("DEL of container %s (pod %s): %w", req.ContainerID, req.PodKey(), err)
	}
	return nil
}

// Check verifies that the pod interface, its addresses and routes, the node-side veth and
// the OVS port are all as ADD made them.
func (h *PodHandler) Check(ctx context.Context, req *Request) error {
	defer h.locks.lock(req.ContainerID)()
	pn, spec, err := h.podSpec(ctx, req)
	if err != nil {
		return err
	}
	if err := checkPrevResult(req.Config, pn); err != nil {
		return err
	}
	if err := hostnet.WithNetNS(podNetnsPath(ctx, req.Netns), func() error { return checkPodIf(spec) }); err != nil {
		return fmt.Errorf("CHECK of pod %s: %w", req.PodKey(), err)
	}
	if err := h.inHostNS(func() error { return checkHostVeth(spec) }); err != nil {
		return fmt.Errorf("CHECK of pod %s: %w", req.PodKey(), err)
	}
	if err := h.Ports.Verify(ctx, spec.hostIf, pn.PortName); err != nil {
		return fmt.Errorf("CHECK of pod %s: %w", req.PodKey(), err)
	}
	return nil
}

// podSpec reads the configuration, waits for the pod's network and derives the veth spec.
func (h *PodHandler) podSpec(ctx context.Context, req *Request) (*PodNetwork, *vethSpec, error) {
	confMTU := 0
	if len(req.Config) > 0 {
		conf, err := ParseNetConf(req.Config)
		if err != nil {
			return nil, nil, err
		}
		confMTU = conf.MTU
	}
	pn, err := h.Networks.WaitPodNetwork(ctx, req.PodNamespace, req.PodName, req.PodUID)
	if err != nil {
		return nil, nil, fmt.Errorf("getting the network of pod %s: %w", req.PodKey(), err)
	}
	err = pn.Validate()
	if err == nil {
		err = pn.validateAttachments(req.IfName)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("network of pod %s: %w", req.PodKey(), err)
	}
	spec := &vethSpec{
		hostIf: HostIfName(req.ContainerID),
		podIf:  req.IfName,
		mtu:    pn.mtu(confMTU),
		mac:    pn.MAC,
		ips:    pn.IPs,
		routes: pn.eth0Routes(),
	}
	return pn, spec, nil
}

// openPodNetNS opens the pod's netns, refusing the node's own.
func (h *PodHandler) openPodNetNS(ctx context.Context, netnsPath string) (netns.NsHandle, error) {
	path := podNetnsPath(ctx, netnsPath)
	same, err := hostnet.SameNetNS(path, h.hostNetNSPath())
	if err != nil {
		return 0, fmt.Errorf("%w: opening pod network namespace %s: %w", ErrInvalidNetNS, netnsPath, err)
	}
	if same {
		return 0, fmt.Errorf("%w: %s is the node's own network namespace", ErrInvalidNetNS, netnsPath)
	}
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return 0, fmt.Errorf("%w: opening pod network namespace %s: %w", ErrInvalidNetNS, netnsPath, err)
	}
	return ns, nil
}

// rollback removes what a failed ADD created, with a fresh deadline.
func (h *PodHandler) rollback(ctx context.Context, hostIf string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	return errors.Join(
		h.Ports.Detach(ctx, hostIf),
		h.inHostNS(func() error { return deleteVeth(hostIf) }),
	)
}

// inHostNS runs fn in the node's namespace: directly, or inside HostNetNS when set.
func (h *PodHandler) inHostNS(fn func() error) error {
	if h.HostNetNS == "" {
		return fn()
	}
	return hostnet.WithNetNS(h.HostNetNS, fn)
}

func (h *PodHandler) hostNetNSPath() string {
	if h.HostNetNS == "" {
		return "/proc/self/ns/net"
	}
	return h.HostNetNS
}

func (h *PodHandler) log() logr.Logger {
	if h.Log.GetSink() == nil {
		return logr.Discard()
	}
	return h.Log
}

// portExternalIDs are the OVS interface's external_ids besides iface-id: who the port is
// for, so a node-side garbage collector can match ports to pods.
func portExternalIDs(req *Request, pn *PodNetwork) map[string]string {
	return map[string]string{
		ExtIDPodNamespace: req.PodNamespace,
		ExtIDPodName:      req.PodName,
		ExtIDPodUID:       req.PodUID,
		ExtIDContainerID:  req.ContainerID,
		ExtIDAttachedMAC:  pn.MAC.String(),
	}
}

// checkPrevResult compares the runtime's cached result (CHECK's prevResult) with the
// pod's network: the addresses the runtime knows must still be the pod's.
func checkPrevResult(config []byte, pn *PodNetwork) error {
	if len(config) == 0 {
		return nil
	}
	conf, err := ParseNetConf(config)
	if err != nil {
		return err
	}
	if conf.RawPrevResult == nil {
		return nil
	}
	if err := version.ParsePrevResult(&conf.NetConf); err != nil {
		return fmt.Errorf("%w: prevResult: %w", ErrDecoding, err)
	}
	prev, err := current.GetResult(conf.PrevResult)
	if err != nil {
		return fmt.Errorf("%w: prevResult: %w", ErrDecoding, err)
	}
	for _, ipc := range prev.IPs {
		found := false
		for _, ip := range pn.IPs {
			found = found || ipc.Address.IP.Equal(ip.Addr().AsSlice())
		}
		if !found {
			return fmt.Errorf("prevResult has address %s, which is no longer the pod's (%v)", ipc.Address.IP, pn.IPs)
		}
	}
	return nil
}
