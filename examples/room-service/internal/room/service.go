package room

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/drain/grpcdrain"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// Service serves the Rooms API: it owns the cells of the rooms this node
// holds and recovers a room's cell when it acquires the room.
type Service struct {
	roompb.UnimplementedRoomsServer

	cfg    Config
	store  store
	leases Leases

	mu    sync.Mutex // guards cells; never held across I/O
	cells map[string]*cell
}

// New returns a Service over rdb and leases. It starts nothing: run
// [Service.Run] for periodic snapshots.
func New(rdb redis.UniversalClient, leases Leases, cfg Config) (*Service, error) {
	if rdb == nil {
		return nil, errors.New("room: redis client is nil")
	}
	if leases == nil {
		return nil, errors.New("room: leases is nil")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkWaitClient(rdb, cfg.WaitReplicas); err != nil {
		return nil, err
	}
	return &Service{
		cfg:    cfg.withDefaults(),
		store:  store{rdb: rdb, sql: cfg.Snapshots, waitReplicas: cfg.WaitReplicas},
		leases: leases,
		cells:  make(map[string]*cell),
	}, nil
}

// Apply appends a command to the room's log if this node owns the room,
// acquiring and recovering the room first if no node does. It answers
// REDIRECT when another node owns the room; UNAVAILABLE with a RetryInfo
// detail (grpcdrain.Refused) when nothing was written, so a retry anywhere is
// safe (this node is draining, lost the room, the owner is unknown, or the
// room could not be opened); and codes.Unknown (DeadlineExceeded when the
// caller's deadline passed) when the write may or may not have happened,
// or, with Config.WaitReplicas, is not yet on the replicas: the outcome is
// unknown, and only a retry with the same command_id, which is
// deduplicated, is safe. A command_id applied before is answered APPLIED
// at the seq of its first application, and nothing changes.
func (s *Service) Apply(ctx context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
	id, cmd := req.GetRoomId(), req.GetCommandId()
	if err := ValidateRoomID(id); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := validateCommandID(cmd); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := validateOp(req.GetOp()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	c, err := s.open(ctx, id)
	switch {
	case errors.Is(err, errUnreplicated):
		// The room as loaded may hold this very command, applied before and
		// not yet confirmed: "nothing applied" could be false.
		return nil, status.Errorf(codes.Unknown, "room %s: outcome unknown, the room's state is %v", id, err)
	case err != nil:
		return s.refuse(ctx, id, err)
	}
	defer c.unlock()

	// A command folded into a snapshot is no longer in the dedup hash; the
	// recovered state answers for it (see "Duplicates after trimming").
	if seq, ok := c.seqOf[cmd]; ok {
		return firstAnswer(seq), nil
	}
	out, seq, err := s.store.append(ctx, id, c.lease.Token(), cmd, req.GetOp())
	switch {
	case errors.Is(err, ErrFenced):
		s.drop(c, "fenced")
		return nil, grpcdrain.Refused(fmt.Sprintf("room %s: this node lost the room; retry", id))
	case err != nil:
		// The write may or may not have happened: reload before the next
		// command instead of guessing, and tell the client the outcome is
		// unknown. A retry with the same command_id is deduplicated.
		c.loaded = false
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, status.Errorf(codes.Unknown, "room %s: outcome unknown, the write may have been applied: %v", id, err)
	case out == duplicate:
		return firstAnswer(seq), nil
	}
	if err := c.apply(seq, cmd); err != nil {
		c.loaded = false // the write succeeded; only this node's copy is off
		s.cfg.Logger.Error("room state out of step with log; reloading", "room_id", id, "err", err)
	}
	if s.cfg.Outbox != nil {
		s.cfg.Outbox.Notify(id)
	}
	return firstAnswer(seq), nil
}

// firstAnswer is the answer to a command first applied at seq, given to
// the first application and to every resend of its command_id alike: a
// client that resends after losing the answer (a reset, a crash, a
// deadline) gets exactly what the first application produced and cannot
// tell that it resent.
func firstAnswer(seq int64) *roompb.ApplyResponse {
	return &roompb.ApplyResponse{Status: roompb.ApplyResponse_APPLIED, Seq: seq}
}

// GetRoom reads the room from Redis (snapshot + log in one transaction),
// not from a cell, so any node answers for any room and a checker sees
// exactly what was acknowledged, whichever node acknowledged it.
func (s *Service) GetRoom(ctx context.Context, req *roompb.GetRoomRequest) (*roompb.Room, error) {
	id := req.GetRoomId()
	if err := ValidateRoomID(id); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	rec, err := s.store.load(ctx, id)
	if err != nil {
		return nil, statusOf(ctx, err)
	}
	return &roompb.Room{
		RoomId:      id,
		Seq:         rec.Seq,
		Fence:       rec.SnapshotFence,
		CommandIds:  rec.CommandIDs,
		SnapshotSeq: rec.SnapshotSeq,
	}, nil
}

// open returns the room's cell locked, leased and loaded. A cell found
// dropped or with a lost lease is discarded and the room acquired afresh.
func (s *Service) open(ctx context.Context, id string) (*cell, error) {
	for {
		c := s.cellFor(id)
		if err := c.lock(ctx); err != nil {
			return nil, err
		}
		if c.dropped {
			c.unlock()
			continue
		}
		if c.lost() {
			s.drop(c, "lease lost")
			c.unlock()
			continue
		}
		if c.lease == nil {
			if err := s.place(ctx, id); err != nil {
				s.drop(c, "placed elsewhere")
				c.unlock()
				return nil, err
			}
			l, err := s.leases.Acquire(ctx, id)
			if err != nil {
				s.drop(c, "not acquired")
				c.unlock()
				return nil, err
			}
			c.lease = l
		}
		if !c.loaded {
			if err := s.recover(ctx, c); err != nil {
				c.unlock() // keep the lease: the next command retries the load
				return nil, err
			}
		}
		return c, nil
	}
}

// placedError names the node a room without an owner is to be opened on.
type placedError struct{ node, addr string }

func (e *placedError) Error() string {
	return fmt.Sprintf("room: to be opened on %s at %s", e.node, e.addr)
}

// place asks Config.Placement whether the room belongs elsewhere: a
// *placedError if so. A Placement that cannot tell (Redis unreachable)
// lets this node acquire, which then fails or succeeds on its own.
func (s *Service) place(ctx context.Context, id string) error {
	if s.cfg.Placement == nil {
		return nil
	}
	node, addr, err := s.cfg.Placement.Place(ctx, id)
	switch {
	case err != nil:
		return err
	case node != "" && addr != "":
		return &placedError{node: node, addr: addr}
	}
	return nil
}

// recover loads the room's snapshot and replays the log after it. Events a
// previous owner left in the room's outbox are handed to the outbox worker.
func (s *Service) recover(ctx context.Context, c *cell) error {
	rec, err := s.store.load(ctx, c.id)
	if err != nil {
		return err
	}
	c.load(rec)
	s.cfg.Logger.Info("room recovered", "room_id", c.id, "fence", c.lease.Token(),
		"seq", rec.Seq, "snapshot_seq", rec.SnapshotSeq)
	if s.cfg.Outbox != nil {
		s.cfg.Outbox.Notify(c.id)
	}
	return nil
}

func (s *Service) cellFor(id string) *cell {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.cells[id]
	if !ok {
		c = newCell(id)
		s.cells[id] = c
	}
	return c
}

// drop removes a locked cell so no command runs on it again; the next
// command for the room acquires it afresh.
func (s *Service) drop(c *cell, reason string) {
	c.dropped = true
	s.mu.Lock()
	if s.cells[c.id] == c {
		delete(s.cells, c.id)
	}
	s.mu.Unlock()
	if c.lease != nil {
		s.cfg.Logger.Info("room cell dropped", "room_id", c.id, "reason", reason)
	}
}

// refuse turns a failure to open a cell into the answer a client can act
// on: the owner's address, or Unavailable when a retry is safe.
func (s *Service) refuse(ctx context.Context, id string, err error) (*roompb.ApplyResponse, error) {
	var placed *placedError
	switch {
	case errors.As(err, &placed):
		return &roompb.ApplyResponse{Status: roompb.ApplyResponse_REDIRECT, OwnerNode: placed.node, OwnerAddr: placed.addr}, nil
	case errors.Is(err, s.cfg.ErrHeld):
		node, addr, _, oerr := s.leases.Owner(ctx, id)
		if oerr != nil || node == "" || addr == "" {
			// The owner released or lost the room since, or its session
			// (which carries the address) ended: a retry may acquire it.
			return nil, grpcdrain.Refused(fmt.Sprintf("room %s: owner unknown; retry: %v", id, errors.Join(err, oerr)))
		}
		return &roompb.ApplyResponse{Status: roompb.ApplyResponse_REDIRECT, OwnerNode: node, OwnerAddr: addr}, nil
	case errors.Is(err, s.cfg.ErrDraining):
		return nil, grpcdrain.Refused(fmt.Sprintf("room %s: node is draining; retry on another node", id))
	}
	return nil, statusOf(ctx, err)
}

// statusOf maps an error after which nothing was written (opening a cell,
// reading a room) to a gRPC status: the caller's own deadline, or a refusal
// that is safe to retry anywhere.
func statusOf(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	return grpcdrain.Refused(fmt.Sprintf("room: %v", err))
}
