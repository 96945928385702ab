package jetstream

import "testing"

func TestSubjectsOverlap(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"ord.>", "ord.a", true},
		{"ord.*", "ord.a.b", false},
		{"ord.*", "ord.>", true},
		{"ord.a", "ord.b", false},
		{"a.*.c", "a.b.*", true},
		{"a.*.c", "a.b.d", false},
		{"bench", "bench", true},
		{"bench", "bench.x", false},
		{">", "anything.at.all", true},
		{"a.>", "a", false},
		{"*", "a", true},
		{"*", "a.b", false},
	} {
		if got := subjectsOverlap(c.a, c.b); got != c.want {
			t.Errorf("overlap(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := subjectsOverlap(c.b, c.a); got != c.want {
			t.Errorf("overlap(%q, %q) = %v, want %v (symmetry)", c.b, c.a, got, c.want)
		}
	}
}

func TestSubjectMatches(t *testing.T) {
	for _, c := range []struct {
		filter, subj string
		want         bool
	}{
		{"ord.>", "ord.a", true},
		{"ord.>", "ord", false},
		{"ord.*", "ord.a", true},
		{"ord.*", "ord.a.b", false},
		{"ord.a", "ord.a", true},
		{"ord.a", "ord.ab", false},
		{"*.a", "x.a", true},
		{">", "x", true},
	} {
		if got := subjectMatches(c.filter, c.subj); got != c.want {
			t.Errorf("matches(%q, %q) = %v, want %v", c.filter, c.subj, got, c.want)
		}
	}
}

func TestTopicForStream(t *testing.T) {
	for _, c := range []struct {
		name   string
		meta   map[string]string
		want   string
		wantOK bool
	}{
		{"ORDERS", nil, "demo/streams/ORDERS", true},
		{"events:orders", nil, "demo/events/orders", true},
		{"ORDERS", map[string]string{"strata.namespace": "events"}, "demo/events/ORDERS", true},
		{"a+b", nil, "", false},
		{":x", nil, "", false},
	} {
		n, ok := topicForStream("demo", "streams", c.name, c.meta)
		if ok != c.wantOK || (ok && n.String() != c.want) {
			t.Errorf("topicForStream(%q) = %s, %v; want %s, %v", c.name, n, ok, c.want, c.wantOK)
		}
	}
}
