package ovn

import (
	"reflect"
	"testing"

	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
)

func TestMapMutations(t *testing.T) {
	var field map[string]string
	cur := map[string]string{"same": "1", "changed": "old", "dropped": "x", "foreign": "y"}
	got := MapMutations(&field, cur, map[string]string{"same": "1", "changed": "new", "added": "z"}, []string{"dropped", "absent", "added"})
	want := []model.Mutation{
		{Field: &field, Mutator: ovsdb.MutateOperationDelete, Value: map[string]string{"changed": "old", "dropped": "x"}},
		{Field: &field, Mutator: ovsdb.MutateOperationInsert, Value: map[string]string{"changed": "new", "added": "z"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if got := MapMutations(&field, cur, map[string]string{"same": "1"}, []string{"absent"}); got != nil {
		t.Errorf("nothing to change: %+v", got)
	}
}
