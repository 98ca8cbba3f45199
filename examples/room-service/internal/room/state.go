package room

import "fmt"

// State is a room's state: the commands applied to it, in log order. It is
// what a snapshot stores and what recovery rebuilds, kept deliberately
// small so "every acknowledged command applied exactly once" can be checked
// by reading it.
type State struct {
	// Seq is the position of the last applied command; 0 for a new room.
	Seq int64 `json:"seq"`
	// CommandIDs lists the applied commands; CommandIDs[i] has seq i+1.
	CommandIDs []string `json:"command_ids"`
}

// apply adds the command at seq. The log is gap-free by construction (one
// INCR per append), so any other seq means the log and the state disagree
// and recovery must not guess.
func (s *State) apply(seq int64, commandID string) error {
	if seq != s.Seq+1 {
		return fmt.Errorf("room: log entry seq %d after seq %d: the log has a gap", seq, s.Seq)
	}
	s.Seq = seq
	s.CommandIDs = append(s.CommandIDs, commandID)
	return nil
}

// clone returns a copy that shares nothing with s, for a snapshot written
// while the cell keeps changing or for a reader outside the cell lock.
func (s State) clone() State {
	s.CommandIDs = append([]string(nil), s.CommandIDs...)
	return s
}
