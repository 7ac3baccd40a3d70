//go:build cgo

// Command libtrajring is the main package of trajring's shared library:
// go build -buildmode=c-shared -o libtrajring.so ./capi/libtrajring (make
// python does it and puts the library into the Python package). Every
// function of the C ABI comes from package capi; a user who adds Go
// environments builds a main package like this one that also imports
// theirs (see docs/python.md).
package main

import _ "github.com/trajring/trajring/capi"

func main() {}
