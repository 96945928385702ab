package meta

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// Sentinel errors. Every error returned by this package that matches one of
// these does so through errors.Is; the returned error itself carries the
// operation and the key.
var (
	// ErrNotFound: the key (or the election's leader) does not exist.
	ErrNotFound = errors.New("meta: not found")
	// ErrConflict: a revision condition did not hold. The concrete error is
	// a *ConflictError naming the key and the revisions.
	ErrConflict = errors.New("meta: conflict")
	// ErrLeaseLost: the lease named in a write, or backing a campaign, no
	// longer exists (expired, revoked, or no longer kept alive).
	ErrLeaseLost = errors.New("meta: lease lost")
	// ErrClosed: the Store has been closed.
	ErrClosed = errors.New("meta: store closed")
	// ErrInvalidKey: an empty key was given where a key is required.
	ErrInvalidKey = errors.New("meta: invalid key")
	// ErrInvalidTTL: a lease TTL below MinLeaseTTL.
	ErrInvalidTTL = errors.New("meta: invalid lease TTL")
)

// ConflictError reports a failed revision condition (CAS, DeleteIf, Txn).
// errors.Is(err, ErrConflict) holds for it.
type ConflictError struct {
	// Key is the key whose condition failed, relative to the Store's prefix.
	Key string
	// Expected is the mod revision the caller required (0 = absent).
	Expected int64
	// Actual is the key's mod revision when the condition was evaluated
	// (0 = absent).
	Actual int64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("meta: conflict on %q: expected mod revision %d, actual %d", e.Key, e.Expected, e.Actual)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// wrapErr turns an etcd client error into this package's vocabulary:
// ErrClosed once the Store is closed, ErrLeaseLost for a missing lease,
// context errors kept as they are (wrapped).
func (s *Store) wrapErr(op, key string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case s.isClosed() && !errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("meta: %s %q: %w", op, key, ErrClosed)
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("meta: %s %q: %w (%w)", op, key, ErrLeaseLost, err)
	default:
		return fmt.Errorf("meta: %s %q: %w", op, key, err)
	}
}
