package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBatchScripts runs the multi-key release script on standalone and on
// a cluster, through the drain's hand-off: every lease gets its own status
// although leases share script calls, across chunk boundaries and, on the
// cluster, inside one slot.
func TestBatchScripts(t *testing.T) {
	for _, start := range []func(*testing.T) backend{standalone, cluster} {
		b := start(t)
		t.Run(b.name, func(t *testing.T) {
			for _, n := range []int{1, 2, maxBatch + 1, 2*maxBatch + 1} {
				t.Run(fmt.Sprintf("release %d leases", n), func(t *testing.T) {
					testReleaseBatch(t, b, spreadIDs(fmt.Sprintf("release%d", n), n))
				})
			}
			t.Run("release within one slot", func(t *testing.T) { testReleaseBatch(t, b, sameSlotIDs(t, "release", 6)) })
			if b.name == "cluster" {
				t.Run("key slot", func(t *testing.T) { testKeySlot(t, b.client()) })
			}
		})
	}
}

// outcome is what a test does to a lease's key before a batch runs.
type outcome int

const (
	keep   outcome = iota // left alone: the batch renews or releases it
	expire                // deleted: the batch reports it gone
	steal                 // overwritten by another holder: reported stolen
)

// outcomeOf spreads the three outcomes over the leases, so that a batch
// mixes them and a status attributed to the wrong lease shows.
func outcomeOf(i, n int) outcome {
	if n < 3 {
		return outcome(i) // 1 lease: kept; 2: kept and expired
	}
	return outcome(i % 3)
}

// spreadIDs are n room ids over many slots, named prefix-i (each subtest
// its own rooms: the server is shared).
func spreadIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return ids
}

// sameSlotIDs finds n room ids whose route keys share one Cluster slot,
// so a cluster client puts them in one script call.
func sameSlotIDs(t *testing.T, prefix string, n int) []string {
	t.Helper()
	ids := []string{prefix + "-slot-0"}
	want := keySlot(DefaultRoutePrefix + "{" + ids[0] + "}")
	for i := 1; len(ids) < n; i++ {
		if i > 10_000_000 {
			require.FailNowf(t, "too few ids in one slot", "found %d ids in slot %d; want %d", len(ids), want, n)
		}
		id := fmt.Sprintf("%s-slot-%d", prefix, i)
		if keySlot(DefaultRoutePrefix+"{"+id+"}") == want {
			ids = append(ids, id)
		}
	}
	return ids
}

// acquireAll acquires ids and applies each one's outcome to its key.
func acquireAll(t *testing.T, m *Manager, c redis.UniversalClient, ids []string) []*Lease {
	t.Helper()
	ctx := context.Background()
	ls := make([]*Lease, len(ids))
	for i, id := range ids {
		l, err := m.Acquire(ctx, id)
		require.NoError(t, err, "Acquire %s", id)
		ls[i] = l
	}
	for i, l := range ls {
		switch outcomeOf(i, len(ls)) {
		case expire:
			c.Del(ctx, l.key)
		case steal:
			c.Set(ctx, l.key, "thief|x|"+fmt.Sprint(i+1), 0)
		}
	}
	return ls
}

// testReleaseBatch hands every lease off with a flush that succeeds: the
// hand-off releases them in batches, each with its own outcome.
func testReleaseBatch(t *testing.T, b backend, ids []string) {
	var (
		mu      sync.Mutex
		maxKeys int // most keys in one release script call
	)
	count := pipelineHook{fn: func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		for _, cmd := range cmds {
			if args := cmd.Args(); len(args) > 3 && (args[1] == releaseScript.Hash() || args[1] == releaseSrc) {
				mu.Lock()
				maxKeys = max(maxKeys, args[2].(int))
				mu.Unlock()
			}
		}
		return next(ctx, cmds)
	}}
	c := b.client(count)
	// What is tested is the batching and each lease's outcome, not timing:
	// a TTL long enough that a loaded machine acquiring a thousand leases
	// on the cluster does not lose the session meanwhile.
	cfg := testConfig()
	cfg.TTL = time.Minute
	m := startManager(t, c, cfg)
	ctx := context.Background()
	ls := acquireAll(t, m, c, ids)
	hook, err := m.HandOff(func(context.Context, *Lease) error { return nil }, 8)
	require.NoError(t, err)
	require.NoError(t, hook.Run(ctx), "hand-off")
	// Standalone puts any leases in one call, up to maxBatch; the cluster
	// only leases of one slot (sameSlotIDs), other ids nearly never share.
	// Flushes finish one by one, so a call holds those flushed meanwhile:
	// at least one key, at most maxBatch.
	mu.Lock()
	assert.LessOrEqual(t, maxKeys, maxBatch, "keys in the largest release call")
	assert.Positive(t, maxKeys, "keys in the largest release call")
	mu.Unlock()
	for i, l := range ls {
		cause := context.Cause(l.Context())
		require.ErrorIs(t, cause, ErrReleased, "%s: cause", l.label())
		got, err := c.Get(ctx, l.key).Result()
		switch outcomeOf(i, len(ls)) {
		case keep, expire:
			require.ErrorIs(t, err, redis.Nil, "%s: key holds %q after release; want deleted", l.label(), got)
		case steal:
			require.Equal(t, "thief|x|"+fmt.Sprint(i+1), got, "%s: stolen key after release (err %v); want the thief's", l.label(), err)
		}
	}
}

// TestBatches checks how leases are split into script calls for each
// client kind: every lease in exactly one call, at most maxBatch per call,
// and on Cluster one slot per call.
func TestBatches(t *testing.T) {
	leases := make([]*Lease, 2*maxBatch+7)
	for i := range leases {
		key := DefaultRoutePrefix + fmt.Sprintf("{b-%d}", i%(maxBatch+3)) // some slots repeat
		leases[i] = &Lease{key: key, slot: keySlot(key)}
	}
	type custom struct{ redis.UniversalClient } // neither of the two go-redis clients
	tests := []struct {
		name     string
		client   redis.UniversalClient
		calls    int  // 0: not checked
		sameSlot bool // every call holds one hash slot
	}{
		{"standalone", &redis.Client{}, 3, false},
		{"cluster", &redis.ClusterClient{}, 0, true},
		{"other", custom{}, len(leases), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Manager{client: tt.client}
			batches := m.batches(leases)
			if tt.calls != 0 {
				require.Len(t, batches, tt.calls, "calls")
			}
			seen := map[*Lease]int{}
			for _, b := range batches {
				require.NotEmpty(t, b, "a call of no leases")
				require.LessOrEqual(t, len(b), maxBatch, "leases in one call")
				for _, l := range b {
					seen[l]++
					if tt.sameSlot {
						require.Equal(t, b[0].slot, l.slot, "call mixes slots; want one slot")
					}
				}
			}
			for _, l := range leases {
				require.Equal(t, 1, seen[l], "calls holding %s", l.key)
			}
		})
	}
}

// TestDecodeStatuses: a reply of the wrong shape fails its whole batch and
// never shifts statuses onto other leases.
func TestDecodeStatuses(t *testing.T) {
	tests := []struct {
		name    string
		val     any
		err     error
		want    []int8
		wantErr bool
	}{
		{"mixed", []any{int64(1), int64(0), int64(-1)}, nil, []int8{1, 0, -1}, false},
		{"short", []any{int64(1), int64(0)}, nil, nil, true},
		{"long", []any{int64(1), int64(0), int64(1), int64(1)}, nil, nil, true},
		{"out of range", []any{int64(1), int64(2), int64(1)}, nil, nil, true},
		{"not a number", []any{int64(1), "1", int64(1)}, nil, nil, true},
		{"not an array", int64(1), nil, nil, true},
		{"call failed", nil, errors.New("i/o timeout"), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := redis.NewCmd(context.Background())
			cmd.SetVal(tt.val)
			cmd.SetErr(tt.err)
			got, err := decodeStatuses(cmd, 3)
			if tt.wantErr {
				require.Error(t, err)
				require.Nil(t, got, "statuses after a failed decode; want none")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got, "statuses")
		})
	}
}

// testKeySlot compares keySlot with the cluster's CLUSTER KEYSLOT.
func testKeySlot(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	for _, key := range []string{
		"room:route:{a}", "room:route:{123456789}", "room:fence:{room-42}",
		"no-tag", "{}empty-tag", "x{open", "a{b}c{d}", "{user1000}.following",
	} {
		want, err := c.ClusterKeySlot(ctx, key).Result()
		require.NoError(t, err, "CLUSTER KEYSLOT %s", key)
		assert.Equal(t, want, int64(keySlot(key)), "keySlot(%q)", key)
	}
}
