package jsapi

// Account info (spec §2.2): the reply to $JS.API.INFO.

// APILevel is the JetStream API level Strata advertises in AccountInfo and
// the INFO line's api_lvl. natscli's `bench js pub --create` sends
// Nats-Required-Api-Level: 3 (spec §2.1); a request needing more gets
// ErrRequiredAPILevel (10185).
const APILevel = 3

// AccountLimits are an account's JetStream limits; -1 = unlimited.
type AccountLimits struct {
	MaxMemory            int64 `json:"max_memory"`
	MaxStore             int64 `json:"max_storage"`
	MaxStreams           int   `json:"max_streams"`
	MaxConsumers         int   `json:"max_consumers"`
	MaxAckPending        int   `json:"max_ack_pending"`
	MemoryMaxStreamBytes int64 `json:"memory_max_stream_bytes"`
	StoreMaxStreamBytes  int64 `json:"storage_max_stream_bytes"`
	MaxBytesRequired     bool  `json:"max_bytes_required"`
}

// UnlimitedAccountLimits has every limit at -1 (unlimited).
func UnlimitedAccountLimits() AccountLimits {
	return AccountLimits{-1, -1, -1, -1, -1, -1, -1, false}
}

// APIStats counts API requests.
type APIStats struct {
	Level  int    `json:"level"`
	Total  uint64 `json:"total"`
	Errors uint64 `json:"errors"`
}

// AccountInfo is an account's JetStream usage and limits.
type AccountInfo struct {
	Memory         uint64        `json:"memory"`
	Store          uint64        `json:"storage"`
	ReservedMemory uint64        `json:"reserved_memory"`
	ReservedStore  uint64        `json:"reserved_storage"`
	Streams        int           `json:"streams"`
	Consumers      int           `json:"consumers"`
	Limits         AccountLimits `json:"limits"`
	Domain         string        `json:"domain,omitempty"`
	API            APIStats      `json:"api"`
}

// AccountInfoResponse replies to $JS.API.INFO.
type AccountInfoResponse struct {
	Response
	*AccountInfo
}
