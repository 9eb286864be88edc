package ovn

import "github.com/ovn-org/libovsdb/model"

// NBIndexes are the client-side indexes of kovn's northbound cache. Logical_Switch and
// Logical_Router have no schema index on name, and kovn finds the rows an object owns through
// its owner key; without these indexes either lookup scans the whole table, so one pod event
// would cost more the more pods there are. Query them with client.Where(model).List: Get
// ignores client indexes.
func NBIndexes() map[string][]model.ClientIndex {
	byName := model.ClientIndex{Columns: []model.ColumnKey{{Column: "name"}}}
	byOwner := model.ClientIndex{Columns: []model.ColumnKey{{Column: "external_ids", Key: OwnerKey}}}
	return map[string][]model.ClientIndex{
		"Logical_Switch":              {byName, byOwner},
		"Logical_Router":              {byName, byOwner},
		"Logical_Switch_Port":         {byOwner},
		"Logical_Router_Port":         {byOwner},
		"Logical_Router_Policy":       {byOwner},
		"Logical_Router_Static_Route": {byOwner},
		"Port_Group":                  {byOwner},
		// ACL has no name index (names are neither unique nor required); Address_Set's
		// schema index on name serves lookups by name.
		"ACL":           {byOwner},
		"Address_Set":   {byOwner},
		"QoS":           {byOwner},
		"Meter":         {byOwner}, // the schema's index on name serves lookups by name
		"NAT":           {byOwner},
		"Load_Balancer": {byName, byOwner},
		// Load_Balancer_Group: its schema index on name serves lookups by name, and it has no
		// external_ids column to index owners by (nbsync records group owners in NB_Global).
	}
}
