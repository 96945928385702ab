package jetstream

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/stratamesh/strata/broker/consumer"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/tenancy"
)

// cursorsPrefix holds the persisted cursors: "cursors/<t>/<ns>/<topic>/<consumer>"
// → consumer.State as JSON. Only the topic's owner writes them, each
// write conditioned on its ownership.
const cursorsPrefix = "cursors/"

func cursorDir(n tenancy.Name) string { return cursorsPrefix + n.String() + "/" }

func cursorKey(n tenancy.Name, consumerName string) string { return cursorDir(n) + consumerName }

// loadCursors reads every persisted cursor of topic n, by consumer name.
func loadCursors(ctx context.Context, st *meta.Store, n tenancy.Name) (map[string]consumer.State, error) {
	kvs, err := st.List(ctx, cursorDir(n))
	if err != nil {
		return nil, err
	}
	out := make(map[string]consumer.State, len(kvs))
	for _, kv := range kvs {
		name := strings.TrimPrefix(kv.Key, cursorDir(n))
		if name == "" || strings.Contains(name, "/") {
			continue
		}
		var cs consumer.State
		if err := json.Unmarshal(kv.Value, &cs); err != nil {
			continue
		}
		out[name] = cs
	}
	return out, nil
}

// countCursors counts tenant's persisted durable consumers in the region
// (for account info: a tenant's count never includes another tenant's).
func countCursors(ctx context.Context, st *meta.Store, tenant string) int {
	if tenant == "" {
		return 0
	}
	kvs, err := st.List(ctx, cursorsPrefix+tenant+"/")
	if err != nil {
		return 0
	}
	return len(kvs)
}

// writeCursor persists a cursor under the topic's ownership condition.
func (t *topic) writeCursor(ctx context.Context, name string, cs *consumer.State) error {
	b, err := json.Marshal(cs)
	if err != nil {
		return err
	}
	_, err = t.s.cfg.Store.Txn(ctx, []meta.Cond{t.own.Cond()}, meta.OpPut(cursorKey(t.name, name), b))
	return err
}

// deleteCursor removes a cursor under the topic's ownership condition.
func (t *topic) deleteCursor(ctx context.Context, name string) error {
	_, err := t.s.cfg.Store.Txn(ctx, []meta.Cond{t.own.Cond()}, meta.OpDelete(cursorKey(t.name, name)))
	return err
}
