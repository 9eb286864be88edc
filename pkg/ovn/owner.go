package ovn

import (
	"fmt"
	"maps"
	"reflect"

	"github.com/ovn-org/libovsdb/model"
)

// Ownership keys written into external_ids of every row kovn creates. They let a
// reconciler find its rows without names encoding everything, and let garbage collection
// delete rows whose owner is gone while leaving rows of other tools (ovn-ic, northd,
// an admin's nbctl) alone.
const (
	// OwnerTypeKey holds the kind of the owning object, e.g. "Subnet" or "Service".
	OwnerTypeKey = "kovn.io/owner-type"
	// OwnerKey holds the owning object's key: "namespace/name", or "name" if cluster-scoped.
	OwnerKey = "kovn.io/owner"
	// WriterKey names the kovn component that wrote the row ("topology", "services", ...).
	// Each writer garbage-collects only its own rows, so a second writer's rows on the same
	// tables (load balancers, ACLs, transit switches) never disappear under it.
	WriterKey = "kovn.io/writer"
	// ParentKey names the row (switch, router) that references a child row, so moving or
	// deleting the child touches its parent by name instead of searching every parent.
	ParentKey = "kovn.io/parent"
)

// OwnerIDs returns external_ids naming the owner, merged over extra (extra is not
// modified; the ownership keys win over keys of the same name in extra).
func OwnerIDs(ownerType, owner string, extra map[string]string) map[string]string {
	ids := make(map[string]string, len(extra)+2)
	maps.Copy(ids, extra)
	ids[OwnerTypeKey] = ownerType
	ids[OwnerKey] = owner
	return ids
}

// OwnerOf reads the owner from external_ids; ok is false for rows kovn does not own.
func OwnerOf(ids map[string]string) (ownerType, owner string, ok bool) {
	ownerType, ok = ids[OwnerTypeKey]
	if !ok || ownerType == "" {
		return "", "", false
	}
	return ownerType, ids[OwnerKey], true
}

// OwnedBy returns a predicate, usable with Find, CreateOrUpdateWithPredicateOps and
// DeleteWithPredicateOps, that matches rows owned by (ownerType, owner). An empty owner
// matches every row of ownerType: the starting set for garbage collection, which keeps the
// rows whose owner still exists and deletes the rest.
//
// T must be a pointer to a model with an external_ids column. The predicate runs against
// every cached row of the table, so it only reads.
func OwnedBy[T model.Model](ownerType, owner string) func(T) bool {
	return func(m T) bool {
		ids := ExternalIDs(m)
		if ids[OwnerTypeKey] != ownerType {
			return false
		}
		return owner == "" || ids[OwnerKey] == owner
	}
}

// ExternalIDs returns the external_ids column of m (nil if m has none). Generated models
// share no interface for it, hence reflection over the ovsdb struct tag.
func ExternalIDs(m model.Model) map[string]string {
	v := reflect.ValueOf(m)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f, ok := externalIDsField(v.Elem().Type())
	if !ok {
		return nil
	}
	return v.Elem().Field(f).Interface().(map[string]string)
}

// SetOwner writes the ownership keys into m's external_ids, keeping its other keys.
func SetOwner(m model.Model, ownerType, owner string) error {
	v := reflect.ValueOf(m)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("%T is not a pointer to a model", m)
	}
	f, ok := externalIDsField(v.Elem().Type())
	if !ok {
		return fmt.Errorf("%T has no external_ids column", m)
	}
	field := v.Elem().Field(f)
	ids, _ := field.Interface().(map[string]string)
	field.Set(reflect.ValueOf(OwnerIDs(ownerType, owner, ids)))
	return nil
}

// externalIDsField finds the index of the map[string]string field tagged ovsdb:"external_ids".
func externalIDsField(t reflect.Type) (int, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Tag.Get("ovsdb") == "external_ids" && f.Type == reflect.TypeOf(map[string]string(nil)) {
			return i, true
		}
	}
	return 0, false
}

// UUIDOf returns the _uuid of model m ("" if it has none).
func UUIDOf(m model.Model) string {
	if f := UUIDField(m); f != nil {
		return *f
	}
	return ""
}

// UUIDField returns a pointer to m's _uuid field, for conditions on it (nil if it has none).
func UUIDField(m model.Model) *string {
	v := reflect.ValueOf(m)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	t := v.Elem().Type()
	for i := range t.NumField() {
		if t.Field(i).Tag.Get("ovsdb") == "_uuid" && t.Field(i).Type.Kind() == reflect.String {
			return v.Elem().Field(i).Addr().Interface().(*string)
		}
	}
	return nil
}
