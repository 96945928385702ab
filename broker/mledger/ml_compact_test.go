package mledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stratamesh/strata/tenancy"
)

// storedFlags reads every entry of name's ledgers from the bookies and
// returns the flags byte of each message's record, by topic sequence,
// checking that the entries decode with the topic's Local (TopicMeta)
// and that each record has the size EncodedSize gives it.
func (e *env) storedFlags(name tenancy.Name) map[uint64]byte {
	e.t.Helper()
	ctx := testCtx(e.t)
	tm, _, err := Load(ctx, e.st, name)
	if err != nil {
		e.t.Fatal(err)
	}
	flags := map[uint64]byte{}
	for _, li := range tm.Ledgers {
		if li.Entries <= 0 {
			continue
		}
		r, err := e.lc.OpenReader(ctx, li.ID)
		if err != nil {
			e.t.Fatal(err)
		}
		ents, err := r.Read(ctx, 0, li.Entries-1)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, ent := range ents {
			msgs, err := DecodeBatch(ent.Payload, tm.Local())
			if err != nil {
				e.t.Fatalf("ledger %d entry %d: %v", li.ID, ent.ID, err)
			}
			off := batchHeaderSize
			for i := range msgs {
				flags[msgs[i].Seq] = ent.Payload[off]
				off += EncodedSize(&msgs[i], tm.Local())
			}
			if off != len(ent.Payload) {
				e.t.Fatalf("ledger %d entry %d: records end at %d of %d bytes", li.ID, ent.ID, off, len(ent.Payload))
			}
		}
	}
	return flags
}

// liveBytes is the sum of the records of ml's live messages, read back.
func liveBytes(t *testing.T, ml *ML, l Local) uint64 {
	t.Helper()
	var n uint64
	st := ml.State()
	for s := st.FirstSeq; s <= st.LastSeq; s++ {
		m, err := ml.Read(testCtx(t), s)
		if err != nil {
			t.Fatalf("read %d: %v", s, err)
		}
		n += uint64(EncodedSize(&m, l))
	}
	return n
}

// TestCompactLocalRecords: local publishes are stored compact (only the
// origin sequence: flagLocalOrigin|flagOriginNow), replicated ones in
// full; the first Open with a region records it as TopicMeta.Region; and
// every message read back — from the cache, from the bookies by Read,
// ReadLocal and NextLocal, and by a new owner's replay after a crash —
// carries its complete origin. Bytes count the compact records.
func TestCompactLocalRecords(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.create(testTopic, `{}`)
	mod := []func(*Config){batching(2, 5), func(c *Config) { c.Limits.RolloverEntries = 8 }}
	ml := e.open(testTopic, e.config(testTopic, nil, mod...))
	tm, _, _ := Load(ctx, e.st, testTopic)
	if tm.Region != testRegion || tm.Local() != (Local{Region: testRegion, Incarnation: ml.Incarnation()}) {
		t.Fatalf("TopicMeta region %q, local %+v after the first Open", tm.Region, tm.Local())
	}
	e1 := remote("E1")
	var r uint64
	local := map[uint64]bool{}
	for i := range 30 {
		if i%4 == 3 {
			r++
			mustReplicate(t, ml, e1, r)
			continue
		}
		local[mustPublish(t, ml, "l", fmt.Sprint(i), PublishOptions{MsgID: fmt.Sprint("id-", i)})] = true
	}
	sc := scanOrigins(t, ml, 1) // from the cache
	l := Local{Region: testRegion, Incarnation: ml.Incarnation()}
	if st := ml.State(); st.Bytes != liveBytes(t, ml, l) {
		t.Fatalf("State.Bytes %d, records %d", st.Bytes, liveBytes(t, ml, l))
	}
	ml.Drop() // a crash: the next owner recovers the open ledger and replays
	ml2 := e.open(testTopic, e.config(testTopic, nil, mod...))
	if sc2 := scanOrigins(t, ml2, 1); fmt.Sprint(sc2) != fmt.Sprint(sc) {
		t.Fatalf("after takeover %v, before %v", sc2, sc)
	}
	if st := ml2.State(); st.Bytes != liveBytes(t, ml2, l) || st.LastOriginSeq != uint64(len(local)) {
		t.Fatalf("after takeover: State %+v, records %d bytes, %d local", st, liveBytes(t, ml2, l), len(local))
	}
	if err := ml2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	flags := e.storedFlags(testTopic)
	if len(flags) != 30 {
		t.Fatalf("%d records stored, want 30", len(flags))
	}
	for seq, f := range flags {
		want := flagOrigin // replicated: an earlier origin time
		if local[seq] {
			want = flagLocalOrigin | flagOriginNow
		}
		if f != want {
			t.Fatalf("seq %d (local %v): flags %#02x, want %#02x", seq, local[seq], f, want)
		}
	}
	// A third owner reads everything from the bookies (its cache is
	// empty after a graceful close).
	ml3 := e.open(testTopic, e.config(testTopic, nil, mod...))
	scanOrigins(t, ml3, 1)
	if tm, _, _ := Load(ctx, e.st, testTopic); tm.Region != testRegion {
		t.Fatalf("TopicMeta region %q after reopening", tm.Region)
	}
}

// TestCompactRegionRenamed: TopicMeta.Region, not Config.Region, names
// the compact records' region. A region reopening its topic under
// another name (renamed, or rebuilt over the same metadata) reads its
// old local messages with the name they were published under; its own
// local messages are stored with full origins under the new name; the
// recorded region never changes; and each reads back right after
// another takeover, under either name.
func TestCompactRegionRenamed(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.create(testTopic, `{}`)
	ml := e.open(testTopic, e.config(testTopic, nil))
	inc := ml.Incarnation()
	for i := range 3 {
		mustPublish(t, ml, "l", fmt.Sprint(i), PublishOptions{})
	}
	if err := ml.Close(ctx); err != nil {
		t.Fatal(err)
	}
	const renamed = "us-east-2"
	check := func(ml *ML) {
		t.Helper()
		for s := uint64(1); s <= 4; s++ {
			m, err := ml.Read(ctx, s)
			want := testRegion
			if s == 4 {
				want = renamed
			}
			if err != nil || m.Origin.Region != want || m.Origin.Incarnation != inc || m.Origin.Seq != s || !m.Origin.Time.Equal(m.Time) {
				t.Fatalf("seq %d: origin %+v, %v; want region %s", s, m.Origin, err, want)
			}
		}
	}
	for _, region := range []string{renamed, renamed, testRegion} {
		ml := e.open(testTopic, e.config(testTopic, nil, func(c *Config) { c.Region = region }))
		if ml.State().LastSeq == 3 { // the first time: one local message under the new name
			if seq := mustPublish(t, ml, "l", "renamed", PublishOptions{}); seq != 4 {
				t.Fatalf("seq %d", seq)
			}
		}
		check(ml)
		if err := ml.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if tm, _, _ := Load(ctx, e.st, testTopic); tm.Region != testRegion || tm.Incarnation != inc {
			t.Fatalf("TopicMeta region %q incarnation %q after opening as %s", tm.Region, tm.Incarnation, region)
		}
	}
	flags := e.storedFlags(testTopic)
	for s, want := range map[uint64]byte{1: flagLocalOrigin | flagOriginNow, 3: flagLocalOrigin | flagOriginNow, 4: flagOrigin | flagOriginNow} {
		if flags[s] != want {
			t.Fatalf("seq %d: flags %#02x, want %#02x", s, flags[s], want)
		}
	}
}

// TestCompactWithoutRegion: a topic's compact records need its
// TopicMeta.Region. Were it lost (metadata rewritten without it) and the
// ML had no Config.Region to record, reads fail with ErrNoLocalStream
// (and ErrCorrupt) instead of returning messages with an empty region;
// an ML with a region records it again.
func TestCompactWithoutRegion(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.create(testTopic, `{}`)
	ml := e.open(testTopic, e.config(testTopic, nil))
	mustPublish(t, ml, "l", "x", PublishOptions{})
	if err := ml.Close(ctx); err != nil {
		t.Fatal(err)
	}
	tm, _, err := Load(ctx, e.st, testTopic)
	if err != nil {
		t.Fatal(err)
	}
	tm.Region = ""
	b, _ := json.Marshal(tm)
	if _, err := e.st.Put(ctx, TopicKey(testTopic), b); err != nil {
		t.Fatal(err)
	}
	ml2 := e.open(testTopic, e.config(testTopic, nil, func(c *Config) { c.Region = "" }))
	if m, err := ml2.Read(ctx, 1); !errors.Is(err, ErrNoLocalStream) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read without the topic's region: %+v, %v", m, err)
	}
	if err := ml2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ml3 := e.open(testTopic, e.config(testTopic, nil))
	if m, err := ml3.Read(ctx, 1); err != nil || m.Origin.Region != testRegion || m.Origin.Incarnation != tm.Incarnation {
		t.Fatalf("read with the region recorded again: %+v, %v", m, err)
	}
}
