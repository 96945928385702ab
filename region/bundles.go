package region

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/broker/bundle"
	"github.com/stratamesh/strata/internal/meta"
)

// unloadTimeout bounds an unload operation: the owner closes the bundle's
// topics (jetstream.Config.HandoverTimeout) and another broker takes it.
const unloadTimeout = time.Minute

// operationsPrefix keeps long admin operations (admin-api.md: 202 and an
// operation id) in the region's etcd, so that any broker reports them.
const operationsPrefix = "operations/"

// finishUnload records the unload's outcome once the bundle moved (or
// unloadTimeout passed).
func (n *Node) finishUnload(op admin.Operation, id bundle.ID, from string) {
	ctx, cancel := context.WithTimeout(context.Background(), unloadTimeout)
	defer cancel()
	to, err := n.js.WaitMoved(ctx, id, from)
	op.Finished = time.Now().UTC()
	if err != nil {
		op.State, op.Error = admin.OperationFailed, "the bundle did not move within "+unloadTimeout.String()
	} else {
		op.State, op.Done = admin.OperationDone, 1
		op.Result = admin.UnloadResult{Bundle: id.String(), From: from, To: to}
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if _, err := meta.PutJSON(wctx, n.store, operationsPrefix+op.ID, op); err != nil {
		n.logger.Warn("recording an unload's outcome failed", "bundle", id.String(), "err", err)
	}
}

func newOperationID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
