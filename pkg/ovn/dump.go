package ovn

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"

	"github.com/kovn/kovn/pkg/ovn/model/icnb"
	"github.com/kovn/kovn/pkg/ovn/model/icsb"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/pkg/ovn/model/sb"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
)

// DatabaseModels are the databases a dump can read, by the short names kovn's tools use.
var DatabaseModels = map[string]func() (model.DatabaseModel, error){
	"nb":    nb.DatabaseModel,
	"sb":    sb.DatabaseModel,
	"ic-nb": icnb.DatabaseModel,
	"ic-sb": icsb.DatabaseModel,
	"ovs":   vswitch.DatabaseModel,
}

// Dump reads tables (every table when none are named) of database db ("nb", "sb", "ic-nb",
// "ic-sb" or "ovs") at cfg's endpoints through a libovsdb monitor and returns their rows by
// table, each table's rows ordered by UUID. The rows are kovn's generated models, so a reader
// decodes them back into the same typed structs (DecodeRows) instead of parsing a CLI's text.
func Dump(ctx context.Context, db string, cfg Config, tables ...string) (map[string][]model.Model, error) {
	full, ok := DatabaseModels[db]
	if !ok {
		return nil, fmt.Errorf("unknown database %q (nb, sb, ic-nb, ic-sb or ovs)", db)
	}
	dbModel, err := full()
	if err != nil {
		return nil, err
	}
	monitored := make([]model.Model, 0, len(tables))
	for _, t := range tables {
		m, err := dbModel.NewModel(t)
		if err != nil {
			return nil, fmt.Errorf("database %s has no table %q", db, t)
		}
		monitored = append(monitored, m)
	}
	c, err := Connect(ctx, dbModel.Client(), cfg, monitored...)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return CachedRows(c, tables...), nil
}

// CachedRows is the rows of tables (every table of the client's model when none are named)
// in c's cache, by table, each ordered by UUID.
func CachedRows(c client.Client, tables ...string) map[string][]model.Model {
	if len(tables) == 0 {
		tables = c.Cache().Tables()
	}
	out := make(map[string][]model.Model, len(tables))
	for _, name := range tables {
		rows := []model.Model{}
		if tc := c.Cache().Table(name); tc != nil {
			uuids := tc.RowsShallow()
			keys := make([]string, 0, len(uuids))
			for uuid := range uuids {
				keys = append(keys, uuid)
			}
			sort.Strings(keys)
			for _, k := range keys {
				rows = append(rows, uuids[k])
			}
		}
		out[name] = rows
	}
	return out
}

// DecodeRows decodes table's rows from a JSON dump (Dump's result, encoded) into T, the
// table's generated model.
func DecodeRows[T any](dump map[string]json.RawMessage, table string) ([]T, error) {
	raw, ok := dump[table]
	if !ok {
		var zero T
		return nil, fmt.Errorf("the dump has no table %s (for %s)", table, reflect.TypeOf(zero))
	}
	var rows []T
	if err := json.Unmarshal(raw, &rows); err != nil {
		return nil, fmt.Errorf("decoding %s rows: %w", table, err)
	}
	return rows, nil
}
