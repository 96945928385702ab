package topology

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/stratamesh/strata/tenancy"
)

// The checks run in two passes over the decoded Mesh. checkMesh runs before
// defaults are applied, so it sees what the file says (the index tells a
// field written as 0 from one left out); checkResolved runs after, on
// what the file means (a region's bookie count against its ensemble,
// generated node ids). Both report every problem and never stop early.

// maxCount bounds brokers, bookies and ledger sizes: far above any real
// region, low enough that resolving generated nodes stays cheap.
const maxCount = 1000

// checkMesh reports problems in m as written.
func checkMesh(r *report, m *Mesh) {
	r.requireToken("mesh", m.Name)
	r.checkDefaults(&m.Defaults)
	if !r.ix.has("regions") {
		r.missing("regions")
	} else if len(m.Regions) == 0 {
		r.errorf("regions", "must list at least one region")
	}
	names := make([]string, len(m.Regions))
	for i := range m.Regions {
		names[i] = m.Regions[i].Name
		r.checkRegion(elem("regions", i), &m.Regions[i])
	}
	r.unique("regions", "name", "region", names)
	r.checkPortClashes(m)
	r.checkJournalDirClashes(m)
	r.checkTenants(m)
	r.checkTLS(m)
	if a := m.Auth; a != nil && a.SuperuserTokenSHA256 != "" && !isHex64(a.SuperuserTokenSHA256) {
		r.errorf("auth.superuser_token_sha256", "want 64 hex digits (the SHA-256 of the token, e.g. `printf %%s TOKEN | sha256sum`)")
	}
	if a := m.Auth; a != nil && a.NATS != nil {
		r.checkNATSAuth(a)
	}
}

func (r *report) checkDefaults(d *Defaults) {
	if d.Ledger != nil {
		r.checkLedger("defaults.ledger", d.Ledger)
	}
	if d.Rollover != nil {
		r.checkRollover("defaults.rollover", d.Rollover)
	}
}

// requireToken checks a required name or id: present, non-empty, and made
// of letters, digits, '-' and '_'.
func (r *report) requireToken(path, value string) {
	switch {
	case value == "":
		r.missing(path)
	case !tenancy.ValidToken(value):
		r.errorf(path, `%s is not a valid name: use letters, digits, "-" and "_"`, quoteShort(value))
	}
}

// unique reports the second and later uses of a name among the items of
// list (items[i].key holds names[i]), naming the line of the first.
func (r *report) unique(list, key, what string, names []string) {
	first := map[string]string{}
	for i, name := range names {
		if name == "" {
			continue
		}
		p := field(elem(list, i), key)
		if f, dup := first[name]; dup {
			r.errorf(p, "duplicate %s %q (first at line %d)", what, name, r.ix.at(f).line)
			continue
		}
		first[name] = p
	}
}

// atLeast reports an integer field written below min.
func (r *report) atLeast(path string, v, lo int64) bool {
	if r.ix.has(path) && v < lo {
		r.errorf(path, "must be at least %d, got %d", lo, v)
		return false
	}
	return true
}

// checkLedger checks E ≥ Qw ≥ Qa ≥ 1, all three required. Each field
// is compared with the nearest valid one above it, so {E2, Qw3, Qa4}
// reports both quorums.
func (r *report) checkLedger(p string, l *Ledger) {
	e, w, a := field(p, "ensemble"), field(p, "write_quorum"), field(p, "ack_quorum")
	for _, f := range []string{e, w, a} {
		if !r.ix.has(f) {
			r.missing(f)
		}
	}
	okE := r.ix.has(e) && r.atLeast(e, int64(l.Ensemble), 1)
	if okE && l.Ensemble > maxCount {
		r.errorf(e, "must be at most %d, got %d", maxCount, l.Ensemble)
	}
	okE = okE && l.Ensemble <= maxCount
	okW := r.ix.has(w) && r.atLeast(w, int64(l.WriteQuorum), 1)
	if okW && okE && l.WriteQuorum > l.Ensemble {
		r.errorf(w, "%d is larger than ensemble %d", l.WriteQuorum, l.Ensemble)
		okW = false
	}
	if !r.ix.has(a) || !r.atLeast(a, int64(l.AckQuorum), 1) {
		return
	}
	switch {
	case okW && l.AckQuorum > l.WriteQuorum:
		r.errorf(a, "%d is larger than write_quorum %d", l.AckQuorum, l.WriteQuorum)
	case !okW && okE && l.AckQuorum > l.Ensemble: // write_quorum is wrong too
		r.errorf(a, "%d is larger than ensemble %d", l.AckQuorum, l.Ensemble)
	case l.AckQuorum == 1:
		r.warnf(a, "ack_quorum 1: an acknowledged entry may exist on one bookie only")
	}
}

func (r *report) checkRollover(p string, ro *Rollover) {
	r.atLeast(field(p, "max_entries"), ro.MaxEntries, 0)
}

// oneOf reports a written enum field whose value is not allowed.
func (r *report) oneOf(path, what, value string, allowed ...string) {
	if !r.ix.has(path) || slices.Contains(allowed, value) {
		return
	}
	r.errorf(path, "unknown %s %s: want %s", what, quoteShort(value), orList(allowed))
}

// orList writes "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// isHTTPURL reports whether s is an absolute http:// or https:// URL.
func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// isHostPort reports whether s is host:port with a port in 1..65535.
func isHostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// isHex64 reports whether s is 64 hex digits (a SHA-256 in hex).
func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// checkNATSAuth checks auth.nats: both seed files named, and admin auth
// on (the account seeds are only sealed between regions with it).
func (r *report) checkNATSAuth(a *Auth) {
	if !a.Enabled {
		r.errorf("auth.nats", "needs auth.enabled: true (tenants' account keys travel between regions only in batches sealed with the superuser token's hash)")
	}
	for _, f := range []struct{ path, v string }{
		{"auth.nats.operator_seed_file", a.NATS.OperatorSeedFile},
		{"auth.nats.system_account_seed_file", a.NATS.SystemAccountSeedFile},
	} {
		if f.v == "" {
			r.missing(f.path)
		}
	}
	if a.NATS.OperatorSeedFile != "" && a.NATS.OperatorSeedFile == a.NATS.SystemAccountSeedFile {
		r.errorf("auth.nats.system_account_seed_file", "the system account's seed file must not be the operator's (%s)", quoteShort(a.NATS.OperatorSeedFile))
	}
}
