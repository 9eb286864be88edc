package node

import (
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
)

func mutationInsert(field any, uuid string) model.Mutation {
	return model.Mutation{Field: field, Mutator: ovsdb.MutateOperationInsert, Value: []string{uuid}}
}
