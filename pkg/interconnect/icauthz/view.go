package icauthz

import (
	"context"
	"fmt"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/clusterset"
	"github.com/kovn/kovn/pkg/ovn/model/icsb"
)

// DBView is a View kept by the relay's own monitors of the IC-SB server (over its unix
// socket): the owned tables of OVN_IC_Southbound and OVN_ClusterSet.
type DBView struct {
	icsb, cs libovsdb.Client
}

// ConnectView monitors the server at endpoint (unix:PATH) until ctx ends.
func ConnectView(ctx context.Context, endpoint string) (*DBView, error) {
	cfg := ovn.Config{Endpoints: []string{endpoint}}
	sbModel, err := icsb.FullDatabaseModel()
	if err != nil {
		return nil, err
	}
	sbc, err := ovn.Connect(ctx, sbModel, cfg, &icsb.AvailabilityZone{}, &icsb.Gateway{}, &icsb.PortBinding{}, &icsb.Route{})
	if err != nil {
		return nil, fmt.Errorf("monitoring %s: %w", ICSBDB, err)
	}
	csModel, err := clusterset.FullDatabaseModel()
	if err != nil {
		sbc.Close()
		return nil, err
	}
	csc, err := ovn.Connect(ctx, csModel, cfg, &clusterset.Cluster{}, &clusterset.ServiceExport{}, &clusterset.EndpointSlice{},
		&clusterset.PolicyNamespace{}, &clusterset.PolicyPod{})
	if err != nil {
		sbc.Close()
		return nil, fmt.Errorf("monitoring %s: %w", ClusterSetDB, err)
	}
	go func() { <-ctx.Done(); sbc.Close(); csc.Close() }()
	return &DBView{icsb: sbc, cs: csc}, nil
}

func row(c libovsdb.Client, table, uuid string) model.Model {
	rc := c.Cache().Table(table)
	if rc == nil {
		return nil
	}
	return rc.Row(uuid)
}

// AZName implements View.
func (v *DBView) AZName(uuid string) (string, bool) {
	if az, ok := row(v.icsb, "Availability_Zone", uuid).(*icsb.AvailabilityZone); ok {
		return az.Name, true
	}
	return "", false
}

// AZUUID implements View.
func (v *DBView) AZUUID(name string) (string, bool) {
	for uuid, m := range v.icsb.Cache().Table("Availability_Zone").RowsShallow() {
		if az, ok := m.(*icsb.AvailabilityZone); ok && az.Name == name {
			return uuid, true
		}
	}
	return "", false
}

// Owner implements View.
func (v *DBView) Owner(db, table, uuid string) (string, bool) {
	c := v.icsb
	if db == ClusterSetDB {
		c = v.cs
	}
	switch r := row(c, table, uuid).(type) {
	case *icsb.AvailabilityZone:
		return r.Name, true
	case *icsb.Gateway:
		return r.AvailabilityZone, true
	case *icsb.PortBinding:
		return r.AvailabilityZone, true
	case *icsb.Route:
		return r.AvailabilityZone, true
	case *clusterset.Cluster:
		return r.AvailabilityZone, true
	case *clusterset.ServiceExport:
		return r.Cluster, true
	case *clusterset.EndpointSlice:
		return r.Cluster, true
	case *clusterset.PolicyNamespace:
		return r.Cluster, true
	case *clusterset.PolicyPod:
		return r.Cluster, true
	}
	return "", false
}

// ClusterAZ implements View.
func (v *DBView) ClusterAZ(cluster string) (string, bool) {
	for _, m := range v.cs.Cache().Table("Cluster").RowsShallow() {
		if c, ok := m.(*clusterset.Cluster); ok && c.Name == cluster {
			return c.AvailabilityZone, true
		}
	}
	return "", false
}
