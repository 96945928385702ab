package region

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/bookie"
	"github.com/stratamesh/strata/bookie/ledger"
	"github.com/stratamesh/strata/broker/bundle"
	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/tenancy"
	"github.com/stratamesh/strata/tiered"
	"github.com/stratamesh/strata/tiered/blob"
	"github.com/stratamesh/strata/topology"
)

// This file is the region side of the admin API: the node's backends
// for package admin's routes (each a small adapter over the node), and
// the mount. The routes, their types, policies and error codes are
// admin's; the adapters turn the node's domain values (jetstream,
// mledger, ledger metadata) into admin's types (adminconv.go) and its
// domain errors into admin's catalog codes.

// adminBackends are the admin routes' backends for this node's role.
func (n *Node) adminBackends() admin.Backends {
	b := admin.Backends{
		Region:  n.cfg.Region,
		Health:  n.admin,
		Metrics: n.tel.Handler(),
		Members: membersAdmin{n},
		Bookies: bookiesAdmin{n},
		Ledgers: ledgersAdmin{n},
	}
	if n.spec.Role == topology.RoleBookie {
		b.Bookie = bookieAdmin{n}
	}
	if n.js != nil {
		b.Topics = topicsAdmin{n}
		b.Subscriptions = topicsAdmin{n}
		b.Offload = topicsAdmin{n}
		b.Bundles = bundlesAdmin{n}
		b.Replication = replicationAdmin{n}
		b.Tier = tierAdmin{n}
		b.Tenancy = tenancyAdmin{n}
		b.Users = usersAdmin{n}
		b.Usage = quotaUsage{n}
		b.Audit = auditAdmin{n}
		b.Decommission = decomAdmin{n}
		b.Regions = tenancyAdmin{n}.regions()
		if n.failover != nil {
			b.RegionStates = n.failover
		}
	}
	return b
}

// mountAdmin mounts the admin routes on the node's admin server, with
// the topology's authorization (admin_tenancy.go; nil: off).
func (n *Node) mountAdmin() error {
	auth, err := n.authenticator()
	if err != nil {
		return err
	}
	admin.Mount(n.admin, admin.Routes(n.adminBackends()), auth)
	return nil
}

func (n *Node) metadataError(err error) *admin.Error {
	return admin.Errorf(admin.CodeMetadataUnavailable, "", "region %s: its metadata (etcd) did not answer: %v", n.cfg.Region, err)
}

// ---- members ----

type membersAdmin struct{ n *Node }

func (a membersAdmin) Members() admin.MembersView { return a.n.Members() }

// ---- bookies ----

type bookieAdmin struct{ n *Node }

func (a bookieAdmin) LocalBookie() admin.BookieView { return a.n.localBookie() }

func (a bookieAdmin) SetReadOnly(_ context.Context, req admin.ReadOnlyRequest) (admin.BookieView, error) {
	return a.n.setReadOnly(req)
}

type bookiesAdmin struct{ n *Node }

func (a bookiesAdmin) Bookies(ctx context.Context) ([]admin.BookieView, error) {
	regs, err := bookie.ListRegistrations(ctx, a.n.store)
	if err != nil {
		return nil, a.n.metadataError(err)
	}
	out := make([]admin.BookieView, len(regs))
	var wg sync.WaitGroup
	for i, g := range regs {
		out[i] = admin.BookieView{ID: g.ID, Instance: g.Instance, Address: g.Address, ReadOnly: g.ReadOnly,
			FreeBytes: g.FreeBytes, TotalBytes: g.TotalBytes, Registered: true}
		wg.Go(func() { liveBookieInfo(ctx, &out[i], a.n.clientTLS()) })
	}
	wg.Wait()
	return out, nil
}

// ---- ledgers ----

type ledgersAdmin struct{ n *Node }

func (a ledgersAdmin) client() (*ledger.Client, error) {
	lc, err := a.n.ledgers()
	if err != nil {
		return nil, admin.Errorf(admin.CodeLedgersUnavailable, "", "region %s: %v", a.n.cfg.Region, err)
	}
	return lc, nil
}

func (a ledgersAdmin) Ledgers(ctx context.Context) ([]admin.LedgerView, error) {
	lc, err := a.client()
	if err != nil {
		return nil, err
	}
	mds, err := lc.List(ctx)
	if err != nil {
		return nil, a.n.metadataError(err)
	}
	out := make([]admin.LedgerView, 0, len(mds))
	for _, md := range mds {
		out = append(out, ledgerView(md))
	}
	return out, nil
}

func (a ledgersAdmin) Ledger(ctx context.Context, id int64) (admin.LedgerView, error) {
	lc, err := a.client()
	if err != nil {
		return admin.LedgerView{}, err
	}
	rd, err := lc.OpenReader(ctx, id)
	if err != nil {
		return admin.LedgerView{}, a.ledgerError(id, err)
	}
	v := ledgerView(rd.Metadata())
	lac := rd.LAC()
	v.LAC = &lac
	return v, nil
}

func (a ledgersAdmin) Entries(ctx context.Context, id, from, to int64) (admin.EntriesView, error) {
	lc, err := a.client()
	if err != nil {
		return admin.EntriesView{}, err
	}
	rd, err := lc.OpenReader(ctx, id)
	if err != nil {
		return admin.EntriesView{}, a.ledgerError(id, err)
	}
	view := admin.EntriesView{Ledger: id, LAC: rd.LAC(), From: from, To: from - 1, Entries: []admin.EntryView{}}
	if last := min(to, rd.LAC()); last >= from {
		entries, err := rd.Read(ctx, from, last)
		if err != nil {
			return admin.EntriesView{}, a.ledgerError(id, err)
		}
		size := 0
		for _, e := range entries {
			if size += len(e.Payload); size > admin.MaxReadBytes && len(view.Entries) > 0 {
				break
			}
			view.Entries = append(view.Entries, admin.EntryView{ID: e.ID, Payload: e.Payload})
			view.To = e.ID
		}
	}
	return view, nil
}

func (a ledgersAdmin) ledgerError(id int64, err error) *admin.Error {
	ids := strconv.FormatInt(id, 10)
	switch {
	case errors.Is(err, ledger.ErrNoLedger):
		return admin.Errorf(admin.CodeNoSuchLedger, "id", "region %s has no ledger %s", a.n.cfg.Region, ids)
	case errors.Is(err, context.DeadlineExceeded):
		return admin.Errorf(admin.CodeTimeout, "", "ledger %s: %v", ids, err)
	default:
		return admin.Errorf(admin.CodeBookiesUnavailable, "", "ledger %s: %v", ids, err)
	}
}

// ---- topics, subscriptions, offload ----

type topicsAdmin struct{ n *Node }

func (a topicsAdmin) Topics(tenant, namespace string) []admin.TopicSummary {
	ts := a.n.js.Topics(tenant, namespace)
	out := make([]admin.TopicSummary, len(ts))
	for i, t := range ts {
		out[i] = topicSummary(t)
	}
	return out
}

func (a topicsAdmin) TopicStats(ctx context.Context, name tenancy.Name) (*admin.TopicStats, error) {
	st, err := a.n.js.TopicStats(ctx, name)
	var apiErr *jsapi.APIError
	switch {
	case err == nil:
		return topicStats(st), nil
	case errors.Is(err, jetstream.ErrTopicNotFound), errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound:
		return nil, a.notFound(name)
	default:
		return nil, admin.Errorf(admin.CodeNoOwner, "", "%v", err)
	}
}

func (a topicsAdmin) notFound(name tenancy.Name) *admin.Error {
	return admin.Errorf(admin.CodeTopicNotFound, "topic", "region %s has no topic %s", a.n.cfg.Region, name)
}

func (a topicsAdmin) PutSubscription(ctx context.Context, name tenancy.Name, sub string, req admin.SubscriptionRequest) error {
	jreq := jetstream.SubscriptionRequest{Replicated: req.Replicated, FilterSubject: req.FilterSubject}
	if rt := req.ResetTo; rt != nil {
		jreq.ResetTo = &jetstream.ResetTo{Time: rt.At()}
		if rt.Seq != nil {
			jreq.ResetTo = &jetstream.ResetTo{Seq: *rt.Seq}
		}
	}
	return a.subscriptionError(name, sub, a.n.js.PutSubscription(ctx, name, sub, jreq))
}

func (a topicsAdmin) DeleteSubscription(ctx context.Context, name tenancy.Name, sub string) error {
	return a.subscriptionError(name, sub, a.n.js.DeleteSubscription(ctx, name, sub))
}

func (a topicsAdmin) subscriptionError(name tenancy.Name, sub string, err error) error {
	var apiErr *jsapi.APIError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrTopicNotFound):
		return a.notFound(name)
	case errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound:
		return admin.Errorf(admin.CodeSubscriptionNotFound, "sub", "topic %s has no subscription %s: %s", name, sub, apiErr.Description)
	case errors.As(err, &apiErr):
		return admin.Errorf(admin.CodeInvalidSubscription, "", "%s", apiErr.Description)
	default:
		return admin.Errorf(admin.CodeNoOwner, "", "%v", err)
	}
}

func (a topicsAdmin) Offload(ctx context.Context, name tenancy.Name, start bool, keep int64) (*admin.OffloadStatus, error) {
	st, err := a.n.js.TopicOffload(ctx, name, jetstream.OffloadRequest{Offload: start, KeepBytes: keep})
	switch {
	case err == nil:
		return offloadStatus(st), nil
	case errors.Is(err, jetstream.ErrTopicNotFound):
		return nil, a.notFound(name)
	case errors.Is(err, jetstream.ErrNoTier):
		return nil, admin.Errorf(admin.CodeNoTier, "", "region %s has no tier to offload to", a.n.cfg.Region)
	default:
		return nil, admin.Errorf(admin.CodeNoOwner, "", "%v", err)
	}
}

func (a topicsAdmin) TierInfo() admin.TierInfo { return a.n.tierInfo() }

// ---- bundles and operations ----

type bundlesAdmin struct{ n *Node }

func (a bundlesAdmin) Bundles() []admin.BundleInfo {
	bs := a.n.js.Bundles()
	out := make([]admin.BundleInfo, len(bs))
	for i, b := range bs {
		out[i] = admin.BundleInfo{Bundle: b.Bundle, Owner: b.Owner, Since: b.Since, Topics: b.Topics, Unloading: b.Unloading}
	}
	return out
}

func (a bundlesAdmin) Unload(ctx context.Context, id bundle.ID, to string) (admin.Operation, error) {
	n := a.n
	if to != "" && !strings.Contains(to, ".") {
		to = SerfName(n.cfg.Region, to) // a node id of this region ("b2")
	}
	from, err := n.js.Unload(ctx, id, to)
	switch {
	case errors.Is(err, jetstream.ErrUnknownBundle):
		return admin.Operation{}, admin.Errorf(admin.CodeBundleNotFound, "range", "region %s has no bundle %s", n.cfg.Region, id)
	case errors.Is(err, jetstream.ErrNotLive):
		return admin.Operation{}, admin.Errorf(admin.CodeBrokerNotLive, "to",
			"cannot move %s to %s: no live broker of region %s has that name (give a broker id such as b1, or its full name %s)", id, to, n.cfg.Region, SerfName(n.cfg.Region, "b1"))
	case errors.Is(err, jetstream.ErrNoOwner):
		return admin.Operation{}, admin.Errorf(admin.CodeNoOwner, "", "%s has no owner yet: it is being placed", id)
	case err != nil:
		return admin.Operation{}, n.metadataError(err)
	}
	op := admin.Operation{ID: newOperationID(), Kind: "unload", Target: id.String(), State: admin.OperationRunning, Total: 1, Started: time.Now().UTC()}
	if from == to {
		op.State, op.Done, op.Finished = admin.OperationDone, 1, op.Started
		op.Result = admin.UnloadResult{Bundle: id.String(), From: from, To: from}
	}
	if _, err := meta.PutJSON(ctx, n.store, operationsPrefix+op.ID, op); err != nil {
		return admin.Operation{}, n.metadataError(err)
	}
	if op.State == admin.OperationRunning {
		go n.finishUnload(op, id, from)
	}
	return op, nil
}

func (a bundlesAdmin) Operation(ctx context.Context, id string) (admin.Operation, error) {
	op, _, err := meta.GetJSON[admin.Operation](ctx, a.n.store, operationsPrefix+id)
	switch {
	case errors.Is(err, meta.ErrNotFound):
		return admin.Operation{}, admin.Errorf(admin.CodeOperationNotFound, "id", "region %s has no operation %s", a.n.cfg.Region, id)
	case err != nil:
		return admin.Operation{}, a.n.metadataError(err)
	}
	return op, nil
}

// ---- replication and tier ----

type replicationAdmin struct{ n *Node }

func (a replicationAdmin) Replication() admin.ReplicationView {
	js := a.n.js
	v := admin.ReplicationView{Broker: a.n.name}
	for _, l := range js.LinkStatus() {
		v.Links = append(v.Links, admin.LinkStatus{Remote: l.Remote, Connected: l.Connected, URL: l.URL, Dials: l.Dials, Dropped: l.Dropped, LastError: l.LastError})
	}
	for _, c := range js.Replication() {
		v.Cursors = append(v.Cursors, replicationStats(c))
	}
	for _, l := range js.OriginLosses() {
		v.Lost = append(v.Lost, admin.OriginLoss{Topic: l.Topic, Region: l.Region, Incarnation: l.Incarnation, Lost: l.Lost})
	}
	return v
}

type tierAdmin struct{ n *Node }

// TierUsage lists what the region's tier holds under "<region>/": data
// and index objects of offloaded ledgers (`strata status` shows it).
func (a tierAdmin) TierUsage(ctx context.Context) admin.TierUsage {
	n := a.n
	u := admin.TierUsage{Kind: n.region.Tier.Kind}
	if u.Kind == "" {
		u.Kind = topology.TierFS
	}
	st, err := n.tierStore(ctx)
	var objs []blob.Attrs
	if err == nil {
		objs, err = st.List(ctx, n.cfg.Region+"/")
	}
	if err != nil {
		u.Error = err.Error()
		return u
	}
	for _, o := range objs {
		u.Objects++
		u.Bytes += o.Size
		if strings.HasSuffix(o.Name, tiered.DataObjectName("")) {
			u.Ledgers++
		}
	}
	return u
}
