package quota

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleMsg() *Msg {
	e := &Entry{}
	e.Offered[PublishRate], e.Admitted[PublishRate] = 1200, 1000
	e.Lend[PublishRate], e.LendFor[PublishRate] = 42.5, int64(1500*time.Millisecond)
	e.Cap[Connections], e.Caps = 7, 1<<Connections
	return &Msg{From: "region/us-east", Term: 3, Sent: 1_700_000_000_000_000_000, Echo: 1_699_999_999_750_000_000,
		To: "region/eu-west", ToTerm: 2, Tenants: map[string]*Entry{"acme": e}}
}

func TestMsgRoundTrip(t *testing.T) {
	m := sampleMsg()
	got, err := DecodeMsg(m.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("round trip: %+v, want %+v", got, m)
	}
}

// TestDecodeMsgRejects: bad input gets ErrBadMsg and says what was
// wrong.
func TestDecodeMsgRejects(t *testing.T) {
	for _, c := range []struct{ in, says string }{
		{``, "unexpected end"},
		{`not json`, "invalid character"},
		{`[]`, "cannot unmarshal"},
		{`{}`, "no from"},
		{`{"from":"","sent":1}`, "no from"},
		{`{"from":"broker/b","tenants":{"t":null}}`, `tenant "t": null entry`},
		{`{"from":"broker/b","tenants":{"t":{"offered":[-1,0,0,0,0,0]}}}`, "publish_rate: negative or NaN amount"},
		{`{"from":"broker/b","tenants":{"t":{"use":[0,0,0,0,-3,0]}}}`, "connections: negative or NaN amount"},
		{`{"from":"broker/b","tenants":{"t":{"lend_for":[-1,0,0,0,0,0]}}}`, "lend_for -1 ns out of range"},
		{`{"from":"broker/b","tenants":{"t":{"lend_for":[3600000000001,0,0,0,0,0]}}}`, "out of range"},
		{`{"from":"broker/b","sent":"soon"}`, "cannot unmarshal"},
		{`{"from":"broker/b","tenants":{"t":{"caps":256}}}`, "cannot unmarshal"},
	} {
		_, err := DecodeMsg([]byte(c.in))
		if !errors.Is(err, ErrBadMsg) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("DecodeMsg(%s) = %v, want ErrBadMsg saying %q", c.in, err, c.says)
		}
	}
}

// FuzzDecodeMsg: DecodeMsg never panics; what it accepts has a from, no
// negative amount and lend_for in range, and survives Encode and
// DecodeMsg again unchanged.
func FuzzDecodeMsg(f *testing.F) {
	f.Add(sampleMsg().Encode())
	f.Add([]byte(`{"from":"broker/b0","sent":5,"tenants":{"t":{"offered":[1,2,0,0,0,0],"refused":[0,0,0,0,1,0]}}}`))
	f.Add([]byte(`{"from":"region/a","term":1,"sent":9,"echo":3,"to":"broker/b0","tenants":{"t":{"want":[10,0,0,0,0,0],"cap":[0,0,0,0,4,0],"caps":16}}}`))
	f.Add([]byte(`{"from":"x","tenants":{"t":null}}`))
	f.Add([]byte(`{"from":"x","tenants":{"t":{"lend":[1e308,0,0,0,0,0],"lend_for":[3600000000000,0,0,0,0,0]}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMsg(b)
		if err != nil {
			if !errors.Is(err, ErrBadMsg) {
				t.Fatalf("error %v is not ErrBadMsg", err)
			}
			return
		}
		if m.From == "" {
			t.Fatal("accepted a message with no from")
		}
		for name, e := range m.Tenants {
			for k := range NumKinds {
				for _, v := range []float64{e.Offered[k], e.Admitted[k], e.Demand[k], e.Rate[k], e.Use[k], e.Allowance[k], e.Lend[k], e.Want[k], e.Cap[k], e.Refused[k]} {
					if v < 0 || v != v {
						t.Fatalf("accepted %v in tenant %q", v, name)
					}
				}
				if e.LendFor[k] < 0 || e.LendFor[k] > int64(time.Hour) {
					t.Fatalf("accepted lend_for %d", e.LendFor[k])
				}
			}
		}
		again, err := DecodeMsg(m.Encode())
		if err != nil {
			t.Fatalf("re-decoding what was accepted: %v", err)
		}
		if len(m.Tenants) == 0 && len(again.Tenants) == 0 {
			m.Tenants, again.Tenants = nil, nil // an empty map is not sent
		}
		if !reflect.DeepEqual(again, m) {
			t.Fatalf("round trip changed it: %+v -> %+v", m, again)
		}
	})
}
