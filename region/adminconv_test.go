package region

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/ledger/core"
	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/broker/mledger"
)

// fill sets every exported field of the value v points to (recursively)
// to something non-zero, so that a conversion that drops a field shows.
// Fields named in skip are left zero.
func fill(v reflect.Value, skip map[string]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem(), skip)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)))
			return
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.IsExported() && !skip[f.Name] {
				fill(v.Field(i), skip)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte("xy"))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i), skip)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, skip)
		fill(e, skip)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1) // 1: a valid enum value too (core.StateOpen)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(2)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	}
}

func jsonOf(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func sameJSON(t *testing.T, what string, domain, wire any, drop ...string) {
	t.Helper()
	d, w := jsonOf(t, domain), jsonOf(t, wire)
	for _, k := range drop {
		delete(d, k)
	}
	if !reflect.DeepEqual(d, w) {
		db, _ := json.MarshalIndent(d, "", " ")
		wb, _ := json.MarshalIndent(w, "", " ")
		t.Errorf("%s: the admin type's JSON differs from the domain value's:\ndomain: %s\nadmin:  %s", what, db, wb)
	}
}

// TestAdminConversions: the admin API's types carry every field of the
// domain values region converts (the JSON the routes served before
// admin had its own types): a field added to a domain type and not to
// the conversion fails here.
func TestAdminConversions(t *testing.T) {
	var md core.Metadata
	fill(reflect.ValueOf(&md), nil)
	sameJSON(t, "ledger metadata", md, ledgerView(md), "master_key")

	var st jetstream.TopicStats
	fill(reflect.ValueOf(&st), map[string]bool{"Config": true})
	sameJSON(t, "topic stats", st, topicStats(&st))

	var off mledger.OffloadStatus
	fill(reflect.ValueOf(&off), nil)
	sameJSON(t, "offload status", off, offloadStatus(&off))

	var rs jetstream.ReplicationStats
	fill(reflect.ValueOf(&rs), nil)
	sameJSON(t, "replication stats", rs, replicationStats(rs))
}
