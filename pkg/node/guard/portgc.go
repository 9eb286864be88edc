package guard

import (
	"context"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kovn/kovn/pkg/cni"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
)

// PortGC removes br-int ports of pods that are gone without a CNI DEL having reached the
// daemon (a node restart, a daemon down during the delete): their veth vanished with the pod's
// netns, but the Port row would stay in Open_vSwitch forever.
type PortGC struct {
	Client   client.Reader // the daemon's cache: this node's pods
	Live     client.Reader // a direct API reader: confirms a pod is gone before its port goes
	OVS      libovsdb.Client
	Ports    cni.PortAttacher
	Interval time.Duration
}

// Start runs a pass at once and then every Interval until ctx ends (manager.Runnable).
func (g *PortGC) Start(ctx context.Context) error {
	interval := g.Interval
	if interval == 0 {
		interval = 5 * time.Minute
	}
	for {
		if err := g.Collect(ctx); err != nil {
			log.FromContext(ctx).Error(err, "collecting stale pod ports")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// Collect detaches every pod port whose pod no longer exists with the uid it was plumbed for.
func (g *PortGC) Collect(ctx context.Context) error {
	var ifaces []vswitch.Interface
	if err := g.OVS.List(ctx, &ifaces); err != nil {
		return err
	}
	for _, iface := range ifaces {
		ns, name, uid := iface.ExternalIDs[cni.ExtIDPodNamespace], iface.ExternalIDs[cni.ExtIDPodName], iface.ExternalIDs[cni.ExtIDPodUID]
		if ns == "" || name == "" {
			continue // not a pod port (ovn0, br-int itself, another tool's port)
		}
		if alive, err := podAlive(ctx, g.Client, ns, name, uid); err != nil || alive {
			if err != nil {
				return err
			}
			continue
		}
		// The cache may lag a pod created a moment ago: ask the API server before deleting.
		if alive, err := podAlive(ctx, g.Live, ns, name, uid); err != nil || alive {
			if err != nil {
				return err
			}
			continue
		}
		log.FromContext(ctx).Info("removing the port of a pod that is gone", "port", iface.Name, "pod", ns+"/"+name)
		if err := g.Ports.Detach(ctx, iface.Name); err != nil {
			return err
		}
	}
	return nil
}

func podAlive(ctx context.Context, r client.Reader, ns, name, uid string) (bool, error) {
	var pod corev1.Pod
	err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &pod)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return uid == "" || string(pod.UID) == uid, nil
}
