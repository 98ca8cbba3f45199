// Package roompb holds the room-service gRPC API generated from room.proto.
//
// The generated files are checked in; regenerate with `go generate` after
// installing the pinned plugins:
//
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
package roompb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative room.proto
