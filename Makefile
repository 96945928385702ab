# The README's test command is `make test`; CI (.ci/run) runs exactly that.
GO ?= go
UNIT_PKGS = $(shell $(GO) list ./... | grep -v /e2e)

.PHONY: test vet unit e2e fuzz build peers

test: vet unit e2e

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

# Unit tests keep -race; each package gets an explicit timeout.
unit:
	$(GO) test -race -timeout 15m $(UNIT_PKGS)

# e2e: real processes on loopback; the binary is built once per package
# without -race, packages run one at a time.
e2e:
	$(GO) test -p 1 -timeout 20m ./e2e/...

# Fuzz targets, each for FUZZTIME (not part of `make test`).
FUZZTIME ?= 2m
fuzz:
	$(GO) test ./topology -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./topology -run '^$$' -fuzz '^FuzzUnits$$' -fuzztime $(FUZZTIME)
	$(GO) test ./bookie -run '^$$' -fuzz '^FuzzServerRequest$$' -fuzztime $(FUZZTIME)
	$(GO) test ./broker/natsproto -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./broker -run '^$$' -fuzz '^FuzzServerSession$$' -fuzztime $(FUZZTIME)
	$(GO) test ./broker -run '^$$' -fuzz '^FuzzConnectJWT$$' -fuzztime $(FUZZTIME)
	$(GO) test ./broker/jsapi -run '^$$' -fuzz '^FuzzParseAPISubject$$' -fuzztime $(FUZZTIME)
	$(GO) test ./broker/jsapi -run '^$$' -fuzz '^FuzzParseAckSubject$$' -fuzztime $(FUZZTIME)
	$(GO) test ./broker/jsapi -run '^$$' -fuzz '^FuzzParseAck$$' -fuzztime $(FUZZTIME)
	$(GO) test ./admin -run '^$$' -fuzz '^FuzzParseOriginsQuery$$' -fuzztime $(FUZZTIME)
	$(GO) test ./admin -run '^$$' -fuzz '^FuzzTestHookBody$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/audit -run '^$$' -fuzz '^FuzzRequestNormalize$$' -fuzztime $(FUZZTIME)
	$(GO) test ./broker/sublist -run '^$$' -fuzz '^FuzzSubjects$$' -fuzztime $(FUZZTIME)
	$(GO) test ./bookie -run '^$$' -fuzz '^FuzzAddRequestDecode$$' -fuzztime $(FUZZTIME)
	$(GO) test ./bookie/ledger -run '^$$' -fuzz '^FuzzOpenFrame$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/ackset -run '^$$' -fuzz '^FuzzUnmarshalBinary$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/supervisor -run '^$$' -fuzz '^FuzzNetnsTopology$$' -fuzztime $(FUZZTIME)
	$(GO) test ./bookie/storage -run '^$$' -fuzz '^FuzzScanJournal$$' -fuzztime $(FUZZTIME)
	$(GO) test ./broker/mledger -run '^$$' -fuzz '^FuzzDecodeEntry$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tiered -run '^$$' -fuzz '^FuzzDecodeIndex$$' -fuzztime $(FUZZTIME)
	$(GO) test ./admin -run '^$$' -fuzz '^FuzzDecodeDecommission$$' -fuzztime $(FUZZTIME)
	$(GO) test ./region -run '^$$' -fuzz '^FuzzParseTestHooks$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tiered -run '^$$' -fuzz '^FuzzDecodeFrames$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tiered/blob -run '^$$' -fuzz '^FuzzValidateName$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tiered/blob -run '^$$' -fuzz '^FuzzConfigValidate$$' -fuzztime $(FUZZTIME)
	$(GO) test ./broker/jetstream -run '^$$' -fuzz '^FuzzEnvelope$$' -fuzztime $(FUZZTIME)
	$(GO) test ./broker/jetstream -run '^$$' -fuzz '^FuzzDeliveryBatch$$' -fuzztime $(FUZZTIME)
	$(GO) test ./replicator/wire -run '^$$' -fuzz '^FuzzDecodeBatch$$' -fuzztime $(FUZZTIME)
	$(GO) test ./replicator/wire -run '^$$' -fuzz '^FuzzDecodeAnswer$$' -fuzztime $(FUZZTIME)
	$(GO) test ./replicator/wire -run '^$$' -fuzz '^FuzzDecodeSubSync$$' -fuzztime $(FUZZTIME)
	$(GO) test ./replicator/wire -run '^$$' -fuzz '^FuzzDecodeTombstone$$' -fuzztime $(FUZZTIME)
	$(GO) test ./replicator -run '^$$' -fuzz '^FuzzDecodeSubSet$$' -fuzztime $(FUZZTIME)
	$(GO) test ./admin -run '^$$' -fuzz '^FuzzDecodeRequests$$' -fuzztime $(FUZZTIME)
	$(GO) test ./admin -run '^$$' -fuzz '^FuzzPathParams$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tenancy/quota/quotanet -run '^$$' -fuzz '^FuzzDecodeInbound$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tenancy/quota/quotanet -run '^$$' -fuzz '^FuzzDecodeUsageAnswer$$' -fuzztime $(FUZZTIME)
	$(GO) test ./broker/bundle -run '^$$' -fuzz '^FuzzParseID$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tenancy/store -run '^$$' -fuzz '^FuzzDecodeBatch$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tenancy -run '^$$' -fuzz '^FuzzTenantQuotas$$' -fuzztime $(FUZZTIME)
	$(GO) test ./cmd/strata -run '^$$' -fuzz '^FuzzRegionCapFlag$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tenancy/quota -run '^$$' -fuzz '^FuzzDecodeMsg$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/drill -run '^$$' -fuzz '^FuzzParseRate$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/drill -run '^$$' -fuzz '^FuzzParseRegionURLs$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/harness -run '^$$' -fuzz '^FuzzDecodeRequest$$' -fuzztime $(FUZZTIME)

VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/strata ./cmd/strata

# The pinned peers for differential tests and side-by-side benchmarks
# (nats-server v2.15.3, natscli v0.5.0), from their own module in tools/.
peers:
	cd tools && $(GO) build -o ../bin/ github.com/nats-io/nats-server/v2 github.com/nats-io/natscli/nats
