package nbsync

import (
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

func modelMutationInsertPort(ls *nb.LogicalSwitch, uuid string) model.Mutation {
	return model.Mutation{Field: &ls.Ports, Mutator: ovsdb.MutateOperationInsert, Value: []string{uuid}}
}
