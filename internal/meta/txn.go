package meta

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Cond is one condition of a Txn: Key's mod revision must equal ModRevision
// (0: the key must be absent). An owner conditions its writes on its
// ownership key: Cond{Key: l.Key(), ModRevision: l.Rev()}.
type Cond struct {
	Key         string
	ModRevision int64
}

type opKind int

const (
	opPut opKind = iota + 1
	opDelete
)

// Op is one write of a Txn; build it with OpPut or OpDelete.
type Op struct {
	kind  opKind
	key   string
	value []byte
	opts  []PutOption
}

// OpPut writes key.
func OpPut(key string, value []byte, opts ...PutOption) Op {
	return Op{kind: opPut, key: key, value: value, opts: opts}
}

// OpDelete deletes key (nothing if absent).
func OpDelete(key string) Op { return Op{kind: opDelete, key: key} }

// Txn applies ops atomically if every cond holds, and returns the revision
// of the transaction. If a cond fails nothing is written and the error is a
// *ConflictError naming the first failing cond (in the order given) with
// the key's actual mod revision. etcd caps a transaction at 128 conditions
// and 128 operations by default (--max-txn-ops); puts of the same key twice
// in one Txn are rejected by etcd.
func (s *Store) Txn(ctx context.Context, conds []Cond, ops ...Op) (int64, error) {
	if err := s.check("txn", "", false); err != nil {
		return 0, err
	}
	cmps := make([]clientv3.Cmp, 0, len(conds))
	gets := make([]clientv3.Op, 0, len(conds))
	for _, c := range conds {
		if err := s.check("txn", c.Key, true); err != nil {
			return 0, err
		}
		k := s.abs(c.Key)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", c.ModRevision))
		gets = append(gets, clientv3.OpGet(k, clientv3.WithKeysOnly()))
	}
	thens := make([]clientv3.Op, 0, len(ops))
	for _, o := range ops {
		if err := s.check("txn", o.key, true); err != nil {
			return 0, err
		}
		switch o.kind {
		case opPut:
			thens = append(thens, clientv3.OpPut(s.abs(o.key), string(o.value), putOpts(o.opts)...))
		case opDelete:
			thens = append(thens, clientv3.OpDelete(s.abs(o.key)))
		default:
			return 0, fmt.Errorf("meta: txn: zero Op for %q (use OpPut or OpDelete)", o.key)
		}
	}
	resp, err := s.client.Txn(ctx).If(cmps...).Then(thens...).Else(gets...).Commit()
	if err != nil {
		key := ""
		if len(ops) > 0 {
			key = ops[0].key
		}
		return 0, s.wrapErr("txn", key, err)
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil
	}
	// The Else branch read every cond key in the same transaction, so the
	// values are the ones the conditions saw.
	for i, c := range conds {
		var actual int64
		if kvs := resp.Responses[i].GetResponseRange().GetKvs(); len(kvs) > 0 {
			actual = kvs[0].ModRevision
		}
		if actual != c.ModRevision {
			return 0, &ConflictError{Key: c.Key, Expected: c.ModRevision, Actual: actual}
		}
	}
	return 0, fmt.Errorf("meta: txn failed but every condition holds on re-read: %w", ErrConflict)
}
