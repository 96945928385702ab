package jetstream

import (
	"testing"

	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/tenancy"
)

func TestWithHeader(t *testing.T) {
	for _, tc := range []struct{ hdr, want string }{
		{"", "NATS/1.0\r\nNats-Pin-Id: P\r\n\r\n"},
		{"NATS/1.0\r\n\r\n", "NATS/1.0\r\nNats-Pin-Id: P\r\n\r\n"},
		{"NATS/1.0\r\nA: 1\r\n\r\n", "NATS/1.0\r\nA: 1\r\nNats-Pin-Id: P\r\n\r\n"},
	} {
		hdr := []byte(tc.hdr)
		if got := string(withHeader(hdr, jsapi.HdrPinID, "P")); got != tc.want {
			t.Errorf("withHeader(%q) = %q, want %q", tc.hdr, got, tc.want)
		}
		if string(hdr) != tc.hdr {
			t.Errorf("withHeader changed its input to %q", hdr)
		}
	}
	if id := newPinID(); len(id) != pinIDLen || id == newPinID() {
		t.Errorf("pin id %q", id)
	}
}

func TestTopicSubject(t *testing.T) {
	name := tenancy.Name{Tenant: "demo", Namespace: "events", Topic: "orders"}
	for _, tc := range []struct {
		subjects []string
		want     string
	}{
		{[]string{"demo.events.orders", "demo.events.orders.>"}, "demo.events.orders"},
		{[]string{"demo.events.orders.eu.*"}, "demo.events.orders"},
		{[]string{"ord.>"}, ""},
		{[]string{"demo.events.ordersx"}, ""},
	} {
		st := &stream{name: name, config: jsapi.StreamConfig{Subjects: tc.subjects}}
		if got := topicSubject(st); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.subjects, got, tc.want)
		}
	}
}
