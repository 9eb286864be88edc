package ovn

import (
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
)

// MapMutations are the mutations of the map column field (a pointer into the model to mutate)
// that take it from cur to holding every pair of want and none of the keys in drop, leaving
// every other key alone: another writer's keys survive, where an Update of the whole column
// would drop them. A changed or dropped key is deleted with the value it had in cur, so a value
// someone else wrote meanwhile is not removed (the insert is then a no-op, and the next reconcile
// sees it); the deletes come first because OVSDB applies the items in order and an insert of an
// existing key does nothing. Nil when cur already matches.
func MapMutations(field *map[string]string, cur, want map[string]string, drop []string) []model.Mutation {
	del, ins := map[string]string{}, map[string]string{}
	for k, v := range want {
		if old, ok := cur[k]; !ok || old != v {
			if ok {
				del[k] = old
			}
			ins[k] = v
		}
	}
	for _, k := range drop {
		if _, keep := want[k]; !keep {
			if old, ok := cur[k]; ok {
				del[k] = old
			}
		}
	}
	var muts []model.Mutation
	if len(del) > 0 {
		muts = append(muts, model.Mutation{Field: field, Mutator: ovsdb.MutateOperationDelete, Value: del})
	}
	if len(ins) > 0 {
		muts = append(muts, model.Mutation{Field: field, Mutator: ovsdb.MutateOperationInsert, Value: ins})
	}
	return muts
}
