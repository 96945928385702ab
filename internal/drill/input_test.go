package drill

import (
	"errors"
	"strings"
	"testing"

	"github.com/stratamesh/strata/tenancy"
)

func TestParseRegionURLs(t *testing.T) {
	r, u, err := ParseRegionURLs("us-east=nats://10.0.1.10:4222, 10.0.1.11:4222,tls://b3.example:4443")
	if err != nil || r != "us-east" || strings.Join(u, " ") != "nats://10.0.1.10:4222 nats://10.0.1.11:4222 tls://b3.example:4443" {
		t.Fatalf("got %q %q %v", r, u, err)
	}
	for in, want := range map[string]string{
		"us-east":                  "want REGION=URL",
		"=nats://h:1":              `region ""`,
		"us east=nats://h:1":       `region "us east"`,
		"r=":                       `URL "nats://"`,
		"r=http://h:1":             `URL "http://h:1"`,
		"r=nats://h":               `URL "nats://h"`,
		"r=nats://:4222":           `URL "nats://:4222"`,
		"r=nats://h:1,,nats://h:2": `URL "nats://"`,
		"r=nats://h:1/x":           `URL "nats://h:1/x"`,
		"r=nats://h:1\x7f":         "want nats://host:port",
	} {
		_, _, err := ParseRegionURLs(in)
		if !errors.Is(err, ErrNATSFlag) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRegionURLs(%q) = %v; want ErrNATSFlag with %q", in, err, want)
		}
	}
}

func FuzzParseRegionURLs(f *testing.F) {
	for _, s := range []string{"us-east=nats://h:4222", "r=h:1,h:2", "=", "r=tls://[::1]:4222", "x=nats://h:1/%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, urls, err := ParseRegionURLs(s)
		if err != nil {
			if !errors.Is(err, ErrNATSFlag) {
				t.Fatalf("%q: %v is not ErrNATSFlag", s, err)
			}
			return
		}
		if !tenancy.ValidToken(r) || len(urls) == 0 {
			t.Fatalf("%q: accepted region %q urls %q", s, r, urls)
		}
		for _, u := range urls {
			if !strings.HasPrefix(u, "nats://") && !strings.HasPrefix(u, "tls://") {
				t.Fatalf("%q: accepted URL %q", s, u)
			}
		}
	})
}

func TestChooseNamespace(t *testing.T) {
	ns := func(t, n string) tenancy.NSName { return tenancy.NSName{Tenant: t, Namespace: n} }
	all := []string{"a", "b", "c"}
	cands := []Candidate{
		{NS: ns("metered", "events"), Replication: all, Quotas: true, AutoCreate: true},
		{NS: ns("demo", "streams"), Replication: all, AutoCreate: true},
		{NS: ns("demo", "events"), Replication: all, AutoCreate: true},
		{NS: ns("demo", "alone"), Replication: []string{"a"}, AutoCreate: true},
		{NS: ns("demo", "closed"), Replication: all},
		{NS: ns("demo", "bc"), Replication: []string{"b", "c"}, AutoCreate: true},
	}
	if c, err := ChooseNamespace(cands, "a", ""); err != nil || c.NS != ns("demo", "events") {
		t.Fatalf("a: %v %v", c.NS, err)
	}
	if c, err := ChooseNamespace(cands, "b", ""); err != nil || c.NS != ns("demo", "bc") {
		t.Fatalf("b: %v %v", c.NS, err)
	}
	if c, err := ChooseNamespace(cands[:1], "a", ""); err != nil || c.NS != ns("metered", "events") {
		t.Fatalf("only a quota tenant: %v %v", c.NS, err)
	}
	if _, err := ChooseNamespace(cands[3:5], "a", ""); !errors.Is(err, ErrNoNamespace) || !strings.Contains(err.Error(), "give --namespace") {
		t.Fatalf("none: %v", err)
	}
	// With --survivor the namespace must replicate to it too.
	cands = append(cands, Candidate{NS: ns("demo", "ac"), Replication: []string{"a", "c"}, AutoCreate: true})
	if c, err := ChooseNamespace(cands[3:], "a", "c"); err != nil || c.NS != ns("demo", "ac") {
		t.Fatalf("a to c: %v %v", c.NS, err)
	}
	if _, err := ChooseNamespace(cands[3:5], "a", "c"); !errors.Is(err, ErrNoNamespace) || !strings.Contains(err.Error(), "replicates a to --survivor c") {
		t.Fatalf("none to c: %v", err)
	}
}
