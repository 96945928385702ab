package quotanet

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/stratamesh/strata/tenancy"
	"github.com/stratamesh/strata/tenancy/quota"
)

// Subjects, all in the broker's system subject space (tenants' clients
// never reach it: with NATS accounts on they are confined to their own
// space, and the JetStream layer refuses their publishes on $STRATA.).
// <region> and <id> are topology tokens ([A-Za-z0-9_-]+), so the region
// is always the third token and nothing else can be mistaken for it.
//
//	$STRATA.QUOTA.<region>.coord.<term>  broker → its coordinator of term <term> (Broker.Report, Broker.Hello)
//	$STRATA.QUOTA.<region>.broker.<id>   coordinator → broker <id> (Coordinator.Tick)
//	$STRATA.QUOTA.<region>.leader        coordinator → every broker: its announcement, each interval
//	$STRATA.QUOTA.<region>.wan.<term>    another region's coordinator → this region's of term <term>; term 0: a hello, leases stripped
//	$STRATA.QUOTA.<region>.usage         usage request (payload: a tenant name), answered by the coordinator
//	$STRATA.QUOTA.<region>.reply.<id>.<n> the answers to broker <id>'s usage requests
const subjectPrefix = "$STRATA.QUOTA."

// SubjectPrefix starts every quota subject; the JetStream layer routes
// publishes on it (from other regions' links) to the internal
// subscriptions instead of taking them as its own.
const SubjectPrefix = subjectPrefix

func coordSubject(region string, term uint64) string {
	return subjectPrefix + region + ".coord." + strconv.FormatUint(term, 10)
}
func brokerSubject(region, id string) string { return subjectPrefix + region + ".broker." + id }
func leaderSubject(region string) string     { return subjectPrefix + region + ".leader" }
func wanSubject(region string, term uint64) string {
	return subjectPrefix + region + ".wan." + strconv.FormatUint(term, 10)
}
func usageSubject(region string) string    { return subjectPrefix + region + ".usage" }
func replyPrefix(region, id string) string { return subjectPrefix + region + ".reply." + id + "." }
func replySubject(region, id string, n uint64) string {
	return replyPrefix(region, id) + strconv.FormatUint(n, 10)
}

// ErrBadMessage wraps every refusal of an inbound quota message that
// quota.DecodeMsg accepts but this driver does not: a sender or term that
// does not fit the subject it came on.
var ErrBadMessage = errors.New("quotanet: bad quota message")

// Origins of inbound messages, by subject.
type origin uint8

const (
	fromBroker      origin = iota // on coord.<term>: a broker of this region
	fromCoordinator               // on broker.<id> or leader: this region's coordinator
	fromRegion                    // on wan.<term>: another region's coordinator
)

// decodeInbound parses a quota message that arrived on a subject of
// origin o in region, with regions the mesh's regions: quota.DecodeMsg,
// then a sender that fits o ("broker/<id>" with no term; "region/<region>"
// with a term; "region/<other region>" with a term), and a Sent > 0
// (Sent is echoed back and identifies the sender's message).
func decodeInbound(o origin, region string, regions []string, b []byte) (*quota.Msg, error) {
	m, err := quota.DecodeMsg(b)
	if err != nil {
		return nil, err
	}
	if m.Sent <= 0 {
		return nil, fmt.Errorf("%w: from %q: sent %d is not a time", ErrBadMessage, m.From, m.Sent)
	}
	kind, name, _ := strings.Cut(m.From, "/")
	switch o {
	case fromBroker:
		if kind != "broker" || !tenancy.ValidToken(name) {
			return nil, fmt.Errorf("%w: from %q: want broker/<id> on a coordinator's subject", ErrBadMessage, m.From)
		}
		if m.Term != 0 {
			return nil, fmt.Errorf("%w: from %q: a broker sends no term (got %d)", ErrBadMessage, m.From, m.Term)
		}
	case fromCoordinator:
		if kind != "region" || name != region {
			return nil, fmt.Errorf("%w: from %q: want region/%s on a broker's subject", ErrBadMessage, m.From, region)
		}
		if m.Term == 0 {
			return nil, fmt.Errorf("%w: from %q: a coordinator's message has no term", ErrBadMessage, m.From)
		}
	case fromRegion:
		if kind != "region" || name == region || !slices.Contains(regions, name) {
			return nil, fmt.Errorf("%w: from %q: want region/<another region of the mesh> on the WAN subject", ErrBadMessage, m.From)
		}
		if m.Term == 0 {
			return nil, fmt.Errorf("%w: from %q: a coordinator's message has no term", ErrBadMessage, m.From)
		}
	}
	return m, nil
}

// usageAnswer is the coordinator's answer on a usage request's reply
// subject: the usage, or why there is none.
type usageAnswer struct {
	Usage *quota.Usage `json:"usage,omitempty"`
	Error string       `json:"error,omitempty"`
}

// parseUsageRequest is a usage request's tenant (the payload, a tenant
// name token).
func parseUsageRequest(b []byte) (string, error) {
	t := string(b)
	if err := tenancy.CheckToken("tenant", t); err != nil {
		return "", fmt.Errorf("quotanet: usage request: %w", err)
	}
	return t, nil
}

// ErrUsageAnswer wraps a malformed answer to a usage request.
var ErrUsageAnswer = errors.New("quotanet: bad usage answer")

// ErrCoordinator wraps the error a coordinator answered a usage request
// with.
var ErrCoordinator = errors.New("quotanet: the coordinator refused the usage request")

// decodeUsageAnswer parses an answer to a usage request for tenant: its
// usage (of that tenant, quotas named by quota.Kind, no negative
// figures), or the coordinator's error wrapped in ErrCoordinator.
func decodeUsageAnswer(tenant string, b []byte) (quota.Usage, error) {
	var a usageAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return quota.Usage{}, fmt.Errorf("%w: %v", ErrUsageAnswer, err)
	}
	switch {
	case a.Error != "" && a.Usage != nil:
		return quota.Usage{}, fmt.Errorf("%w: both a usage and an error", ErrUsageAnswer)
	case a.Error != "":
		return quota.Usage{}, fmt.Errorf("%w: %s", ErrCoordinator, a.Error)
	case a.Usage == nil:
		return quota.Usage{}, fmt.Errorf("%w: neither a usage nor an error", ErrUsageAnswer)
	}
	u := *a.Usage
	if u.Tenant != tenant {
		return quota.Usage{}, fmt.Errorf("%w: usage of tenant %q, asked for %q", ErrUsageAnswer, u.Tenant, tenant)
	}
	for _, q := range u.Quotas {
		if _, ok := quota.ParseKind(q.Quota); !ok {
			return quota.Usage{}, fmt.Errorf("%w: unknown quota %q", ErrUsageAnswer, q.Quota)
		}
		bad := q.Limit < 0 || q.Use < 0
		for _, r := range q.Regions {
			bad = bad || r.Use < 0 || r.Share < 0 || r.Cap < 0
		}
		if bad { // JSON has no NaN: negative is the only bad number
			return quota.Usage{}, fmt.Errorf("%w: quota %s: negative figure", ErrUsageAnswer, q.Quota)
		}
	}
	if u.Quotas == nil {
		u.Quotas = []quota.QuotaUsage{}
	}
	return u, nil
}

func encodeUsageAnswer(u *quota.Usage, err error) []byte {
	a := usageAnswer{Usage: u}
	if err != nil {
		a = usageAnswer{Error: err.Error()}
	}
	b, _ := json.Marshal(a)
	return b
}

// parseReplySubject is the request number of a reply subject under
// prefix (replySubject's inverse).
func parseReplySubject(subject, prefix string) (uint64, bool) {
	rest, ok := strings.CutPrefix(subject, prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	return n, err == nil && n > 0
}
