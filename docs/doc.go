// Package docs holds trajring's user documentation: the pages in this
// folder and the repository's README. It has no API; its test keeps every
// Go snippet of those pages identical to the body of a function in a test
// file of the module, so each snippet is compiled, and run where that
// function is an example or called by one.
package docs
