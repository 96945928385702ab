package jsapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/broker"
	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/internal/testutil"
)

// fakeJS answers the JetStream API over a real Strata core broker using only
// this package's vocabulary, so nats.go's jetstream client proves on the
// wire that it accepts what we send and sends what we parse. It is a test
// double (one stream, in memory), not the broker's JetStream.
type fakeJS struct {
	t  *testing.T
	nc *nats.Conn

	mu        sync.Mutex
	stream    *jsapi.StreamConfig
	created   time.Time
	msgs      []*nats.Msg // index = seq-1
	ids       map[string]uint64
	consumers map[string]*jsapi.ConsumerConfig
	next      map[string]uint64 // consumer → next stream seq
	dseq      map[string]uint64
	parsed    []jsapi.APIRequest
	acks      []ackSeen
}

type ackSeen struct {
	meta jsapi.AckMeta
	ack  jsapi.Ack
	sync bool
}

func (f *fakeJS) reply(m *nats.Msg, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		f.t.Error(err)
		return
	}
	if err := m.Respond(b); err != nil {
		f.t.Error(err)
	}
}

func (f *fakeJS) fail(m *nats.Msg, k jsapi.Kind, e *jsapi.APIError) {
	f.reply(m, jsapi.ErrorResponse(k, e))
}

func (f *fakeJS) info() *jsapi.StreamInfo {
	si := &jsapi.StreamInfo{Config: *f.stream, Created: f.created, TimeStamp: time.Now().UTC()}
	si.State.Consumers = len(f.consumers)
	if n := uint64(len(f.msgs)); n > 0 {
		si.State.Msgs, si.State.FirstSeq, si.State.LastSeq = n, 1, n
	}
	return si
}

func (f *fakeJS) consumerInfo(name string) *jsapi.ConsumerInfo {
	return &jsapi.ConsumerInfo{Stream: f.stream.Name, Name: name, Created: f.created, TimeStamp: time.Now().UTC(),
		Config: *f.consumers[name], NumPending: uint64(len(f.msgs)) - (f.next[name] - 1)}
}

func (f *fakeJS) api(m *nats.Msg) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := jsapi.ParseAPISubject(m.Subject)
	if err != nil {
		f.t.Errorf("%s: %v", m.Subject, err)
		return
	}
	f.parsed = append(f.parsed, r)
	if !jsapi.RequiredAPILevelOK(m.Header.Get(jsapi.HdrRequiredAPILevel)) {
		f.fail(m, r.Kind, jsapi.ErrRequiredAPILevel())
		return
	}
	k := r.Kind
	switch k {
	case jsapi.KindAccountInfo:
		f.reply(m, jsapi.AccountInfoResponse{Response: jsapi.Response{Type: k.ResponseType()},
			AccountInfo: &jsapi.AccountInfo{Limits: jsapi.UnlimitedAccountLimits(), API: jsapi.APIStats{Level: jsapi.APILevel}}})
	case jsapi.KindStreamUpdate, jsapi.KindStreamInfo:
		if f.stream == nil || f.stream.Name != r.Stream {
			f.fail(m, k, jsapi.ErrStreamNotFound())
			return
		}
		f.reply(m, jsapi.StreamInfoResponse{Response: jsapi.Response{Type: k.ResponseType()}, StreamInfo: f.info()})
	case jsapi.KindStreamCreate:
		var cfg jsapi.StreamConfig
		if err := json.Unmarshal(m.Data, &cfg); err != nil {
			f.fail(m, k, jsapi.ErrInvalidJSON(err))
			return
		}
		if cfg.Name != r.Stream {
			f.fail(m, k, jsapi.ErrStreamMismatch())
			return
		}
		cfg.SetDefaults()
		if err := cfg.Validate(); err != nil {
			f.fail(m, k, jsapi.ErrStreamInvalidConfig(err))
			return
		}
		f.stream, f.created = &cfg, time.Now().UTC()
		f.reply(m, jsapi.StreamCreateResponse{Response: jsapi.Response{Type: k.ResponseType()}, StreamInfo: f.info(), DidCreate: true})
	case jsapi.KindConsumerCreate:
		var req jsapi.CreateConsumerRequest
		if err := json.Unmarshal(m.Data, &req); err != nil {
			f.fail(m, k, jsapi.ErrInvalidJSON(err))
			return
		}
		if f.stream == nil || req.Stream != r.Stream {
			f.fail(m, k, jsapi.ErrStreamNotFound())
			return
		}
		if r.Filter != "" && r.Filter != req.Config.FilterSubject {
			f.fail(m, k, jsapi.ErrConsumerFilterSubjectMismatch())
			return
		}
		name := req.Config.EffectiveName()
		if name != r.Consumer {
			f.fail(m, k, jsapi.ErrConsumerNameNotMatchSubject())
			return
		}
		req.Config.SetDefaults()
		if err := req.Config.Validate(); err != nil {
			f.fail(m, k, jsapi.ErrConsumerCreate(err))
			return
		}
		if _, ok := f.consumers[name]; !ok {
			f.next[name] = 1
		}
		f.consumers[name] = &req.Config
		f.reply(m, jsapi.ConsumerInfoResponse{Response: jsapi.Response{Type: k.ResponseType()}, ConsumerInfo: f.consumerInfo(name)})
	case jsapi.KindConsumerInfo:
		if _, ok := f.consumers[r.Consumer]; !ok {
			f.fail(m, k, jsapi.ErrConsumerNotFound())
			return
		}
		f.reply(m, jsapi.ConsumerInfoResponse{Response: jsapi.Response{Type: k.ResponseType()}, ConsumerInfo: f.consumerInfo(r.Consumer)})
	case jsapi.KindConsumerNext:
		pr, err := jsapi.ParsePullRequest(m.Data)
		if err != nil {
			f.t.Errorf("pull %q: %v", m.Data, err)
			return
		}
		// Deliver what is there (the test asks for exactly that many).
		for i := 0; i < pr.Batch && f.next[r.Consumer] <= uint64(len(f.msgs)); i++ {
			seq := f.next[r.Consumer]
			f.next[r.Consumer]++
			f.dseq[r.Consumer]++
			src := f.msgs[seq-1]
			out := nats.NewMsg(m.Reply)
			out.Data, out.Header = src.Data, src.Header
			out.Reply = jsapi.FormatAckSubject(jsapi.AckMeta{Stream: r.Stream, Consumer: r.Consumer, Delivered: 1,
				StreamSeq: seq, ConsumerSeq: f.dseq[r.Consumer], Timestamp: time.Now().UnixNano(),
				Pending: uint64(len(f.msgs)) - seq})
			if err := f.nc.PublishMsg(out); err != nil {
				f.t.Error(err)
			}
		}
	default:
		f.t.Errorf("unexpected API call %v", r)
	}
}

func (f *fakeJS) publish(m *nats.Msg) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ack := jsapi.PubAckResponse{PubAck: &jsapi.PubAck{Stream: f.stream.Name}}
	if id := m.Header.Get(jsapi.HdrMsgID); id != "" {
		if seq, ok := f.ids[id]; ok {
			ack.Sequence, ack.Duplicate = seq, true
			f.reply(m, ack)
			return
		}
	}
	if v := m.Header.Get(jsapi.HdrExpectedLastSequence); v != "" {
		if want, _ := strconv.ParseUint(v, 10, 64); want != uint64(len(f.msgs)) {
			ack.Error = jsapi.ErrStreamWrongLastSequence(uint64(len(f.msgs)))
			f.reply(m, ack)
			return
		}
	}
	if v := m.Header.Get(jsapi.HdrExpectedStream); v != "" && v != f.stream.Name {
		ack.Error = jsapi.ErrStreamNotMatch()
		f.reply(m, ack)
		return
	}
	f.msgs = append(f.msgs, m)
	ack.Sequence = uint64(len(f.msgs))
	if id := m.Header.Get(jsapi.HdrMsgID); id != "" {
		f.ids[id] = ack.Sequence
	}
	if m.Reply != "" {
		f.reply(m, ack)
	}
}

func (f *fakeJS) ack(m *nats.Msg) {
	meta, err := jsapi.ParseAckSubject(m.Subject)
	if err != nil {
		f.t.Errorf("ack subject %q: %v", m.Subject, err)
		return
	}
	f.mu.Lock()
	f.acks = append(f.acks, ackSeen{meta: meta, ack: jsapi.ParseAck(m.Data), sync: m.Reply != ""})
	f.mu.Unlock()
	if m.Reply != "" {
		_ = m.Respond(nil) // AckSync: an empty MSG once applied.
	}
}

func TestLiveNatsGoJetStream(t *testing.T) {
	srv, err := broker.Start(broker.Config{ServerName: "jsapi-live", ListenAddr: "127.0.0.1:0", Mesh: "m", Region: "r"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	snc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer snc.Close()
	f := &fakeJS{t: t, nc: snc, ids: map[string]uint64{}, consumers: map[string]*jsapi.ConsumerConfig{},
		next: map[string]uint64{}, dseq: map[string]uint64{}}
	for subj, h := range map[string]nats.MsgHandler{"$JS.API.>": f.api, "ord.>": f.publish, "$JS.ACK.>": f.ack} {
		if _, err := snc.Subscribe(subj, h); err != nil {
			t.Fatal(err)
		}
	}
	if err := snc.Flush(); err != nil {
		t.Fatal(err)
	}

	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	ai, err := js.AccountInfo(ctx)
	if err != nil || ai.API.Level != jsapi.APILevel || ai.Limits.MaxStreams != -1 {
		t.Fatalf("AccountInfo: %+v %v", ai, err)
	}
	// UPDATE → 10059 → CREATE, and nats.go checks the echo.
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"ord.>"},
		Storage: jetstream.FileStorage, Duplicates: time.Minute})
	if err != nil {
		t.Fatalf("CreateOrUpdateStream: %v", err)
	}
	if c := s.CachedInfo().Config; c.MaxMsgs != -1 || c.Duplicates != time.Minute || c.Retention != jetstream.LimitsPolicy {
		t.Errorf("stream config %+v", c)
	}
	if _, err := js.Stream(ctx, "NOPE"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("missing stream: %v", err)
	}

	pa, err := js.Publish(ctx, "ord.a", []byte("one"))
	if err != nil || pa.Stream != "ORDERS" || pa.Sequence != 1 || pa.Duplicate {
		t.Fatalf("publish: %+v %v", pa, err)
	}
	for i, wantDup := range []bool{false, true} {
		pa, err := js.Publish(ctx, "ord.a", []byte("two"), jetstream.WithMsgID("id-2"))
		if err != nil || pa.Sequence != 2 || pa.Duplicate != wantDup {
			t.Fatalf("publish %d with id: %+v %v", i, pa, err)
		}
	}
	_, err = js.Publish(ctx, "ord.b", []byte("three"), jetstream.WithExpectLastSequence(99))
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.Description != "wrong last sequence: 2" {
		t.Errorf("expected-last-sequence: %v", err)
	}
	if _, err := js.Publish(ctx, "ord.b", []byte("x"), jetstream.WithExpectStream("OTHER")); !errors.As(err, &apiErr) ||
		apiErr.ErrorCode != 10060 {
		t.Errorf("expected-stream: %v", err)
	}
	for i := range 3 {
		if _, err := js.PublishAsync("ord.c", []byte("async-"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("async acks")
	}

	// The filter goes in the subject: CONSUMER.CREATE.ORDERS.proc.ord.>
	cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "proc",
		AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "ord.>", MaxDeliver: 3, AckWait: 2 * time.Second})
	if err != nil {
		t.Fatalf("CreateOrUpdateConsumer: %v", err)
	}
	if ci := cons.CachedInfo(); ci.Name != "proc" || ci.Config.MaxAckPending != 1000 || ci.NumPending != 5 {
		t.Errorf("consumer info %+v", ci)
	}
	if _, err := js.Consumer(ctx, "ORDERS", "nope"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("missing consumer: %v", err)
	}

	batch, err := cons.Fetch(5, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []jetstream.Msg
	for m := range batch.Messages() {
		got = append(got, m)
	}
	if batch.Error() != nil || len(got) != 5 {
		t.Fatalf("fetch: %d messages, %v", len(got), batch.Error())
	}
	for i, m := range got {
		md, err := m.Metadata()
		if err != nil || md.Stream != "ORDERS" || md.Consumer != "proc" || md.Sequence.Stream != uint64(i+1) ||
			md.Sequence.Consumer != uint64(i+1) || md.NumDelivered != 1 || md.NumPending != uint64(4-i) {
			t.Errorf("metadata %d: %+v %v", i, md, err)
		}
	}
	if err := got[0].Ack(); err != nil {
		t.Error(err)
	}
	if err := got[1].NakWithDelay(3 * time.Second); err != nil {
		t.Error(err)
	}
	if err := got[2].InProgress(); err != nil {
		t.Error(err)
	}
	if err := got[3].TermWithReason("poison"); err != nil {
		t.Error(err)
	}
	if err := got[4].DoubleAck(ctx); err != nil {
		t.Errorf("DoubleAck: %v", err)
	}
	want := []jsapi.Ack{{Kind: jsapi.AckAck}, {Kind: jsapi.AckNak, Delay: 3 * time.Second},
		{Kind: jsapi.AckProgress}, {Kind: jsapi.AckTerm, Reason: "poison"}, {Kind: jsapi.AckAck}}
	testutil.Eventually(t, "every ack parsed", 10*time.Second, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.acks) >= len(want)
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.acks) != len(want) {
		t.Fatalf("acks: %+v", f.acks)
	}
	for _, a := range f.acks {
		i := a.meta.StreamSeq - 1
		if a.ack.Kind != want[i].Kind || a.ack.Delay != want[i].Delay || a.ack.Reason != want[i].Reason || a.sync != (i == 4) {
			t.Errorf("ack for seq %d: %+v", i+1, a)
		}
	}
	// What nats.go asked for, as parsed.
	var sawFilter bool
	for _, r := range f.parsed {
		if r.Kind == jsapi.KindConsumerCreate && r.Consumer == "proc" && r.Filter == "ord.>" {
			sawFilter = true
		}
	}
	if !sawFilter {
		t.Errorf("no CONSUMER.CREATE.ORDERS.proc.ord.> among %+v", f.parsed)
	}
}
