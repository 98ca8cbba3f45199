package grpcdrain

import (
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// errIntakeClosed is what a refused RPC gets, made once for the many
// refusals of a drain.
var errIntakeClosed = Refused("grpcdrain: server is draining; retry on another instance")

// Refused returns an UNAVAILABLE status carrying a RetryInfo detail (retry
// after one second, as [drain.RetryAfter] tells HTTP clients): the form in
// which a server says it did nothing with the call. Use it for every "not
// processed, retry" answer so clients can rely on the detail (see
// [IsRefused]).
func Refused(msg string) error {
	st, err := status.New(codes.Unavailable, msg).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
	if err != nil { // only if the detail cannot be marshalled, which a RetryInfo always can
		return status.Error(codes.Unavailable, msg)
	}
	return st.Err()
}

// IsRefused reports whether err is a server's statement that it did not
// process the call: UNAVAILABLE with a RetryInfo detail, as [Refused] makes.
// A server stream the drain closed ends so too, after the messages it
// sent: resume it from the last one received, on another instance.
func IsRefused(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return false
	}
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.RetryInfo); ok {
			return true
		}
	}
	return false
}
