"""Workspace snapshots (issue 39): content-addressed trees and blobs kept in the
operator's snapshot folder (`store`), taken incrementally around write calls (`taker`)."""
