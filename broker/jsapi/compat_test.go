package jsapi_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/broker/jsapi"
)

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	t0 = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	t1 = t0.Add(time.Hour)
)

func ourStreamInfo() *jsapi.StreamInfo {
	cfg := jsapi.StreamConfig{
		Name: "ORDERS", Subjects: []string{"ord.>"}, Retention: jsapi.RetentionWorkQueue,
		MaxAge: time.Hour, Discard: jsapi.DiscardNew, Storage: jsapi.StorageMemory,
		MaxBytes: 1 << 30, Compression: jsapi.CompressionS2, AllowDirect: true,
		DenyDelete: true, AllowRollup: true, AllowMsgTTL: true, AllowAtomicPublish: true,
		AllowBatchPublish: true, Metadata: map[string]string{"strata.namespace": "ns"},
		ConsumerLimits: jsapi.StreamConsumerLimits{InactiveThreshold: time.Minute, MaxAckPending: 10},
	}
	cfg.SetDefaults()
	return &jsapi.StreamInfo{
		Config: cfg, Created: t0, TimeStamp: t1,
		State: jsapi.StreamState{Msgs: 5, Bytes: 500, FirstSeq: 3, FirstTime: t0, LastSeq: 7, LastTime: t1,
			Consumers: 2, NumSubjects: 4},
	}
}

// Our StreamInfo, in the create reply envelope, decodes as nats.go decodes it.
func TestStreamInfoDecodesInNatsGo(t *testing.T) {
	si := ourStreamInfo()
	if err := si.Config.Validate(); err != nil {
		t.Fatal(err)
	}
	b := mustJSON(t, jsapi.StreamCreateResponse{
		Response: jsapi.Response{Type: jsapi.TypeStreamCreateResponse}, StreamInfo: si, DidCreate: true})
	var got struct {
		Type  string              `json:"type"`
		Error *jetstream.APIError `json:"error"`
		*jetstream.StreamInfo
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	c := got.Config
	if got.Type != jsapi.TypeStreamCreateResponse || got.Error != nil || c.Name != "ORDERS" ||
		!reflect.DeepEqual(c.Subjects, []string{"ord.>"}) || c.Retention != jetstream.WorkQueuePolicy ||
		c.MaxAge != time.Hour || c.Discard != jetstream.DiscardNew || c.Storage != jetstream.MemoryStorage ||
		c.MaxBytes != 1<<30 || c.MaxMsgs != -1 || c.MaxMsgsPerSubject != -1 || c.MaxConsumers != -1 ||
		c.MaxMsgSize != -1 || c.Replicas != 1 || c.Duplicates != 2*time.Minute ||
		c.Compression != jetstream.S2Compression || !c.AllowDirect || !c.DenyDelete || !c.AllowRollup ||
		!c.AllowMsgTTL || !c.AllowAtomicPublish || !c.AllowBatchPublish || c.Metadata["strata.namespace"] != "ns" ||
		c.ConsumerLimits.InactiveThreshold != time.Minute || c.ConsumerLimits.MaxAckPending != 10 {
		t.Errorf("config: %s\n→ %+v", b, c)
	}
	s := got.State
	if !got.Created.Equal(t0) || !got.TimeStamp.Equal(t1) || s.Msgs != 5 || s.Bytes != 500 || s.FirstSeq != 3 ||
		!s.FirstTime.Equal(t0) || s.LastSeq != 7 || !s.LastTime.Equal(t1) || s.Consumers != 2 || s.NumSubjects != 4 {
		t.Errorf("state: %s\n→ %+v", b, got.StreamInfo)
	}
}

// A config as nats.go sends it survives our decode and echoes back equal:
// nats.go compares the echo (spec §2.3).
func TestStreamConfigEchoFromNatsGo(t *testing.T) {
	in := jetstream.StreamConfig{
		Name: "ORDERS", Description: "d", Subjects: []string{"ord.a", "ord.b.>"},
		Retention: jetstream.InterestPolicy, MaxConsumers: 3, MaxMsgs: 100, MaxBytes: 1 << 20,
		Discard: jetstream.DiscardNew, DiscardNewPerSubject: true, MaxAge: time.Hour,
		MaxMsgsPerSubject: 5, MaxMsgSize: 1024, Storage: jetstream.FileStorage, Replicas: 1,
		NoAck: true, Duplicates: time.Minute, DenyDelete: true, DenyPurge: true, AllowRollup: true,
		Compression: jetstream.S2Compression, FirstSeq: 10, AllowDirect: true,
		ConsumerLimits: jetstream.StreamConsumerLimits{InactiveThreshold: time.Second, MaxAckPending: 7},
		Metadata:       map[string]string{"a": "b"}, AllowMsgTTL: true, SubjectDeleteMarkerTTL: time.Minute,
		AllowAtomicPublish: true, AllowBatchPublish: true,
		Placement:        &jetstream.Placement{Cluster: "c1", Tags: []string{"x"}},
		Sources:          []*jetstream.StreamSource{{Name: "OTHER", FilterSubject: "o.>"}},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "ord.>", Destination: "x.>"},
		PersistMode:      jetstream.AsyncPersistMode,
	}
	var ours jsapi.StreamConfig
	if err := json.Unmarshal(mustJSON(t, in), &ours); err != nil {
		t.Fatal(err)
	}
	if ours.Retention != jsapi.RetentionInterest || ours.Discard != jsapi.DiscardNew || ours.Storage != jsapi.StorageFile ||
		ours.Compression != jsapi.CompressionS2 || ours.MaxAge != time.Hour || ours.Duplicates != time.Minute ||
		ours.PersistMode != jsapi.PersistAsync || ours.FirstSeq != 10 || !ours.NoAck {
		t.Errorf("decoded %+v", ours)
	}
	if got, want := ours.Unsupported(), []string{"sources", "subject_transform", "persist_mode"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Unsupported = %v, want %v", got, want)
	}
	var echo jetstream.StreamConfig
	if err := json.Unmarshal(mustJSON(t, ours), &echo); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(echo, in) {
		t.Errorf("echo differs:\n got %+v\nwant %+v", echo, in)
	}
	// A minimal config from nats.go gets the reference defaults.
	var min jsapi.StreamConfig
	if err := json.Unmarshal(mustJSON(t, jetstream.StreamConfig{Name: "S"}), &min); err != nil {
		t.Fatal(err)
	}
	min.SetDefaults()
	if err := min.Validate(); err != nil || min.MaxMsgs != -1 || min.Duplicates != 2*time.Minute ||
		!reflect.DeepEqual(min.Subjects, []string{"S"}) || min.Unsupported() != nil {
		t.Errorf("defaults: %+v %v", min, err)
	}
}

func ourConsumerInfo(pp jsapi.PriorityPolicy) *jsapi.ConsumerInfo {
	start := t0
	cfg := jsapi.ConsumerConfig{
		Durable: "proc", DeliverPolicy: jsapi.DeliverByStartTime, OptStartTime: &start,
		AckPolicy: jsapi.AckExplicit, BackOff: []time.Duration{time.Second, 2 * time.Second}, MaxDeliver: 3,
		FilterSubjects: []string{"ord.a", "ord.b"}, ReplayPolicy: jsapi.ReplayOriginal,
		Metadata: map[string]string{"strata.subscription": "key_shared"}, MemoryStorage: true,
	}
	if pp != jsapi.PriorityNone {
		cfg.PriorityPolicy, cfg.PriorityGroups, cfg.PriorityTimeout = pp, []string{"g"}, time.Minute
	}
	cfg.SetDefaults()
	last := t1
	return &jsapi.ConsumerInfo{
		Stream: "ORDERS", Name: "proc", Created: t0, TimeStamp: t1, Config: cfg,
		Delivered:     jsapi.SequenceInfo{Consumer: 9, Stream: 12, Last: &last},
		AckFloor:      jsapi.SequenceInfo{Consumer: 4, Stream: 6},
		NumAckPending: 5, NumRedelivered: 1, NumWaiting: 2, NumPending: 30,
		PriorityGroups: []jsapi.PriorityGroupState{{Group: "g", PinnedClientID: "pin-1", PinnedTS: t1}},
	}
}

func TestConsumerInfoDecodesInNatsGo(t *testing.T) {
	for _, pp := range []jsapi.PriorityPolicy{jsapi.PriorityNone, jsapi.PriorityPinned, jsapi.PriorityOverflow, jsapi.PriorityPrioritized} {
		ci := ourConsumerInfo(pp)
		if err := ci.Config.Validate(); err != nil {
			t.Fatal(err)
		}
		b := mustJSON(t, jsapi.ConsumerInfoResponse{Response: jsapi.Response{Type: jsapi.TypeConsumerCreateResponse}, ConsumerInfo: ci})
		var got struct {
			Type  string              `json:"type"`
			Error *jetstream.APIError `json:"error"`
			*jetstream.ConsumerInfo
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		c := got.Config
		wantPP := map[jsapi.PriorityPolicy]jetstream.PriorityPolicy{
			jsapi.PriorityNone: jetstream.PriorityPolicyNone, jsapi.PriorityPinned: jetstream.PriorityPolicyPinned,
			jsapi.PriorityOverflow: jetstream.PriorityPolicyOverflow, jsapi.PriorityPrioritized: jetstream.PriorityPolicyPrioritized,
		}[pp]
		if got.Stream != "ORDERS" || got.Name != "proc" || !got.Created.Equal(t0) || !got.TimeStamp.Equal(t1) ||
			c.Durable != "proc" || c.DeliverPolicy != jetstream.DeliverByStartTimePolicy || !c.OptStartTime.Equal(t0) ||
			c.AckPolicy != jetstream.AckExplicitPolicy || c.AckWait != time.Second || c.MaxDeliver != 3 ||
			!reflect.DeepEqual(c.BackOff, []time.Duration{time.Second, 2 * time.Second}) ||
			!reflect.DeepEqual(c.FilterSubjects, []string{"ord.a", "ord.b"}) || c.ReplayPolicy != jetstream.ReplayOriginalPolicy ||
			c.MaxWaiting != 512 || c.MaxAckPending != 1000 || c.InactiveThreshold != 0 || !c.MemoryStorage ||
			c.Metadata["strata.subscription"] != "key_shared" || c.PriorityPolicy != wantPP {
			t.Errorf("config (%q): %s\n→ %+v", pp, b, c)
		}
		if pp != jsapi.PriorityNone && (!reflect.DeepEqual(c.PriorityGroups, []string{"g"}) || c.PinnedTTL != time.Minute) {
			t.Errorf("priority config: %+v", c)
		}
		if got.Delivered.Consumer != 9 || got.Delivered.Stream != 12 || !got.Delivered.Last.Equal(t1) ||
			got.AckFloor.Consumer != 4 || got.AckFloor.Stream != 6 || got.AckFloor.Last != nil ||
			got.NumAckPending != 5 || got.NumRedelivered != 1 || got.NumWaiting != 2 || got.NumPending != 30 ||
			len(got.PriorityGroups) != 1 || got.PriorityGroups[0].PinnedClientID != "pin-1" || !got.PriorityGroups[0].PinnedTS.Equal(t1) {
			t.Errorf("info: %s\n→ %+v", b, got.ConsumerInfo)
		}
	}
}

// Every enum value Validate accepts decodes in nats.go; "none" as a
// priority policy does not (spec §2.1), and we never send it.
func TestEnumsDecodeInNatsGo(t *testing.T) {
	type enumCase struct {
		json string
		dst  any
	}
	var cases []enumCase
	add := func(v string, dst any) { cases = append(cases, enumCase{`"` + v + `"`, dst}) }
	for _, v := range []jsapi.RetentionPolicy{jsapi.RetentionLimits, jsapi.RetentionInterest, jsapi.RetentionWorkQueue} {
		add(string(v), new(jetstream.RetentionPolicy))
	}
	for _, v := range []jsapi.StorageType{jsapi.StorageFile, jsapi.StorageMemory} {
		add(string(v), new(jetstream.StorageType))
	}
	for _, v := range []jsapi.DiscardPolicy{jsapi.DiscardOld, jsapi.DiscardNew} {
		add(string(v), new(jetstream.DiscardPolicy))
	}
	for _, v := range []jsapi.Compression{jsapi.CompressionNone, jsapi.CompressionS2} {
		add(string(v), new(jetstream.StoreCompression))
	}
	for _, v := range []jsapi.PersistMode{jsapi.PersistDefault, jsapi.PersistAsync} {
		add(string(v), new(jetstream.PersistModeType))
	}
	for _, v := range []jsapi.DeliverPolicy{jsapi.DeliverAll, jsapi.DeliverLast, jsapi.DeliverNew, jsapi.DeliverByStartSeq, jsapi.DeliverByStartTime, jsapi.DeliverLastPerSubject} {
		if v.Validate() != nil {
			t.Errorf("%q invalid", v)
		}
		add(string(v), new(jetstream.DeliverPolicy))
	}
	for _, v := range []jsapi.AckPolicy{jsapi.AckNone, jsapi.AckAll, jsapi.AckExplicit, jsapi.AckFlowControl} {
		add(string(v), new(jetstream.AckPolicy))
	}
	for _, v := range []jsapi.ReplayPolicy{jsapi.ReplayInstant, jsapi.ReplayOriginal} {
		add(string(v), new(jetstream.ReplayPolicy))
	}
	for _, v := range []jsapi.PriorityPolicy{jsapi.PriorityPinned, jsapi.PriorityOverflow, jsapi.PriorityPrioritized} {
		add(string(v), new(jetstream.PriorityPolicy))
	}
	for _, c := range cases {
		if err := json.Unmarshal([]byte(c.json), c.dst); err != nil {
			t.Errorf("nats.go rejects %s (%T): %v", c.json, c.dst, err)
		}
	}
	// The rule: never "none" for priority_policy.
	if err := json.Unmarshal([]byte(`"none"`), new(jetstream.PriorityPolicy)); err == nil {
		t.Error(`nats.go now accepts priority_policy "none"; revisit the rule`)
	}
	var p jsapi.PriorityPolicy
	if err := json.Unmarshal([]byte(`"none"`), &p); err != nil || p != jsapi.PriorityNone {
		t.Errorf(`we decode "none" as %q, %v`, p, err)
	}
	cc := jsapi.ConsumerConfig{PriorityPolicy: p}
	cc.SetDefaults()
	b := mustJSON(t, cc)
	if json.Unmarshal(b, new(jetstream.ConsumerConfig)) != nil || jsonHasKey(t, b, "priority_policy") {
		t.Errorf("none priority policy encodes as %s", b)
	}
	// Unknown values fail our decode (→ 10025) and Validate.
	for _, bad := range []struct {
		json string
		dst  any
	}{
		{`"bogus"`, new(jsapi.RetentionPolicy)}, {`"LIMITS"`, new(jsapi.RetentionPolicy)},
		{`"disk"`, new(jsapi.StorageType)}, {`"none"`, new(jsapi.DiscardPolicy)},
		{`"zstd"`, new(jsapi.Compression)}, {`"first"`, new(jsapi.DeliverPolicy)},
		{`"some"`, new(jsapi.AckPolicy)}, {`"slow"`, new(jsapi.ReplayPolicy)},
		{`"pinned"`, new(jsapi.PriorityPolicy)}, {`"upsert"`, new(jsapi.ConsumerAction)}, {`1`, new(jsapi.AckPolicy)},
	} {
		if err := json.Unmarshal([]byte(bad.json), bad.dst); err == nil {
			t.Errorf("accepted %s as %T", bad.json, bad.dst)
		}
	}
	if jsapi.PriorityPolicy("none").Validate() == nil || jsapi.AckPolicy("").Validate() == nil || jsapi.PriorityNone.Validate() != nil {
		t.Error("Validate")
	}
	var d jsapi.DeliverPolicy
	if err := json.Unmarshal([]byte(`"undefined"`), &d); err != nil || d != jsapi.DeliverAll {
		t.Errorf("undefined deliver policy: %q %v", d, err)
	}
}

func jsonHasKey(t *testing.T, b []byte, key string) bool {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	_, ok := m[key]
	return ok
}

func TestConsumerConfigEchoFromNatsGo(t *testing.T) {
	start := t0
	for _, in := range []jetstream.ConsumerConfig{
		{Durable: "proc", DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: 2 * time.Second, MaxDeliver: 3, FilterSubject: "ord.>", ReplayPolicy: jetstream.ReplayInstantPolicy,
			MaxAckPending: 100},
		{Name: "n", Durable: "n", Description: "d", DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 7,
			AckPolicy: jetstream.AckAllPolicy, BackOff: []time.Duration{time.Second, time.Minute}, MaxDeliver: 5,
			FilterSubjects: []string{"a", "b.*"}, ReplayPolicy: jetstream.ReplayOriginalPolicy, RateLimit: 9,
			SampleFrequency: "50%", MaxWaiting: 10, MaxAckPending: -1, HeadersOnly: true, MaxRequestBatch: 100,
			MaxRequestExpires: time.Minute, MaxRequestMaxBytes: 4096, InactiveThreshold: time.Hour, Replicas: 1,
			MemoryStorage: true, Metadata: map[string]string{"k": "v"}, PauseUntil: &start,
			PriorityPolicy: jetstream.PriorityPolicyPinned, PinnedTTL: time.Minute, PriorityGroups: []string{"g"}},
		{Name: "eph", DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy, AckPolicy: jetstream.AckNonePolicy,
			OptStartTime: nil, PriorityPolicy: jetstream.PriorityPolicyPrioritized, PriorityGroups: []string{"a", "b"}},
	} {
		req := struct {
			Stream string                   `json:"stream_name"`
			Config jetstream.ConsumerConfig `json:"config"`
			Action string                   `json:"action"`
		}{"ORDERS", in, "create"}
		var ours jsapi.CreateConsumerRequest
		if err := json.Unmarshal(mustJSON(t, req), &ours); err != nil {
			t.Fatal(err)
		}
		if ours.Stream != "ORDERS" || ours.Action != jsapi.ActionCreate || ours.Config.EffectiveName() != in.Name+map[bool]string{true: in.Durable}[in.Name == ""] {
			t.Errorf("request: %+v", ours)
		}
		var echo jetstream.ConsumerConfig
		if err := json.Unmarshal(mustJSON(t, ours.Config), &echo); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(echo, in) {
			t.Errorf("echo differs:\n got %+v\nwant %+v", echo, in)
		}
	}
}

// The consumer create request nats.go sent on the wire (spec §2.5, [seen]).
func TestConsumerCreateRequestSpec(t *testing.T) {
	const body = `{"stream_name":"ORDERS","config":{"durable_name":"proc","deliver_policy":"all","ack_policy":"explicit","ack_wait":2000000000,"max_deliver":3,"filter_subject":"ord.\u003e","replay_policy":"instant","max_ack_pending":100,"num_replicas":0},"action":""}`
	var r jsapi.CreateConsumerRequest
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	c := r.Config
	if r.Action != jsapi.ActionCreateOrUpdate || c.EffectiveName() != "proc" || c.FilterSubject != "ord.>" ||
		c.AckWait != 2*time.Second || c.MaxDeliver != 3 || c.MaxAckPending != 100 || c.AckPolicy != jsapi.AckExplicit {
		t.Errorf("%+v", r)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil || c.MaxWaiting != 512 || c.InactiveThreshold != 0 || c.AckWait != 2*time.Second {
		t.Errorf("defaults %+v %v", c, err)
	}
	eph := jsapi.ConsumerConfig{}
	eph.SetDefaults()
	if eph.AckPolicy != jsapi.AckNone || eph.AckWait != 0 || eph.MaxAckPending != 0 || eph.InactiveThreshold != 5*time.Second || eph.MaxDeliver != -1 {
		t.Errorf("ephemeral defaults %+v", eph)
	}
	bad := jsapi.ConsumerConfig{Name: "a", Durable: "b", FilterSubject: "x", FilterSubjects: []string{"y"},
		DeliverPolicy: jsapi.DeliverByStartSeq, AckPolicy: jsapi.AckAll, ReplayPolicy: jsapi.ReplayInstant,
		PriorityGroups: []string{"g"}}
	if err := bad.Validate(); err == nil {
		t.Error("bad config validated")
	} else {
		t.Logf("all problems: %v", err)
	}
}

func TestPubAckWire(t *testing.T) {
	// Byte-exact against spec §2.4 [seen].
	for _, tc := range []struct {
		v    jsapi.PubAckResponse
		want string
	}{
		{jsapi.PubAckResponse{PubAck: &jsapi.PubAck{Stream: "ORDERS", Sequence: 1}}, `{"stream":"ORDERS","seq":1}`},
		{jsapi.PubAckResponse{PubAck: &jsapi.PubAck{Stream: "ORDERS", Sequence: 2, Duplicate: true}}, `{"stream":"ORDERS","seq":2,"duplicate":true}`},
		{jsapi.PubAckResponse{Error: jsapi.ErrStreamWrongLastSequence(2), PubAck: &jsapi.PubAck{Stream: "ORDERS"}},
			`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 2"},"stream":"ORDERS","seq":0}`},
	} {
		b := mustJSON(t, tc.v)
		if string(b) != tc.want {
			t.Errorf("got %s\nwant %s", b, tc.want)
		}
		// As nats.go's pubAckResponse decodes it.
		var got struct {
			Type  string              `json:"type"`
			Error *jetstream.APIError `json:"error"`
			*jetstream.PubAck
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if got.PubAck == nil || got.Stream != tc.v.Stream || got.Sequence != tc.v.Sequence || got.Duplicate != tc.v.Duplicate {
			t.Errorf("%s → %+v", b, got.PubAck)
		}
		if tc.v.Error != nil && (got.Error == nil || got.Error.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence) {
			t.Errorf("%s → error %+v", b, got.Error)
		}
	}
}

func TestAccountInfoDecodesInNatsGo(t *testing.T) {
	ai := &jsapi.AccountInfo{Memory: 1, Store: 2, ReservedStore: 3, Streams: 4, Consumers: 5,
		Limits: jsapi.UnlimitedAccountLimits(), Domain: "hub",
		API: jsapi.APIStats{Level: jsapi.APILevel, Total: 10, Errors: 1}}
	b := mustJSON(t, jsapi.AccountInfoResponse{Response: jsapi.Response{Type: jsapi.TypeAccountInfoResponse}, AccountInfo: ai})
	var got struct {
		Type  string              `json:"type"`
		Error *jetstream.APIError `json:"error"`
		jetstream.AccountInfo
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	a := got.AccountInfo
	if a.Memory != 1 || a.Store != 2 || a.ReservedStore != 3 || a.Streams != 4 || a.Consumers != 5 || a.Domain != "hub" ||
		a.API.Level != 3 || a.API.Total != 10 || a.API.Errors != 1 || a.Limits.MaxStreams != -1 ||
		a.Limits.MaxStore != -1 || a.Limits.MaxAckPending != -1 || a.Limits.StoreMaxStreamBytes != -1 {
		t.Errorf("%s → %+v", b, a)
	}
}

func TestAPIErrorInNatsGo(t *testing.T) {
	// With the reference's zero paging block (its reply type embeds one).
	b := mustJSON(t, jsapi.ErrorResponse(jsapi.KindStreamInfo, jsapi.ErrStreamNotFound()))
	const want = `{"type":"io.nats.jetstream.api.v1.stream_info_response","error":{"code":404,"err_code":10059,"description":"stream not found"},"total":0,"offset":0,"limit":0}`
	if string(b) != want {
		t.Errorf("got %s", b)
	}
	var got struct {
		Type  string              `json:"type"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	// nats.go matches by err_code: this is what makes CreateOrUpdateStream
	// fall back to CREATE.
	if !errors.Is(got.Error, jetstream.ErrStreamNotFound) {
		t.Errorf("nats.go does not see ErrStreamNotFound in %+v", got.Error)
	}
	for _, tc := range []struct {
		ours   *jsapi.APIError
		theirs jetstream.JetStreamError
	}{
		{jsapi.ErrConsumerNotFound(), jetstream.ErrConsumerNotFound},
		{jsapi.ErrStreamNameInUse(), jetstream.ErrStreamNameAlreadyInUse},
		{jsapi.ErrConsumerAlreadyExists(), jetstream.ErrConsumerExists},
		{jsapi.ErrConsumerDoesNotExist(), jetstream.ErrConsumerDoesNotExist},
		{jsapi.ErrStreamMessageExceedsMaximum(), jetstream.ErrStreamMessageExceedsMaximum},
		{jsapi.ErrNotEnabledForAccount(), jetstream.ErrJetStreamNotEnabledForAccount},
		{jsapi.ErrNotEnabled(), jetstream.ErrJetStreamNotEnabled},
		{jsapi.ErrMaximumConsumersLimit(), jetstream.ErrMaximumConsumersLimit},
		{jsapi.ErrNoMessageFound(), jetstream.ErrMsgNotFound},
		{jsapi.ErrBadRequest(), jetstream.ErrBadRequest},
		{jsapi.ErrConsumerDuplicateFilterSubjects(), jetstream.ErrDuplicateFilterSubjects},
	} {
		var ae jetstream.APIError
		if err := json.Unmarshal(mustJSON(t, tc.ours), &ae); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(&ae, tc.theirs) {
			t.Errorf("%v is not nats.go's %v", tc.ours, tc.theirs)
		}
	}
}
