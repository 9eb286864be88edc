package ovn

import (
	"context"
	"fmt"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"
)

// ReconcileTimeout bounds the OVSDB work of one reconcile pass. libovsdb's reconnecting client
// makes a transaction wait until the connection is back, so a pass against a database that
// stays unreachable (or refuses this client's certificate) would otherwise hang unseen, holding
// its worker and never reporting the outage in status.
const ReconcileTimeout = 30 * time.Second

// Transact commits ops as one OVSDB transaction. OVSDB reports most failures inside a
// successful reply, one result per operation; those are turned into an error that names the
// failing operation (and wraps libovsdb's typed error, e.g. *ovsdb.ConstraintViolation, for
// errors.As). An empty ops is a no-op, so reconcilers can call it unconditionally.
func Transact(ctx context.Context, c client.Client, ops []ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	results, err := c.Transact(ctx, ops...)
	if err != nil {
		return nil, fmt.Errorf("OVSDB transaction of %d operations on %s: %w", len(ops), c.Schema().Name, err)
	}
	opErrs, err := ovsdb.CheckOperationResults(results, ops)
	if err == nil {
		return results, nil
	}
	for _, opErr := range opErrs {
		if i := opIndex(ops, opErr.Operation()); i >= 0 {
			return results, fmt.Errorf("OVSDB transaction on %s failed at operation %d of %d (%s): %w",
				c.Schema().Name, i+1, len(ops), describeOp(ops[i]), opErr)
		}
	}
	// Not tied to one operation: the commit itself failed (e.g. a referential integrity
	// violation) or the server sent fewer results than operations. Name the first
	// operation that reported an error, if any did.
	for i, r := range results {
		if r.Error != "" && i < len(ops) {
			return results, fmt.Errorf("OVSDB transaction on %s failed at operation %d of %d (%s): %s: %s",
				c.Schema().Name, i+1, len(ops), describeOp(ops[i]), r.Error, r.Details)
		}
	}
	return results, fmt.Errorf("OVSDB transaction of %d operations on %s failed: %w", len(ops), c.Schema().Name, err)
}

// opIndex finds op (a pointer into ops, as CheckOperationResults returns) in ops.
func opIndex(ops []ovsdb.Operation, op *ovsdb.Operation) int {
	for i := range ops {
		if &ops[i] == op {
			return i
		}
	}
	return -1
}

// describeOp summarizes an operation for an error message: verb, table and the row's name
// or UUID, else its first condition. Whole rows would drown the message.
func describeOp(op ovsdb.Operation) string {
	s := op.Op + " " + op.Table
	if name, ok := op.Row["name"].(string); ok && name != "" {
		return s + " name=" + name
	}
	if op.UUID != "" {
		return s + " uuid=" + op.UUID
	}
	if op.UUIDName != "" {
		return s + " uuid-name=" + op.UUIDName
	}
	if len(op.Where) > 0 {
		cond := op.Where[0]
		if u, ok := cond.Value.(ovsdb.UUID); ok {
			return fmt.Sprintf("%s where %s %s %s", s, cond.Column, cond.Function, u.GoUUID)
		}
		return fmt.Sprintf("%s where %s %s %v", s, cond.Column, cond.Function, cond.Value)
	}
	return s
}
