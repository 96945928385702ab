package meta

import (
	"context"
	"encoding/json"
	"fmt"
)

// GetJSON reads key and decodes its value into a T.
func GetJSON[T any](ctx context.Context, s *Store, key string) (T, KV, error) {
	var v T
	kv, err := s.Get(ctx, key)
	if err != nil {
		return v, kv, err
	}
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		return v, kv, fmt.Errorf("meta: decode %q: %w", key, err)
	}
	return v, kv, nil
}

// PutJSON encodes v and writes it to key.
func PutJSON(ctx context.Context, s *Store, key string, v any, opts ...PutOption) (int64, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("meta: encode %q: %w", key, err)
	}
	return s.Put(ctx, key, b, opts...)
}

// CASJSON encodes v and writes it to key if key's mod revision is
// expectModRev (see CAS).
func CASJSON(ctx context.Context, s *Store, key string, v any, expectModRev int64, opts ...PutOption) (int64, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("meta: encode %q: %w", key, err)
	}
	return s.CAS(ctx, key, b, expectModRev, opts...)
}
