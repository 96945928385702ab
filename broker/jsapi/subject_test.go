package jsapi

import (
	"errors"
	"strings"
	"testing"
)

func TestParseAPISubject(t *testing.T) {
	for _, tc := range []struct {
		subj string
		want APIRequest
	}{
		{"$JS.API.INFO", APIRequest{Kind: KindAccountInfo}},
		{"$JS.hub.API.INFO", APIRequest{Kind: KindAccountInfo, Domain: "hub"}},
		{"$JS.API.STREAM.CREATE.ORDERS", APIRequest{Kind: KindStreamCreate, Stream: "ORDERS"}},
		{"$JS.API.STREAM.UPDATE.ORDERS", APIRequest{Kind: KindStreamUpdate, Stream: "ORDERS"}},
		{"$JS.API.STREAM.INFO.ns:topic", APIRequest{Kind: KindStreamInfo, Stream: "ns:topic"}},
		{"$JS.API.STREAM.DELETE.S", APIRequest{Kind: KindStreamDelete, Stream: "S"}},
		{"$JS.API.STREAM.PURGE.S", APIRequest{Kind: KindStreamPurge, Stream: "S"}},
		{"$JS.API.STREAM.NAMES", APIRequest{Kind: KindStreamNames}},
		{"$JS.API.STREAM.LIST", APIRequest{Kind: KindStreamList}},
		{"$JS.API.CONSUMER.CREATE.S", APIRequest{Kind: KindConsumerCreate, Stream: "S"}},
		{"$JS.API.CONSUMER.CREATE.S.c", APIRequest{Kind: KindConsumerCreate, Stream: "S", Consumer: "c"}},
		{"$JS.API.CONSUMER.CREATE.ORDERS.proc.ord.>", APIRequest{Kind: KindConsumerCreate, Stream: "ORDERS", Consumer: "proc", Filter: "ord.>"}},
		{"$JS.API.CONSUMER.CREATE.S.c.a.*.b", APIRequest{Kind: KindConsumerCreate, Stream: "S", Consumer: "c", Filter: "a.*.b"}},
		{"$JS.API.CONSUMER.INFO.S.c", APIRequest{Kind: KindConsumerInfo, Stream: "S", Consumer: "c"}},
		{"$JS.API.CONSUMER.DELETE.S.c", APIRequest{Kind: KindConsumerDelete, Stream: "S", Consumer: "c"}},
		{"$JS.API.CONSUMER.NAMES.S", APIRequest{Kind: KindConsumerNames, Stream: "S"}},
		{"$JS.API.CONSUMER.LIST.S", APIRequest{Kind: KindConsumerList, Stream: "S"}},
		{"$JS.API.CONSUMER.MSG.NEXT.S.c", APIRequest{Kind: KindConsumerNext, Stream: "S", Consumer: "c"}},
		{"$JS.API.CONSUMER.UNPIN.S.c", APIRequest{Kind: KindConsumerUnpin, Stream: "S", Consumer: "c"}},
		{"$JS.API.STREAM.MSG.GET.S", APIRequest{Kind: KindStreamMsgGet, Stream: "S"}},
		{"$JS.API.DIRECT.GET.S", APIRequest{Kind: KindDirectGet, Stream: "S"}},
		{"$JS.API.DIRECT.GET.S.a.b", APIRequest{Kind: KindDirectGet, Stream: "S", Filter: "a.b"}},
		{"$JS.API.CONSUMER.DURABLE.CREATE.S.c", APIRequest{Kind: KindConsumerDurableCreate, Stream: "S", Consumer: "c"}},
		// A stream literally named like an operation token is still a name.
		{"$JS.API.STREAM.INFO.INFO", APIRequest{Kind: KindStreamInfo, Stream: "INFO"}},
	} {
		got, err := ParseAPISubject(tc.subj)
		if err != nil {
			t.Errorf("%s: %v", tc.subj, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.subj, got, tc.want)
		}
		if s := got.Subject(); s != tc.subj {
			t.Errorf("%s: Subject() = %s", tc.subj, s)
		}
	}
}

func TestParseAPISubjectErrors(t *testing.T) {
	for _, tc := range []struct {
		subj string
		want error
	}{
		{"", ErrNotAPISubject},
		{"foo.bar", ErrNotAPISubject},
		{"$JS.ACK.S.c.1.1.1.1.0", ErrNotAPISubject},
		{"$JS.API", ErrNotAPISubject},
		{"$JS.*.API.INFO", ErrNotAPISubject},
		{"$JS.API.", ErrUnknownAPI},
		{"$JS.API.FOO", ErrUnknownAPI},
		{"$JS.API.STREAM", ErrUnknownAPI},
		{"$JS.API.STREAM.SNAPSHOT.S", ErrUnknownAPI},
		{"$JS.API.CONSUMER.MSG", ErrUnknownAPI},
		{"$JS.API.CONSUMER.PAUSE.S.c", ErrUnknownAPI},
		{"$JS.API.INFO.x", ErrMalformedAPISubject},
		{"$JS.API.STREAM.", ErrUnknownAPI},
		{"$JS.API.STREAM.NAMES.", ErrMalformedAPISubject},
		{"$JS.API.INFO.", ErrMalformedAPISubject},
		{"$JS.API.STREAM.CREATE", ErrMalformedAPISubject},
		{"$JS.API.STREAM.CREATE.", ErrMalformedAPISubject},
		{"$JS.API.STREAM.CREATE.a.b", ErrMalformedAPISubject},
		{"$JS.API.STREAM.INFO.*", ErrMalformedAPISubject},
		{"$JS.API.STREAM.INFO.>", ErrMalformedAPISubject},
		{"$JS.API.STREAM.NAMES.x", ErrMalformedAPISubject},
		{"$JS.API.CONSUMER.INFO.S", ErrMalformedAPISubject},
		{"$JS.API.CONSUMER.INFO.S.c.d", ErrMalformedAPISubject},
		{"$JS.API.CONSUMER.INFO.S.", ErrMalformedAPISubject},
		{"$JS.API.CONSUMER.MSG.NEXT.S", ErrMalformedAPISubject},
		{"$JS.API.CONSUMER.CREATE.S..f", ErrMalformedAPISubject},
		{"$JS.API.CONSUMER.CREATE.S.c.", ErrMalformedAPISubject},
		{"$JS.API.CONSUMER.CREATE.S.c.>.x", ErrMalformedAPISubject},
		{"$JS.API.CONSUMER.CREATE.S.*", ErrMalformedAPISubject},
	} {
		_, err := ParseAPISubject(tc.subj)
		if !errors.Is(err, tc.want) {
			t.Errorf("%q: got %v, want %v", tc.subj, err, tc.want)
		}
	}
}

func TestKinds(t *testing.T) {
	later := map[Kind]bool{KindStreamMsgGet: true, KindDirectGet: true, KindConsumerDurableCreate: true}
	for k := KindUnknown + 1; k < numKinds; k++ {
		if k.InSubset() == later[k] {
			t.Errorf("%v: InSubset = %v", k, k.InSubset())
		}
		rt := k.ResponseType()
		if (rt == "") != (k == KindConsumerNext || k == KindDirectGet) {
			t.Errorf("%v: ResponseType %q", k, rt)
		}
		if rt != "" && !strings.HasPrefix(rt, "io.nats.jetstream.api.v1.") {
			t.Errorf("%v: ResponseType %q", k, rt)
		}
	}
	if KindUnknown.InSubset() || KindUnknown.String() != "UNKNOWN" || Kind(200).String() != "UNKNOWN" {
		t.Error("KindUnknown")
	}
}

func TestValidStreamName(t *testing.T) {
	for _, ok := range []string{"ORDERS", "ns:topic", "a-b_c", "ünï"} {
		if !ValidStreamName(ok) {
			t.Errorf("%q rejected", ok)
		}
	}
	for _, bad := range []string{"", "a.b", "a*", "a>", "a/b", `a\b`, "a b", "a\tb", "a\x00", "a\x7f"} {
		if ValidStreamName(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParseAPISubject(f *testing.F) {
	for _, s := range []string{
		"$JS.API.INFO", "$JS.d.API.STREAM.CREATE.S", "$JS.API.CONSUMER.CREATE.S.c.a.>",
		"$JS.API.CONSUMER.MSG.NEXT.S.c", "$JS.API.CONSUMER.DURABLE.CREATE.S.c",
		"$JS.API.DIRECT.GET.S.x.*", "$JS.API.STREAM.MSG.GET.S", "$JS.API.STREAM..X",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseAPISubject(s)
		if err != nil {
			if r != (APIRequest{}) {
				t.Fatalf("%q: error with non-zero result %+v", s, r)
			}
			if !errors.Is(err, ErrNotAPISubject) && !errors.Is(err, ErrUnknownAPI) && !errors.Is(err, ErrMalformedAPISubject) {
				t.Fatalf("%q: unclassified error %v", s, err)
			}
			return
		}
		if r.Kind == KindUnknown || r.Kind >= numKinds {
			t.Fatalf("%q: kind %d", s, r.Kind)
		}
		if got := r.Subject(); got != s {
			t.Fatalf("%q: Subject() = %q", s, got)
		}
		for _, n := range []string{r.Domain, r.Stream, r.Consumer} {
			if n != "" && !validNameToken(n) {
				t.Fatalf("%q: bad name %q in %+v", s, n, r)
			}
		}
		if r.Kind != KindAccountInfo && r.Kind != KindStreamNames && r.Kind != KindStreamList && r.Stream == "" {
			t.Fatalf("%q: no stream", s)
		}
	})
}
